"""Markdown pieces of the reports: number formatting, sections and tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["fmt", "section", "table"]


def fmt(x: Any, nd: int = 2, inf: str = "inf") -> str:
    """``x`` with ``nd`` decimals; "-" for None or NaN, ``inf`` for an infinite value.

    >>> fmt(1 / 3), fmt(float("nan")), fmt(float("inf"), inf="never")
    ('0.33', '-', 'never')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return inf
    return f"{x:.{nd}f}"


def section(title: str, level: int = 2) -> list[str]:
    """The lines that open a section of ``level`` (blank line, heading, blank line)."""
    return ["", f"{'#' * level} {title}", ""]


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table: the header row, the separator, one line per row of cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]

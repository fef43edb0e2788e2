"""Pieces every docs renderer shares: a result file loaded with its path relative to the
repository, a block ending in its source line, the load-average note and the format of times."""

from __future__ import annotations

import math
from pathlib import Path

from adaptive_rollouts.experiments.results import Result, load_result, provenance

__all__ = ["load_relative", "block", "load_note", "fmt_ms", "left_out_reason", "pooled_interval"]


def load_relative(root: Path, rel: str) -> Result:
    r = load_result(root / rel)
    return Result(rel, r.header, r.data)  # show the path relative to the repository


def block(lines: list[str], results: list[Result]) -> str:
    return "\n".join([*lines, "", provenance(results)])


def load_note(data: dict) -> str:
    load = data.get("load_average")
    return "" if load is None else f", at a 1-minute load average of {load:.1f} on the machine that ran it"


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "not run"
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def pooled_interval(pooled: dict) -> str:
    """A pooled effect's 90% interval as text, or "interval undefined" where it has none (no cell
    with a standard error, or an older file pooled one without)."""
    low, high = pooled["low"], pooled["high"]
    if math.isfinite(low) and math.isfinite(high):
        return f"{low:.2f}-{high:.2f}"
    return "interval undefined"


def left_out_reason(pooled: dict, no_statistic: str = "no statistic") -> str:
    """Why cells are left out of a pooled effect (`experiments.gain_speedup.pooled_effect_t`): no
    statistic (``no_statistic`` says it), or a statistic without a standard error (``no_se``).

    >>> left_out_reason({"left_out": 3, "no_se": 1}), left_out_reason({"left_out": 1, "no_se": 1})
    ('2 no statistic, 1 no standard error', 'no standard error')
    """
    no_se, left = int(pooled.get("no_se", 0)), int(pooled["left_out"])
    if no_se == 0:
        return no_statistic
    if no_se == left:
        return "no standard error"
    return f"{left - no_se} {no_statistic}, {no_se} no standard error"

"""Command-line argument types: each checks and converts one argument once, at the edge; the error
names the value typed (argparse prints it with the option's name)."""

from __future__ import annotations

import argparse
import math

__all__ = ["nonnegative_int", "positive_int", "probability_list"]


def _integer(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the error names the value typed)."""
    return _integer(text, 1, ">= 1")


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (the error names the value typed)."""
    return _integer(text, 0, ">= 0")


def probability_list(text: str) -> list[float]:
    """argparse type: comma-separated probabilities in [0, 1], e.g. ``0.1,0.5``."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated probabilities such as 0.1,0.5, got {text!r}")
    values = []
    for t in items:
        try:
            v = float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{t!r} is not a number (in {text!r})") from None
        if not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise argparse.ArgumentTypeError(f"success probabilities must lie in [0, 1], got {t} (in {text!r})")
        values.append(v)
    return values

"""Seed statistics of the demo: means with 95% t-intervals, and rollouts to a target on a mean curve."""

from __future__ import annotations

import numpy as np
from scipy.stats import t


def t_interval(values, level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the ``level`` Student-t interval over seeds (half-width nan for one seed).

    >>> m, h = t_interval([1.0, 2.0, 3.0]); round(m, 3), round(h, 3)
    (2.0, 2.484)
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"values must be a non-empty 1-d sequence, got shape {x.shape}")
    if len(x) == 1:
        return float(x[0]), float("nan")

    half = t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return float(x.mean()), float(half)


def fmt_interval(values, digits: int = 3) -> str:
    """``"0.412 +- 0.031"`` (95% t-interval over seeds), or the single value for one seed."""
    m, h = t_interval(values)
    return f"{m:.{digits}f}" if np.isnan(h) else f"{m:.{digits}f} +- {h:.{digits}f}"


def rollouts_to_reach(rollouts, curve, target: float) -> float:
    """First evaluated rollout count whose value reaches ``target`` (inf if never), linearly
    interpolated between the two evaluations around the crossing.

    >>> rollouts_to_reach([0, 100, 200], [0.1, 0.3, 0.5], 0.4)
    150.0
    >>> rollouts_to_reach([0, 100], [0.1, 0.2], 0.3)
    inf
    """
    x, y = np.asarray(rollouts, dtype=float), np.asarray(curve, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"rollouts and curve must be 1-d of one length, got {x.shape} and {y.shape}")
    hit = np.flatnonzero(y >= target - 1e-12)
    if len(hit) == 0:
        return float("inf")
    i = int(hit[0])
    if i == 0 or y[i] == y[i - 1]:
        return float(x[i])
    return float(x[i - 1] + (target - y[i - 1]) * (x[i] - x[i - 1]) / (y[i] - y[i - 1]))

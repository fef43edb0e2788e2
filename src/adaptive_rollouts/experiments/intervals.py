"""Intervals for a ratio measured on paired seeds, and for its pooled value over cells.

The map's primary statistic is a ratio R of rollouts (`gain_speedup`), computed on the seed-mean
curves of n paired seeds. Its interval is read on log R, where the ratio of a method to Uniform
and of Uniform to the method are mirror images:

* ``jackknife-t`` (the map's interval from 32 paired seeds on): leave each seed out in turn,
  theta_(i) = log R without seed i, and

      se = sqrt((n - 1) / n * sum_i (theta_(i) - mean theta_(.))^2),
      log R  +-  t_{n-1, (1 + level) / 2} se;

  a Student-t interval with the jackknife's standard error (Efron and Tibshirani, *An Introduction
  to the Bootstrap*, ch. 11 and 12). It is deterministic (no resampling seed) and costs n
  evaluations of the statistic.
* ``percentile``: the central ``level`` quantiles of the statistic over paired bootstrap resamples
  of the seeds (the maps run before the jackknife-t were read with it).

Why the change (`benchmarks/interval_coverage.py`, results/interval_coverage/): where the true
ratio is 1, the 90% percentile interval covers it less often than 90%: 84% of 400 draws of
synthetic twin curves with heavy-tailed per-seed pace at 16 seeds (83% at 32), and 87% of 400 pairs
resampled from the committed 16-seed maps' controls (87% at 32), while the jackknife-t covers 91%
and 90% at 16 seeds, 89% and 89% at 32 (Monte Carlo standard errors about 1.5 points). The
percentile bootstrap is too narrow for a skewed statistic on few seeds; the t quantile and the
jackknife's variance are not (`tests/test_sim_intervals.py` checks the 16-seed gap).

The pooled effect over cells (independent seeds per cell) is the mean of the cells' log R with
standard error sqrt(sum se_c^2) / C and Welch-Satterthwaite degrees of freedom
(sum se_c^2)^2 / sum(se_c^4 / df_c) (`pooled_t`).

>>> lo, hi, se, df = jackknife_t(0.0, [0.1, -0.1, 0.0, 0.0], level=0.9)
>>> round(se, 4), df, round(hi, 4) == -round(lo, 4)
(0.1225, 3, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import t as student_t

from adaptive_rollouts.checks.validation import check_choice

__all__ = ["INTERVALS", "INTERVAL", "OLD_INTERVAL", "check_interval", "jackknife_t", "pooled_t"]

INTERVALS = ("jackknife-t", "percentile")
INTERVAL = "jackknife-t"  # the map's interval (`MapConfig.interval`)
OLD_INTERVAL = "percentile"  # what a map whose configuration names no interval was read with


def check_interval(name: str) -> str:
    """``name`` if it is one of `INTERVALS`; ValueError naming the choices otherwise."""
    check_choice("interval", name, INTERVALS)
    return name


def _check_level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(level)


def jackknife_t(full: float, leave_one_out: Sequence[float], level: float = 0.9) -> tuple[float, float, float, int]:
    """(low, high, se, df) of the jackknife-t interval of a statistic (on its log scale) from its
    value on all n seeds and its n leave-one-seed-out values (see the module docstring); nan bounds
    when any value is not finite (a subset with no gain)."""
    _check_level(level)
    loo = np.asarray(leave_one_out, dtype=float)
    n = loo.size
    if n < 3:
        raise ValueError(f"the jackknife-t interval needs >= 3 seeds, got {n}")
    if not (np.isfinite(full) and np.isfinite(loo).all()):
        return float("nan"), float("nan"), float("nan"), n - 1
    se = float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
    q = float(student_t.ppf((1 + level) / 2, n - 1))
    return float(full - q * se), float(full + q * se), se, n - 1


def pooled_t(
    logs: Sequence[float], ses: Sequence[float], dfs: Sequence[float], level: float = 0.9
) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of independent cells' log statistics, each with its standard
    error and degrees of freedom: a t interval with Welch-Satterthwaite degrees of freedom."""
    _check_level(level)
    x, s, d = (np.asarray(v, dtype=float) for v in (logs, ses, dfs))
    if not (x.size == s.size == d.size) or x.size == 0:
        raise ValueError(f"need as many logs, ses and dfs (>= 1), got {x.size}, {s.size}, {d.size}")
    mean = float(x.mean())
    var = float(np.sum(s**2)) / x.size**2
    if not np.isfinite(var):
        return mean, float("nan"), float("nan")
    if var == 0.0:
        return mean, mean, mean
    df = float(np.sum(s**2) ** 2 / np.sum(s**4 / d))
    half = float(student_t.ppf((1 + level) / 2, df)) * np.sqrt(var)
    return mean, mean - half, mean + half

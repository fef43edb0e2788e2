"""The map's primary statistic: rollouts to several shares of the gain, Uniform's over the method's,
paired over seeds, with a paired-bootstrap interval and a pooled effect over cells.

A single hitting time near a plateau is ill-conditioned: there a tiny accuracy difference is a large
rollout difference, so one target reads 1.6x on some seeds and 0.7x on others for the same method.
The statistic here reads several targets on the steep part of the curves and averages them:

    a0      = held-out accuracy before training (the same problem instances for both arms),
    G       = the lower of the two seed-mean curves' tops, minus a0 (the gain both arms reach),
    t_f     = a0 + f G                     for each share f in ``fractions`` (0.5, 0.75, 0.9),
    T_X(t)  = rollouts at which the running max of X's seed-mean curve first reaches t (linear
              interpolation from (0, a0); inf when never); with ``cost="tokens"`` the same on the
              runs' cumulative generated tokens instead (tokens to target),
    speedup = geometric mean over f of T_U(t_f) / T_M(t_f).

The targets are symmetric in the two arms, so swapping them inverts the ratio and an arm that
allocates like Uniform reads 1 in expectation (a target read off Uniform alone carries Uniform's own
upward noise, which an independent replicate then needs extra rollouts to match), and both arms reach
every target, so the ratio is always finite and its bootstrap well behaved. An arm that ends lower
than Uniform is not penalised here beyond its slower climb: the map reports the final accuracy gap
beside it. Seed-mean curves
are averaged over the paired seeds first (Uniform's seed ``s`` and the method's seed ``s`` share a
problem instance), and the interval is over those pairs: the jackknife-t on log speedup
(`jackknife_gain_speedup`, the map's interval from 32 paired seeds on) or the percentile bootstrap
(`bootstrap_gain_speedup`, the earlier maps'); `experiments.intervals` says why and how each is
calibrated. All arms run at one rate (Uniform's, tuned on other seeds), so no rate choice sits
outside the seeds' variation.

>>> u = {"rollouts": [10, 20, 30, 40], "accuracy": [0.2, 0.4, 0.5, 0.6], "accuracy0": 0.0}
>>> m = {"rollouts": [10, 20, 30, 40], "accuracy": [0.4, 0.5, 0.6, 0.6], "accuracy0": 0.0}
>>> round(gain_speedup([u], [m]), 4), round(gain_speedup([m], [u]), 4), gain_speedup([u], [u])
(1.6777, 0.5961, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptive_rollouts.experiments.intervals import OLD_INTERVAL, check_interval, jackknife_t, pooled_t

__all__ = [
    "FRACTIONS",
    "stack_runs",
    "hitting_rollouts",
    "gain_speedup_parts",
    "gain_speedup",
    "bootstrap_gain_speedup",
    "jackknife_gain_speedup",
    "gain_interval",
    "pooled_effect",
    "pooled_effect_t",
    "pooled_gain",
]

FRACTIONS = (0.5, 0.75, 0.9)


def stack_runs(runs: Sequence[dict], cost: str = "rollouts") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cumulative cost [S, T], accuracy [S, T], accuracy0 [S]) of runs of equal length; ``cost`` names
    the runs' cumulative cost curve (the x axis): "rollouts", or "tokens" where the runs recorded them."""
    if not runs:
        raise ValueError("no runs to stack")
    absent = [i for i, r in enumerate(runs) if cost not in r]
    if absent:
        raise ValueError(f"runs {absent[:5]} record no {cost!r} curve")
    lengths = {len(r["accuracy"]) for r in runs} | {len(r[cost]) for r in runs}
    if len(lengths) != 1:
        raise ValueError(f"runs of different lengths {sorted(lengths)}: curves cannot be averaged step by step")
    r = np.array([x[cost] for x in runs], dtype=float)
    a = np.array([x["accuracy"] for x in runs], dtype=float)
    return r, a, np.array([x["accuracy0"] for x in runs], dtype=float)


def hitting_rollouts(rollouts: np.ndarray, accuracy: np.ndarray, a0: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Rollouts at which each running-max curve first reaches each target: [B, F] for curves [B, T],
    starting points a0 [B] and targets [B, F]; linear interpolation between recorded steps, from
    (0, a0) before the first; inf where never reached."""
    r = np.concatenate([np.zeros((rollouts.shape[0], 1)), rollouts], axis=1)
    a = np.maximum.accumulate(np.concatenate([a0[:, None], accuracy], axis=1), axis=1)
    hit = a[:, None, :] >= targets[:, :, None]  # [B, F, T+1]
    first = np.argmax(hit, axis=2)
    reached = hit.any(axis=2)
    i = np.maximum(first, 1)
    rows = np.arange(a.shape[0])[:, None]
    a_hi, a_lo = a[rows, i], a[rows, i - 1]
    r_hi, r_lo = r[rows, i], r[rows, i - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(a_hi > a_lo, (targets - a_lo) / (a_hi - a_lo), 1.0)
    out = np.where(first == 0, 0.0, r_lo + np.clip(frac, 0.0, 1.0) * (r_hi - r_lo))
    return np.where(reached, out, np.inf)


def _ratios(u: tuple, m: tuple, idx: np.ndarray, fractions: Sequence[float]) -> np.ndarray:
    """T_U / T_M per resample row of seed indices ``idx`` [B, S] and share: [B, F]."""
    ru, au, a0 = (x[idx].mean(axis=1) for x in u)
    rm, am, _ = (x[idx].mean(axis=1) for x in m)
    gain = np.minimum(au.max(axis=1), am.max(axis=1)) - a0
    targets = a0[:, None] + gain[:, None] * np.asarray(fractions, float)[None, :]
    tu, tm = hitting_rollouts(ru, au, a0, targets), hitting_rollouts(rm, am, a0, targets)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = tu / tm
    ratio[~(gain > 0)] = np.nan  # no gain: no target to reach
    return ratio


def _geomean(ratios: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.mean(np.log(ratios), axis=-1))


def _paired(uniform: Sequence[dict], method: Sequence[dict], cost: str = "rollouts") -> tuple[tuple, tuple]:
    if len(uniform) != len(method) or not uniform:
        raise ValueError(f"need equally many paired runs, got {len(uniform)} and {len(method)}")
    u, m = stack_runs(uniform, cost), stack_runs(method, cost)
    if u[1].shape != m[1].shape:
        raise ValueError(f"Uniform's runs have {u[1].shape[1]} steps and the method's {m[1].shape[1]}")
    return u, m


def gain_speedup_parts(
    uniform: Sequence[dict], method: Sequence[dict], fractions: Sequence[float] = FRACTIONS, cost: str = "rollouts"
) -> list[float]:
    """T_U / T_M at each share of the gain (see the module docstring), on the seed-mean curves, with
    T read on the ``cost`` axis (`stack_runs`)."""
    u, m = _paired(uniform, method, cost)
    return _ratios(u, m, np.arange(len(uniform))[None, :], fractions)[0].tolist()


def gain_speedup(
    uniform: Sequence[dict], method: Sequence[dict], fractions: Sequence[float] = FRACTIONS, cost: str = "rollouts"
) -> float:
    """The geometric mean of `gain_speedup_parts` (nan when neither arm gains)."""
    if not fractions:
        return float("nan")
    return float(_geomean(np.asarray(gain_speedup_parts(uniform, method, fractions, cost))))


def bootstrap_gain_speedup(
    uniform: Sequence[dict],
    method: Sequence[dict],
    fractions: Sequence[float] = FRACTIONS,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.9,
    cost: str = "rollouts",
) -> tuple[float, float, np.ndarray]:
    """(low, high, draws): the central ``level`` percentile interval of `gain_speedup` over
    ``resamples`` paired bootstrap resamples of the seeds (``uniform[i]`` pairs with ``method[i]``;
    the same resampled seeds for both), and the draws themselves (for `pooled_effect`); T read on the
    ``cost`` axis."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    u, m = _paired(uniform, method, cost)
    idx = np.random.default_rng(seed).integers(0, len(uniform), (resamples, len(uniform)))
    draws = _geomean(_ratios(u, m, idx, fractions))
    lo, hi = np.nanquantile(draws, [(1 - level) / 2, (1 + level) / 2]) if np.isfinite(draws).any() else (np.nan, np.nan)
    return float(lo), float(hi), draws


def jackknife_gain_speedup(
    uniform: Sequence[dict],
    method: Sequence[dict],
    fractions: Sequence[float] = FRACTIONS,
    level: float = 0.9,
    cost: str = "rollouts",
) -> tuple[float, float, float, int]:
    """(low, high, se, df): the jackknife-t interval (`intervals.jackknife_t`) of `gain_speedup` over
    the paired seeds (each pair left out in turn), its standard error on log speedup and degrees of
    freedom; nan bounds when some subset of the seeds has no gain. T read on the ``cost`` axis."""
    u, m = _paired(uniform, method, cost)
    n = len(uniform)
    if n < 3:
        raise ValueError(f"the jackknife-t interval needs >= 3 paired seeds, got {n}")
    keep = np.array([np.delete(np.arange(n), i) for i in range(n)])
    with np.errstate(divide="ignore", invalid="ignore"):
        full = np.log(_geomean(_ratios(u, m, np.arange(n)[None, :], fractions)))[0]
        loo = np.log(_geomean(_ratios(u, m, keep, fractions)))
    lo, hi, se, df = jackknife_t(float(full), loo, level)
    return float(np.exp(lo)), float(np.exp(hi)), se, df


def gain_interval(
    uniform: Sequence[dict],
    method: Sequence[dict],
    fractions: Sequence[float] = FRACTIONS,
    interval: str = OLD_INTERVAL,
    resamples: int = 1000,
    level: float = 0.9,
    cost: str = "rollouts",
) -> dict:
    """The ``level`` interval of `gain_speedup` by ``interval`` (`intervals.INTERVALS`):
    {"low", "high"} and what pools it over cells: "draws" (percentile) or "se" and "df" (jackknife-t);
    T read on the ``cost`` axis."""
    if check_interval(interval) == "jackknife-t":
        lo, hi, se, df = jackknife_gain_speedup(uniform, method, fractions, level, cost)
        return {"low": lo, "high": hi, "se": se, "df": df}
    lo, hi, draws = bootstrap_gain_speedup(uniform, method, fractions, resamples, level=level, cost=cost)
    return {"low": lo, "high": hi, "draws": draws}


def pooled_gain(estimates: Sequence[float], intervals: Sequence[dict], level: float = 0.9) -> dict[str, float]:
    """The pooled effect over cells of `gain_interval` results: `pooled_effect_t` for jackknife-t
    intervals, `pooled_effect` for percentile ones (every cell read with one method)."""
    kinds = {"draws" in x for x in intervals}
    if len(kinds) > 1:
        raise ValueError("the cells' intervals mix the percentile bootstrap and the jackknife-t: pool one kind")
    if kinds == {True}:
        return pooled_effect(estimates, [x["draws"] for x in intervals], level)
    return pooled_effect_t(estimates, [x["se"] for x in intervals], [x["df"] for x in intervals], level)


def _no_cells(left_out: int) -> dict[str, float]:
    """The pooled effect when no cell has a finite estimate: undefined, every cell left out."""
    return {"effect": float("nan"), "low": float("nan"), "high": float("nan"), "cells": 0, "left_out": int(left_out)}


def pooled_effect_t(
    estimates: Sequence[float], ses: Sequence[float], dfs: Sequence[float], level: float = 0.9
) -> dict[str, float]:
    """The geometric mean over cells of their statistics and its Welch-Satterthwaite t interval
    from the cells' jackknife standard errors on log speedup (`intervals.pooled_t`; independent seeds
    per cell). Cells whose estimate is not finite (no gain) are left out and counted in
    ``left_out``; so are cells without a standard error (their statistic undefined on some
    leave-one-seed-out subset: seeds that never reach a target), counted also in ``no_se``: the
    effect and its interval are read over the same cells, the rest said by number.

    >>> p = pooled_effect_t([2.0, 3.0, 8.0], [0.1, float("nan"), 0.1], [15, 15, 15])
    >>> round(p["effect"], 6), p["cells"], p["left_out"], p["no_se"]
    (4.0, 2, 1, 1)
    """
    est = np.asarray(estimates, dtype=float)
    se = np.asarray(ses, dtype=float)
    has_stat = np.isfinite(est) & (est > 0)
    ok = has_stat & np.isfinite(se)
    no_se = int(np.sum(has_stat & ~ok))
    if not ok.any():
        return {**_no_cells(est.size), "no_se": no_se}
    mean, lo, hi = pooled_t(np.log(est[ok]), se[ok], np.asarray(dfs, float)[ok], level)
    return {
        "effect": float(np.exp(mean)),
        "low": float(np.exp(lo)),
        "high": float(np.exp(hi)),
        "cells": int(ok.sum()),
        "left_out": int((~ok).sum()),
        "no_se": no_se,
    }


def pooled_effect(estimates: Sequence[float], draws: Sequence[np.ndarray], level: float = 0.9) -> dict[str, float]:
    """The geometric mean over cells of their statistics, and its central ``level`` interval from the
    cells' bootstrap draws (independent seeds per cell, so replicate b of every cell is one draw of
    the pooled effect). Cells whose estimate is not finite (no gain) are left out and counted."""
    est = np.asarray(estimates, dtype=float)
    ok = np.isfinite(est) & (est > 0)
    if not ok.any():
        return _no_cells(est.size)
    d = np.asarray([np.asarray(draws[int(i)], dtype=float) for i in np.flatnonzero(ok)])
    with np.errstate(divide="ignore"):
        logs = np.log(np.where(d > 0, d, np.nan))
    finite = np.isfinite(logs)
    # a replicate where no cell has a finite draw (no gain in any) gives no pooled draw
    pooled = np.exp(np.where(finite, logs, 0.0).sum(axis=0) / np.maximum(finite.sum(axis=0), 1))[finite.any(axis=0)]
    lo, hi = np.nanquantile(pooled, [(1 - level) / 2, (1 + level) / 2])
    return {
        "effect": float(np.exp(np.mean(np.log(est[ok])))),
        "low": float(lo),
        "high": float(hi),
        "cells": int(ok.sum()),
        "left_out": int((~ok).sum()),
    }

"""Monte Carlo coverage of the primary statistic's interval where the truth is known: two arms whose
curves have one distribution (a twin of Uniform), so the true speedup is 1.00.

`twin_curves` draws n paired seeds of two such arms. A seed is a problem instance: its accuracy
before training a0, its gain G and its learning rate k are shared by both arms. Each arm then
learns at its own pace on that instance,

    acc_arm(t) = a0 + G (1 - exp(-k exp(s e_arm) t)) + c t / T + x_arm(t),

with e_arm Student-t (``tail`` degrees of freedom: a small training run is now and then much
faster or slower than its twin), a slow climb c over the run (curves of the map keep climbing
after their knee) and x_arm an AR(1) wobble (training trajectories wander, step after step). The
defaults are of the order of the committed maps' curves (gain about 0.45 over 60 steps, the two
arms of a seed some 0.02-0.04 apart).

`interval_coverage` runs ``trials`` such draws and reports how often each interval of
`gain_speedup.gain_interval` covers 1.00 (both intervals on the same draws), so a method that
covers less than its nominal level shows it beside one that does not.
`resampled_control_coverage` does the same on measured curves: pairs drawn from the runs of a
committed map's arms that share Uniform's distribution.

>>> cov = interval_coverage(seeds=8, trials=4, resamples=100, seed=0)
>>> sorted(cov), all(0.0 <= c["coverage"] <= 1.0 for c in cov.values())
(['jackknife-t', 'percentile'], True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval
from adaptive_rollouts.experiments.intervals import INTERVALS, check_interval

__all__ = ["twin_curves", "interval_coverage", "resampled_control_coverage"]


def twin_curves(
    rng: np.random.Generator,
    seeds: int,
    steps: int = 60,
    rollouts_per_step: float = 256.0,
    rate_spread: float = 0.2,
    tail: float = 1.5,
    wobble: float = 0.02,
    wobble_memory: float = 0.8,
    climb: float = 0.1,
) -> tuple[list[dict], list[dict]]:
    """Two paired run lists (``rollouts``, ``accuracy``, ``accuracy0``) of one distribution (see the
    module docstring): the true speedup of either over the other is 1."""
    if seeds < 1 or steps < 2:
        raise ValueError(f"need seeds >= 1 and steps >= 2, got {seeds} and {steps}")
    t = np.arange(1, steps + 1)
    a0 = rng.normal(0.15, 0.02, seeds)
    gain = rng.normal(0.45, 0.04, seeds)
    k = np.exp(rng.normal(np.log(0.2), 0.3, seeds))
    arms = []
    for _ in range(2):
        rate = k * np.exp(rate_spread * rng.standard_t(tail, seeds))
        x = rng.normal(0.0, wobble, seeds)
        walk = np.empty((seeds, steps))
        for j in range(steps):  # AR(1) with stationary sd ``wobble``
            x = wobble_memory * x + rng.normal(0.0, wobble * np.sqrt(1 - wobble_memory**2), seeds)
            walk[:, j] = x
        acc = a0[:, None] + gain[:, None] * (1 - np.exp(-rate[:, None] * t)) + climb * t / steps + walk
        arms.append(
            [
                {"rollouts": (rollouts_per_step * t).tolist(), "accuracy": acc[s].tolist(), "accuracy0": float(a0[s])}
                for s in range(seeds)
            ]
        )
    return arms[0], arms[1]


def interval_coverage(
    seeds: int = 16,
    trials: int = 300,
    intervals: Sequence[str] = INTERVALS,
    fractions: Sequence[float] = FRACTIONS,
    resamples: int = 1000,
    level: float = 0.9,
    seed: int = 0,
    **curves: float,
) -> dict[str, dict[str, float]]:
    """Per interval method: {"coverage": share of ``trials`` twin draws (`twin_curves`, ``seeds``
    paired seeds, ``curves`` its settings) whose ``level`` interval covers 1, "se": its binomial
    standard error, "log_width": the mean width on log speedup, "undefined": draws without a finite
    interval (counted as not covering)}."""
    rng = np.random.default_rng(seed)
    draws = (twin_curves(rng, seeds, **curves) for _ in range(_check_trials(trials)))  # type: ignore[arg-type]
    return _tally(draws, intervals, fractions, resamples, level)


def resampled_control_coverage(
    instances: Sequence[Sequence[Sequence[dict]]],
    seeds: int = 16,
    trials: int = 20,
    intervals: Sequence[str] = INTERVALS,
    fractions: Sequence[float] = FRACTIONS,
    resamples: int = 1000,
    level: float = 0.9,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """As `interval_coverage`, on measured curves: ``instances[c][i]`` holds the runs of cell c's
    problem instance i by arms of one distribution (Uniform, the null control, the replicate: true
    speedup 1). A draw takes ``seeds`` instances of one cell at random (with replacement) and two
    of each instance's runs in random order as the pair; ``trials`` draws per cell."""
    rng = np.random.default_rng(seed)
    for c, cell in enumerate(instances):
        if not cell or any(len(runs) < 2 for runs in cell):
            raise ValueError(f"cell {c}: every instance needs >= 2 runs of arms with one distribution")

    def draws():
        for cell in instances:
            for _ in range(_check_trials(trials)):
                picks = [(cell[i], rng.permutation(len(cell[i]))[:2]) for i in rng.integers(0, len(cell), seeds)]
                yield [runs[a] for runs, (a, _) in picks], [runs[b] for runs, (_, b) in picks]

    return _tally(draws(), intervals, fractions, resamples, level)


def _check_trials(trials: int) -> int:
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    return trials


def _tally(
    draws: Iterable[tuple[list[dict], list[dict]]],
    intervals: Sequence[str],
    fractions: Sequence[float],
    resamples: int,
    level: float,
) -> dict[str, dict[str, float]]:
    for name in intervals:
        check_interval(name)
    hits: dict[str, list[bool]] = {name: [] for name in intervals}
    widths: dict[str, list[float]] = {name: [] for name in intervals}
    for u, m in draws:
        for name in intervals:
            ci = gain_interval(u, m, fractions, name, resamples, level)
            lo, hi = ci["low"], ci["high"]
            ok = bool(np.isfinite(lo) and np.isfinite(hi))
            hits[name].append(ok and lo <= 1.0 <= hi)
            widths[name].append(float(np.log(hi / lo)) if ok and lo > 0 else float("nan"))
    out = {}
    for name in intervals:
        c, n = float(np.mean(hits[name])), len(hits[name])
        w = np.asarray(widths[name])
        out[name] = {
            "coverage": c,
            "se": float(np.sqrt(c * (1 - c) / n)),
            "trials": n,
            "log_width": float(np.nanmean(w)) if np.isfinite(w).any() else float("nan"),
            "undefined": int((~np.isfinite(w)).sum()),
        }
    return out

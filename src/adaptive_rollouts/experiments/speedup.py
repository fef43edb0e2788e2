"""Reading a speedup off learning curves: rollouts to a target, the tuning criterion, seed-mean
curves, the speedup to a common target and its paired-bootstrap interval (used by `bench`,
`regime_map` and `map_report`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "final_steps",
    "final_level",
    "rollouts_to_target",
    "rollouts_needed",
    "seed_mean_curve",
    "speedup",
    "bootstrap_speedup",
]


def rollouts_to_target(
    rollouts: Sequence[float] | np.ndarray, accuracy: Sequence[float] | np.ndarray, target: float
) -> float:
    """Rollouts at which ``accuracy`` first reaches ``target`` (linear interpolation); inf if never."""
    r = np.concatenate([[0.0], np.asarray(rollouts, float)])
    a = np.asarray(accuracy, float)
    hit = np.flatnonzero(a >= target)
    if hit.size == 0:
        return float("inf")
    i = hit[0]
    prev_acc = a[i - 1] if i > 0 else -np.inf
    if not np.isfinite(prev_acc) or a[i] == prev_acc:
        return float(r[i + 1])
    frac = (target - prev_acc) / (a[i] - prev_acc)
    return float(r[i] + frac * (r[i + 1] - r[i]))


def final_steps(n: int) -> slice:
    """The steps of an n-step run that its final level averages: the last third (at least one).

    >>> final_steps(6), final_steps(2)
    (slice(4, 6, None), slice(1, 2, None))
    """
    return slice(n - max(1, n // 3), n)


def final_level(accuracy: Sequence[float] | np.ndarray) -> float:
    """Mean held-out accuracy over the last third of a run (the tuning criterion).

    >>> final_level([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    0.45
    """
    a = np.asarray(accuracy, dtype=float)
    if a.size == 0:
        raise ValueError("accuracy curve is empty")
    return float(a[final_steps(a.size)].mean())


def seed_mean_curve(runs: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, float]:
    """(rollouts, running max of the seed-mean accuracy, accuracy0) over runs (equal budgets: same
    rollout axis). The running max is the best seed-mean accuracy reached so far: monotone, so the
    first crossing of a target is well defined.

    >>> r, a, a0 = seed_mean_curve([{"rollouts": [8, 16, 24], "accuracy": [0.3, 0.2, 0.5], "accuracy0": 0.1}])
    >>> a.tolist(), a0
    ([0.3, 0.3, 0.5], 0.1)
    """
    r = np.mean([x["rollouts"] for x in runs], axis=0)
    a = np.maximum.accumulate(np.mean([x["accuracy"] for x in runs], axis=0))
    return r, a, float(np.mean([x["accuracy0"] for x in runs]))


def rollouts_needed(uniform: Sequence[dict], method: Sequence[dict], target_at: float) -> tuple[float, float, float]:
    """(target, rollouts Uniform needs to reach it, rollouts the method needs; inf if never), read off
    the running max of the seed-mean curves; the target as in `speedup`."""
    if not 0.0 < target_at <= 1.0:
        raise ValueError(f"target_at must be in (0, 1], got {target_at}")
    ru, au, _ = seed_mean_curve(uniform)
    rm, am, _ = seed_mean_curve(method)
    pooled = np.maximum.accumulate(
        (np.mean([x["accuracy"] for x in uniform], axis=0) + np.mean([x["accuracy"] for x in method], axis=0)) / 2
    )
    target = float(pooled[max(0, int(round(target_at * pooled.size)) - 1)])
    return target, rollouts_to_target(ru, au, target), rollouts_to_target(rm, am, target)


def speedup(uniform: Sequence[dict], method: Sequence[dict], target_at: float) -> float:
    """Rollouts to a common target: Uniform's / the method's (0 = never reached).

    The target is the accuracy that the running max of the *average* of the two seed-mean curves
    has ``target_at`` of the way through the run. Symmetric on purpose: a target read off
    Uniform's curve alone includes Uniform's own upward noise up to that point, which a method
    with independent noise then needs extra rollouts to match (a method allocating exactly like
    Uniform scored 0.88x that way on 16 paired seeds); with the pooled target such a method
    scores 1 in expectation, and swapping the arguments inverts the ratio.

    >>> u = [{"rollouts": [10, 20, 30, 40], "accuracy": [0.2, 0.4, 0.5, 0.6], "accuracy0": 0.0}]
    >>> m = [{"rollouts": [10, 20, 30, 40], "accuracy": [0.4, 0.5, 0.6, 0.7], "accuracy0": 0.0}]
    >>> speedup(u, m, 0.5), speedup(m, u, 0.5), speedup(u, u, 0.5)
    (1.6666666666666667, 0.6, 1.0)

    A method that is at the target before generating anything (a first step that skipped every
    prompt, its accuracy already there) needs no rollouts: infinitely faster, or level with a
    Uniform that needs none either.

    >>> z = [{"rollouts": [0, 10, 20, 30], "accuracy": [0.5, 0.5, 0.5, 0.5], "accuracy0": 0.5}]
    >>> speedup(u, z, 0.5), speedup(z, z, 0.5)
    (inf, 1.0)
    """
    _, need_u, need_m = rollouts_needed(uniform, method, target_at)
    if not np.isfinite(need_m):
        return 0.0
    if need_m == 0.0:
        return 1.0 if need_u == 0.0 else float("inf")
    return float(need_u / need_m)


def bootstrap_speedup(
    uniform: Sequence[dict],
    method: Sequence[dict],
    target_at: float,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.9,
) -> tuple[float, float]:
    """The central ``level`` interval (default 90%: 5th and 95th percentiles) of `speedup` over paired
    bootstrap resamples of the seeds (the same resampled seeds for Uniform and the method;
    ``uniform[i]`` pairs with ``method[i]``)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if len(uniform) != len(method) or not uniform:
        raise ValueError(f"need equally many paired runs, got {len(uniform)} and {len(method)}")
    rng = np.random.default_rng(seed)
    n = len(uniform)
    draws = []
    for _ in range(resamples):
        i = rng.integers(0, n, n)
        draws.append(speedup([uniform[j] for j in i], [method[j] for j in i], target_at))
    lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)

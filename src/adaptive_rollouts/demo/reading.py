"""Reading the demo's curves at a glance: held-out accuracy at equal rollouts, and rollouts to fixed
shares of Uniform's gain (interpolated), both on seed-mean curves.

A target at Uniform's *final* accuracy is ill-conditioned: near the plateau one problem of the
held-out set decides between "reached" and "never". The demo reads instead:

- accuracy at equal spend: each method's held-out curve (linear in rollouts between evaluations)
  at 25%, 50% and 100% of the rollouts Uniform generated over its run, seed-mean;
- rollouts to 50%, 75% and 90% of Uniform's gain (its seed-mean final minus its start), on the
  running max of each method's seed-mean curve, and Uniform's rollouts over the method's at each
  share (geometric mean: the speedup).

>>> u = [(np.array([0, 100, 200]), np.array([0.2, 0.5, 0.6]))]
>>> m = [(np.array([0, 50, 100]), np.array([0.2, 0.5, 0.55]))]
>>> accuracy_at_spend(m, [0.25, 0.5], 200.0).round(3).tolist()
[0.5, 0.55]
>>> rollouts_to_gain(u, 0.2, 0.4, (0.5, 1.0)).round(1).tolist(), rollouts_to_gain(m, 0.2, 0.4, (0.5, 1.0)).round(1).tolist()
([66.7, 200.0], [33.3, inf])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .stats import rollouts_to_reach

__all__ = ["SPEND_SHARES", "GAIN_SHARES", "accuracy_at_spend", "rollouts_to_gain", "ONE_SEED_NOTE"]

SPEND_SHARES = (0.25, 0.5, 1.0)
GAIN_SHARES = (0.5, 0.75, 0.9)
ONE_SEED_NOTE = (
    "One seed shows where this run's curves differ; it cannot show whether a difference is larger than "
    "the spread between seeds (there is no interval). The protocol (`python benchmarks/demo_protocol.py`) "
    "measures, with paired seeds and a null control."
)

Curve = tuple[np.ndarray, np.ndarray]  # (rollouts at each evaluation, held-out accuracy there)


def accuracy_at_spend(curves: Sequence[Curve], shares: Sequence[float], total: float) -> np.ndarray:
    """Seed-mean accuracy at ``share x total`` rollouts for each share (linear between evaluations;
    nan where a seed's run ended before that spend)."""
    at = np.asarray(shares, float) * total
    out = []
    for x, y in curves:
        x, y = np.asarray(x, float), np.asarray(y, float)
        out.append(np.where(at <= x[-1] + 1e-9, np.interp(at, x, y), np.nan))
    return np.mean(out, axis=0)


def rollouts_to_gain(curves: Sequence[Curve], start: float, gain: float, shares: Sequence[float]) -> np.ndarray:
    """Rollouts at which the running max of the seed-mean curve first reaches ``start + share x
    gain`` for each share (interpolated; inf when never). The seeds' curves must share their
    evaluation steps (their rollout counts are averaged)."""
    x = np.mean([np.asarray(c[0], float) for c in curves], axis=0)
    y = np.maximum.accumulate(np.mean([np.asarray(c[1], float) for c in curves], axis=0))
    return np.array([rollouts_to_reach(x, y, start + share * gain) for share in shares])

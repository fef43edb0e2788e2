"""The saving default's rule, as pure functions: which options (skipping a prompt, cutting a flat
group) to give up within a share of the step's expected signal, and the per-group facts it reads
(docs/saving.md derives the rule)."""

from __future__ import annotations

import numpy as np

from ..checks.rewards import all_equal, group_extremes
from ..types import Rewards

__all__ = ["LOSS_SHARE", "affordable_losses", "group_stats"]

_TIE = 1e-8  # relative: ratios closer than this are equal
LOSS_SHARE = 0.05
"""The share of a step's expected signal (under the belief) the default may give up by skipping
and cutting: what it saves is bought with at most this much signal (docs/saving.md)."""


def affordable_losses(
    value: np.ndarray, cost: np.ndarray, allowance: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Which options to give up (skip or cut) so that as many rollouts as possible are saved while the
    signal given up stays within ``allowance``: among the options worth less per rollout than the
    average option (value / cost below sum value / sum cost), in ascending order of value / cost
    (ties in random order, by ``rng``), the longest prefix whose values sum to at most
    ``allowance``. Options the belief cannot tell apart are all average: a belief that knows nothing
    particular about any prompt gives nothing up. Options of cost 0 are never given up.

    >>> affordable_losses(np.array([0.3, 0.01, 0.02, 2.0]), np.array([8, 8, 8, 8]), 0.05).tolist()
    [False, True, True, False]
    >>> affordable_losses(np.array([0.01, 0.01, 0.01]), np.array([8, 8, 8]), 0.025).tolist()  # all alike
    [False, False, False]
    """
    value, cost = np.asarray(value, dtype=float), np.asarray(cost, dtype=float)
    give = np.zeros(value.size, dtype=bool)
    ok = np.flatnonzero(cost > 0)
    if ok.size == 0:
        return give
    ratio = value[ok] / cost[ok]
    average = float(value[ok].sum() / cost[ok].sum())
    below = ratio < average - _TIE * max(average, 1e-12)
    tiebreak = (rng if rng is not None else np.random.default_rng(0)).random(ok.size)
    order = np.lexsort((tiebreak, ratio))
    order = order[below[order]]
    fits = np.flatnonzero(np.cumsum(value[ok][order]) <= allowance)
    if fits.size:
        give[ok[order[: int(fits[-1]) + 1]]] = True
    return give


def group_stats(rewards: Rewards) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: its size, its sum and whether it has signal (>= 2 rollouts, not all equal:
    `metrics.group_has_signal`, `checks.rewards.all_equal`), in one pass over the concatenated rewards."""
    sizes = np.fromiter(map(len, rewards), dtype=np.int64, count=len(rewards))
    flat = np.concatenate(rewards) if len(rewards) else np.zeros(0)
    low, high, sums = group_extremes(flat, sizes)
    with np.errstate(invalid="ignore"):  # empty groups: NaN extremes, no signal
        return sizes, sums, (sizes >= 2) & ~all_equal(low, high)

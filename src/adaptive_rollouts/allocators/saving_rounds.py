"""The saving default's rounds: which open groups are completed, which flat ones are cut within
the allowance, and which go on by half of what they lack (docs/saving.md, "The default's rule",
step 5)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .collector import RolloutCollector
from .round_plan import cannot_cut
from .saving_rule import affordable_losses, group_stats, next_chunk

__all__ = ["flat_round"]


def flat_round(
    alloc: Any,
    collector: RolloutCollector,
    target: np.ndarray,
    keep: np.ndarray,
    a0: np.ndarray,
    b0: np.ndarray,
    allowance: float,
    lost: float,
    weigh: bool = False,
    plan: bool = False,
    probe: tuple[np.ndarray, float] | None = None,
) -> tuple[np.ndarray, float]:
    """Step 4 of `SavingProgressive` (``alloc``): the next round's increments (all zero when no prompt continues) and the signal
    given up so far (``keep``: the prompts still open; a prompt cut once stays cut; ``weigh``:
    price a completion in expected tokens, `_completion_cost`; ``plan``: the still-flat groups
    get their chunk only where the round after it pays, else all they lack, `round_plan`;
    ``probe``: the prompts piloted only by exploration and its bar: one whose rewards are still
    all equal continues only while its completion is worth the bar per rollout, its skip having
    been paid for in step 2)."""
    k = collector.scored
    rewards = collector.rewards()
    _, s, varied = group_stats(rewards)
    # a prompt none of whose rollouts got a reward shows nothing that could vary: not completed
    open_ = keep & (collector.counts > 0) & (collector.counts < target) & (k > 0)
    chunk = np.minimum(target - collector.counts, next_chunk(target, collector.counts))
    if not alloc.saving:
        return np.where(open_, chunk, 0), lost
    inc = np.where(open_ & varied, target - collector.counts, 0)
    tied = np.flatnonzero(open_ & ~varied)
    if tied.size:
        rest = alloc._value(target[tied], k[tied], s[tied], a0[tied] + s[tied], b0[tied] + k[tied] - s[tied])
        cost = (target - collector.counts)[tied]
        if weigh:
            cost = alloc._completion_cost(collector, tied, cost, rewards, (a0 + s)[tied] / (a0 + b0 + k)[tied])
        refuted = np.zeros(tied.size, dtype=bool)
        probed = np.zeros(tied.size, dtype=bool) if probe is None else probe[0][tied]
        if probe is not None:
            refuted = probed & (rest < probe[1] * cost)
        lost += float(rest[refuted].sum())
        cut = refuted.copy()
        hopeless = None
        if alloc.flat_chance is not None:  # the bound per group, on the flat pilot's own evidence
            passed = np.isclose(s[tied], k[tied])  # a flat pilot of successes (else of failures, or graded)
            lack = (target - collector.counts)[tied]
            hopeless = alloc._hopeless((a0 + s)[tied], (b0 + k - s)[tied], lack, passed)
            hopeless &= passed | np.isclose(s[tied], 0.0)  # a graded flat pilot (rewards inside (0, 1)) never is
            hopeless = hopeless[~refuted]
        cut[~refuted] = affordable_losses(rest[~refuted], cost[~refuted], allowance - lost, alloc.rng, hopeless)
        lost += float(rest[cut & ~refuted].sum())
        go = tied[~cut]
        inc[go] = chunk[go]
        sg, kg, lack = s[go], k[go], (target - collector.counts)[go]
        if go.size and cannot_cut(a0[go] + sg, b0[go] + kg - sg, target[go], kg, lack, cost[~cut], probed[~cut]):
            inc[go] = lack  # alike flat groups: no later round could cut one (round_plan.cannot_cut)
        elif plan and go.size:  # halves only where the round after them pays (round_plan)
            means = alloc.lengths.means([collector.prompts[i] for i in go.tolist()])
            inc[go] = alloc.round_plan.chunks(chunk[go], lack, a0[go] + sg, b0[go] + kg - sg, sg >= kg, *means)
    return inc, lost

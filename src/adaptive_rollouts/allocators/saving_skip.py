"""The saving default before any rollout: which prompts are skipped within the allowance (and which
of those are explored anyway), and how long each kept prompt's pilot is (docs/saving.md, "The
default's rule", steps 2 to 4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..types import Prompt
from .saving_rule import (
    affordable_losses,
    below_average,
    bound_before_rollouts,
    explore_skipped,
    settling_pilot,
    skipping_pays,
)

__all__ = ["skip_unseen", "pilot_sizes"]


def skip_unseen(
    alloc: Any,
    target: np.ndarray,
    value: np.ndarray,
    cost: np.ndarray,
    a0: np.ndarray,
    b0: np.ndarray,
    allowance: float,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
    """Steps 2 and 3 of `SavingProgressive` (``alloc``): the prompts kept for a pilot, those of them
    kept only by exploration, exploration's bar (`saving_rule.explore_skipped`), and, with
    ``bound_skips="measured"``, the prompts the bound would skip unseen (else None). Skipped: the
    prompts worth least per unit of ``cost`` within the ``allowance``, and where the bound acts
    before any rollout (`saving_rule.bound_before_rollouts`) those it says are hopeless on the
    belief Beta(a0, b0) alone. Without saving (the null control), every prompt is kept."""
    q = len(target)
    if not alloc.saving:
        return np.ones(q, bool), np.zeros(q, bool), 0.0, None
    unseen = None
    # the bound before any rollout where it does not wait for each prompt's own pilot (by
    # default: where the pilot is the whole group): only what the belief tells apart
    early = bound_before_rollouts(alloc.bound_skips, target, alloc.pilot)
    measured = alloc.bound_skips == "measured" and alloc.flat_chance is not None
    hopeless = alloc._hopeless(a0, b0, target) if early.any() or measured else None
    if hopeless is not None:
        hopeless &= (cost > 0) & below_average(value, np.maximum(cost, 1e-12))
        if measured:  # what the bound would skip unseen: skipped once the run has measured that it
            # yields fewer varied groups per rollout than the rest (saving_rule.skipping_pays)
            alloc.skipping_unseen = skipping_pays(alloc.skip_evidence, alloc.skipping_unseen)
            unseen = hopeless & ~early
            early = early | (unseen if alloc.skipping_unseen else False)
        hopeless &= early
    skip = affordable_losses(value, cost, allowance, alloc.rng, hopeless)
    keep, explored, bar = explore_skipped(skip, value, cost, target, a0, b0, alloc.rng, alloc._value_at)
    return keep, explored, bar, unseen


def pilot_sizes(
    alloc: Any,
    prompts: Sequence[Prompt],
    target: np.ndarray,
    keep: np.ndarray,
    a0: np.ndarray,
    b0: np.ndarray,
    weigh: bool,
) -> tuple[np.ndarray, bool]:
    """Step 4 of `SavingProgressive` (``alloc``): each prompt's pilot (at most its group
    ``target``; the caller draws it for the ``keep`` rows) and whether the round plan prices the
    rounds (``weigh``: costs in expected tokens). With timed rounds a round is added only where its
    tokens saved buy back its latency (`round_plan`); before two rounds are timed, a saving step goes
    in one round; otherwise, from a run's second step, short pilots
    (`saving_rule.settling_pilot`: not at the first step, where the belief has seen nothing and
    every prompt gets the full pilot)."""
    plan, pilot = weigh and alloc.round_plan.known, alloc.pilot
    if plan:
        fail, success = alloc.lengths.means(prompts)
        pilot = alloc.round_plan.pilot_size(pilot, target[keep], a0[keep], b0[keep], fail[keep], success[keep])
    elif alloc.saving and alloc.round_plan.awaiting_times:  # rounds will be timed, none priced yet: one
        pilot = max(int(target.max(initial=0)), pilot)
    size = np.minimum(target, pilot)
    rounds_free = not plan and not alloc.round_plan.awaiting_times  # else the round plan owns the pilot
    if alloc.short_pilots and alloc.flat_chance is not None and alloc.history and rounds_free:
        size = settling_pilot(a0, b0, target, pilot, alloc.flat_chance)
    return size, plan

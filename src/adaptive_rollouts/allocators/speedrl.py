"""SPEED-RL: screen every prompt with a few rollouts, continue only the ones with mixed results."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..metrics import group_has_signal
from ..types import Prompt, Rewards, SampleFn
from .base import BaseAllocator
from .dynamic_sampling import drop_flat_groups
from .vigor import spread

__all__ = ["SpeedRL"]


class SpeedRL(BaseAllocator):
    """SPEED-RL (Zhang et al. 2025, "SPEED-RL: faster training of reasoning models via online
    curriculum learning", arXiv 2506.09016).

    Rule: screening phase, every prompt gets N_init = min(screen, C // Q) rollouts; a prompt
    qualifies when its screening rewards are mixed (pass rate strictly between 0 and 1; graded:
    not all equal); continuation phase, the remaining C - N_init Q rollouts are split evenly over
    the qualified prompts (seeded random order for the remainder), or over all prompts when none
    qualifies. Groups that end with no signal are dropped from the returned batch (empty arrays;
    `drop_zero_variance=False` keeps them); their rollouts count against the budget and the metrics
    report `dropped_groups` / `dropped_rollouts`. Budget: C >= 2Q.

    >>> import numpy as np
    >>> def sample(idx, counts):  # "a" mixed, "b" always right
    ...     return [np.resize([0.0, 1.0], c) if i == 0 else np.ones(c) for i, c in zip(idx, counts)]
    >>> [len(r) for r in SpeedRL(screen=4).run(["a", "b"], 16, sample)]
    [12, 0]
    """

    name = "speedrl"
    lower = 2

    def __init__(self, screen: int = 4, drop_zero_variance: bool = True, seed: int | None = 0):
        super().__init__(seed)
        if screen < 2:
            raise ValueError(f"screen must be >= 2, got {screen}")
        self.screen, self.drop_zero_variance = int(screen), bool(drop_zero_variance)

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start = self._begin_rounds(prompts, budget, sample, first_round=self.screen)
        q = len(prompts)
        left = budget - int(collector.counts.sum())
        if left > 0:
            mixed = np.flatnonzero([group_has_signal(r) for r in collector.rewards()])
            pool = mixed if mixed.size else np.arange(q)
            collector.draw(spread(left, pool[self.rng.permutation(pool.size)], collector.counts, None))
        self._check_counts(collector.counts, budget)
        rewards = self._finish(prompts, collector, start)
        if not self.drop_zero_variance:
            return rewards
        kept, info = drop_flat_groups(rewards)
        self._add_metrics(info)
        return kept

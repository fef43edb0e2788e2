"""AR3PO adaptive rollout: sample in stages until each prompt has a success."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..types import Prompt, Rewards, SampleFn
from .base import BaseAllocator
from .vigor import spread

__all__ = ["AR3PO"]


class AR3PO(BaseAllocator):
    """Adaptive Rollout and Response Reuse Policy Optimization, adaptive-rollout part (Zhang et al.
    2025, arXiv 2509.25808).

    Rule: stage 1 gives every prompt s = min(stage_size, C // Q) rollouts; each later stage gives
    stage_size more to every prompt still without a success (a reward >= success_threshold), until
    the budget is spent or every prompt has one. A stage the budget cannot cover is split evenly
    over the active prompts in seeded random order. Rollouts left when every prompt has a success
    (AR3PO would stop early) are spread evenly over all prompts, so the budget is spent exactly.
    Response reuse (replaying stored correct answers) is a trainer-side feature, not done here.
    Budget: C >= 2Q.

    >>> import numpy as np
    >>> def sample(idx, counts):  # prompt "a" always succeeds, "b" never does
    ...     return [np.full(c, 1.0 if i == 0 else 0.0) for i, c in zip(idx, counts)]
    >>> [len(r) for r in AR3PO(stage_size=4).run(["a", "b"], 16, sample)]
    [4, 12]
    """

    name = "ar3po"
    lower = 2

    def __init__(self, stage_size: int = 4, success_threshold: float = 1.0, seed: int | None = 0):
        super().__init__(seed)
        if stage_size < 1:
            raise ValueError(f"stage_size must be >= 1, got {stage_size}")
        self.stage_size, self.success_threshold = int(stage_size), float(success_threshold)

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start = self._begin_rounds(prompts, budget, sample, first_round=self.stage_size)
        q = len(prompts)
        left = budget - int(collector.counts.sum())
        while left > 0:
            solved = np.array([bool(np.any(r >= self.success_threshold - 1e-8)) for r in collector.rewards()])
            active = np.flatnonzero(~solved)
            if active.size == 0:
                break
            active = active[self.rng.permutation(active.size)]
            inc = spread(min(left, self.stage_size * active.size), active, collector.counts, None)
            collector.draw(inc)
            left -= int(inc.sum())
        if left > 0:
            collector.draw(spread(left, self.rng.permutation(q), collector.counts, None))
        self._check_counts(collector.counts, budget)
        return self._finish(prompts, collector, start)

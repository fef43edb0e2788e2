"""Pilot: a few rollouts for every prompt, more only where they disagreed; no predictor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..metrics import group_has_signal
from ..types import Prompt, Rewards, SampleFn
from ._pilot import PilotAllocator, count_parameter, cut_to_budget, pilot_parameter

__all__ = ["Pilot"]


class Pilot(PilotAllocator):
    """Pilot-only saving baseline (this library's; the predictor-free rule the pilot stages of
    SPEED-RL, arXiv 2506.09016, and Pilot-Commit, arXiv 2605.26606, share).

    Rule: every prompt gets m rollouts; a prompt whose m rewards varied (not all equal, the
    `metrics.group_has_signal` test) gets e more, the others none:

        n_q = m + e [rewards of the pilot not all equal],   e = extra, default floor(C / Q) - m

    so a varied prompt ends at Uniform's group size and a flat one saves C / Q - m rollouts. Spent:
    m Q + e k <= C (k varied prompts); with an explicit `extra` that would overspend, the extra
    rollouts are cut to the budget left, evenly, the remainder to the first prompts in batch order
    (`cut_to_budget`). Defaults: m = 4 (a 2-rollout
    pilot calls a p = 0.3 prompt flat 58% of the time, a 4-rollout one 25%). Budget: C >= m Q
    (refused before any rollout otherwise). The metrics add `varied` (prompts that got the extra).

    >>> import numpy as np
    >>> def sample(idx, counts):  # "a" alternates 0/1, "b" is always right
    ...     return [np.resize([0.0, 1.0], c) if i == 0 else np.ones(c) for i, c in zip(idx, counts)]
    >>> [len(r) for r in Pilot(m=4).run(["a", "b"], 16, sample)]
    [8, 4]
    """

    name = "pilot"

    def __init__(self, m: int = 4, extra: int | None = None, seed: int | None = 0):
        super().__init__(seed)
        self.m = pilot_parameter("m", m)
        self.extra = None if extra is None else count_parameter("extra", extra, 0)
        self.lower = self.m

    def least_pilot(self) -> int:
        return self.m

    def pilot_size(self, num_prompts: int, budget: int) -> int:
        return self.m

    def extra_size(self, num_prompts: int, budget: int) -> int:
        """e: `extra`, or by default what brings a prompt to Uniform's group size, floor(C / Q) - m."""
        return budget // num_prompts - self.m if self.extra is None else self.extra

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start, _ = self._pilot(prompts, budget, sample)
        varied = np.array([group_has_signal(r) for r in collector.rewards()], dtype=bool)
        wanted = np.where(varied, self.extra_size(len(prompts), budget), 0)
        collector.draw(cut_to_budget(wanted, budget - int(collector.counts.sum())))
        self._check_counts(collector.counts, budget)
        return self._finish(prompts, collector, start, extra={"varied": int(varied.sum())}, budget=budget)

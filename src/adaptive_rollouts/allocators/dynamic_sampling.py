"""DAPO dynamic sampling: whole groups in random order, zero-std groups dropped."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks.rewards import ZERO_VARIANCE_TOL
from ..metrics import group_has_signal
from ..solvers import equal_split
from ..types import Prediction, Prompt, Rewards, SampleFn
from .base import SingleShotAllocator

__all__ = ["DynamicSampling"]


def drop_flat_groups(rewards: Rewards, tol: float = ZERO_VARIANCE_TOL) -> tuple[Rewards, dict]:
    """Replace groups without signal by empty arrays; report what was dropped."""
    keep = [group_has_signal(r, tol) for r in rewards]
    dropped = [r for r, k in zip(rewards, keep) if r.size and not k]
    out = [r if k else np.zeros(0) for r, k in zip(rewards, keep)]
    return out, {"dropped_groups": len(dropped), "dropped_rollouts": int(sum(r.size for r in dropped))}


class DynamicSampling(SingleShotAllocator):
    """DAPO dynamic sampling (Yu et al. 2025, "DAPO: an open-source LLM reinforcement learning system
    at scale").

    Rule: sample whole groups of G rollouts, drop every group whose rewards have zero std
    (all-correct or all-wrong), keep sampling until the batch is full. Under a fixed budget C the
    batch given to `run` is the pool: prompts are visited in seeded random order, floor(C/G) of them
    get G rollouts (a remainder r >= 2 makes one more group of r, a remainder of 1 goes to the first
    group), so the over-sampled rollouts count against the budget, honestly. To model DAPO's
    over-sampling pass a pool larger than the training batch; G defaults to max(2, C // Q).
    `run` returns an empty array for each dropped group (`drop_zero_variance=False` keeps them);
    the metrics count them in `dropped_groups` / `dropped_rollouts`, and their rollouts in `rollouts`.

    >>> import numpy as np
    >>> DynamicSampling(group_size=4, seed=0).plan(list("abcdef"), 10).counts.tolist()
    [0, 0, 4, 4, 0, 2]
    """

    name = "dynamic-sampling"
    lower = 2
    allow_skip = True

    def __init__(self, group_size: int | None = None, drop_zero_variance: bool = True, seed: int | None = 0):
        super().__init__(seed)
        if group_size is not None and group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {group_size}")
        self.group_size, self.drop_zero_variance = group_size, bool(drop_zero_variance)

    def budget_range(self, num_prompts: int) -> tuple[int, int | None]:
        # with G = C // Q every budget >= 2 fits; a fixed G caps the pool at G Q (plus a remainder of 1)
        return 0, None if self.group_size is None else self.group_size * num_prompts

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        q = len(prompts)
        counts = np.zeros(q, dtype=np.int64)
        if budget == 0:
            return counts
        g = self.group_size or max(2, budget // q)
        order = self.rng.permutation(q)
        if g * q <= budget:  # the pool is smaller than the budget: everybody, evenly
            return equal_split(budget, q, order)
        full, rest = divmod(budget, g)
        counts[order[:full]] = g
        if rest >= 2:
            counts[order[full]] = rest
        elif rest == 1:
            counts[order[0]] += 1
        return counts

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        rewards = super()._run(prompts, budget, sample)
        if not self.drop_zero_variance:
            return rewards
        kept, info = drop_flat_groups(rewards)
        self._add_metrics(info)
        return kept

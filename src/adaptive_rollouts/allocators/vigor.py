"""VIGOR: progressive rounds that double down on the prompts with the highest reward variance."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..types import Prompt, Rewards, SampleFn
from .base import BaseAllocator, random_order

__all__ = ["VIGOR", "spread"]


def spread(amount: int, ranked: np.ndarray, counts: np.ndarray, upper: int | None) -> np.ndarray:
    """Split `amount` rollouts as evenly as possible over the prompts `ranked` (best first):
    each gets amount // k, the first amount % k one more; shares cut at `upper` flow to the next
    prompts in `ranked`. Returns increments; their sum is < amount only if every ranked prompt is full."""
    inc = np.zeros(counts.size, dtype=np.int64)
    ranked = np.asarray(ranked, dtype=np.int64)
    left = int(amount)
    while left > 0:
        room = np.full(ranked.size, np.iinfo(np.int64).max) if upper is None else upper - counts[ranked] - inc[ranked]
        open_ = ranked[room > 0]
        if open_.size == 0:
            break
        share = np.full(open_.size, left // open_.size, dtype=np.int64)
        share[: left % open_.size] += 1
        share = np.minimum(share, room[room > 0])
        inc[open_] += share
        left -= int(share.sum())
    return inc


class VIGOR(BaseAllocator):
    """VarIance Guided Online Rollout allocation (arXiv 2607.22002).

    Rule, per step, no history: every prompt gets m0 rollouts; then for rounds t = 1 .. T-1 keep
    the top k_t = ceil(alpha k_{t-1}) still-active prompts by u_q = variance of all rewards
    collected for q so far, and give each m0 gamma^t more. With the defaults (m0=2, T=4,
    alpha=0.5, gamma=2) and C = 8Q the groups end at 2 / 6 / 14 / 30 rollouts for 50 / 25 / 12.5 /
    12.5 % of the prompts.

    Any budget: the remainder R = C - m0 Q is split over rounds in proportion to the nominal
    schedule (round t spends floor(R_t w_t / sum_{s>=t} w_s), w_s = k_s m0 gamma^s, R_t what is
    left), so C = 8Q reproduces the schedule exactly and other budgets, alpha gamma != 1 included,
    scale it; within a round the spend is split evenly over the kept prompts, the remainder one by
    one in rank order. Ties in u (e.g. every 2-rollout binary group has u in {0, 1/4}) are broken
    uniformly at random with the allocator's seeded generator. Zero-variance prompts stay eligible:
    if fewer than k_t prompts have u > 0, the rest of the kept set is drawn among the ties at 0, as
    the rule reads (`drop_zero_variance=True` instead keeps only u > 0 prompts while any exist).
    Rollouts left after the last round (T = 1, or `upper` caps) go to the prompts in rank order.
    Budget: C >= m0 Q (and <= upper Q when upper is set).

    >>> import numpy as np
    >>> def sample(idx, counts):  # prompt i: rewards alternate 0, (i+1)/8 - variance ranks by i
    ...     return [np.resize([0.0, (i + 1) / 8], c) for i, c in zip(idx, counts)]
    >>> rewards = VIGOR(seed=0).run(list("abcdefgh"), 64, sample)
    >>> [len(r) for r in rewards]
    [2, 2, 2, 2, 6, 6, 14, 30]
    """

    name = "vigor"

    def __init__(
        self,
        m0: int = 2,
        rounds: int = 4,
        alpha: float = 0.5,
        gamma: float = 2.0,
        upper: int | None = None,
        drop_zero_variance: bool = False,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        if m0 < 1 or rounds < 1 or not (0 < alpha <= 1) or gamma <= 0:
            raise ValueError(
                f"need m0 >= 1, rounds >= 1, 0 < alpha <= 1, gamma > 0; got m0={m0}, "
                f"rounds={rounds}, alpha={alpha}, gamma={gamma}"
            )
        if upper is not None and upper < m0:
            raise ValueError(f"upper must be >= m0={m0}, got {upper}")
        self.m0, self.rounds, self.alpha, self.gamma = int(m0), int(rounds), float(alpha), float(gamma)
        self.lower, self.upper, self.drop_zero_variance = int(m0), upper, bool(drop_zero_variance)

    def schedule(self, num_prompts: int) -> tuple[list[int], list[float]]:
        """Nominal kept counts k_t and per-prompt increments m0 gamma^t for rounds 0 .. T-1."""
        kept = [num_prompts]
        for _ in range(1, self.rounds):
            kept.append(max(1, math.ceil(self.alpha * kept[-1] - 1e-9)))
        return kept, [self.m0 * self.gamma**t for t in range(self.rounds)]

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start = self._begin_rounds(prompts, budget, sample)
        q = len(prompts)
        kept, per_prompt = self.schedule(q)
        weights = [k * m for k, m in zip(kept, per_prompt)]
        collector.draw(np.full(q, self.m0, dtype=np.int64))
        left = budget - self.m0 * q
        active = np.arange(q)
        for t in range(1, self.rounds):
            spend = left if t == self.rounds - 1 else int(left * weights[t] // sum(weights[t:]))
            ranked = active[random_order(self.rng, collector.reward_variance()[active])]
            if self.drop_zero_variance:
                u = collector.reward_variance()[ranked]
                if np.any(u > 0):
                    ranked = ranked[u > 0]
            active = ranked[: kept[t]]
            inc = spread(spend, active, collector.counts, self.upper)
            collector.draw(inc)
            left -= int(inc.sum())
        if left > 0:  # T == 1, or upper caps: the rest in rank order over every prompt
            ranked = random_order(self.rng, collector.reward_variance())
            inc = spread(left, ranked, collector.counts, self.upper)
            collector.draw(inc)
            left -= int(inc.sum())
        self._check_counts(collector.counts, budget)
        return self._finish(prompts, collector, start)

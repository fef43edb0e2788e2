"""sGPO: group size from the inverse of a profiled success rate."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..checks.validation import check_range
from ..types import Prompt, Rewards, SampleFn
from ._pilot import PilotAllocator, count_parameter, cut_to_budget, pilot_parameter

__all__ = ["SGPO"]


class SGPO(PilotAllocator):
    """sorted Group Policy Optimization, group-size rule (Sudalairaj, Xu, Srivastava, Giannone 2026,
    "sGPO: trading inference FLOPs for training efficiency in RLVR", arXiv 2606.08854).

    Rule: profile every prompt with m rollouts; with s_q the sum of its k_q scored pilot rewards,
    p-hat_q = (s_q + a) / (k_q + a + b) (a Beta(a, b) prior, so a prompt with no success has a finite
    1 / p-hat); its group size is

        n_q = min(U, ceil(c / p-hat_q))   and it gets max(0, n_q - m) more rollouts,

    none if every pilot reward was 1 (too easy: the paper removes trivial prompts). When the extra
    rollouts would exceed the budget left, they are shrunk in proportion to what each prompt asked
    for (`cut_to_budget`). Spent: m Q + extra <= C. The metrics add `too_easy`.

    Our reading of the paper: it profiles once, offline, under the initial policy, and sets each
    prompt's training group size to 1 / (success rate); it also drops trivial prompts, sub-samples
    unsolvable ones and orders the data easy to hard, which are the trainer's data pipeline, not a
    per-step allocation. An allocator sees one batch at a time, so here the profile is each step's
    pilot: p-hat is current, and its m Q rollouts are spent (and trained on) every step.
    Defaults: m = 4, c = 1 (the paper's 1 / p), Jeffreys prior a = b = 1/2 (p-hat = 0 would ask for
    an infinite group; with it an unsolved prompt asks for c (m + 1) / (1/2) = 10 at m = 4),
    U = None (no cap beyond that prior bound and the budget). Budget: C >= m Q.

    >>> import numpy as np
    >>> def sample(idx, counts):  # "a" always right, "b" never, "c" alternates
    ...     return [np.ones(c) if i == 0 else np.zeros(c) if i == 1 else np.resize([0.0, 1.0], c)
    ...             for i, c in zip(idx, counts)]
    >>> [len(r) for r in SGPO(m=4).run(["a", "b", "c"], 24, sample)]  # p-hat 0.9, 0.1, 0.5
    [4, 10, 4]
    """

    name = "sgpo"

    def __init__(
        self,
        m: int = 4,
        c: float = 1.0,
        prior: tuple[float, float] = (0.5, 0.5),
        upper: int | None = None,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        self.m = pilot_parameter("m", m)
        self.c = check_range(c, "c", 0.0, None)
        if not isinstance(prior, (tuple, list)) or len(prior) != 2:
            raise ValueError(f"prior must be a pair (a, b) of positive numbers, got {prior!r}")
        self.prior = (check_range(prior[0], "prior a", 0.0, None), check_range(prior[1], "prior b", 0.0, None))
        self.upper = None if upper is None else count_parameter("upper", upper, self.m)
        self.lower = self.m

    def least_pilot(self) -> int:
        return self.m

    def pilot_size(self, num_prompts: int, budget: int) -> int:
        return self.m

    def success_estimate(self, rewards: Sequence[np.ndarray]) -> np.ndarray:
        """p-hat_q = (s_q + a) / (k_q + a + b) from each prompt's rewards so far."""
        a, b = self.prior
        s = np.array([float(np.sum(r)) for r in rewards])
        k = np.array([r.size for r in rewards], dtype=float)
        return (s + a) / (k + a + b)

    def group_sizes(self, p_hat: np.ndarray) -> np.ndarray:
        """n_q = min(U, ceil(c / p-hat_q)) (a relative 1e-9 guards c / p-hat landing a hair above an integer)."""
        sizes = np.array([math.ceil(self.c / p * (1 - 1e-9)) for p in np.asarray(p_hat, dtype=float)], dtype=np.int64)
        return sizes if self.upper is None else np.minimum(sizes, self.upper)

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start, m = self._pilot(prompts, budget, sample)
        rewards = collector.rewards()
        easy = np.array([r.size > 0 and bool(np.all(r >= 1 - 1e-8)) for r in rewards], dtype=bool)
        wanted = np.where(easy, 0, np.maximum(self.group_sizes(self.success_estimate(rewards)) - m, 0))
        collector.draw(cut_to_budget(wanted, budget - int(collector.counts.sum())))
        self._check_counts(collector.counts, budget)
        return self._finish(prompts, collector, start, extra={"too_easy": int(easy.sum())}, budget=budget)

"""Pilot-Commit: a pilot for every prompt, the rest committed to the prompts whose pilot varied most."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..checks.validation import check_range
from ..state.checks import StateReader
from ..types import Prompt, Rewards, SampleFn, StateDict
from ._pilot import PilotAllocator, count_parameter, pilot_parameter
from .base import random_order

__all__ = ["PilotCommit"]


def _check_thresholds(defer_below: float, easy_above: float, evict_at: float | None) -> tuple:
    """The constructor's checks (also applied to a loaded state)."""
    defer_below = check_range(defer_below, "defer_below", 0.0, 1.0, low_closed=True, high_closed=True)
    easy_above = check_range(easy_above, "easy_above", 0.0, 1.0, low_closed=True, high_closed=True)
    if defer_below > easy_above:
        raise ValueError(f"defer_below must be <= easy_above, got {defer_below} > {easy_above}")
    if evict_at is not None:
        evict_at = check_range(evict_at, "evict_at", 0.0, 1.0, high_closed=True)
    return defer_below, easy_above, evict_at


class PilotCommit(PilotAllocator):
    """Pilot-Commit (Kim, Yang, Yan, Liu 2026, "Spend your rollouts where it counts: rollout
    allocation for group-based RL post-training", arXiv 2605.26606; code github.com/databricks/pilot-commit).

    Rule, per step, with n = floor(C / Q) (Uniform's group size) and pilot mean r-bar_q:

    - pilot: every prompt not evicted gets m rollouts, m = max(2, floor(n / 4));
    - commit: prompts with defer_below <= r-bar_q <= easy_above, ranked by the standard deviation
      of their pilot rewards (highest first, ties in seeded random order), get k = n - m more each,
      whole groups, while the budget lasts: a committed prompt ends at n = m + k, as GRPO's group;
    - defer: r-bar_q < defer_below (too hard) gets nothing more this step; nothing is remembered,
      the prompt is piloted again whenever it comes back;
    - evict: r-bar_q >= evict_at (too easy) is remembered and gets 0 rollouts (skipped) in every
      later step; above easy_above but below evict_at it is only not committed this step.

    Spent: m Q' + k K <= C (Q' prompts not evicted, K committed). The metrics add `committed`,
    `deferred`, `too_easy`, `evicted` (newly) and `evicted_skipped` (skipped this step).

    Defaults, from the authors' public code and run scripts: the pilot is a quarter of the group
    (their runs: 32 pilot + 96 commit for n = 128, 16 + 48 for n = 64); the pass band
    [1/8, 3/4] (`diversity_threshold_lower` 0.125, 1 - `diversity_threshold_upper` 0.25); eviction
    at a pilot mean of 1 (`exclude_threshold_upper` 1.0), permanent as in their trainer; commits go
    to the highest pilot standard deviation first (their `max_variance` buffer sampling). Their
    trainer commits in the next generation round from a replay buffer of pilots (at most 4 steps
    old) and trains only on committed prompts; a step here pilots and commits within the step, and
    returns every prompt's rewards (a pilot that was not committed is returned too: the rollouts
    were generated, and a flat group carries no gradient). `pilot=` / `commit=` fix m and k instead.
    Budget: C >= m Q (refused before any rollout otherwise).

    >>> import numpy as np
    >>> def sample(idx, counts):  # "a" alternates 0/1, "b" always right, "c" never
    ...     return [np.resize([0.0, 1.0], c) if i == 0 else np.full(c, float(i == 1)) for i, c in zip(idx, counts)]
    >>> alloc = PilotCommit(seed=0)
    >>> [len(r) for r in alloc.run(["a", "b", "c"], 24, sample)]  # commit a, evict b, defer c
    [8, 2, 2]
    >>> [len(r) for r in alloc.run(["a", "b", "c"], 24, sample)]  # b stays evicted
    [8, 0, 2]
    """

    name = "pilot-commit"
    allow_skip = True

    def __init__(
        self,
        pilot: int | None = None,
        commit: int | None = None,
        defer_below: float = 0.125,
        easy_above: float = 0.75,
        evict_at: float | None = 1.0,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        self.pilot = None if pilot is None else pilot_parameter("pilot", pilot)
        self.commit = None if commit is None else count_parameter("commit", commit, 0)
        self.defer_below, self.easy_above, self.evict_at = _check_thresholds(defer_below, easy_above, evict_at)
        self.lower = 2 if self.pilot is None else self.pilot
        self._evicted: set[Any] = set()

    def stores_prompts(self) -> bool:
        return True  # the evicted prompts

    def evicted(self, prompt: Any) -> bool:
        """Whether `prompt` was evicted (gets no rollouts any more)."""
        return prompt in self._evicted

    def least_pilot(self) -> int:
        return self.lower

    def pilot_size(self, num_prompts: int, budget: int) -> int:
        """m: `pilot`, or a quarter of Uniform's group size floor(C / Q), at least 2."""
        return self.pilot if self.pilot is not None else max(2, budget // num_prompts // 4)

    def commit_size(self, num_prompts: int, budget: int) -> int:
        """k: `commit`, or what brings a committed prompt to floor(C / Q) (at least 0)."""
        if self.commit is not None:
            return self.commit
        return max(0, budget // num_prompts - self.pilot_size(num_prompts, budget))

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        prompts, budget, collector, start = self._begin_rounds(prompts, budget, sample)
        q = len(prompts)
        skip = np.array([p in self._evicted for p in prompts], dtype=bool)
        m, k = self.pilot_size(q, budget), self.commit_size(q, budget)
        collector.draw(np.where(skip, 0, m))
        rewards = collector.rewards()
        piloted = ~skip & (collector.scored > 0)
        mean = np.array([float(np.mean(r)) if r.size else 0.0 for r in rewards])
        spread = np.array([float(np.std(r)) if r.size else 0.0 for r in rewards])
        passed = piloted & (mean >= self.defer_below) & (mean <= self.easy_above)
        ranked = random_order(self.rng, np.where(passed, spread, -1.0))[: int(passed.sum())]
        left = budget - int(collector.counts.sum())
        take = ranked[: left // k] if k > 0 else ranked[:0]
        inc = np.zeros(q, dtype=np.int64)
        inc[take] = k
        collector.draw(inc)
        evict = piloted & (mean >= self.evict_at - 1e-8) if self.evict_at is not None else np.zeros(q, dtype=bool)
        self._evicted.update(prompts[i] for i in np.flatnonzero(evict))
        self._check_counts(collector.counts, budget)
        info = {
            "committed": int(take.size),
            "deferred": int(np.sum(piloted & (mean < self.defer_below))),
            "too_easy": int(np.sum(piloted & (mean > self.easy_above))),
            "evicted": int(evict.sum()),
            "evicted_skipped": int(skip.sum()),
        }
        return self._finish(prompts, collector, start, extra=info, budget=budget)

    def _extra_state(self) -> StateDict:
        return {
            "defer_below": self.defer_below,
            "easy_above": self.easy_above,
            "evict_at": self.evict_at,
            "keys": sorted(self._evicted, key=repr),
        }

    def _load_extra_state(self, state: StateDict) -> None:
        """Checks everything before changing anything: the thresholds as the constructor would,
        distinct savable prompt keys for the evicted set."""
        reader = StateReader(state, "PilotCommit", ["defer_below", "easy_above", "evict_at", "keys"])
        thresholds = reader.hyperparameters(_check_thresholds, ["defer_below", "easy_above", "evict_at"])
        keys = reader.keys()
        self.defer_below, self.easy_above, self.evict_at = thresholds
        self._evicted = set(keys)

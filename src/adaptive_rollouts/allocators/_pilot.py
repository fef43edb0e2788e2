"""What the pilot-based saving allocators (Pilot, Pilot-Commit, sGPO) share: a pilot of m rollouts
for every prompt, a budget check that names the pilot, and a proportional cut of the extra rollouts
when they would overspend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..checks.validation import check_budget, check_feasible, check_integer
from ..types import AllocatorKind, Prompt, SampleFn
from .base import BaseAllocator
from .collector import RolloutCollector
from .proportional import water_fill

__all__ = ["PilotAllocator", "count_parameter", "cut_to_budget", "pilot_parameter"]


def count_parameter(name: str, value: Any, low: int) -> int:
    """A constructor's rollout count: an integer >= ``low`` (else ValueError naming it)."""
    return check_integer(value, name, least=low)


def pilot_parameter(name: str, value: Any) -> int:
    """A pilot's size (Pilot's and sGPO's ``m``, PilotCommit's and the default's ``pilot``): an
    integer >= 2, since a group of one rollout has no baseline and carries no signal.

    >>> pilot_parameter("m", 1)
    Traceback (most recent call last):
    ...
    ValueError: m must be >= 2 (a group of one rollout carries no signal), got 1
    """
    check_integer(value, name)
    if int(value) < 2:
        raise ValueError(f"{name} must be >= 2 (a group of one rollout carries no signal), got {int(value)}")
    return int(value)


def cut_to_budget(wanted: np.ndarray, amount: int) -> np.ndarray:
    """``wanted`` extra rollouts per prompt, or, when their sum exceeds ``amount``, the same shape
    shrunk to sum exactly ``amount`` (n_q ~ c wanted_q, `water_fill`); never above wanted_q.

    >>> cut_to_budget(np.array([6, 0, 2]), 4).tolist()
    [3, 0, 1]
    """
    wanted = np.asarray(wanted, dtype=np.int64)
    if wanted.sum() <= amount:
        return wanted
    out = np.zeros_like(wanted)
    asked = np.flatnonzero(wanted > 0)
    out[asked] = water_fill(wanted[asked].astype(float), int(amount), 0, None)
    if np.any(out > wanted):  # c < 1, so rounding up cannot pass an integer wanted_q
        raise RuntimeError(f"internal error: cut {out.tolist()} exceeds {wanted.tolist()}")
    return out


class PilotAllocator(BaseAllocator):
    """A "save" allocator that starts every step with a pilot of `pilot_size` rollouts per prompt.

    Subclasses set `pilot_size(q, budget)`; the budget must pay for the pilot (checked, with an
    error naming the pilot, before any rollout). Prompts are never skipped by the pilot itself."""

    kind: ClassVar[AllocatorKind] = "save"
    lower = 2

    def pilot_size(self, num_prompts: int, budget: int) -> int:
        raise NotImplementedError

    def least_pilot(self) -> int:
        """The smallest pilot this allocator runs (the budget needs at least this much per prompt)."""
        return self.lower

    def budget_range(self, num_prompts: int) -> tuple[int, int | None]:
        return self.least_pilot() * num_prompts, None

    def _check_budget(self, prompts: Sequence[Prompt], budget: Any) -> int:
        budget = check_budget(budget)
        q = len(prompts)
        m = self.pilot_size(q, budget) if budget >= self.least_pilot() * q else self.least_pilot()
        detail = f": its pilot of {m} rollouts per prompt"
        return check_feasible(budget, q, m, None, span=(m * q, None), owner=type(self).__name__, detail=detail)

    def _pilot(
        self, prompts: Sequence[Prompt], budget: Any, sample: SampleFn
    ) -> tuple[list, int, RolloutCollector, float, int]:
        """Checked prompts and budget, then the pilot drawn: (prompts, budget, collector, start, m)."""
        prompts, budget, collector, start = self._begin_rounds(prompts, budget, sample)
        m = self.pilot_size(len(prompts), budget)
        collector.draw(np.full(len(prompts), m, dtype=np.int64))
        return prompts, budget, collector, start, m

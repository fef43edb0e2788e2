"""Shared types of the data path: predict -> allocate -> sample -> observe.

A *prompt* is any hashable key (its text, or an id). Rewards for one prompt are a 1-D float
array (binary in {0, 1}, or graded in [0, 1]); a batch of rewards is a list of such arrays,
one per prompt, in the order of the prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

Prompt = Hashable
Rewards = list[np.ndarray]
StateDict = dict[str, Any]

SampleFn = Callable[[np.ndarray, np.ndarray], Rewards]
"""sample(indices, counts) generates counts[i] more rollouts for prompts[indices[i]] and
returns their rewards, one 1-D array of length counts[i] per entry."""


class Prediction(NamedTuple):
    """Belief about each prompt's success probability p.

    mean: E[p], shape [Q]; var: Var[p] (posterior uncertainty), shape [Q].
    E[p (1 - p)] = mean (1 - mean) - var, the expected Bernoulli variance.
    """

    mean: np.ndarray
    var: np.ndarray

    @property
    def expected_bernoulli_variance(self) -> np.ndarray:
        return np.clip(self.mean * (1.0 - self.mean) - self.var, 0.0, 0.25)

    @property
    def plugin_bernoulli_variance(self) -> np.ndarray:
        return self.mean * (1.0 - self.mean)


@runtime_checkable
class Encoder(Protocol):
    """Maps prompts to feature vectors of a fixed dimension."""

    dim: int

    def encode(self, prompts: Sequence[Prompt]) -> np.ndarray:  # [Q, dim] float
        ...


@runtime_checkable
class Predictor(Protocol):
    """Success-probability model. One convention for all predictors."""

    def predict(self, prompts: Sequence[Prompt]) -> Prediction: ...

    def update(self, prompts: Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None: ...

    def state_dict(self) -> StateDict: ...

    def load_state_dict(self, state: StateDict) -> None: ...


@runtime_checkable
class Allocator(Protocol):
    """Spends exactly `budget` rollouts over `prompts` in one training step."""

    def run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        """Returns all rewards per prompt (an empty array for a skipped prompt)."""
        ...

    def state_dict(self) -> StateDict: ...

    def load_state_dict(self, state: StateDict) -> None: ...


@runtime_checkable
class PlanningAllocator(Allocator, Protocol):
    """Single-shot allocators also offer the two halves, for trainers that generate
    outside the allocator (verl, TRL)."""

    def plan(self, prompts: Sequence[Prompt], budget: int) -> np.ndarray: ...

    def observe(self, prompts: Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None: ...

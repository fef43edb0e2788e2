"""Shared types of the data path: predict -> allocate -> sample -> observe.

A *prompt* is any hashable key (its text, or an id). Rewards for one prompt are a 1-D float
array (binary in {0, 1}, or graded in [0, 1]); a batch of rewards is a list of such arrays,
one per prompt, in the order of the prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, cast, runtime_checkable

import numpy as np

Prompt = Hashable
Rewards = list[np.ndarray]
StateDict = dict[str, Any]

AllocatorKind = Literal["fill", "save"]
"""What an allocator promises about the budget C of a step: "fill" spends exactly C (VIP, VIGOR and
the other published fixed-budget methods); "save" spends at most C and may give a prompt no
rollouts (reported as skipped), so a trainer trains on fewer rollouts than C."""


class Draw(list):
    """The answer of a ``sample`` call that says more than the rewards: the list of per-prompt scored
    rewards (so code that reads it as a plain list keeps working), plus

    - ``unscored[i]``: how many rollouts of the i-th requested prompt were generated but have no reward
      (TRL: every reward function returned None; verl: a failed session); ``len(draw[i]) +
      unscored[i]`` = the count asked. Unscored rollouts are spent (they count against the budget)
      but are never observations;
    - ``lengths`` (optional): one 1-D int array per requested prompt, the completion length in tokens
      of every rollout generated for it: the scored ones first (``len(draw[i])`` entries, in the order
      of the rewards), then the unscored ones (``unscored[i]`` entries). None for a prompt (or for the
      whole draw) whose lengths are unknown: then rollouts are counted, as for a plain list;
    - ``seconds`` (optional): how long the round took to generate and score (wall clock, or a
      simulator's modelled time). With the lengths it lets an allocator price a round's latency
      (`allocators.round_plan`); None: unknown.

    `with_lengths` builds one whose rollouts are all scored.

    >>> import numpy as np
    >>> d = Draw([np.ones(2), np.zeros(0)], [1, 3])
    >>> len(d), d.unscored.tolist(), d.lengths
    (2, [1, 3], None)
    >>> d = Draw.with_lengths([np.array([1.0, 0.0])], [[120, 512]])
    >>> d.unscored.tolist(), d.lengths
    ([0], [[120, 512]])
    """

    def __init__(
        self,
        rewards: Sequence[np.ndarray],
        unscored: Sequence[int] | np.ndarray,
        lengths: Sequence[Any] | None = None,
        seconds: float | None = None,
    ):
        super().__init__(rewards)
        self.unscored = np.asarray(unscored)
        self.lengths: list[Any] | None = None if lengths is None else list(lengths)  # checked where it is read
        self.seconds = seconds  # checked where it is read

    @classmethod
    def with_lengths(cls, rewards: Sequence[np.ndarray], lengths: Sequence[Any], seconds: float | None = None) -> Draw:
        """Every rollout scored (``rewards[i]``), with its completion length (``lengths[i]``, one entry
        per reward, same order) and the round's ``seconds``."""
        rewards = list(rewards)
        return cls(rewards, np.zeros(len(rewards), dtype=np.int64), lengths, seconds)


SampleFn = Callable[[np.ndarray, np.ndarray], Rewards | Draw]
"""sample(indices, counts) generates counts[i] more rollouts for prompts[indices[i]] and
returns their rewards, one 1-D array of length counts[i] per entry, or a `Draw` when some of them
could not be scored or when it knows their completion lengths (tokens)."""


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


@dataclass(frozen=True)
class Plan:
    """A single-shot allocator's decision for one step, returned by ``plan`` and given back to
    ``observe``: the checked prompts, ``counts[i]`` rollouts for ``prompts[i]`` (0 = skipped), the
    budget, the prediction the counts were planned from (None for allocators without one) and the
    seconds planning took. A value: it holds everything ``observe`` needs, so nothing is left on the
    allocator between the two calls. ``np.asarray(plan)`` is the counts."""

    prompts: list
    counts: np.ndarray
    budget: int
    prediction: Prediction | None = None
    seconds: float = 0.0

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.counts if dtype is None else self.counts.astype(dtype)

    @property
    def spent(self) -> int:
        return int(self.counts.sum())

    @property
    def skipped(self) -> list:
        """The prompts given no rollouts."""
        return [p for p, n in zip(self.prompts, self.counts.tolist()) if n == 0]


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
    """Spends `budget` rollouts over `prompts` in one training step: exactly (``kind == "fill"``) or
    at most (``kind == "save"``)."""

    kind: ClassVar[AllocatorKind]

    def run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        """Returns all rewards per prompt (an empty array for a skipped prompt)."""
        ...

    def state_dict(self) -> StateDict: ...

    def load_state_dict(self, state: StateDict) -> None: ...


@runtime_checkable
class PlanningAllocator(Allocator, Protocol):
    """Single-shot allocators also offer the two halves, for trainers that generate
    outside the allocator (verl, TRL)."""

    def plan(self, prompts: Sequence[Prompt], budget: int) -> Plan: ...

    def observe(self, plan: Plan | Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None: ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """An allocator that reports its last step (every `allocators.BaseAllocator`): ``last_metrics`` is
    `metrics.step_metrics` of the step that just ran (None before the first), with what only the
    allocator knows (its prediction's quality, its own counts). Trainers read it through
    `bridge.TrainerStep`, which computes the same set itself for an allocator without it."""

    last_metrics: dict[str, Any] | None


@runtime_checkable
class PolicyAware(Protocol):
    """An allocator that reads the policy's own view of each prompt before it allocates a step.

    ``features[i]`` is one row per prompt of ``prompts`` (e.g. the policy's last-layer hidden state at
    the prompt's last token), float, finite, of one width for the whole run. `bridge.TrainerStep`
    calls it once per step, before ``run`` / ``plan``, when the trainer gives ``policy_features``."""

    def observe_policy(self, prompts: Sequence[Prompt], features: np.ndarray) -> None: ...


def reads_policy(allocator: Any) -> bool:
    """Whether an allocator reads the policy's view: it is `PolicyAware` and was not built with its
    policy source off (``policy=False``)."""
    return isinstance(allocator, PolicyAware) and getattr(allocator, "policy", True) is not False


def allocator_kind(allocator: Any) -> AllocatorKind:
    """The declared kind of an allocator object or class; "fill" when it declares none."""
    kind = getattr(allocator, "kind", "fill")
    if kind not in ("fill", "save"):
        raise ValueError(f"{type(allocator).__name__}.kind must be 'fill' or 'save', got {kind!r}")
    return cast(AllocatorKind, kind)

"""What one trainer step generated, and what a run spent: the books `TrainerStep` keeps.

- `StepBook`: per prompt, the rollouts asked, the scored successes (each round's raw rewards mapped
  at once, `steps.scored_draw`), the scored raw rewards, unscored and missing rollouts, rounds;
- `PerPrompt`: a round from a framework's ``generate(prompt, n)`` and ``reward(prompt, completion)``;
- `RoundIncomplete`: a trainer's round that could not be delivered (verl's failed sessions);
- `RunningTotals`: rollouts spent and budgeted since the start of the run (checkpointed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptive_rollouts.state.checks import StateReader
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw, StateDict

from .steps import scored_draw

__all__ = ["PerPrompt", "RoundFn", "RoundIncomplete", "RunningTotals", "StepBook"]

RoundFn = Callable[[np.ndarray, np.ndarray], Sequence[Any]]
"""``generate(indices, counts)``: one group of raw rewards per asked prompt (see the module docstring)."""


class PerPrompt:
    """A round built from a framework's two callables, for trainers that generate one prompt at a
    time: ``generate(prompt, n)`` -> n completions, ``reward(prompt, completion)`` -> a score in any
    range (None: unscored). Keeps every completion and raw reward per prompt (``completions``,
    ``rewards``), in the order generated.

    >>> rounds = PerPrompt(["a"], lambda p, n: [p] * n, lambda p, c: 1.0)
    >>> rounds([0], [2]), rounds.completions
    ([[1.0, 1.0]], [['a', 'a']])
    """

    def __init__(
        self,
        prompts: Sequence[Any],
        generate: Callable[[Any, int], Sequence[Any]],
        reward: Callable[[Any, Any], float | None],
    ):
        self.prompts = list(prompts)
        self.generate, self.reward = generate, reward
        self.completions: list[list] = [[] for _ in self.prompts]
        self.rewards: list[list] = [[] for _ in self.prompts]

    def __call__(self, indices: Any, counts: Any) -> list[list]:
        groups = []
        for i, n in zip(np.asarray(indices).tolist(), np.asarray(counts).tolist()):
            new = list(self.generate(self.prompts[i], n)) if n else []
            if len(new) != n:
                raise ValueError(f"generate({self.prompts[i]!r}, {n}) returned {len(new)} completions")
            scores = [self.reward(self.prompts[i], c) for c in new]
            self.completions[i] += new
            self.rewards[i] += scores
            groups.append(scores)
        return groups


class RoundIncomplete(RuntimeError):
    """Raised by a trainer's ``generate`` when it could not deliver a round (verl: sessions still
    failing after its retries). ``raws``: what it did produce for the asked prompts (or None). The
    allocator's run stops there and leaves its state as before the step; the step result keeps what
    was generated, marked ``incomplete``."""

    def __init__(self, message: str, raws: Sequence[Any] | None = None):
        super().__init__(message)
        self.raws = raws


class StepBook:
    """What one step generated, per prompt: rollouts asked (``requested``), scored successes, scored
    raw rewards, unscored and missing (failed) rollouts, rounds. `add` maps one round's raw rewards
    at once (`steps.scored_draw`) and returns the `Draw` the allocator gets."""

    def __init__(self, prompts: Sequence[Hashable], requested: Any = None, signal: SuccessSignal | None = None):
        self.prompts = list(prompts)
        n = len(self.prompts)
        self.requested = np.zeros(n, dtype=np.int64) if requested is None else np.asarray(requested, dtype=np.int64)
        self.signal = SuccessSignal() if signal is None else signal
        self._success: list[list[float]] = [[] for _ in range(n)]
        self._raw: list[list[float]] = [[] for _ in range(n)]
        self.unscored = 0  # rollouts generated whose reward is None / NaN
        self.missing = 0  # rollouts asked that came back without any record (failed)
        self.rounds = 0

    def reserve(self, indices: np.ndarray, counts: np.ndarray, budget: int, who: str) -> None:
        """Book a round's request, refused (before anything is generated) past the budget."""
        asked = int(self.requested.sum() + counts.sum())
        if asked > budget:
            raise ValueError(
                f"{who} asked for {int(counts.sum())} more rollouts in round {self.rounds + 1} after "
                f"spending {int(self.requested.sum())}: over the budget {budget} (it asked for {asked} "
                f"rollouts this step in all, the budget is {budget})"
            )
        self.requested[indices] += counts
        self.rounds += 1

    def add(self, indices: Any, raws: Sequence[Any], asked: Any) -> Draw:
        """One round: prompt ``indices[j]`` got raw rewards ``raws[j]`` for ``asked[j]`` rollouts (fewer:
        the rest failed). Returns the allocator's `Draw` (scored successes; unscored = asked - scored)."""
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        asked = np.asarray(asked, dtype=np.int64).reshape(-1)
        groups = [np.atleast_1d(np.asarray(r, dtype=object)).ravel().tolist() for r in raws]
        if len(groups) != len(idx):
            raise ValueError(f"generate returned {len(groups)} reward groups for {len(idx)} asked prompts")
        for i, g, n in zip(idx, groups, asked.tolist()):
            if len(g) > n:
                raise ValueError(f"generate returned {len(g)} rewards for prompt {self.prompts[i]!r}, asked {n}")
        draw = scored_draw(self.signal, groups, [self.prompts[i] for i in idx])
        unscored = np.zeros(len(idx), dtype=np.int64)
        for j, (i, g, scored, n) in enumerate(zip(idx, groups, draw, asked.tolist())):
            raw = np.array([np.nan if r is None else float(r) for r in g], dtype=float)
            self._success[i].extend(scored.tolist())
            self._raw[i].extend(raw[~np.isnan(raw)].tolist())
            self.unscored += int(draw.unscored[j])
            self.missing += n - len(g)
            unscored[j] = n - scored.size
        return Draw(list(draw), unscored)

    def successes(self) -> list[np.ndarray]:
        return [np.asarray(s, dtype=float) for s in self._success]

    def raw_rewards(self) -> list[np.ndarray]:
        return [np.asarray(r, dtype=float) for r in self._raw]

    @property
    def delivered(self) -> np.ndarray:
        return np.array([len(s) for s in self._success], dtype=np.int64)


@dataclass
class RunningTotals:
    """Rollouts spent and budgeted since the start of the run (part of a trainer's checkpoint, so a
    resumed run logs the totals of an uninterrupted one).

    >>> t = RunningTotals(); t.add(24, 32); t.add(32, 32); t.values()
    {'rollouts_spent_total': 56, 'rollouts_saved_total': 8, 'budget_share_total': 0.875}
    """

    steps: int = 0
    rollouts_spent: int = 0
    budget: int = 0

    def add(self, spent: int, budget: int) -> None:
        self.steps += 1
        self.rollouts_spent += int(spent)
        self.budget += int(budget)

    def values(self) -> dict[str, Any]:
        return {
            "rollouts_spent_total": self.rollouts_spent,
            "rollouts_saved_total": self.budget - self.rollouts_spent,
            "budget_share_total": self.rollouts_spent / self.budget if self.budget else 0.0,
        }

    def state_dict(self) -> StateDict:
        return {"steps": self.steps, "rollouts_spent": self.rollouts_spent, "budget": self.budget}

    def load_state_dict(self, state: StateDict) -> None:
        """Checked whole before anything changes: ValueError naming the entry otherwise."""
        reader = StateReader(state, "RunningTotals", ["steps", "rollouts_spent", "budget"])
        steps, spent, budget = (reader.integer(k, low=0) for k in ("steps", "rollouts_spent", "budget"))
        if spent > budget:
            raise ValueError(f"RunningTotals state: rollouts_spent {spent} exceeds budget {budget}")
        self.steps, self.rollouts_spent, self.budget = steps, spent, budget

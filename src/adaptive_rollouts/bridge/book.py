"""What one trainer step generated, and what a run spent: the books `TrainerStep` keeps.

- `StepBook`: per prompt, the rollouts asked, the scored successes (each round's raw rewards mapped
  at once, `steps.scored_draw`), the scored raw rewards, unscored and missing rollouts, rounds, and
  the completion lengths when the trainer gives them (`Generated`);
- `Generated`: a round's raw rewards with each rollout's completion length (tokens);
- `PerPrompt`: a round from a framework's ``generate(prompt, n)`` and ``reward(prompt, completion)``;
- `RoundIncomplete`: a trainer's round that could not be delivered (verl's failed sessions);
- `RunningTotals`: rollouts (and tokens) spent, budgeted and saved since the start of the run
  (checkpointed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptive_rollouts.checks.lengths import check_lengths, lengths_state
from adaptive_rollouts.state.checks import StateReader
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw, StateDict

from .steps import scored_draw

__all__ = ["Generated", "PerPrompt", "RoundFn", "RoundIncomplete", "RunningTotals", "StepBook"]


@dataclass(frozen=True)
class Generated:
    """A round's answer with completion lengths: ``rewards[j]``, the raw rewards of the j-th asked
    prompt (as a plain answer: None / NaN unscored, fewer than asked when some failed), and
    ``lengths[j]``, the completion length in tokens of each of them, in the same order (None: not
    known for that prompt). A rollout that failed (asked, no record) has no length and counts 0 tokens.

    >>> Generated([[1.0, None]], [[12, 40]]).lengths
    [[12, 40]]
    """

    rewards: Sequence[Any]
    lengths: Sequence[Any]


RoundFn = Callable[[np.ndarray, np.ndarray], "Sequence[Any] | Generated"]
"""``generate(indices, counts)``: one group of raw rewards per asked prompt, or a `Generated` with
their completion lengths (see the module docstring)."""


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
    failing after its retries). ``raws``: what it did produce for the asked prompts (or None; a
    `Generated` with their lengths). The
    allocator's run stops there and leaves its state as before the step; the step result keeps what
    was generated, marked ``incomplete``."""

    def __init__(self, message: str, raws: Sequence[Any] | Generated | None = None):
        super().__init__(message)
        self.raws = raws


class StepBook:
    """What one step generated, per prompt: rollouts asked (``requested``), scored successes, scored
    raw rewards, unscored and missing (failed) rollouts, rounds, completion lengths. `add` maps one
    round's raw rewards at once (`steps.scored_draw`) and returns the `Draw` the allocator gets."""

    def __init__(self, prompts: Sequence[Hashable], requested: Any = None, signal: SuccessSignal | None = None):
        self.prompts = list(prompts)
        n = len(self.prompts)
        self.requested = np.zeros(n, dtype=np.int64) if requested is None else np.asarray(requested, dtype=np.int64)
        self.signal = SuccessSignal() if signal is None else signal
        self._success: list[list[float]] = [[] for _ in range(n)]
        self._raw: list[list[float]] = [[] for _ in range(n)]
        self._length_scored: list[list[int]] = [[] for _ in range(n)]  # in the order of the successes
        self._length_rest: list[list[int]] = [[] for _ in range(n)]  # unscored, then failed (0 tokens)
        self._length_known: list[bool] = []  # per round and asked prompt: were its lengths given
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

    def add(self, indices: Any, raws: Sequence[Any] | Generated, asked: Any, max_length: int | None = None) -> Draw:
        """One round: prompt ``indices[j]`` got raw rewards ``raws[j]`` for ``asked[j]`` rollouts (fewer:
        the rest failed), or a `Generated` with their completion lengths (checked by
        `checks.lengths.check_lengths`, at most ``max_length``). Returns the allocator's `Draw`
        (scored successes; unscored = asked - scored; their lengths, scored first, when given)."""
        lengths = raws.lengths if isinstance(raws, Generated) else None
        raws = raws.rewards if isinstance(raws, Generated) else raws
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        asked = np.asarray(asked, dtype=np.int64).reshape(-1)
        groups = [np.atleast_1d(np.asarray(r, dtype=object)).ravel().tolist() for r in raws]
        if len(groups) != len(idx):
            raise ValueError(f"generate returned {len(groups)} reward groups for {len(idx)} asked prompts")
        for i, g, n in zip(idx, groups, asked.tolist()):
            if len(g) > n:
                raise ValueError(f"generate returned {len(g)} rewards for prompt {self.prompts[i]!r}, asked {n}")
        keys = [self.prompts[i] for i in idx]
        checked = check_lengths(keys, lengths, [len(g) for g in groups], max_length, source="generate(...)")
        draw = scored_draw(self.signal, groups, keys)
        unscored = np.zeros(len(idx), dtype=np.int64)
        ordered: list[np.ndarray | None] = []
        for j, (i, g, scored, n) in enumerate(zip(idx, groups, draw, asked.tolist())):
            raw = np.array([np.nan if r is None else float(r) for r in g], dtype=float)
            self._success[i].extend(scored.tolist())
            self._raw[i].extend(raw[~np.isnan(raw)].tolist())
            self.unscored += int(draw.unscored[j])
            self.missing += n - len(g)
            unscored[j] = n - scored.size
            length = checked[j]
            if lengths is not None:
                self._length_known.append(length is not None)
            if length is None:
                ordered.append(None)
                continue
            kept = ~np.isnan(raw)  # the scored rollouts (`scored_draw` keeps exactly these)
            rest = [*length[~kept].tolist(), *[0] * (n - len(g))]  # a failed rollout: no record, 0 tokens
            self._length_scored[i].extend(length[kept].tolist())
            self._length_rest[i].extend(rest)
            ordered.append(np.array([*length[kept].tolist(), *rest], dtype=np.int64))
        return Draw(list(draw), unscored, None if lengths is None else ordered)

    @property
    def lengths_partial(self) -> bool:
        """Whether this step's lengths were given for some rollouts and not for others."""
        return lengths_state([np.zeros(0) if k else None for k in self._length_known]) == "partial"

    def lengths(self) -> list[np.ndarray] | None:
        """Each prompt's completion lengths this step (scored rollouts in the order of `successes`,
        then unscored and failed ones), or None unless every round gave every asked prompt's."""
        if not self._length_known or not all(self._length_known):
            return None
        return [np.array(a + b, dtype=np.int64) for a, b in zip(self._length_scored, self._length_rest)]

    def draw(self) -> list[np.ndarray] | Draw:
        """The step's successes as the allocator's ``observe`` takes them: a plain list, or a `Draw`
        with each prompt's unscored (and failed) rollouts and completion lengths when any were given."""
        successes = self.successes()
        if not self._length_known:
            return successes
        known = self.lengths()
        lengths = [None] * len(successes) if known is None else known
        return Draw(successes, self.requested - self.delivered, lengths)

    def successes(self) -> list[np.ndarray]:
        return [np.asarray(s, dtype=float) for s in self._success]

    def raw_rewards(self) -> list[np.ndarray]:
        return [np.asarray(r, dtype=float) for r in self._raw]

    @property
    def delivered(self) -> np.ndarray:
        return np.array([len(s) for s in self._success], dtype=np.int64)


@dataclass
class RunningTotals:
    """Rollouts spent and budgeted since the start of the run, and tokens spent and saved over the
    steps that gave completion lengths (part of a trainer's checkpoint, so a resumed run logs the
    totals of an uninterrupted one). The token totals appear once a step has given lengths.

    >>> t = RunningTotals(); t.add(24, 32); t.add(32, 32); t.values()
    {'rollouts_spent_total': 56, 'rollouts_saved_total': 8, 'budget_share_total': 0.875}
    >>> t.add(8, 32, {"tokens_spent": 800, "tokens_saved": 2400.0}); t.values()["tokens_saved_total"]
    2400.0
    """

    steps: int = 0
    rollouts_spent: int = 0
    budget: int = 0
    token_steps: int = 0  # steps whose tokens were counted
    tokens_spent: int = 0
    tokens_saved: float = 0.0  # an estimate (`metrics.token_metrics`)

    def add(self, spent: int, budget: int, tokens: dict[str, Any] | None = None) -> None:
        """One step: its rollouts spent and budget, and its `metrics.token_metrics` when it had lengths."""
        self.steps += 1
        self.rollouts_spent += int(spent)
        self.budget += int(budget)
        if tokens is not None:
            self.token_steps += 1
            self.tokens_spent += int(tokens["tokens_spent"])
            self.tokens_saved += float(tokens["tokens_saved"] or 0.0)

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rollouts_spent_total": self.rollouts_spent,
            "rollouts_saved_total": self.budget - self.rollouts_spent,
            "budget_share_total": self.rollouts_spent / self.budget if self.budget else 0.0,
        }
        if self.token_steps:
            out.update(tokens_spent_total=self.tokens_spent, tokens_saved_total=self.tokens_saved)
        return out

    def state_dict(self) -> StateDict:
        return {
            "steps": self.steps,
            "rollouts_spent": self.rollouts_spent,
            "budget": self.budget,
            "token_steps": self.token_steps,
            "tokens_spent": self.tokens_spent,
            "tokens_saved": self.tokens_saved,
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Checked whole before anything changes: ValueError naming the entry otherwise. A state
        written before the token totals existed loads with them at zero."""
        reader = StateReader(state, "RunningTotals", ["steps", "rollouts_spent", "budget"])
        steps, spent, budget = (reader.integer(k, low=0) for k in ("steps", "rollouts_spent", "budget"))
        if spent > budget:
            raise ValueError(f"RunningTotals state: rollouts_spent {spent} exceeds budget {budget}")
        token_steps = reader.integer("token_steps", low=0, high=steps) if "token_steps" in state else 0
        tokens_spent = reader.integer("tokens_spent", low=0) if "tokens_spent" in state else 0
        tokens_saved = reader.real("tokens_saved") if "tokens_saved" in state else 0.0
        self.steps, self.rollouts_spent, self.budget = steps, spent, budget
        self.token_steps, self.tokens_spent, self.tokens_saved = token_steps, tokens_spent, tokens_saved

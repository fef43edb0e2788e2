"""`RolloutCollector`: the rewards of a progressive allocator's several `sample` calls, per prompt."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks.lengths import check_lengths, lengths_state
from ..checks.validation import check_rewards_flat
from ..clock import AllocatorClock
from ..types import Draw, Prompt, Rewards, SampleFn
from .round_plan import check_seconds

__all__ = ["RolloutCollector"]


def _checked_unscored(unscored: object, asked: np.ndarray, prompts: Sequence[Prompt]) -> np.ndarray:
    """A `Draw`'s ``unscored``: one integer in [0, asked[i]] per requested prompt."""
    arr = np.asarray(unscored)
    if arr.shape != asked.shape or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(
            f"sample(...) returned a Draw whose unscored has shape {arr.shape} and dtype {arr.dtype}, "
            f"expected {asked.size} integers"
        )
    bad = np.flatnonzero((arr < 0) | (arr > asked))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"sample(...) for prompt {prompts[i]!r}: unscored={int(arr[i])} is outside [0, {int(asked[i])}] (asked)"
        )
    return arr.astype(np.int64)


class RolloutCollector:
    """Accumulates rewards per prompt over several calls to `sample` and checks each answer.

    A trainer whose reward functions may leave a rollout unscored (TRL: every reward function returned
    None; verl: a failed session) answers with a `Draw`: per prompt the rewards it has and how many
    rollouts were left unscored. Such rollouts are spent (`counts`, the budget) but are not
    observations (`scored`, `unscored`): allocators learn from the rewards only, never from a
    made-up 0. A plain list answer must hold exactly the rewards asked for.

    A `Draw` may also carry each rollout's completion length (``lengths``, checked by
    `checks.lengths.check_lengths`); `lengths` gives them per prompt over every round, or None when
    some rollout's length is unknown (`lengths_partial` says whether some were known), and the time
    the round took (``seconds``, `timed_rounds`).
    """

    def __init__(self, prompts: Sequence[Prompt], sample: SampleFn, clock: AllocatorClock | None = None):
        self.prompts = prompts if type(prompts) is list else list(prompts)
        self.sample = sample
        self.counts = np.zeros(len(self.prompts), dtype=np.int64)
        self.unscored = np.zeros(len(self.prompts), dtype=np.int64)
        self._draws: list[tuple[np.ndarray, list[np.ndarray], np.ndarray]] = []
        self._lengths: list[list[np.ndarray | None]] = []  # per draw, one group per asked prompt (or None)
        self._seconds: list[float | None] = []  # per draw, the time the trainer says it took (or None)
        self.clock = AllocatorClock() if clock is None else clock  # sampling is paused time

    @property
    def sample_time_s(self) -> float:
        """Seconds spent inside ``sample`` (the trainer's generation and scoring)."""
        return self.clock.paused_seconds

    def draw(self, increments: np.ndarray) -> None:
        """Sample increments[q] more rollouts for every prompt q with increments[q] > 0 (checked with
        one concatenation per answer, `validation.check_rewards_flat`)."""
        increments = np.asarray(increments, dtype=np.int64)
        if np.any(increments < 0):
            raise RuntimeError(f"internal error: negative increments {increments[increments < 0].tolist()}")
        indices = np.flatnonzero(increments > 0)
        if indices.size == 0:
            return
        with self.clock.paused():
            answer = self.sample(indices, increments[indices])
        everyone = indices.size == len(self.prompts)
        sub_prompts = self.prompts if everyone else [self.prompts[i] for i in indices.tolist()]
        asked = increments[indices]
        unscored = np.zeros(indices.size, dtype=np.int64)
        lengths, seconds = None, None
        if isinstance(answer, Draw):
            unscored = _checked_unscored(answer.unscored, asked, sub_prompts)
            lengths = answer.lengths
            seconds = check_seconds(getattr(answer, "seconds", None))
            answer = list(answer)
        groups, flat, _ = check_rewards_flat(sub_prompts, answer, asked - unscored, source="sample(...)")
        assert groups is not None
        checked = check_lengths(sub_prompts, lengths, asked, source="sample(...)")
        self._draws.append((indices, groups, flat))
        self._lengths.append(checked)
        self._seconds.append(seconds)
        self.counts[indices] += asked
        self.unscored[indices] += unscored

    @property
    def scored(self) -> np.ndarray:
        """Rollouts of each prompt that have a reward (= `counts` unless some were left unscored)."""
        return self.counts - self.unscored

    def rewards(self) -> Rewards:
        q = len(self.prompts)
        if len(self._draws) == 1 and self._draws[0][0].size == q:
            return list(self._draws[0][1])  # one draw for every prompt: the checked arrays as they are
        parts: list[list[np.ndarray]] = [[] for _ in range(q)]
        for indices, groups, _ in self._draws:
            for i, g in zip(indices.tolist(), groups):
                parts[i].append(g)
        return [np.concatenate(g) if len(g) > 1 else g[0] if g else np.zeros(0) for g in parts]

    def _length_groups(self) -> list[np.ndarray | None]:
        return [g for draw in self._lengths for g in draw]

    @property
    def lengths_partial(self) -> bool:
        """Whether this step's lengths are known for some rollouts and not for others
        (`checks.lengths.lengths_state`): its tokens cannot be counted."""
        return lengths_state(self._length_groups()) == "partial"

    def lengths(self) -> list[np.ndarray] | None:
        """Each prompt's completion lengths over every draw: those of its scored rollouts in the order
        of `rewards`, then those of its unscored ones (an empty array for a prompt never drawn). None
        unless every rollout drawn has a length (no draw at all: None)."""
        if not self._lengths or lengths_state(self._length_groups()) != "complete":
            return None
        scored: list[list[np.ndarray]] = [[] for _ in self.prompts]
        unscored: list[list[np.ndarray]] = [[] for _ in self.prompts]
        for (indices, groups, _), lengths in zip(self._draws, self._lengths):
            for i, g, length in zip(indices.tolist(), groups, lengths):
                assert length is not None
                scored[i].append(length[: g.size])
                unscored[i].append(length[g.size :])
        return [
            np.concatenate([*a, *b]).astype(np.int64) if a else np.zeros(0, np.int64) for a, b in zip(scored, unscored)
        ]

    def timed_rounds(self) -> list[tuple[float, int, int]]:
        """(seconds, longest rollout, tokens) of each round that came with its time and every length."""
        out = []
        for seconds, lengths in zip(self._seconds, self._lengths):
            if seconds is not None and all(g is not None for g in lengths):
                flat = np.concatenate([g for g in lengths if g is not None])
                if flat.size:
                    out.append((seconds, int(flat.max()), int(flat.sum())))
        return out

    def flat(self) -> np.ndarray | None:
        """All rewards in prompt order, when that is how they were drawn (one draw for everyone)."""
        if len(self._draws) == 1 and self._draws[0][0].size == len(self.prompts):
            return self._draws[0][2]
        return None

    def reward_variance(self) -> np.ndarray:
        """Population variance of each prompt's rewards so far (0 for fewer than 2)."""
        return np.array([np.var(r) if r.size >= 2 else 0.0 for r in self.rewards()])

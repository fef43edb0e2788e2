"""GRESO: skip prompts before rollout when their recent groups were all-correct or all-wrong.

`GRESO` is the published rule (skipped prompts are not refilled: it saves rollouts); `GRESOFill`
spends the whole budget on the kept prompts. Both share the streaks and keep probabilities of
`StreakSkip`, and a state saved by either loads into the other (the rule is not part of the state)."""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np

from ..checks.validation import check_range
from ..solvers import equal_split
from ..state.checks import StateReader, real_number
from ..types import AllocatorKind, Prediction, StateDict
from .base import SingleShotAllocator


def _check_probabilities(p_easy: float, p_hard: float, floor: float = 0.01) -> tuple[float, float, float]:
    """The constructor's checks (also applied to a loaded state)."""
    values = {"p_easy": p_easy, "p_hard": p_hard, "floor": floor}
    p_easy, p_hard, floor = (check_range(v, name, 0.0, 1.0, high_closed=True) for name, v in values.items())
    return p_easy, p_hard, floor


__all__ = ["GRESO", "GRESOFill", "StreakSkip"]

# class names whose states hold the same streaks and probabilities (GRESO before the split filled)
_STATE_NAMES = ("GRESO", "GRESOFill")


class StreakSkip(SingleShotAllocator):
    """GRESO's pre-rollout filter, shared by `GRESO` and `GRESOFill` (which add the allocation).

    A prompt whose last k_e (k_h) consecutive groups were all-correct (all-wrong) is kept before
    rollout with probability max(p_easy^k_e, floor) (max(p_hard^k_h, floor)), floor = 0.01, and
    skipped otherwise; prompts never seen have k = 0 and are always kept. After each step p_easy
    moves by `step` toward the target: down when the share of all-correct groups exceeds
    `target_easy`, up otherwise (same for p_hard); both stay in [floor, 1]. Streaks are keyed by
    prompt (JSON-able keys - str or int - for `state_dict`). Defaults (p = 0.5, step = 0.01,
    targets 1/12 easy and 1/6 hard) are our reading of the paper's settings; all are parameters.

    >>> import numpy as np
    >>> greso = GRESO(seed=0)
    >>> greso.observe(["a", "b"], [np.ones(4), np.array([0.0, 1.0, 0.0, 1.0])])
    >>> greso.streaks("a"), greso.streaks("b")
    ((1, 0), (0, 0))
    """

    lower = 2
    allow_skip = True

    def __init__(
        self,
        p_easy: float = 0.5,
        p_hard: float = 0.5,
        step: float = 0.01,
        target_easy: float = 1 / 12,
        target_hard: float = 1 / 6,
        floor: float = 0.01,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        self.p_easy, self.p_hard, self.floor = _check_probabilities(p_easy, p_hard, floor)
        self.step = real_number("step", step)
        self.target_easy, self.target_hard = float(target_easy), float(target_hard)
        self._easy: dict[Any, int] = {}
        self._hard: dict[Any, int] = {}

    def stores_prompts(self) -> bool:
        return True  # streaks are keyed by prompt

    def streaks(self, prompt: Any) -> tuple[int, int]:
        """(consecutive all-correct groups, consecutive all-wrong groups) of `prompt`."""
        return self._easy.get(prompt, 0), self._hard.get(prompt, 0)

    def keep_probability(self, prompts: list) -> np.ndarray:
        easy = np.array([self._easy.get(p, 0) for p in prompts], dtype=float)
        hard = np.array([self._hard.get(p, 0) for p in prompts], dtype=float)
        keep = np.ones(len(prompts))
        keep = np.where(easy > 0, np.maximum(self.p_easy**easy, self.floor), keep)
        keep = np.where(hard > 0, np.maximum(self.p_hard**hard, self.floor), keep)
        return keep

    def _keep(self, prompts: list) -> np.ndarray:
        """The step's random keep decision, one draw per prompt."""
        return self.rng.random(len(prompts)) < self.keep_probability(prompts)

    def _observe(self, prompts: list, rewards: list[np.ndarray]) -> None:
        easy_n = hard_n = seen = 0
        for p, r in zip(prompts, rewards):
            if r.size == 0:
                continue  # skipped: streak unchanged
            seen += 1
            all_easy, all_hard = bool(np.all(r >= 1 - 1e-8)), bool(np.all(r <= 1e-8))
            # only non-zero streaks are stored: the dicts stay as small as the state they encode
            for streaks, hit in ((self._easy, all_easy), (self._hard, all_hard)):
                if hit:
                    streaks[p] = streaks.get(p, 0) + 1
                else:
                    streaks.pop(p, None)
            easy_n += all_easy
            hard_n += all_hard
        if seen:
            self.p_easy = float(
                np.clip(self.p_easy + (-self.step if easy_n / seen > self.target_easy else self.step), self.floor, 1.0)
            )
            self.p_hard = float(
                np.clip(self.p_hard + (-self.step if hard_n / seen > self.target_hard else self.step), self.floor, 1.0)
            )

    def _extra_state(self) -> StateDict:
        keys = sorted(set(self._easy) | set(self._hard), key=repr)
        return {
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "keys": list(keys),
            "easy": [self._easy.get(k, 0) for k in keys],
            "hard": [self._hard.get(k, 0) for k in keys],
        }

    def _load_extra_state(self, state: StateDict) -> None:
        """Checks everything before changing anything: p_easy / p_hard in [floor, 1], distinct
        keys, one non-negative integer streak of each kind per key."""
        reader = StateReader(state, type(self).__name__, ["p_easy", "p_hard", "keys", "easy", "hard"])
        p_easy, p_hard, _ = reader.hyperparameters(_check_probabilities, ["p_easy", "p_hard"], floor=self.floor)
        keys = reader.keys()
        easy = reader.array("easy", (len(keys),), dtype=np.int64, low=0)
        hard = reader.array("hard", (len(keys),), dtype=np.int64, low=0)
        if np.any((easy > 0) & (hard > 0)):
            raise reader.error("easy", "a prompt cannot be on an all-correct and an all-wrong streak at once")
        self.p_easy, self.p_hard = p_easy, p_hard
        self._easy = {k: int(v) for k, v in zip(keys, easy) if v}
        self._hard = {k: int(v) for k, v in zip(keys, hard) if v}

    def load_state_dict(self, state: StateDict) -> None:
        """As `BaseAllocator.load_state_dict`; a `GRESO` state loads into `GRESOFill` and back."""
        if isinstance(state, dict) and state.get("allocator") in _STATE_NAMES:
            state = copy.copy(state)  # keeps a loaded state's file and entry for error messages
            state["allocator"] = type(self).__name__
        super().load_state_dict(state)


class GRESO(StreakSkip):
    """GRPO with Efficient Selective Rollout (Zheng et al. 2025, "Act only when it pays",
    arXiv 2506.02177), as published: it saves the skipped prompts' rollouts.

    Rule: the keep decision of `StreakSkip` (a prompt on a k-step all-correct / all-wrong streak is
    kept with probability max(p^k, 0.01), p adapted toward a target share of flat groups); a kept
    prompt gets Uniform's group size, n_q = floor(C / Q) (+1 for the first C mod Q prompts of the
    batch), a skipped one 0, and the skipped prompts' rollouts are not given to anyone:
    spent = sum over kept prompts of n_q <= C. Budget: C >= 2Q (a kept group has >= 2 rollouts).
    `GRESOFill` ("greso-fill") spends the whole budget on the kept prompts instead.

    >>> import numpy as np
    >>> greso = GRESO(p_easy=0.01, seed=0)  # keep probability after one all-correct group: 0.01
    >>> greso.observe(["a", "b", "c"], [np.ones(4), np.array([0.0, 1.0]), np.array([1.0, 0.0])])
    >>> greso.plan(["a", "b", "c"], 24).counts.tolist()
    [0, 8, 8]
    """

    name = "greso"
    kind: ClassVar[AllocatorKind] = "save"

    def budget_range(self, num_prompts: int) -> tuple[int, int | None]:
        return self.lower * num_prompts, None

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        return np.where(self._keep(prompts), equal_split(budget, len(prompts)), 0)


class GRESOFill(StreakSkip):
    """GRESO's skip rule with the budget spent in full on the kept prompts (this library's variant
    for fixed-budget comparisons; `GRESO` is the published, saving rule).

    Rule: the keep decision of `StreakSkip`; the budget is split evenly over the kept prompts
    (`Uniform` over them, the first C mod K in batch order get one more); if no prompt or more than
    C / 2 prompts are kept, the kept set is filled / cut in seeded random order so every kept prompt
    gets >= 2. Spent: exactly C.

    >>> import numpy as np
    >>> greso = GRESOFill(p_easy=0.01, seed=0)
    >>> greso.observe(["a", "b", "c"], [np.ones(4), np.array([0.0, 1.0]), np.array([1.0, 0.0])])
    >>> greso.plan(["a", "b", "c"], 24).counts.tolist()
    [0, 12, 12]
    """

    name = "greso-fill"

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        q = len(prompts)
        counts = np.zeros(q, dtype=np.int64)
        if budget == 0:
            return counts
        kept = self._keep(prompts)
        most = budget // self.lower
        order = self.rng.permutation(q)
        if kept.sum() == 0:
            kept[order[0]] = True
        if kept.sum() > most:
            drop = [i for i in order if kept[i]][: int(kept.sum()) - most]
            kept[drop] = False
        idx = np.flatnonzero(kept)
        counts[idx] = equal_split(budget, idx.size)
        return counts

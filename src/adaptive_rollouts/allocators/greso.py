"""GRESO: skip prompts before rollout when their recent groups were all-correct or all-wrong."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..types import StateDict
from .base import SingleShotAllocator

__all__ = ["GRESO"]


class GRESO(SingleShotAllocator):
    """GRPO with Efficient Selective Rollout (Zheng et al. 2025, "Act only when it pays",
    arXiv 2506.02177).

    Rule: a prompt whose last k_e (k_h) consecutive groups were all-correct (all-wrong) is kept
    before rollout with probability max(p_easy^k_e, floor) (max(p_hard^k_h, floor)), floor = 0.01,
    and skipped otherwise. After each step p_easy moves by `step` toward the target: down when the
    share of all-correct groups exceeds `target_easy`, up otherwise (same for p_hard); both stay
    in [floor, 1]. The budget is split evenly over the kept prompts (`Uniform` over them, the
    first C mod K in batch order get one more); if fewer than 1 or more than C / 2 prompts are kept,
    the kept set is filled / cut in seeded random order so every kept prompt gets >= 2.
    Prompts never seen have k = 0 and are always kept. Streaks are keyed by prompt (JSON-able keys
    - str or int - for `state_dict`). Defaults (p = 0.5, step = 0.01, targets 1/12 easy and 1/6 hard)
    are our reading of the paper's settings; all are parameters.

    >>> import numpy as np
    >>> greso = GRESO(seed=0)
    >>> greso.observe(["a", "b"], [np.ones(4), np.array([0.0, 1.0, 0.0, 1.0])])
    >>> greso.streaks("a"), greso.streaks("b")
    ((1, 0), (0, 0))
    """

    name = "greso"
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
        for name, v in [("p_easy", p_easy), ("p_hard", p_hard), ("floor", floor)]:
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v}")
        self.p_easy, self.p_hard, self.step, self.floor = float(p_easy), float(p_hard), float(step), float(floor)
        self.target_easy, self.target_hard = float(target_easy), float(target_hard)
        self._easy: dict[Any, int] = {}
        self._hard: dict[Any, int] = {}

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

    def _plan(self, prompts: list, budget: int) -> np.ndarray:
        q = len(prompts)
        counts = np.zeros(q, dtype=np.int64)
        if budget == 0:
            return counts
        kept = self.rng.random(q) < self.keep_probability(prompts)
        most = budget // self.lower
        order = self.rng.permutation(q)
        if kept.sum() == 0:
            kept[order[0]] = True
        if kept.sum() > most:
            drop = [i for i in order if kept[i]][: int(kept.sum()) - most]
            kept[drop] = False
        idx = np.flatnonzero(kept)
        counts[idx] = budget // idx.size
        counts[idx[: budget % idx.size]] += 1
        return counts

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
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self._easy = {k: int(v) for k, v in zip(state["keys"], state["easy"]) if v}
        self._hard = {k: int(v) for k, v in zip(state["keys"], state["hard"]) if v}

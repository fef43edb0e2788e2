"""Reference allocators that know the simulator's true success probabilities.

They bound what any predictor-based allocator can reach and give the variance reference of the
benchmark. ``truth(prompts) -> (mean, var)`` returns each prompt's true expected reward and reward
variance under the current policy (``Simulator.truth``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.types import Prediction, Prompt, Rewards, SampleFn

TruthFn = Callable[[Sequence[Prompt]], tuple[np.ndarray, np.ndarray]]

__all__ = ["OracleAllocator", "SimpleUniform", "TruePredictor", "greedy_allocate", "fill_allocate"]


def _check_budget(budget: int, n_prompts: int, lower: int) -> None:
    if n_prompts == 0:
        raise ValueError("prompts is empty")
    if budget < lower * n_prompts:
        raise ValueError(f"budget={budget} is below lower*Q = {lower}*{n_prompts}")


def greedy_allocate(weights: np.ndarray, budget: int, lower: int, upper: int, objective: str = "rloo") -> np.ndarray:
    """Marginal-gain greedy for min sum_q a_q f(n_q), sum n = budget, lower <= n <= upper.

    f = 1/(n-1) (RLOO) or (n-1)/n^2 (Dr. GRPO). Exact when f is convex on [lower, upper]
    (RLOO for lower >= 2; Dr. GRPO for lower >= 3).

    >>> greedy_allocate(np.array([.01, .1, .2, .4, .5, .8, .95, .99]) * (1 - np.array([.01, .1, .2, .4, .5, .8, .95, .99])), 64, 4, 12, "drgrpo").tolist()
    [4, 7, 10, 12, 12, 10, 5, 4]
    """
    a = np.asarray(weights, dtype=float)
    Q = a.size
    _check_budget(budget, Q, lower)
    if budget > upper * Q:
        raise ValueError(f"budget={budget} exceeds upper*Q = {upper}*{Q}")
    f = (lambda n: 1.0 / (n - 1.0)) if objective == "rloo" else (lambda n: (n - 1.0) / n**2)
    n = np.full(Q, lower, dtype=np.int64)
    for _ in range(budget - lower * Q):
        gain = np.where(n < upper, a * (f(n.astype(float)) - f(n + 1.0)), -np.inf)
        n[int(np.argmax(gain))] += 1
    return n


def fill_allocate(weights: np.ndarray, budget: int, upper: int) -> np.ndarray:
    """Give ``upper`` rollouts to the prompts of largest weight, in order, and skip the rest."""
    a = np.asarray(weights, dtype=float)
    n = np.zeros(a.size, dtype=np.int64)
    left = budget
    for q in np.argsort(-a, kind="stable"):
        if left <= 0:
            break
        take = min(upper, left)
        if take == 1 and n.sum() > 0:  # a singleton group carries no signal: top up the last
            n[np.flatnonzero(n)[-1]] += 1
        else:
            n[q] = take
        left -= take
    if left > 0:
        raise ValueError(f"budget={budget} exceeds upper*Q = {upper}*{a.size}")
    return n


class TruePredictor:
    """Predictor protocol backed by the simulator's truth: Prediction(mean=p, var=0)."""

    def __init__(self, truth: TruthFn):
        self.truth = truth

    def predict(self, prompts: Sequence[Prompt]) -> Prediction:
        mean, _ = self.truth(prompts)
        return Prediction(mean=np.asarray(mean, float), var=np.zeros(len(prompts)))

    def update(self, prompts: Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class _Base:
    last_metrics: dict[str, Any]

    def __init__(self) -> None:
        self.last_metrics = {}

    def plan(self, prompts: Sequence[Prompt], budget: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def observe(self, prompts: Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None:
        return None

    def run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        counts = self.plan(prompts, budget)
        idx = np.flatnonzero(counts)
        got = sample(idx, counts[idx])
        out: Rewards = [np.zeros(0) for _ in prompts]
        for i, r in zip(idx, got):
            out[i] = np.asarray(r, dtype=float)
        self.last_metrics = {"counts": counts.tolist()}
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class SimpleUniform(_Base):
    """n_q = C / Q (remainder to the first prompts). Used when ``allocators`` is unavailable."""

    def plan(self, prompts: Sequence[Prompt], budget: int) -> np.ndarray:
        Q = len(prompts)
        _check_budget(budget, Q, 1)
        n = np.full(Q, budget // Q, dtype=np.int64)
        n[: budget - n.sum()] += 1
        return n


class OracleAllocator(_Base):
    """Allocation from the true reward variance a_q (p (1-p) for binary rewards).

    mode ``"vip"``: VIP's objective min sum_q a_q f(n_q) with the true a_q (objective ``rloo`` or
    ``drgrpo``, ``lower <= n <= upper``); mode ``"fill"``: give ``upper`` rollouts to the prompts
    of largest a_q and skip the rest (METHODS section 6).

    >>> truth = lambda ps: (np.array([.5, .0, .9, .3]), np.array([.25, 0., .09, .21]))
    >>> OracleAllocator(truth, mode="fill", upper=8).plan(["a", "b", "c", "d"], 16).tolist()
    [8, 0, 0, 8]
    """

    def __init__(self, truth: TruthFn, mode: str = "vip", objective: str = "rloo", lower: int = 2, upper: int = 32):
        super().__init__()
        if mode not in ("vip", "fill"):
            raise ValueError(f"mode must be 'vip' or 'fill', got {mode!r}")
        if objective not in ("rloo", "drgrpo"):
            raise ValueError(f"objective must be 'rloo' or 'drgrpo', got {objective!r}")
        self.truth, self.mode, self.objective = truth, mode, objective
        self.lower, self.upper = lower, upper

    def plan(self, prompts: Sequence[Prompt], budget: int) -> np.ndarray:
        _, var = self.truth(prompts)
        if self.mode == "fill":
            return fill_allocate(var, budget, self.upper)
        upper = max(self.upper, -(-budget // len(prompts)))
        return greedy_allocate(var, budget, self.lower, upper, self.objective)

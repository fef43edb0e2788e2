"""Reference allocators that know the simulator's true success probabilities.

They bound what any predictor-based allocator can reach and give the variance reference of the
benchmark. ``truth(prompts) -> (mean, var)`` returns each prompt's true expected reward and reward
variance under the current policy (``Simulator.truth``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.allocators.base import SingleShotAllocator
from adaptive_rollouts.checks.validation import check_choice
from adaptive_rollouts.objectives import get_estimator
from adaptive_rollouts.sim.problem import Problem
from adaptive_rollouts.solvers import allocate, equal_split
from adaptive_rollouts.types import Prediction, Prompt

TruthFn = Callable[[Sequence[Prompt]], tuple[np.ndarray, np.ndarray]]

__all__ = ["OracleAllocator", "SkipOracle", "TruePredictor", "fill_allocate", "problem_truth"]


def problem_truth(problem: Problem) -> TruthFn:
    """``truth(prompts) -> (mean, var)`` of a `sim.problem.Problem` under its initial policy: the
    prompts are the problem's integer prompt indices."""

    def truth(prompts):
        idx = np.asarray([int(p) for p in prompts], dtype=np.int64)
        return problem.success(idx), problem.reward_variance(idx)

    return truth


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


class SkipOracle(SingleShotAllocator):
    """The known-p skip rule (a rule, not an upper bound: learned rules beat it where all-equal groups
    come from prompts whose p is not extreme): Uniform's group size n_q (the equal split of the budget) for
    every prompt whose group would teach something with probability at least 1 - ``flat_above``, and
    no rollouts for the rest: skip q when P(all equal at n_q) = p^n + (1 - p)^n > ``flat_above``
    (0.9), p the true success probability. Spends at most the budget.

    >>> truth = lambda ps: (np.array([.5, .001, .999, .2]), np.zeros(4))
    >>> SkipOracle(truth).plan(["a", "b", "c", "d"], 32).counts.tolist()
    [8, 0, 0, 8]
    """

    name = "oracle-skip"
    kind = "save"
    lower = 2
    allow_skip = True

    def __init__(self, truth: TruthFn, flat_above: float = 0.9):
        super().__init__(seed=0)
        self.truth = truth
        self.flat_above = float(flat_above)

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        p, _ = self.truth(prompts)
        n = equal_split(budget, len(prompts))
        p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
        flat = p**n + (1.0 - p) ** n
        return np.where((flat > self.flat_above) | (n < 2), 0, n)


class OracleAllocator(SingleShotAllocator):
    """Allocation from the true reward variance a_q (p (1-p) for binary rewards).

    mode ``"vip"``: VIP's objective min sum_q a_q f(n_q) with the true a_q (objective ``rloo`` or
    ``drgrpo``, ``lower <= n <= max(upper, ceil(C / Q))``), solved exactly by `solvers.allocate`;
    mode ``"fill"``: give ``upper`` rollouts to the prompts of largest a_q and skip the rest
    (docs/objectives.md, section 3).

    >>> truth = lambda ps: (np.array([.5, .0, .9, .3]), np.array([.25, 0., .09, .21]))
    >>> OracleAllocator(truth, mode="fill", upper=8).plan(["a", "b", "c", "d"], 16).counts.tolist()
    [8, 0, 0, 8]
    """

    name = "oracle"

    def __init__(self, truth: TruthFn, mode: str = "vip", objective: str = "rloo", lower: int = 2, upper: int = 32):
        super().__init__(seed=0)
        self.truth = truth
        self.mode = check_choice("mode", mode, ("vip", "fill"))
        est = get_estimator(objective, "objective")
        if est.cost_depends_on_p:  # the true reward variance is the whole weight only when the cost is p-free
            raise ValueError(
                f"OracleAllocator needs an objective whose cost is w f(n) (RLOO, Dr. GRPO), got {objective!r}"
            )
        self.objective = est.name
        # the solver's cap grows with the budget (vip) and fill may top up one group past it: the
        # per-step bounds are enforced in `_plan`, not by the base class
        self.lower, self.upper, self.allow_skip = (1, None, True) if mode == "fill" else (lower, None, False)
        self.cap = upper

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        _, var = self.truth(prompts)
        if self.mode == "fill":
            return fill_allocate(var, budget, self.cap)
        upper = max(self.cap, -(-budget // len(prompts)))
        return allocate(np.asarray(var, dtype=float), budget, self.lower, upper, self.objective)

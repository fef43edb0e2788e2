"""Knapsack RL: rollouts as items of a knapsack, value = chance of signal x information."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import check_lower_upper
from ..objectives import mixed_probability
from ..solvers import solve_bounded
from ..types import Prediction
from .predictive import PredictiveAllocator

__all__ = ["Knapsack", "knapsack_value"]


def knapsack_value(p: np.ndarray, upper: int) -> np.ndarray:
    """[Q, upper + 1] value of N rollouts: (1 - p^N - (1-p)^N) p (1-p)^2 (0 for N < 2)."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)[:, None]
    value = mixed_probability(p, np.arange(upper + 1)[None, :]) * p * (1.0 - p) ** 2
    value[:, :2] = 0.0
    return value


class Knapsack(PredictiveAllocator):
    """Knapsack RL (Li et al. 2025, "Knapsack RL: Unlocking exploration of LLMs via optimizing
    budget allocation").

    Rule: maximise sum_q v_q(N_q), v(N) = (1 - p^N - (1-p)^N) p (1-p)^2 (probability that the
    group has mixed rewards, times the information gain of a prompt at success rate p), over
    N_q in {0} U [2, 128] with sum N_q = C, solved exactly by dynamic programming
    (`solvers.solve_table`). A prompt may get zero rollouts (skipped). p_q from a predictor
    (default `WindowedMean`: the last observed success rates, as in the paper).

    >>> knapsack_value(np.array([0.5]), 4).round(4).tolist()
    [[0.0, 0.0, 0.0625, 0.0938, 0.1094]]
    """

    name = "knapsack"
    upper: int
    allow_skip = True

    def __init__(
        self,
        predictor: Any = "windowed",
        *,
        features: Any = None,
        lower: int = 2,
        upper: int = 128,
        seed: int | None = 0,
    ):
        super().__init__(predictor, features, seed)
        low, high = check_lower_upper(lower, upper)
        if high is None:
            raise ValueError("Knapsack needs an upper bound, got upper=None")
        self.lower, self.upper = low, high

    def values(self, prediction: Prediction) -> np.ndarray:
        return knapsack_value(prediction.mean, self.upper)

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        assert prediction is not None
        value = self.values(prediction)
        if not np.isfinite(value).all():  # the predictor's output, checked where it enters
            raise ValueError(f"Knapsack: the prediction's means must be finite, got {prediction.mean!r:.80}")
        return solve_bounded(-value, budget, self.lower, self.upper, allow_skip=True)

"""Allocations proportional to a per-prompt weight: DynaMO (Neyman), inverse accuracy, inverse variance."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import check_budget, check_feasible, check_lower_upper
from ..types import Prediction
from .predictive import PredictiveAllocator
from .vigor import spread

__all__ = ["proportional_counts", "water_fill", "DynaMO", "InverseAccuracy", "InverseVariance"]


def proportional_counts(weights: np.ndarray, budget: int, lower: int, upper: int | None) -> np.ndarray:
    """Integer n_q ~ c w_q, water-filled into [lower, upper] with sum exactly `budget`.

    Continuous part: x_q = clip(c w_q, lower, upper) with c found by bisection so sum x = budget
    (all-zero weights count as equal); rounding: floor, then +1 by largest fractional part
    (ties: lower index first) among prompts below upper.

    >>> proportional_counts(np.array([1.0, 2.0, 5.0]), 16, 2, 8).tolist()  # x = 2.67, 5.33, 8
    [3, 5, 8]
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be finite and >= 0, got {w.tolist()}")
    check_feasible(check_budget(budget), w.size, lower, upper, owner="proportional_counts")
    return water_fill(w, budget, lower, upper)


def water_fill(w: np.ndarray, budget: int, lower: int, upper: int | None) -> np.ndarray:
    """`proportional_counts` on checked input (finite weights >= 0, a feasible budget): the kernel
    the allocators call after their own entry check."""
    q = w.size
    hi_cap = np.inf if upper is None else float(upper)
    if w.max(initial=0.0) <= 0:
        w = np.ones(q)
    w = np.maximum(w, 1e-12 * w.max())  # zero weights may still rise above `lower` if the budget needs it

    def total(c: float) -> float:
        return float(np.clip(c * w, lower, hi_cap).sum())

    lo, hi = 0.0, 1.0
    while total(hi) < budget:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) < budget else (lo, mid)
    x = np.clip(hi * w, lower, hi_cap)
    counts = np.floor(x + 1e-9).astype(np.int64)
    counts = np.clip(counts, lower, None if upper is None else upper)
    left = budget - int(counts.sum())
    if left > 0:
        order = np.lexsort((np.arange(q), -(x - np.floor(x + 1e-9))))
        counts += spread(left, order, counts, upper)
    while left < 0:  # numerical overshoot: take back from the smallest fractional parts above lower
        frac = np.where(counts > lower, x - counts, np.inf)
        i = int(np.argmin(frac))
        counts[i] -= 1
        left += 1
    return counts


class _Proportional(PredictiveAllocator):
    default_predictor = "windowed"

    def __init__(
        self,
        predictor: Any = None,
        *,
        features: Any = None,
        lower: int = 2,
        upper: int | None = None,
        seed: int | None = 0,
    ):
        super().__init__(self.default_predictor if predictor is None else predictor, features, seed)
        self.lower, self.upper = check_lower_upper(lower, upper)

    def weights(self, prediction: Prediction) -> np.ndarray:
        raise NotImplementedError

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        assert prediction is not None
        return water_fill(self.weights(prediction), budget, self.lower, self.upper)


def _p(prediction: Prediction) -> np.ndarray:
    return np.clip(np.asarray(prediction.mean, dtype=float), 0.0, 1.0)


class DynaMO(_Proportional):
    """Neyman allocation (DynaMO, Dynamic rollout allocation and advantage MOdulation, 2025).

    Rule: n_q proportional to sigma_q = sqrt(p_q (1 - p_q)), water-filled into [n_low, n_high]
    = [lower, upper] with sum exactly C (`proportional_counts`). p_q from a predictor (default:
    `CumulativeMean`, the running success rate of each prompt); all-zero sigma
    (no signal anywhere) falls back to equal counts.

    >>> import numpy as np
    >>> from adaptive_rollouts.types import Prediction
    >>> DynaMO.weights(None, Prediction(np.array([0.5, 0.1, 1.0]), np.zeros(3))).round(2).tolist()
    [0.5, 0.3, 0.0]
    """

    name = "dynamo"
    default_predictor = "cumulative"

    def weights(self, prediction: Prediction) -> np.ndarray:
        p = _p(prediction)
        return np.sqrt(p * (1 - p))


class InverseAccuracy(_Proportional):
    """Inverse-accuracy heuristic (an ablation in VIP, arXiv 2602.01601: "GP + inverse accuracy").

    Rule: n_q proportional to 1 / max(p_q, eps), water-filled into [lower, upper]; harder prompts
    get more. p_q from our GP by default (as in the ablation, which used the VIP predictor).

    >>> import numpy as np
    >>> from adaptive_rollouts.types import Prediction
    >>> InverseAccuracy.weights(InverseAccuracy.__new__(InverseAccuracy),
    ...                         Prediction(np.array([0.5, 0.25, 0.0]), np.zeros(3))).tolist()
    [2.0, 4.0, 20.0]
    """

    name = "inverse-accuracy"
    default_predictor = "gp"
    eps = 0.05

    def weights(self, prediction: Prediction) -> np.ndarray:
        return 1.0 / np.maximum(_p(prediction), self.eps)


class InverseVariance(_Proportional):
    """Inverse-variance heuristic (an ablation in VIP, arXiv 2602.01601: "GP + inverse variance").

    Rule: n_q proportional to 1 / max(p_q (1 - p_q), eps): prompts whose group is likely to come
    back all-equal get more rollouts, raising the chance of a mixed group. The paper names the
    heuristic without a formula; this literal reading is the project's choice.

    >>> import numpy as np
    >>> from adaptive_rollouts.types import Prediction
    >>> InverseVariance.weights(InverseVariance.__new__(InverseVariance),
    ...                         Prediction(np.array([0.5, 0.1]), np.zeros(2))).round(3).tolist()
    [4.0, 11.111]
    """

    name = "inverse-variance"
    default_predictor = "gp"
    eps = 0.01

    def weights(self, prediction: Prediction) -> np.ndarray:
        p = _p(prediction)
        return 1.0 / np.maximum(p * (1 - p), self.eps)

"""Dr. GRPO and RLOO: advantages proportional to the centred reward, A_i = factor(n) (r_i - mean).

Their gradient variance under a per-prompt-mean loss is s^2 sigma^2 f(n) (docs/objectives.md,
sections 1 and 2), with sigma^2 the reward variance; the variance objective weighs each prompt by
it, and f is convex (RLOO from n = 2, Dr. GRPO from n = 3).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .estimator import CentredEstimator

__all__ = ["DrGRPO", "RLOO"]


class DrGRPO(CentredEstimator):
    """Dr. GRPO (Liu et al. 2025): A_i = r_i - mean, no std normalisation.

    f(n) = (n - 1) / n^2 (0 at n = 1, where the advantage is identically 0); convex from n = 3.
    TRL ``scale_rewards="none"``; verl ``grpo`` with ``norm_adv_by_std_in_grpo=False``.

    >>> est = DrGRPO()
    >>> est.advantages(np.array([1.0, 0.0, 0.0]), np.array([0, 0, 0])).round(4).tolist()
    [0.6667, -0.3333, -0.3333]
    >>> est.unit_variance([1, 2, 4]).tolist()
    [0.0, 0.25, 0.1875]
    """

    name = "drgrpo"
    convex_from: ClassVar[int | None] = 3

    def factor(self, n: Any) -> Any:
        return 1.0

    def unit_variance(self, n: Any) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return np.where(n >= 1, (n - 1.0) / np.maximum(n, 1.0) ** 2, np.inf)

    def unit_cost(self, n: Any) -> np.ndarray:
        n = np.maximum(np.asarray(n, dtype=float), 2.0)
        return (n - 1.0) / (n * n)

    def unit_marginal(self, n: Any) -> np.ndarray:
        n = np.maximum(np.asarray(n, dtype=float), 2.0)
        return (1.0 + n - n * n) / (n * n * (n + 1.0) ** 2)

    def kkt_counts(self, a: np.ndarray, lam: float, lower: int, upper: int) -> np.ndarray:
        """VIP paper, Thm 5.1: lambda = a (n - 2) / n^3, decreasing in n for n >= 3; n = U below
        a h(U), L above a h(L), else the root (bisection)."""
        lo_n = max(float(lower), 3.0)
        hi_n = float(upper)

        def h(x: Any) -> Any:
            return (x - 2.0) / x**3

        out = np.full(a.shape, float(lower))
        out[lam <= a * h(hi_n)] = hi_n
        mid = (lam < a * h(lo_n)) & (lam > a * h(hi_n))
        if mid.any():
            am = a[mid]
            lo = np.full(am.shape, lo_n)
            hi = np.full(am.shape, hi_n)
            for _ in range(60):  # root of a h(n) = lambda on [lo_n, hi_n], h decreasing
                m = 0.5 * (lo + hi)
                big = am * h(m) > lam
                lo = np.where(big, m, lo)
                hi = np.where(big, hi, m)
            out[mid] = 0.5 * (lo + hi)
        return out


class RLOO(CentredEstimator):
    """RLOO (Ahmadian et al. 2024): A_i = r_i - mean of the other n - 1 = n / (n - 1) (r_i - mean).

    f(n) = 1 / (n - 1), defined from n = 2 (a leave-one-out baseline), convex. TRL
    ``advantage_estimator="rloo"``; verl ``rloo`` / ``rloo_vectorized``.

    >>> est = RLOO()
    >>> est.advantages(np.array([1.0, 0.0, 0.0]), np.array([0, 0, 0])).tolist()
    [1.0, -0.5, -0.5]
    >>> est.unit_variance([1, 2, 5]).tolist()
    [inf, 1.0, 0.25]
    """

    name = "rloo"
    first_n = 2

    def factor(self, n: Any) -> Any:
        return n / (n - 1.0)

    def unit_variance(self, n: Any) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(n >= 2, 1.0 / np.maximum(n - 1.0, 1.0), np.inf)

    def unit_cost(self, n: Any) -> np.ndarray:
        n = np.maximum(np.asarray(n, dtype=float), 2.0)
        return 1.0 / (n - 1.0)

    def unit_marginal(self, n: Any) -> np.ndarray:
        n = np.maximum(np.asarray(n, dtype=float), 2.0)
        return -1.0 / (n * (n - 1.0))

    def kkt_counts(self, a: np.ndarray, lam: float, lower: int, upper: int) -> np.ndarray:
        """VIP paper: n_q(lambda) = clip(1 + sqrt(a_q / lambda), L, U)."""
        with np.errstate(divide="ignore"):
            return np.clip(1.0 + np.sqrt(a / lam), lower, upper)

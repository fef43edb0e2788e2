"""The VIP paper's allocation (arXiv 2602.01601), kept for comparison with the exact `allocate`:
continuous KKT counts, a bisection on the multiplier, then greedy rounding."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from ..checks.validation import check_bounds, check_weights
from ..objectives.estimator import Estimator
from ..objectives.registry import get_estimator
from .allocate import objective_function

__all__ = ["solve_kkt"]


def solve_kkt(weights: Any, budget: int, lower: int, upper: int, objective: str | Estimator = "rloo") -> np.ndarray:
    """The VIP paper's allocation (arXiv 2602.01601): continuous KKT, then greedy rounding.

    RLOO: n_q(lambda) = clip(1 + sqrt(a_q / lambda), L, U). Dr. GRPO (Thm 5.1): n_q = U if
    lambda <= a_q (U-2)/U^3, L if lambda >= a_q (L-2)/L^3, else the root of lambda = a_q (n-2)/n^3.
    lambda is bisected (on log scale) until sum_q n_q(lambda) = C. Rounding (Alg. 2): floor, then
    give +1 to the prompt with the largest a_q (f(n) - f(n+1)) below U until the budget is spent
    (ties: lower prompt index). The theorem assumes f convex on [L, U] (Dr. GRPO: L >= 3); below
    that this is a heuristic. Use `allocate` for the exact optimum.

    >>> p = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
    >>> solve_kkt(p * (1 - p), 64, 4, 12, "drgrpo").tolist()
    [4, 7, 10, 12, 12, 10, 5, 4]
    """
    a = check_weights(weights)
    budget, lower, upper = check_bounds(a.size, budget, lower, upper, False)
    est = get_estimator(objective, "objective")
    if est.cost_depends_on_p:
        raise ValueError(
            f"solve_kkt has no KKT counts for objective {est.name!r} (its cost depends on p): use allocate"
        )
    if lower < est.first_n:
        raise ValueError(f"solve_kkt with {est.name!r} needs lower >= {est.first_n}, got lower={lower}")
    n_cont = _continuous_counts(a, budget, lower, upper, est)
    return _round_greedy(a, n_cont, budget, lower, upper, objective_function(est))


def _continuous_counts(a: np.ndarray, budget: int, lower: int, upper: int, est: Estimator) -> np.ndarray:
    """n_q(lambda) at the lambda (bisected on a log scale) where sum_q n_q(lambda) = budget."""
    if not (a.max() > 0 and a.size * lower < budget < a.size * upper):
        return np.full(a.size, budget / a.size)
    lo, hi = -80.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        total = est.kkt_counts(a, np.exp(mid), lower, upper).sum()
        if total > budget:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return est.kkt_counts(a, np.exp(hi), lower, upper)


def _round_greedy(
    a: np.ndarray, n_cont: np.ndarray, budget: int, lower: int, upper: int, f: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Alg. 2: floor, then +1 to the prompt with the largest a_q (f(n) - f(n+1)) below `upper`."""
    counts = np.clip(np.floor(n_cont + 1e-9), lower, upper).astype(np.int64)
    while counts.sum() > budget:  # floor of a sum slightly above C: undo the cheapest unit
        loss = np.where(counts > lower, a * (f(counts - 1) - f(counts)), np.inf)
        counts[int(np.argmin(loss))] -= 1

    def gain(i: int) -> float:
        return float(a[i] * (f(np.array(counts[i])) - f(np.array(counts[i] + 1))))

    heap = [(-gain(i), i) for i in range(a.size) if counts[i] < upper]
    heapq.heapify(heap)
    for _ in range(budget - int(counts.sum())):
        _, i = heapq.heappop(heap)
        counts[i] += 1
        if counts[i] < upper:
            heapq.heappush(heap, (-gain(i), i))
    return counts

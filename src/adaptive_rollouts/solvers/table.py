"""The exact table solver: minimise sum_q costs[q, n_q] subject to sum_q n_q = budget.

Convex rows take the smallest marginal costs; any other table goes to the Lagrangian /
reduced-cost-fixing DP of `lagrangian`. Method, proof sketch, ties and numerics: docs/objectives.md,
section 5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import InfeasibleBudgetError, check_bounds
from .lagrangian import lagrangian, solve_general_table

__all__ = ["solve_bounded", "solve_table", "solve_masked", "take_smallest", "total_cost"]


def total_cost(costs: Any, counts: Any) -> float:
    """sum_q costs[q, counts[q]].

    >>> total_cost([[0.0, 1.0], [2.0, 3.0]], [1, 0])
    3.0
    """
    costs = np.asarray(costs, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    return float(costs[np.arange(costs.shape[0]), counts].sum())


def _mask_table(costs: np.ndarray, lower: int, upper: int, allow_skip: bool) -> np.ndarray:
    """Copy with +inf wherever n is not allowed."""
    out = costs.copy()
    out[:, :lower] = np.inf
    if allow_skip:
        out[:, 0] = costs[:, 0]
    return out


def _convex_rows(c: np.ndarray, start: np.ndarray, stop: np.ndarray) -> bool:
    """Finite entries of each row are contiguous ([start, stop]) and their differences never
    decrease (up to 1e-12 of the largest |cost|)."""
    finite = np.isfinite(c)
    n = np.arange(c.shape[1])
    inside = (n >= start[:, None]) & (n <= stop[:, None])
    if not np.array_equal(finite, inside):
        return False
    if c.shape[1] < 3:
        return True
    scale = float(np.max(np.abs(c[finite]), initial=0.0))
    z = np.where(finite, c, 0.0)
    d2 = z[:, 2:] - 2 * z[:, 1:-1] + z[:, :-2]
    ok2 = inside[:, 2:] & inside[:, :-2]
    return bool(np.all(d2[ok2] >= -1e-12 * max(scale, 1e-300)))


def take_smallest(marg: np.ndarray, take: int) -> tuple[np.ndarray, float]:
    """Per-row counts of the `take` smallest entries of `marg` [Q, K] (rows nondecreasing,
    +inf for unavailable). Ties: row-major order (lower prompt first, then smaller n).
    Returns (counts, threshold value)."""
    q, k = marg.shape
    counts = np.zeros(q, dtype=np.int64)
    if take == 0:
        finite = marg[np.isfinite(marg)]
        return counts, (float(finite.min()) if finite.size else 0.0)
    flat = marg.ravel()
    thr = float(np.partition(flat, take - 1)[take - 1])
    below = marg < thr
    counts = below.sum(axis=1).astype(np.int64)
    need = take - int(counts.sum())
    if need > 0:
        tied = (marg == thr).ravel()
        chosen = tied & (np.cumsum(tied) <= need)
        counts += chosen.reshape(q, k).sum(axis=1)
    return counts, thr


def _solve_convex_table(c: np.ndarray, start: np.ndarray, stop: np.ndarray, budget: int) -> tuple[np.ndarray, float]:
    width = c.shape[1]
    marg = np.full((c.shape[0], max(width - 1, 1)), np.inf)
    if width > 1:
        n = np.arange(width - 1)
        ok = (n >= start[:, None]) & (n < stop[:, None])
        with np.errstate(invalid="ignore"):
            diff = c[:, 1:] - c[:, :-1]
        marg = np.where(ok, diff, np.inf)
    extra, thr = take_smallest(marg, budget - int(start.sum()))
    return start + extra, thr


def solve_masked(c: np.ndarray, budget: int, try_convex: bool = True) -> tuple[np.ndarray, float, np.ndarray, float]:
    """Exact optimum of a table whose forbidden counts are +inf: (counts, multiplier t, the
    Lagrangian row minima phi at t, the optimum's total slack), as `allocate` needs them to prove
    a truncated table exact. ``try_convex=False`` skips the convexity test for rows known not to be."""
    finite = np.isfinite(c)
    has = finite.any(axis=1)
    if not has.all():
        bad = np.flatnonzero(~has)[:5]
        raise ValueError(f"costs rows {bad.tolist()} have no finite entry in the allowed range")
    start = np.argmax(finite, axis=1).astype(np.int64)
    stop = (c.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)).astype(np.int64)
    if not start.sum() <= budget <= stop.sum():  # +inf entries narrow the range the bounds allow (edge cannot know)
        raise InfeasibleBudgetError(
            f"budget={budget} is infeasible for the finite entries of costs: the "
            f"counts can only sum to between {int(start.sum())} and {int(stop.sum())}"
        )
    if try_convex and _convex_rows(c, start, stop):
        counts, thr = _solve_convex_table(c, start, stop, budget)
        phi, _, _ = lagrangian(c, thr)
        return counts, thr, phi, 0.0
    # the threshold of the smallest marginal costs: the multiplier if the rows were convex, a hint
    _, hint = _solve_convex_table(c, start, stop, budget)
    return solve_general_table(c, budget, hint=hint)


def solve_table(costs: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool = False) -> np.ndarray:
    """Exact integer minimiser of ``sum_q costs[q, n_q]``.

    Subject to ``sum_q n_q = budget`` and ``lower <= n_q <= upper`` (or ``n_q = 0`` when
    ``allow_skip``). ``costs`` has shape ``[Q, upper + 1]``; ``costs[q, n]`` is the cost of giving
    prompt q exactly n rollouts; columns below ``lower`` are ignored (except column 0 with
    ``allow_skip``); ``+inf`` forbids a count. Exact for any table: convex rows use the
    smallest-marginal-costs greedy, other rows the Lagrangian / reduced-cost-fixing DP
    (docs/objectives.md, section 5, which also gives the tie-breaking: equal inputs give equal
    outputs).

    >>> import numpy as np
    >>> n = np.arange(9.0)
    >>> costs = np.array([[0.25], [0.04]]) / np.maximum(n - 1, 1)   # a_q / (n - 1), RLOO
    >>> solve_table(costs, budget=10, lower=2, upper=8).tolist()
    [7, 3]
    """
    c = np.asarray(costs, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"costs must be 2-D [Q, upper + 1], got shape {c.shape}")
    budget, lower, upper = check_bounds(c.shape[0], budget, lower, upper, allow_skip)
    if c.shape[1] != upper + 1:
        raise ValueError(f"costs must have upper + 1 = {upper + 1} columns, got shape {c.shape}")
    if np.isnan(c).any():
        bad = np.argwhere(np.isnan(c))[:5]
        raise ValueError(f"costs contain NaN at (q, n) {bad.tolist()}")
    if np.isneginf(c).any():
        bad = np.argwhere(np.isneginf(c))[:5]
        raise ValueError(f"costs contain -inf at (q, n) {bad.tolist()}: the minimum is unbounded")
    return solve_bounded(c, budget, lower, upper, allow_skip)


def solve_bounded(c: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool = False) -> np.ndarray:
    """`solve_table` on checked values (a float table of upper + 1 columns without NaN or -inf, a
    budget feasible for the bounds): the kernel allocators call after their own entry check."""
    counts, *_ = solve_masked(_mask_table(c, lower, upper, allow_skip), budget)
    return counts.astype(np.int64)

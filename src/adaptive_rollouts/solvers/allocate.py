"""`allocate`: the exact integer minimiser of sum_q w_q c_q(n_q) for a named objective or a callable.

Steps: validate -> `upper` lowered to the largest reachable count -> the built-in objectives go to
`builtin` (memory and time independent of upper and the budget); a callable f: (shared convex f
without skipping) the smallest marginal costs, without a table -> otherwise an exact solve of a
table truncated at a cap, proven exact for the counts above the cap (or the cap doubled until it is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..checks.validation import check_budget, check_limits, check_probabilities, check_weights
from ..objectives.estimator import Estimator
from ..objectives.registry import get_estimator
from .builtin import solve_builtin
from .shared import shared_convex
from .table import solve_masked

__all__ = ["Objective", "allocate", "objective_function", "reachable_upper", "solve_allocation"]

Objective = str | Estimator | Callable[[np.ndarray], np.ndarray]
Rows = Callable[[np.ndarray], np.ndarray]  # counts [K] -> costs [Q, K]

_TABLE_CELLS_MAX = 2_000_000  # above this, `allocate` truncates the table and proves the cut exact


def objective_function(objective: Objective) -> Callable[[np.ndarray], np.ndarray]:
    """c(n) per unit weight for "rloo" (1/(n-1)) or "drgrpo" ((n-1)/n^2), with n = 1 priced as a
    group without signal (`objectives.pricing`: 1 for RLOO, 1/4 for Dr. GRPO), or a callable
    returned as is. (Constant factors such as the score variance do not change the argmin.)

    >>> objective_function("rloo")(np.array([1, 2, 3])).tolist()
    [1.0, 1.0, 0.5]
    """
    if callable(objective):
        return objective
    est = get_estimator(objective, "objective")
    if est.cost_depends_on_p:
        raise ValueError(
            f"objective {est.name!r} has a per-prompt f_q(n) (it depends on p_q): use allocate(success_prob=)"
        )
    return lambda n: est.allocation_cost(np.maximum(n, 1))


def _shared_values(f: Callable[[np.ndarray], np.ndarray], n: np.ndarray) -> np.ndarray:
    fn = np.asarray(f(n), dtype=float)
    if fn.shape != n.shape:
        raise ValueError(f"objective callable must return one value per n, got shape {fn.shape}")
    return fn


def _shared_rows(f: Callable[[np.ndarray], np.ndarray], w: np.ndarray) -> Rows:
    def rows(n: np.ndarray) -> np.ndarray:
        fn = _shared_values(f, n)
        with np.errstate(invalid="ignore"):
            vals = w[:, None] * fn[None, :]
        # a zero weight makes every allowed count free (0 * inf stays forbidden)
        return np.where(w[:, None] == 0, np.where(np.isinf(fn), np.inf, 0.0)[None, :], vals)

    return rows


def _skip_column(objective: Callable, w: np.ndarray) -> np.ndarray:
    """Cost of n = 0 per prompt for a callable: w_q f(0)."""
    val = float(np.asarray(objective(np.array([0])), dtype=float).reshape(-1)[0])
    with np.errstate(invalid="ignore"):
        return np.where(w == 0, 0.0, w * val)


def _convex_shared(
    f: Callable[[np.ndarray], np.ndarray], w: np.ndarray, budget: int, lower: int, upper: int
) -> np.ndarray | None:
    """The optimum for a shared f that is finite and convex on [lower, upper], else None (f is
    evaluated on every count in range: a callable costs O(upper - lower))."""
    n = np.arange(lower, upper + 1)
    fn = _shared_values(f, n)
    bad = np.isnan(fn) | np.isneginf(fn)
    if bad.any():
        raise ValueError(f"objective returned NaN or -inf at n = {n[bad][:5].tolist()}")
    if not np.isfinite(fn).all():
        return None
    g = np.diff(fn)
    scale = float(np.max(np.abs(fn), initial=0.0))
    if g.size and np.any(np.diff(g) < -1e-12 * max(scale, 1e-300)):
        return None
    if g.size == 0:
        return np.full(w.size, lower, dtype=np.int64)
    g = np.maximum.accumulate(g)  # remove rounding-level dips
    return (lower + shared_convex(w, g, budget - w.size * lower)).astype(np.int64)


def _first_cap(q: int, budget: int, lower: int, upper: int) -> int:
    """Columns to build first: all of them unless the table would exceed _TABLE_CELLS_MAX cells."""
    if q * (upper + 1) <= _TABLE_CELLS_MAX:
        return upper
    cap = max(lower, min(upper, 4 * (budget // q + 1) + lower, _TABLE_CELLS_MAX // q - 1))
    return max(cap, -(-budget // q))


def _truncation_exact(
    f: Callable, w: np.ndarray, cap: int, upper: int, t: float, phi: np.ndarray, slack: float
) -> bool:
    """True if no count above `cap` can beat the solution found on columns [0, cap].

    Every allocation costs D(t) + sum_q s_q(n_q) with s_q >= 0 on [0, cap]; if f is convex on
    [cap, upper] and each row's reduced cost w_q f(n) - t n is already nondecreasing at cap, the
    least slack above cap is s_q(cap + 1); if that is >= the found slack, nothing above cap helps."""
    n = np.arange(cap, upper + 1)
    fn = np.asarray(f(n), dtype=float)  # a 1-D check of the callable's tail
    if not np.isfinite(fn).all():
        return False
    scale = float(np.max(np.abs(fn), initial=1.0)) * float(np.max(w, initial=1.0))
    if fn.size >= 3 and np.any(np.diff(fn, 2) < -1e-12 * max(scale, 1e-300)):
        return False
    red = w[:, None] * fn[None, :2] - t * n[None, :2]
    if np.any(red[:, 1] - red[:, 0] < 0):
        return False
    return bool(np.all(red[:, 1] - phi >= slack - 1e-12 * scale))


def _solve_truncated(
    rows: Rows, f: Callable, w: np.ndarray, budget: int, lower: int, upper: int, skip: np.ndarray | None
) -> np.ndarray:
    """Exact solve on columns [0, cap], doubling cap until the cut is proven exact."""
    q = w.size
    cap = _first_cap(q, budget, lower, upper)
    # a shared f that failed the convexity test gives non-convex rows (unless all weights are 0)
    known_nonconvex = skip is None and bool(np.any(w > 0))
    while True:
        c = np.full((q, cap + 1), np.inf)
        c[:, lower:] = rows(np.arange(lower, cap + 1))
        if skip is not None:
            c[:, 0] = skip
        if np.isnan(c).any() or np.isneginf(c).any():
            raise ValueError("objective gave NaN or -inf costs for some (prompt, n)")
        counts, t, phi, slack = solve_masked(c, budget, try_convex=not known_nonconvex)
        if cap == upper or _truncation_exact(f, w, cap, upper, t, phi, slack):
            return counts.astype(np.int64)
        cap = min(upper, 2 * cap)


def reachable_upper(q: int, budget: int, lower: int, upper: int | None, skipping: bool) -> int:
    """`upper`, lowered to the most one prompt can get (every other prompt at `lower`, or skipped):
    counts above it can never be used, so no table or search ever spans them."""
    most = max(budget if skipping else budget - (q - 1) * lower, lower)
    if upper is None:
        return most
    return upper if upper < lower else min(upper, most)  # upper < lower: check_limits names it


def allocate(
    weights: Any,
    budget: int,
    lower: int = 2,
    upper: int | None = None,
    objective: Objective = "rloo",
    *,
    success_prob: Any = None,
    allow_skip: bool = False,
    skip_cost: float | None = None,
) -> np.ndarray:
    """Exact integer minimiser of ``sum_q w_q c_q(n_q)`` with ``sum n_q = budget``.

    ``lower <= n_q <= upper`` (or n_q = 0 with ``allow_skip``).

    objective (the built-in costs are those of `objectives.pricing`: the per-prompt gradient
    variance, where a group that carries no gradient is priced as a skipped prompt and a
    1-rollout group is used only when the budget is below two rollouts per prompt):
      * ``"rloo"``: c(n) = 1/(n-1); ``w_q`` = reward variance (p(1-p) for binary rewards).
      * ``"drgrpo"``: c(n) = (n-1)/n^2, ``w_q`` as for RLOO.
      * ``"grpo"``: c_q(n) = (n-1)/n^2 P(mixed) + 1/4 (1 - P(mixed)), P(mixed) = 1 - p_q^n - (1-p_q)^n
        (an all-equal group has no gradient under the std normalisation); needs ``success_prob``;
        ``w_q`` is a pure importance weight (pass ones).
      * a callable f(n) -> values, vectorised over integer arrays: c(n) = f(n) exactly as given
        (it is called on ``np.arange(lower, upper + 1)``, and on 0 with ``allow_skip``).

    upper: default (and at most) what one prompt can get when every other prompt gets ``lower``
    (``budget`` with ``allow_skip``). Memory and time of the built-in objectives grow with Q, not
    with ``upper`` or the budget (a budget of 10^9 over 4 prompts answers at once).

    allow_skip / skip_cost: a skipped prompt costs ``w_q f(0)`` for a callable and
    ``w_q * skip_cost`` for the built-in objectives, where ``skip_cost`` is required (it is then
    also the price of a group without signal).

    Raises `InfeasibleBudgetError` (a ValueError) when the budget cannot be met within the bounds.
    Returns int64 counts; ties go to the lower prompt index.

    >>> p = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
    >>> allocate(p * (1 - p), budget=64, lower=4, upper=12, objective="rloo").tolist()
    [4, 7, 10, 11, 12, 10, 6, 4]
    """
    w = check_weights(weights)
    q = w.size
    budget, lower = check_budget(budget), check_budget(lower, "lower")
    upper = reachable_upper(q, budget, lower, None if upper is None else check_budget(upper, "upper"), allow_skip)
    check_limits(q, budget, lower, upper, allow_skip)
    p = None
    if not callable(objective):
        objective = get_estimator(objective, "objective")
        if (allow_skip or lower == 0) and skip_cost is None:
            raise ValueError(
                f"skipping with objective={objective.name!r} needs skip_cost: the variance objectives cannot "
                "price a skipped prompt (use a callable with f(0), or objectives.improvement_table with solve_table)"
            )
        if objective.cost_depends_on_p:
            if success_prob is None:
                raise ValueError(f"objective={objective.name!r} needs success_prob (its variance depends on p)")
            p = check_probabilities(success_prob)
            if p.shape != w.shape:
                raise ValueError(f"success_prob must have shape {w.shape} with values in [0, 1], got shape {p.shape}")
    return solve_allocation(w, budget, lower, upper, objective, p, allow_skip, skip_cost)


def solve_allocation(
    w: np.ndarray,
    budget: int,
    lower: int,
    upper: int | None,
    objective: Objective,
    success_prob: np.ndarray | None = None,
    allow_skip: bool = False,
    skip_cost: float | None = None,
) -> np.ndarray:
    """`allocate` on checked values (weights, a feasible budget, a known objective with what it needs):
    the kernel allocators call after their own entry check. ``upper`` None: `reachable_upper`."""
    upper = reachable_upper(w.size, budget, lower, upper, allow_skip)
    if callable(objective):
        return _allocate_callable(objective, w, budget, lower, upper, allow_skip)
    est = get_estimator(objective, "objective")
    return solve_builtin(est, w, success_prob, budget, lower, upper, allow_skip or lower == 0, skip_cost)


def _allocate_callable(
    f: Callable[[np.ndarray], np.ndarray], w: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool
) -> np.ndarray:
    rows = _shared_rows(f, w)
    skipping = (allow_skip and lower > 0) or lower == 0
    skip = _skip_column(f, w) if skipping and lower > 0 else None
    if skip is None:
        counts = _convex_shared(f, w, budget, lower, upper)
        if counts is not None:
            return counts
    return _solve_truncated(rows, f, w, budget, lower, upper, skip)

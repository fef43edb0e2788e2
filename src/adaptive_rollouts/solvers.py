"""Exact integer budget allocation: how many rollouts each prompt gets.

Problem (separable resource allocation)::

    minimise   sum_q  c_q(n_q)
    subject to sum_q n_q = C,   lower <= n_q <= upper   (or n_q = 0 when skipping is allowed)

`solve_table` takes the costs as a table ``costs[q, n]``; `allocate` builds them as
``c_q(n) = w_q f(n)`` for a named objective (RLOO, Dr. GRPO, GRPO) or a user callable;
`solve_kkt` is the VIP paper's continuous-KKT-plus-greedy-rounding method, kept for comparison.

Methods (both exact):

* Convex rows (every row's finite entries form one contiguous range of n and their marginal
  costs ``c(n+1) - c(n)`` never decrease): the optimum takes the ``C - sum_q min_q`` smallest
  marginal costs over all prompts (exchange argument). `np.partition` finds the threshold; for a
  shared f (``allocate``) a bisection on the threshold counts marginals per prompt with
  `np.searchsorted` in O(Q log U), without building the table.
* Any other table (Dr. GRPO with lower < 3, skipping with lower > 1, improvement objectives):
  Lagrangian relaxation plus reduced-cost fixing plus a dynamic programme. For a multiplier t,
  every feasible allocation costs ``D(t) + sum_q s_q(n_q)`` with ``D(t) = sum_q min_n (c_q(n) -
  t n) + t C`` and slacks ``s_q(n) = c_q(n) - t n - min_m (c_q(m) - t m) >= 0``. An allocation
  whose total slack is S beats every allocation that uses any single (q, n) with slack > S, so
  the DP over budget only needs, per prompt, the counts with slack <= G; it is rerun with
  G = (best total slack found) and is then provably optimal. t is the bisected dual optimum,
  so nearly every prompt keeps a single candidate and the DP stays small.

Tie-breaking (deterministic): on the convex path, equal marginal costs go to the lower prompt
index first (and, within a prompt, to the smaller n). On the DP path, prompts are processed in
index order and a state keeps the first (smallest) count reaching its minimum. Equal inputs
therefore always give equal outputs.

Numerics: convexity is tested with a tolerance of 1e-12 times the largest finite |cost|; a row
that is convex only up to that rounding is solved by the greedy and the result is optimal up to
that tolerance.

Skipping (n = 0): a skipped prompt gets no rollouts, so it contributes nothing to the batch
gradient. Its cost is ``costs[q, 0]`` in `solve_table` (the caller decides what it is worth);
in `allocate` it is ``w_q f(0)`` for a callable f, and ``w_q skip_cost`` for the built-in
variance objectives, which must be given explicitly: those objectives assume rewards
independent of the score vector, so their expected gradient is zero and they cannot price the
signal a skipped prompt loses (a skipped prompt would look free). The improvement objectives of
`objectives.improvement_table` price it (gain 0).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Union

import numpy as np

__all__ = ["solve_table", "allocate", "solve_kkt", "objective_function", "total_cost"]

Objective = Union[str, Callable[[np.ndarray], np.ndarray]]

_TABLE_CELLS_MAX = 2_000_000  # above this, `allocate` truncates the table and proves the cut exact


# ---------------------------------------------------------------------------------------------
# objective functions f(n)
# ---------------------------------------------------------------------------------------------


def _f_rloo(n: np.ndarray) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(n >= 2, 1.0 / np.maximum(n - 1.0, 1.0), np.inf)


def _f_drgrpo(n: np.ndarray) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    return np.where(n >= 1, (n - 1.0) / np.maximum(n, 1.0) ** 2, np.inf)


def objective_function(objective: Objective) -> Callable[[np.ndarray], np.ndarray]:
    """f(n) per unit weight: "rloo" 1/(n-1) (inf for n < 2: no leave-one-out baseline),
    "drgrpo" (n-1)/n^2 (0 at n = 1: the advantage is identically 0), or a callable returned as is.
    (The constant 4 s^2 of METHODS section 2, or s^2 for {0, 1} rewards, does not change the
    argmin; `objectives` has the scaled formulas.) Values at n = 0 are never used by the built-ins.
    """
    if callable(objective):
        return objective
    if objective == "rloo":
        return _f_rloo
    if objective == "drgrpo":
        return _f_drgrpo
    raise ValueError(f"objective must be 'rloo', 'drgrpo', 'grpo' or a callable, got {objective!r}")


def total_cost(costs: np.ndarray, counts: np.ndarray) -> float:
    """sum_q costs[q, counts[q]]."""
    costs = np.asarray(costs, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    return float(costs[np.arange(costs.shape[0]), counts].sum())


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _check_bounds(q: int, budget, lower, upper, allow_skip: bool) -> tuple[int, int, int]:
    if q == 0:
        raise ValueError("empty batch: need at least one prompt (got 0 weights / table rows)")
    for name, value in (("budget", budget), ("lower", lower), ("upper", upper)):
        if isinstance(value, (bool, np.bool_)) or not float(value).is_integer():
            raise ValueError(f"{name} must be an integer, got {value!r}")
    budget, lower, upper = int(budget), int(lower), int(upper)
    if lower < 0:
        raise ValueError(f"lower must be >= 0, got lower={lower}")
    if lower > upper:
        raise ValueError(f"lower must be <= upper, got lower={lower} > upper={upper}")
    least = 0 if allow_skip else q * lower
    if not least <= budget <= q * upper:
        raise ValueError(
            f"budget={budget} is infeasible for Q={q} prompts with lower={lower}, upper={upper}"
            f"{', allow_skip=True' if allow_skip else ''}: need {least} <= budget <= {q * upper}"
        )
    return budget, lower, upper


def _check_weights(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1:
        raise ValueError(f"weights must be 1-D, got shape {w.shape}")
    if w.size == 0:
        raise ValueError("empty batch: weights has no entries")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        idx = np.flatnonzero(bad)[:5]
        raise ValueError(f"weights must be finite and >= 0; bad at indices {idx.tolist()}: {w[idx].tolist()}")
    return w


def _mask_table(costs: np.ndarray, lower: int, upper: int, allow_skip: bool) -> np.ndarray:
    """Copy with +inf wherever n is not allowed."""
    out = costs.copy()
    out[:, :lower] = np.inf
    if allow_skip:
        out[:, 0] = costs[:, 0]
    return out


# ---------------------------------------------------------------------------------------------
# convex path: smallest marginal costs
# ---------------------------------------------------------------------------------------------


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


def _take_smallest(marg: np.ndarray, take: int) -> tuple[np.ndarray, float]:
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


def _solve_convex_table(c: np.ndarray, start: np.ndarray, stop: np.ndarray, budget: int):
    width = c.shape[1]
    marg = np.full((c.shape[0], max(width - 1, 1)), np.inf)
    if width > 1:
        n = np.arange(width - 1)
        ok = (n >= start[:, None]) & (n < stop[:, None])
        with np.errstate(invalid="ignore"):
            diff = c[:, 1:] - c[:, :-1]
        marg = np.where(ok, diff, np.inf)
    extra, thr = _take_smallest(marg, budget - int(start.sum()))
    return start + extra, thr


# ---------------------------------------------------------------------------------------------
# general path: Lagrangian + reduced-cost fixing + DP
# ---------------------------------------------------------------------------------------------


def _lagrangian(c: np.ndarray, t: float):
    n = np.arange(c.shape[1], dtype=float)
    red = c - t * n
    phi = red.min(axis=1)
    at_min = red == phi[:, None]
    first = np.argmax(at_min, axis=1)
    last = c.shape[1] - 1 - np.argmax(at_min[:, ::-1], axis=1)
    return phi, first, last


def _dual_multiplier(c: np.ndarray, budget: int) -> float:
    """Bisect t until sum of smallest Lagrangian minimisers <= budget <= sum of largest."""
    finite = np.isfinite(c)
    vals = c[finite]
    span = float(vals.max() - vals.min()) if vals.size else 0.0
    lo, hi = -span - 1.0, span + 1.0
    t = 0.0
    for _ in range(200):
        t = 0.5 * (lo + hi)
        if not lo < t < hi:
            break
        _, first, last = _lagrangian(c, t)
        if first.sum() > budget:
            hi = t
        elif last.sum() < budget:
            lo = t
        else:
            break
    return t


def _dp_candidates(slack: np.ndarray, base: np.ndarray, cand: np.ndarray, delta: int):
    """Minimise sum_q slack[q, base_q + d_q] over candidate deviations with sum d_q = delta.
    Returns (deviations, total) or (None, inf)."""
    q_count = slack.shape[0]
    dev = np.zeros(q_count, dtype=np.int64)
    free = np.flatnonzero(cand.sum(axis=1) > 1)
    if free.size == 0:
        return (dev, 0.0) if delta == 0 else (None, np.inf)
    rows = []
    for q in free:
        idx = np.flatnonzero(cand[q])
        lo_d, hi_d = int(idx[0] - base[q]), int(idx[-1] - base[q])
        seg = slack[q, idx[0] : idx[-1] + 1].copy()
        seg[~cand[q, idx[0] : idx[-1] + 1]] = np.inf
        rows.append((q, lo_d, hi_d, seg))
    mins = np.array([r[1] for r in rows])
    maxs = np.array([r[2] for r in rows])
    rest_min = np.concatenate([np.cumsum(mins[::-1])[::-1][1:], [0]])
    rest_max = np.concatenate([np.cumsum(maxs[::-1])[::-1][1:], [0]])
    if not mins.sum() <= delta <= maxs.sum():
        return None, np.inf
    # state: partial sum s in [s_lo, s_lo + len(cur) - 1]
    s_lo, cur = 0, np.zeros(1)
    choices = []
    for i, (q, lo_d, hi_d, seg) in enumerate(rows):
        new_lo = max(s_lo + lo_d, delta - int(rest_max[i]))
        new_hi = min(s_lo + len(cur) - 1 + hi_d, delta - int(rest_min[i]))
        width = new_hi - new_lo + 1
        if width <= 0:
            return None, np.inf
        new = np.full(width, np.inf)
        pick = np.zeros(width, dtype=np.int64)
        for j, s_cost in enumerate(seg):
            if not np.isfinite(s_cost):
                continue
            d = lo_d + j
            # new[s] <- cur[s - d] + s_cost, for s in [new_lo, new_hi] with s - d in cur range
            a = max(new_lo, s_lo + d)
            b = min(new_hi, s_lo + len(cur) - 1 + d)
            if a > b:
                continue
            cand_cost = cur[a - d - s_lo : b - d - s_lo + 1] + s_cost
            view = new[a - new_lo : b - new_lo + 1]
            better = cand_cost < view
            view[better] = cand_cost[better]
            pick[a - new_lo : b - new_lo + 1][better] = d
        choices.append((new_lo, pick))
        s_lo, cur = new_lo, new
    total = float(cur[delta - s_lo]) if s_lo <= delta < s_lo + len(cur) else np.inf
    if not np.isfinite(total):
        return None, np.inf
    s = delta
    for i in range(len(rows) - 1, -1, -1):
        new_lo, pick = choices[i]
        d = int(pick[s - new_lo])
        dev[rows[i][0]] = d
        s -= d
    return dev, total


def _solve_general_table(c: np.ndarray, budget: int):
    """Exact optimum of an arbitrary table (+inf = forbidden). Returns (counts, t, phi, slack)."""
    t = _dual_multiplier(c, budget)
    phi, base, _ = _lagrangian(c, t)
    n = np.arange(c.shape[1], dtype=float)
    slack = np.maximum(c - t * n - phi[:, None], 0.0)  # inf stays inf
    delta = budget - int(base.sum())
    finite = np.isfinite(slack)
    tol = 1e-12 * max(1.0, float(np.max(np.abs(c[finite]), initial=0.0)))
    if delta == 0:
        return base, t, phi, 0.0
    dev, total = _dp_candidates(slack, base, slack <= tol, delta)  # ties at t only: often enough
    if dev is not None:
        return base + dev, t, phi, total
    # then an incumbent: zero-slack counts plus each row's nearest allowed count on either side
    cols = np.arange(c.shape[1])
    below = np.where(finite & (cols < base[:, None]), cols, -1).max(axis=1)
    above = np.where(finite & (cols > base[:, None]), cols, c.shape[1]).min(axis=1)
    rows_idx = np.arange(c.shape[0])
    near = slack <= tol
    ok = below >= 0
    near[rows_idx[ok], below[ok]] = True
    ok = above < c.shape[1]
    near[rows_idx[ok], above[ok]] = True
    dev, total = _dp_candidates(slack, base, near, delta)
    if dev is not None and total <= tol:
        return base + dev, t, phi, total
    gap = total if dev is not None else 0.0
    finite_slack = slack[finite]
    positive = finite_slack[finite_slack > tol]
    top = float(finite_slack.max()) if finite_slack.size else 0.0
    while True:
        # every allocation with a (q, n) of slack > gap costs more than the best found: exact
        dev, total = _dp_candidates(slack, base, slack <= gap + tol, delta)
        if dev is not None:
            if total <= gap + tol:
                return base + dev, t, phi, total
            gap = total
            continue
        if gap + tol >= top:  # every finite count is already a candidate (also ends the loop when all
            # slacks are <= tol, e.g. subnormal costs, where gap would otherwise stay 0 forever)
            raise ValueError(
                f"budget={budget} cannot be met exactly: the allowed counts of the "
                "table rows (finite entries) never sum to it"
            )
        gap = float(positive.min()) if gap == 0.0 and positive.size else gap * 4.0
        gap = min(gap, top)


# ---------------------------------------------------------------------------------------------
# public: tables
# ---------------------------------------------------------------------------------------------


def _solve_masked(c: np.ndarray, budget: int, try_convex: bool = True):
    finite = np.isfinite(c)
    has = finite.any(axis=1)
    if not has.all():
        bad = np.flatnonzero(~has)[:5]
        raise ValueError(f"costs rows {bad.tolist()} have no finite entry in the allowed range")
    start = np.argmax(finite, axis=1).astype(np.int64)
    stop = (c.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)).astype(np.int64)
    if not start.sum() <= budget <= stop.sum():
        raise ValueError(
            f"budget={budget} is infeasible for the finite entries of costs: the "
            f"counts can only sum to between {int(start.sum())} and {int(stop.sum())}"
        )
    if try_convex and _convex_rows(c, start, stop):
        counts, thr = _solve_convex_table(c, start, stop, budget)
        phi, _, _ = _lagrangian(c, thr)
        return counts, thr, phi, 0.0
    return _solve_general_table(c, budget)


def solve_table(costs: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool = False) -> np.ndarray:
    """Exact integer minimiser of ``sum_q costs[q, n_q]``.

    Subject to ``sum_q n_q = budget`` and ``lower <= n_q <= upper`` (or ``n_q = 0`` when
    ``allow_skip``). ``costs`` has shape ``[Q, upper + 1]``; ``costs[q, n]`` is the cost of giving
    prompt q exactly n rollouts; columns below ``lower`` are ignored (except column 0 with
    ``allow_skip``); ``+inf`` forbids a count. Exact for any table: convex rows use the
    smallest-marginal-costs greedy, other rows the Lagrangian / reduced-cost-fixing DP (see the
    module docstring, which also gives the tie-breaking).

    >>> import numpy as np
    >>> n = np.arange(9.0)
    >>> costs = np.array([[0.25], [0.04]]) / np.maximum(n - 1, 1)   # a_q / (n - 1), RLOO
    >>> solve_table(costs, budget=10, lower=2, upper=8).tolist()
    [7, 3]
    """
    c = np.asarray(costs, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"costs must be 2-D [Q, upper + 1], got shape {c.shape}")
    budget, lower, upper = _check_bounds(c.shape[0], budget, lower, upper, allow_skip)
    if c.shape[1] != upper + 1:
        raise ValueError(f"costs must have upper + 1 = {upper + 1} columns, got shape {c.shape}")
    if np.isnan(c).any():
        bad = np.argwhere(np.isnan(c))[:5]
        raise ValueError(f"costs contain NaN at (q, n) {bad.tolist()}")
    if np.isneginf(c).any():
        bad = np.argwhere(np.isneginf(c))[:5]
        raise ValueError(f"costs contain -inf at (q, n) {bad.tolist()}: the minimum is unbounded")
    counts, *_ = _solve_masked(_mask_table(c, lower, upper, allow_skip), budget)
    return counts.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# public: allocate
# ---------------------------------------------------------------------------------------------


def _float_key(x: float) -> int:
    i = int(np.array(x, dtype=np.float64).view(np.int64))
    return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF) - 1


def _key_float(k: int) -> float:
    i = k if k >= 0 else (-(k + 1)) | (-0x8000000000000000)
    return float(np.array(i, dtype=np.int64).view(np.float64))


def _count_le(w: np.ndarray, g: np.ndarray, x: float) -> np.ndarray:
    """Exact per-row count of k with w_q * g[k] <= x (rows nondecreasing since w >= 0)."""
    k = g.size
    out = np.full(w.size, k if 0.0 <= x else 0, dtype=np.int64)  # w == 0: marginals are 0
    pos = w > 0
    if not pos.any():
        return out
    wp = w[pos]
    y = x / wp
    pad = np.abs(y) * 1e-12 + 1e-300
    a = np.searchsorted(g, y - pad, side="left").astype(np.int64)
    b = np.searchsorted(g, y + pad, side="right").astype(np.int64)
    while True:  # binary search for the first k in [a, b) with w g[k] > x
        live = a < b
        if not live.any():
            break
        mid = (a + b) // 2
        ok = wp * g[np.minimum(mid, k - 1)] <= x
        a = np.where(live & ok, mid + 1, a)
        b = np.where(live & ~ok, mid, b)
    out[pos] = a
    return out


def _shared_convex(w: np.ndarray, g: np.ndarray, take: int) -> np.ndarray:
    """Extra counts selecting the `take` smallest of {w_q g[k]} (g nondecreasing, w >= 0),
    ties to the lower prompt index, without building the Q x K matrix."""
    q, k = w.size, g.size
    if take == 0:
        return np.zeros(q, dtype=np.int64)
    if q * k <= 200_000:
        return _take_smallest(w[:, None] * g[None, :], take)[0]
    row_min, row_max = w * g[0], w * g[-1]
    lo = _float_key(float(row_min.min())) - 1
    hi = _float_key(float(row_max.max()))
    c_lo = np.zeros(q, dtype=np.int64)
    c_hi = np.full(q, k, dtype=np.int64)
    while hi - lo > 1 and int((c_hi - c_lo).sum()) > 4 * q:
        mid = lo + (hi - lo) // 2
        c_mid = _count_le(w, g, _key_float(mid))
        if c_mid.sum() >= take:
            hi, c_hi = mid, c_mid
        else:
            lo, c_lo = mid, c_mid
    # enumerate the remaining candidates (c_lo[q] <= k < c_hi[q]) and pick exactly
    need = take - int(c_lo.sum())
    lens = c_hi - c_lo
    rows = np.repeat(np.arange(q), lens)
    ks = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(c_lo, lens)
    vals = w[rows] * g[ks]
    order = np.lexsort((ks, rows, vals))[:need]
    return c_lo + np.bincount(rows[order], minlength=q)


def _default_upper(q: int, budget: int, lower: int, allow_skip: bool) -> int:
    return max(int(budget) if allow_skip else int(budget) - (q - 1) * int(lower), int(lower))


def _grpo_rows(success_prob: np.ndarray, w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    from .objectives import grpo_variance

    def rows(n: np.ndarray) -> np.ndarray:
        vals = w[:, None] * grpo_variance(success_prob[:, None], np.maximum(n, 1)[None, :])
        return np.where(n[None, :] == 0, np.inf, vals)  # n = 0 is priced by skip_cost only

    return rows


def allocate(
    weights,
    budget: int,
    lower: int = 2,
    upper: int | None = None,
    objective: Objective = "rloo",
    *,
    success_prob=None,
    allow_skip: bool = False,
    skip_cost: float | None = None,
) -> np.ndarray:
    """Exact integer minimiser of ``sum_q w_q f(n_q)`` with ``sum n_q = budget``.

    ``lower <= n_q <= upper`` (or n_q = 0 with ``allow_skip``).

    objective:
      * ``"rloo"``: f(n) = 1/(n-1); ``w_q`` = reward variance (p(1-p) for binary rewards).
      * ``"drgrpo"``: f(n) = (n-1)/n^2, ``w_q`` as for RLOO. Convex only for n >= 3; with
        lower < 3 the exact general path is used.
      * ``"grpo"``: per-prompt f_q(n) = (n-1)/n^2 (1 - p_q^n - (1-p_q)^n) (std-normalised
        advantages, `objectives.grpo_variance`), needs ``success_prob``; the normalisation
        cancels the reward variance, so ``w_q`` is a pure importance weight (pass ones).
      * a callable f(n) -> values, vectorised over integer arrays (it is called on
        ``np.arange(lower, upper + 1)``, and on 0 with ``allow_skip``).

    upper: default ``budget - (Q-1) * lower`` (what one prompt can get when every other prompt
    gets ``lower``), ``budget`` with ``allow_skip``.

    allow_skip / skip_cost: a skipped prompt costs ``w_q f(0)`` for a callable and
    ``w_q * skip_cost`` for the built-in variance objectives, where ``skip_cost`` is required
    (see the module docstring: the variance model cannot price a skipped prompt).

    Returns int64 counts. Ties: see the module docstring.

    >>> p = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
    >>> allocate(p * (1 - p), budget=64, lower=4, upper=12, objective="rloo").tolist()
    [4, 7, 10, 11, 12, 10, 6, 4]
    """
    w = _check_weights(weights)
    q = w.size
    if upper is None:
        upper = _default_upper(q, budget, lower, allow_skip)
    budget, lower, upper = _check_bounds(q, budget, lower, upper, allow_skip)
    skip_needed = allow_skip and lower > 0
    if lower == 0 and not callable(objective):  # n = 0 allowed: price it like a skip
        skip_needed = True

    if objective == "grpo":
        if success_prob is None:
            raise ValueError("objective='grpo' needs success_prob (its variance depends on p)")
        p = np.asarray(success_prob, dtype=float)
        if p.shape != w.shape or np.any(~np.isfinite(p) | (p < 0) | (p > 1)):
            raise ValueError(f"success_prob must have shape {w.shape} with values in [0, 1], got shape {p.shape}")
        rows = _grpo_rows(p, w)
        f = None
    else:
        f = objective_function(objective)
        rows = None

    if skip_needed and not callable(objective) and skip_cost is None:
        raise ValueError(
            f"skipping (allow_skip=True, lower={lower}) with objective={objective!r} "
            "needs skip_cost: the variance "
            "objectives cannot price a skipped prompt (use a callable with f(0), or "
            "objectives.improvement_table with solve_table)"
        )

    def skip_column() -> np.ndarray:
        if callable(objective):
            val = float(np.asarray(objective(np.array([0])), dtype=float).reshape(-1)[0])
        else:
            val = float(skip_cost)
        with np.errstate(invalid="ignore"):
            return np.where(w == 0, 0.0, w * val)

    # fast path: shared convex f, no skipping jump
    if f is not None and not skip_needed:
        n = np.arange(lower, upper + 1)
        fn = np.asarray(f(n), dtype=float)
        if fn.shape != n.shape:
            raise ValueError(f"objective callable must return one value per n, got shape {fn.shape}")
        if np.isnan(fn).any() or np.isneginf(fn).any():
            raise ValueError(f"objective returned NaN or -inf at n = {n[np.isnan(fn) | np.isneginf(fn)][:5].tolist()}")
        finite = np.isfinite(fn)
        if finite.all():
            g = np.diff(fn)
            scale = float(np.max(np.abs(fn), initial=0.0))
            if g.size == 0 or np.all(np.diff(g) >= -1e-12 * max(scale, 1e-300)):
                g = np.maximum.accumulate(g) if g.size else g  # remove rounding-level dips
                extra = _shared_convex(w, g, budget - q * lower) if g.size else np.zeros(q, np.int64)
                return (lower + extra).astype(np.int64)

    # general path: build (possibly truncated) table, prove the truncation exact
    if f is not None:

        def rows(n: np.ndarray) -> np.ndarray:  # noqa: F811
            fn = np.asarray(f(n), dtype=float)
            if fn.shape != n.shape:
                raise ValueError(f"objective callable must return one value per n, got shape {fn.shape}")
            with np.errstate(invalid="ignore"):
                vals = w[:, None] * fn[None, :]
            # a zero weight makes every allowed count free (0 * inf stays forbidden)
            return np.where(w[:, None] == 0, np.where(np.isinf(fn), np.inf, 0.0)[None, :], vals)

    cap = upper
    if q * (upper + 1) > _TABLE_CELLS_MAX:
        cap = max(lower, min(upper, 4 * (budget // q + 1) + lower, _TABLE_CELLS_MAX // q - 1))
        cap = max(cap, -(-budget // q))
    while True:
        n = np.arange(cap + 1)
        c = np.full((q, cap + 1), np.inf)
        c[:, lower:] = rows(n[lower:])
        if skip_needed:
            c[:, 0] = skip_column()
        if np.isnan(c).any() or np.isneginf(c).any():
            raise ValueError("objective gave NaN or -inf costs for some (prompt, n)")
        # a shared f that failed the convexity test gives non-convex rows (unless all weights are 0)
        known_nonconvex = f is not None and not skip_needed and bool(np.any(w > 0))
        counts, t, phi, slack = _solve_masked(c, budget, try_convex=not known_nonconvex)
        if cap == upper or _truncation_exact(rows, f, w, cap, upper, t, phi, slack):
            return counts.astype(np.int64)
        cap = min(upper, 2 * cap)


def _truncation_exact(rows, f, w, cap: int, upper: int, t: float, phi: np.ndarray, slack: float) -> bool:
    """True if no count above `cap` can beat the solution found on columns [0, cap].

    Every allocation costs D(t) + sum_q s_q(n_q) with s_q >= 0 on [0, cap]; if each row is convex
    on [cap, upper] and its reduced cost c_q(n) - t n is already nondecreasing at cap, the least
    slack above cap is s_q(cap + 1); if that is >= the found slack, nothing above cap helps."""
    n = np.arange(cap, upper + 1)
    if f is not None:  # shared f: convexity of the tail is a 1-D check
        fn = np.asarray(f(n), dtype=float)
        if not np.isfinite(fn).all():
            return False
        scale = float(np.max(np.abs(fn), initial=1.0)) * float(np.max(w, initial=1.0))
        if fn.size >= 3 and np.any(np.diff(fn, 2) < -1e-12 * max(scale, 1e-300)):
            return False
        tail = w[:, None] * fn[None, :2]
    else:  # per-prompt rows: check every count above cap directly, in column chunks
        for lo in range(cap + 1, upper + 1, 512):
            cols = np.arange(lo, min(lo + 512, upper + 1))
            block = rows(cols)
            scale = float(np.max(np.abs(block[np.isfinite(block)]), initial=1.0))
            if np.any((block - t * cols[None, :]).min(axis=1) - phi < slack - 1e-12 * scale):
                return False
        return True
    red = tail[:, :2] - t * n[None, :2]
    if np.any(red[:, 1] - red[:, 0] < 0):
        return False
    return bool(np.all(red[:, 1] - phi >= slack - 1e-12 * scale))


# ---------------------------------------------------------------------------------------------
# public: the VIP paper's method
# ---------------------------------------------------------------------------------------------


def _kkt_counts(a: np.ndarray, lam: float, lower: int, upper: int, objective: str) -> np.ndarray:
    """Continuous KKT counts n_q(lambda)."""
    if objective == "rloo":
        with np.errstate(divide="ignore"):
            return np.clip(1.0 + np.sqrt(a / lam), lower, upper)
    # Dr. GRPO (Thm 5.1): lambda = a (n - 2) / n^3, decreasing in n for n >= 3
    lo_n = max(float(lower), 3.0)
    hi_n = float(upper)
    h = lambda x: (x - 2.0) / x**3  # noqa: E731
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


def solve_kkt(weights, budget: int, lower: int, upper: int, objective: str = "rloo") -> np.ndarray:
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
    a = _check_weights(weights)
    q = a.size
    budget, lower, upper = _check_bounds(q, budget, lower, upper, False)
    if objective not in ("rloo", "drgrpo"):
        raise ValueError(f"solve_kkt supports objective 'rloo' or 'drgrpo', got {objective!r}")
    if objective == "rloo" and lower < 2:
        raise ValueError(f"solve_kkt with 'rloo' needs lower >= 2, got lower={lower}")
    f = objective_function(objective)
    if a.max() > 0 and q * lower < budget < q * upper:
        # bracket lambda on a log scale
        lo, hi = -80.0, 10.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            total = _kkt_counts(a, np.exp(mid), lower, upper, objective).sum()
            if total > budget:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-13:
                break
        n_cont = _kkt_counts(a, np.exp(hi), lower, upper, objective)
    else:
        n_cont = np.full(q, budget / q)
    counts = np.clip(np.floor(n_cont + 1e-9), lower, upper).astype(np.int64)
    while counts.sum() > budget:  # floor of a sum slightly above C: undo the cheapest unit
        loss = np.where(counts > lower, a * (f(counts - 1) - f(counts)), np.inf)
        counts[int(np.argmin(loss))] -= 1
    left = budget - int(counts.sum())
    heap = []
    for i in range(q):
        if counts[i] < upper:
            gain = float(a[i] * (f(np.array(counts[i])) - f(np.array(counts[i] + 1))))
            heap.append((-gain, i))
    heapq.heapify(heap)
    while left > 0:
        neg_gain, i = heapq.heappop(heap)
        counts[i] += 1
        left -= 1
        if counts[i] < upper:
            gain = float(a[i] * (f(np.array(counts[i])) - f(np.array(counts[i] + 1))))
            heapq.heappush(heap, (-gain, i))
    return counts

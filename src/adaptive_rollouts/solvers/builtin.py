"""`allocate` for the built-in objectives (RLOO, Dr. GRPO, GRPO), in memory and time that grow
with the number of prompts, not with `upper` or the budget.

The cost minimised is ``sum_q w_q c_q(n_q)`` with c the allocation cost of `objectives.pricing`
(gradient variance; a group with no gradient priced as a skipped prompt; 1-rollout groups only
when the budget forces them). Paths, all exact:

* 1-rollout groups: the fewest the budget allows is computed directly; if there are none the
  problem is solved with ``lower = 2``; if some are forced (budget below 2 per prompt, no
  skipping), every other prompt gets exactly 2 and the 1-rollout groups go to the prompts that
  lose least, ``w_q (c0 - c_q(2))``.
* An estimator whose cost is one convex curve from ``lower`` on (`Estimator.convex_from`: RLOO from
  2, Dr. GRPO from 3): the smallest marginal costs (`shared`), with f evaluated on demand when the
  count range is too long to tabulate.
* Such an estimator below its ``convex_from`` (Dr. GRPO with ``lower = 2``): the convex solution on
  n >= convex_from, kept when a Lagrangian certificate shows that no prompt gains by dropping
  below it.
* Otherwise (a cost that depends on p, as GRPO's; skipping; a failed certificate): the exact table
  solver on a window of counts
  per prompt (the low counts, where the cost is not convex, and a band around the convex
  solution), enlarged until a bound proves that no count outside it can help:
  ``c_q(n) >= min(c0, f(n))``, and ``w f(n) - t n`` is convex in n.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..objectives.estimator import Estimator
from ..objectives.mixing import mixed_probability
from ..objectives.pricing import singleton_penalty
from .lagrangian import solve_general_table
from .shared import shared_convex
from .table import solve_masked

__all__ = ["solve_builtin", "forced_singletons"]

_DENSE_WIDTH = 96  # count ranges up to this wide are tabulated whole
_TABLE_CELLS_MAX = 40_000_000  # a window table beyond this is refused rather than run out of memory
_ARRAY_G_MAX = 1 << 22  # marginals tabulated up to this length, evaluated on demand beyond


class _Rows:
    """w_q c_q(n) on demand for the built-in objectives (n >= 1; 0 is the skip price)."""

    def __init__(self, estimator: Estimator, w: np.ndarray, p: np.ndarray | None, skip_cost: float | None):
        self.estimator, self.w, self.p, self.skip_cost = estimator, w, p, skip_cost
        self.c0 = estimator.no_signal_cost(skip_cost)
        if p is not None:  # log p and log(1 - p), once: P(mixed) = 1 - p^n - (1-p)^n is evaluated often
            with np.errstate(divide="ignore"):
                self._logs = np.log(p), np.log1p(-p)

    def __call__(self, rows: np.ndarray, n: np.ndarray) -> np.ndarray:
        mixed = None
        if self.p is not None:
            n_ = np.asarray(n, dtype=float)
            with np.errstate(invalid="ignore"):
                all_equal = np.exp(n_ * self._logs[0][rows]) + np.exp(n_ * self._logs[1][rows])
            mixed = np.where(n_ > 0, np.maximum(1.0 - all_equal, 0.0), 0.0)
        unit = self.estimator.allocation_cost(n, skip_cost=self.skip_cost, mixed=mixed)
        with np.errstate(invalid="ignore"):
            return np.where(np.isinf(unit), np.inf, self.w[rows] * unit)

    def at_two(self) -> np.ndarray:
        return self(np.arange(self.w.size), np.full(self.w.size, 2.0))


def forced_singletons(q: int, budget: int, upper: int, skipping: bool) -> int:
    """The fewest 1-rollout groups an allocation of `budget` over q prompts can have (counts in
    [1, upper], or 0 too when skipping)."""
    if upper < 2:
        return budget
    if not skipping:
        return max(0, 2 * q - budget)
    return 1 if budget == 1 or (upper == 2 and budget % 2 == 1) else 0


def _g_function(estimator: Estimator, start: int) -> Callable[[np.ndarray], np.ndarray]:
    """g(j) = f(start + j + 1) - f(start + j): the marginals of the shared unit cost."""

    def g(j: np.ndarray) -> np.ndarray:
        return estimator.unit_marginal(start + np.asarray(j, dtype=float))

    return g


def _convex(estimator: Estimator, w: np.ndarray, budget: int, lower: int, upper: int) -> np.ndarray:
    """Exact optimum of sum w_q f(n_q), f convex on [lower, upper], no skipping."""
    k = upper - lower
    if k == 0:
        return np.full(w.size, lower, dtype=np.int64)
    take = budget - w.size * lower
    if k <= _ARRAY_G_MAX:
        g = np.maximum.accumulate(estimator.unit_marginal(np.arange(lower, upper, dtype=float)))
        return lower + shared_convex(w, g, take)
    return lower + shared_convex(w, _g_function(estimator, lower), take, k)


def _threshold(estimator: Estimator, w: np.ndarray, counts: np.ndarray, upper: int) -> float:
    """The smallest marginal cost not taken by a convex solution (a Lagrange multiplier for it)."""
    n = counts.astype(float)
    with np.errstate(invalid="ignore"):
        nxt = w * estimator.unit_marginal(n)
    open_ = counts < upper
    return float(nxt[open_].min()) if open_.any() else 0.0


def _convex_part_bound(rows: _Rows, t: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min over n in [a, b] of w min(c0, f(n)) - t n (exactly w c(n) - t n for RLOO and Dr.
    GRPO, where c = f): the linear part at an end, the convex part w f(n) - t n at its minimiser,
    the first n whose marginal w f'(n) - t is >= 0 (binary search)."""
    w, est = rows.w, rows.estimator
    lo, hi = a.copy(), b.copy()
    while True:
        live = lo < hi
        if not live.any():
            break
        mid = (lo + hi) // 2
        up = w * est.unit_marginal(mid) - t >= 0
        hi = np.where(live & up, mid, hi)
        lo = np.where(live & ~up, mid + 1, lo)
    convex = w * est.unit_cost(lo) - t * lo
    if not est.cost_depends_on_p:  # c = f: the convex part is exact
        return convex
    return np.minimum(np.minimum(w * rows.c0 - t * a, w * rows.c0 - t * b), convex)


def _range_bound(rows: _Rows, t: float, a: np.ndarray, b: np.ndarray, enough: np.ndarray) -> np.ndarray:
    """Per prompt, a lower bound of w c(n) - t n over n in [a, b] (n >= 3; inf where a > b),
    exact where it is below `enough` (the caller's test); above it, any value >= `enough` may be
    returned. RLOO and Dr. GRPO: exact (`_convex_part_bound`). GRPO: the larger of that bound
    (from c(n) >= min(c0, f(n)), tight for large n) and one where c decreases in n (c0 >= f(2)):
    [a, b] cut into pieces [x, y] of lengths 1, 2, 3, ... growing by 25%, on each c(n) >= c(y)
    and -t n >= -t x (t <= 0; -t y for t > 0), tight for small n, where P(mixed) matters."""
    q = rows.w.size
    empty = a > b
    a = np.where(empty, 3, np.maximum(a, 3)).astype(np.int64)
    b = np.where(empty, 3, np.maximum(b, a)).astype(np.int64)
    bound = _convex_part_bound(rows, t, a, b)
    if rows.estimator.cost_depends_on_p and rows.c0 >= float(rows.estimator.unit_cost(2.0)):
        pieces = np.full(q, np.inf)
        x, step = a.copy(), 1
        live = ~empty & (bound < enough)
        while live.any():
            y = np.minimum(x + step - 1, b)
            piece = rows(np.arange(q), y.astype(float)) - t * np.where(t <= 0, x, y)
            pieces = np.where(live, np.minimum(pieces, piece), pieces)
            x, step = y + 1, max(step + 1, int(step * 1.25))
            live &= x <= b
            if t <= 0:  # c >= 0: from here on every piece is >= -t x, already enough
                live &= -t * x < enough
        bound = np.maximum(bound, pieces)
    return np.where(empty, np.inf, bound)


def _dense(rows: _Rows, budget: int, lower: int, upper: int, skipping: bool) -> np.ndarray:
    q = rows.w.size
    n = np.arange(upper + 1, dtype=float)
    c = rows(np.repeat(np.arange(q), upper + 1), np.tile(n, q)).reshape(q, upper + 1)
    c[:, : max(lower, 1)] = np.inf
    if skipping:
        c[:, 0] = rows.w * rows.skip_cost
    if lower <= 1 <= upper:
        c[:, 1] = rows.w * rows.c0 + singleton_penalty(np.where(n[None, :] == 1, np.inf, c))
    return solve_masked(c, budget)[0].astype(np.int64)


def _window(
    rows: _Rows, budget: int, lower: int, upper: int, skipping: bool, base: np.ndarray, hint: float | None
) -> np.ndarray:
    """Exact solve on per-prompt windows of counts, enlarged until the bound proves the rest useless."""
    q = rows.w.size
    idx = np.arange(q)
    head, half = 4, 8
    while True:
        head_hi = min(lower + head, upper)
        win_lo = np.clip(base - half, head_hi + 1, upper)
        win_hi = np.clip(base + half, head_hi, upper)
        width = 2 * half + 1
        labels = np.concatenate(
            [
                np.tile(np.arange(lower, head_hi + 1), (q, 1)),
                np.minimum(win_lo[:, None] + np.arange(width)[None, :], upper),
            ],
            axis=1,
        ).astype(np.int64)
        dup = np.zeros(labels.shape, dtype=bool)
        dup[:, head_hi - lower + 1 :] = (labels[:, head_hi - lower + 1 :] > win_hi[:, None]) | (
            labels[:, head_hi - lower + 1 :] <= head_hi
        )
        if skipping:
            labels = np.concatenate([np.zeros((q, 1), dtype=np.int64), labels], axis=1)
            dup = np.concatenate([np.zeros((q, 1), dtype=bool), dup], axis=1)
        if labels.size > _TABLE_CELLS_MAX:
            raise MemoryError(
                f"allocate: the exact solve would need a {q} x {labels.shape[1]} table; "
                "use fewer prompts per call or a smaller upper"
            )
        c = rows(np.repeat(idx, labels.shape[1]), labels.ravel().astype(float)).reshape(labels.shape)
        c[dup] = np.inf
        if skipping:
            c[:, 0] = rows.w * rows.skip_cost
        counts, t, phi, slack = solve_general_table(c, budget, labels.astype(float), hint)
        tol = 1e-12 * max(1.0, float(np.max(np.abs(c[np.isfinite(c)]), initial=0.0)))
        enough = phi + slack - tol
        gap_bound = _range_bound(rows, t, np.full(q, head_hi + 1), win_lo - 1, enough)
        tail_bound = _range_bound(rows, t, win_hi + 1, np.full(q, upper), enough)
        if np.all(np.minimum(gap_bound, tail_bound) >= enough):
            return counts.astype(np.int64)
        head, half, hint = 2 * head, 2 * half, t


def _base_guess(rows: _Rows, budget: int, lower: int, upper: int) -> tuple[np.ndarray, float | None]:
    """Where a window starts: the counts of the convex problem sum w' f(n) on [max(lower, 3),
    upper], with w' = w times (GRPO) the chance of a group with signal at the mean count, and its
    multiplier (a hint for the exact solve)."""
    w, est = rows.w, rows.estimator
    if est.cost_depends_on_p:
        w = w * mixed_probability(rows.p, max(budget / w.size, 2.0))
    start = min(max(lower, 3), upper)
    if budget < w.size * start:
        return np.full(w.size, lower, dtype=np.int64), None
    w = np.maximum(w, 1e-300)
    counts = _convex(est, w, budget, start, upper)
    return counts, _threshold(est, w, counts, upper)


def solve_builtin(
    estimator: Estimator,
    w: np.ndarray,
    p: np.ndarray | None,
    budget: int,
    lower: int,
    upper: int,
    skipping: bool,
    skip_cost: float | None,
) -> np.ndarray:
    """Exact counts for a built-in objective; `upper` is already at most the reachable count."""
    q = w.size
    rows = _Rows(estimator, w, p, skip_cost if skipping else None)
    if lower <= 1:
        forced = forced_singletons(q, budget, upper, skipping)
        if forced and (skipping or upper < 2):
            return _dense(rows, budget, lower, upper, skipping)  # a budget of 1, or upper <= 2
        if forced:  # every other prompt gets exactly 2
            key = w * rows.c0 - rows.at_two()
            singles = np.lexsort((-np.arange(q), key))[:forced]
            counts = np.full(q, 2, dtype=np.int64)
            counts[singles] = 1
            return counts
        lower = 2
    if upper - lower + 1 <= _DENSE_WIDTH and q * (upper + 1) <= _TABLE_CELLS_MAX // 4:
        return _dense(rows, budget, lower, upper, skipping)
    convex_from = estimator.convex_from
    if not skipping and convex_from is not None and lower >= convex_from:
        return _convex(estimator, w, budget, lower, upper)
    if not skipping and convex_from is not None and budget >= convex_from * q:
        counts = _convex(estimator, w, budget, convex_from, upper)
        t = _threshold(estimator, w, counts, upper)
        # the counts below convex_from, where f may be concave: none may beat the chosen count
        head = np.min([w * estimator.unit_cost(float(m)) - m * t for m in range(lower, convex_from)], axis=0)
        chosen = w * estimator.unit_cost(counts) - t * counts
        if np.all(head >= chosen - 1e-12 * max(1.0, float(w.max()))):
            return counts
        return _window(rows, budget, lower, upper, skipping, counts, t)  # the convex solution: a start
    return _window(rows, budget, lower, upper, skipping, *_base_guess(rows, budget, lower, upper))

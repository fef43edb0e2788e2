"""Exact solver for any cost table: Lagrangian relaxation, reduced-cost fixing and a DP.

For a multiplier t, every feasible allocation costs ``D(t) + sum_q s_q(n_q)`` with
``D(t) = sum_q min_n (c_q(n) - t n) + t C`` and slacks ``s_q(n) = c_q(n) - t n - min_m (c_q(m) - t m)
>= 0``. An allocation whose total slack is S beats every allocation that uses a (q, n) with slack
> S, so the DP over the budget only needs, per prompt, the counts with slack <= S. Details:
docs/objectives.md, section 5.
"""

from __future__ import annotations

import numpy as np

from ..checks.validation import InfeasibleBudgetError

__all__ = ["lagrangian", "solve_general_table"]


def lagrangian(c: np.ndarray, t: float, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, at multiplier t: the minimum phi of c(n) - t n, and the first and last column
    reaching it (columns are the counts 0..N-1, or ``labels``: the count of each column, ascending)."""
    n = np.arange(c.shape[1], dtype=float) if labels is None else labels
    red = c - t * n
    phi = red.min(axis=1)
    at_min = red == phi[:, None]
    first = np.argmax(at_min, axis=1)
    last = c.shape[1] - 1 - np.argmax(at_min[:, ::-1], axis=1)
    return phi, first, last


def _label_of(labels: np.ndarray | None, cols: np.ndarray) -> np.ndarray:
    if labels is None:
        return cols.astype(np.int64)
    rows = np.arange(cols.size)
    lab = labels if labels.ndim == 2 else np.broadcast_to(labels, (cols.size, labels.size))
    return lab[rows, cols].astype(np.int64)


def _first_sum(c: np.ndarray, t: float, n: np.ndarray, last: bool = False) -> int:
    """Sum over rows of the smallest (or largest) count minimising c(n) - t n."""
    red = c - t * n
    if last:
        col = c.shape[1] - 1 - np.argmin(red[:, ::-1], axis=1)
    else:
        col = np.argmin(red, axis=1)  # the first minimiser
    if n.ndim == 1:
        return int(n[col].sum())
    return int(np.take_along_axis(n, col[:, None], axis=1).sum())


def _dual_multiplier(c: np.ndarray, budget: int, labels: np.ndarray | None, hint: float | None) -> float:
    """A multiplier t whose smallest Lagrangian minimisers sum to within a few rollouts of the
    budget (or bracket it with the largest): regula falsi (Illinois) on the count, from a bracket
    widened around `hint` (e.g. the multiplier of a convex relaxation) or spanning the costs,
    bisecting when it stalls. Any t keeps the solver exact (the slack decomposition holds for every
    t); a good one keeps the final DP small."""
    n = np.arange(c.shape[1], dtype=float) if labels is None else np.asarray(labels, dtype=float)
    near = max(4, c.shape[0] // 10_000)

    def excess(t: float) -> int | None:
        """Rollouts of the smallest minimisers beyond the budget; None when t is good enough."""
        first = _first_sum(c, t, n) - budget
        if first > 0:
            return first
        if -first <= near or _first_sum(c, t, n, last=True) >= budget:
            return None
        return first

    finite = np.isfinite(c)
    vals = c[finite]
    span = float(vals.max() - vals.min()) if vals.size else 0.0
    lo, hi = -span - 1.0, span + 1.0
    f_lo: float | None = None
    f_hi: float | None = None
    if hint is not None and np.isfinite(hint) and lo < hint < hi:
        f_hint = excess(hint)
        if f_hint is None:
            return float(hint)
        step, t0, f0 = max(abs(hint) * 1e-3, 1e-300), float(hint), f_hint
        while True:  # widen from the hint until the bracket holds the answer
            other = min(max(t0 - np.sign(f0) * step, lo), hi)
            f_other = excess(other)
            if f_other is None:
                return float(other)
            if np.sign(f_other) != np.sign(f0) or other in (lo, hi):
                (lo, f_lo), (hi, f_hi) = sorted([(t0, f0), (other, f_other)])
                break
            t0, f0, step = other, f_other, step * 4.0
    f_lo = excess(lo) if f_lo is None else f_lo
    f_hi = excess(hi) if f_hi is None else f_hi
    if f_lo is None or f_hi is None:
        return lo if f_lo is None else hi
    if f_lo > 0 or f_hi < 0:  # the budget lies outside what the table holds: let the DP report it
        return 0.5 * (lo + hi)
    kept = 0
    for _ in range(200):
        t = lo - f_lo * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (lo + hi)
        if not lo < t < hi:
            t = 0.5 * (lo + hi)
        if not lo < t < hi or hi - lo <= 1e-13 * (abs(lo) + abs(hi)):
            return t
        f_t = excess(t)
        if f_t is None:
            return t
        if f_t > 0:
            hi, f_hi = t, f_t
            f_lo, kept = (f_lo / 2, kept) if kept > 0 else (f_lo, 1)
        else:
            lo, f_lo = t, f_t
            f_hi, kept = (f_hi / 2, kept) if kept < 0 else (f_hi, -1)
    return 0.5 * (lo + hi)


def _prune(dev: np.ndarray, slack: np.ndarray, cand: np.ndarray, delta: int) -> np.ndarray:
    """Drop candidates that no optimal choice needs. Some optimal choice of deviations uses at most
    K = 3 D + |delta| prompts off their base (D = the largest |deviation|: a longer list holds a
    zero-sum part, which can be dropped at no cost), and at each deviation value only the K prompts
    with the smallest slack there (any other can hand its deviation to an unused one of those)."""
    rows, cols = np.nonzero(cand & (dev != 0))
    if rows.size == 0:
        return cand
    d = dev[rows, cols]
    big = int(np.abs(d).max())
    keep_per_value = 3 * big + abs(delta) + 1
    if np.unique(rows).size <= 2 * keep_per_value:
        return cand
    order = np.lexsort((rows, slack[rows, cols], d))
    d_sorted = d[order]
    starts = np.flatnonzero(np.r_[True, d_sorted[1:] != d_sorted[:-1]])
    rank = np.arange(d_sorted.size) - np.repeat(starts, np.diff(np.r_[starts, d_sorted.size]))
    kept = order[rank < keep_per_value]
    out = cand & (dev == 0)
    out[rows[kept], cols[kept]] = True
    return out


def _dp_candidates(slack: np.ndarray, dev: np.ndarray, cand: np.ndarray, delta: int) -> tuple[np.ndarray | None, float]:
    """Minimise sum_q slack[q, j_q] over candidate columns with sum_q dev[q, j_q] = delta (each
    row's base column has dev 0 and slack 0). Returns (the chosen columns' deviations, total) or
    (None, inf)."""
    q_count = slack.shape[0]
    out = np.zeros(q_count, dtype=np.int64)
    cand = _prune(dev, slack, cand, delta)
    free = np.flatnonzero(cand.sum(axis=1) > 1)
    if free.size == 0:
        return (out, 0.0) if delta == 0 else (None, np.inf)
    rows = []
    for q in free:
        idx = np.flatnonzero(cand[q])
        ds, ss = dev[q, idx].astype(np.int64), slack[q, idx]
        rows.append((q, int(ds.min()), int(ds.max()), ds, ss))
    mins = np.array([r[1] for r in rows])
    maxs = np.array([r[2] for r in rows])
    rest_min = np.concatenate([np.cumsum(mins[::-1])[::-1][1:], [0]])
    rest_max = np.concatenate([np.cumsum(maxs[::-1])[::-1][1:], [0]])
    if not mins.sum() <= delta <= maxs.sum():
        return None, np.inf
    # state: partial sum s in [s_lo, s_lo + len(cur) - 1]
    s_lo, cur = 0, np.zeros(1)
    choices = []
    for i, (_q, lo_d, hi_d, ds, ss) in enumerate(rows):
        new_lo = max(s_lo + lo_d, delta - int(rest_max[i]))
        new_hi = min(s_lo + len(cur) - 1 + hi_d, delta - int(rest_min[i]))
        width = new_hi - new_lo + 1
        if width <= 0:
            return None, np.inf
        new = np.full(width, np.inf)
        pick = np.zeros(width, dtype=np.int64)
        for d, s_cost in zip(ds.tolist(), ss.tolist()):  # ascending d: the smallest d wins ties
            if not np.isfinite(s_cost):
                continue
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
        out[rows[i][0]] = d
        s -= d
    return out, total


def _near_candidates(slack: np.ndarray, base: np.ndarray, tol: float) -> np.ndarray:
    """Zero-slack columns plus each row's nearest allowed column on either side of its base."""
    finite = np.isfinite(slack)
    width = slack.shape[1]
    cols = np.arange(width)
    below = np.where(finite & (cols < base[:, None]), cols, -1).max(axis=1)
    above = np.where(finite & (cols > base[:, None]), cols, width).min(axis=1)
    rows = np.arange(slack.shape[0])
    near = slack <= tol
    ok = below >= 0
    near[rows[ok], below[ok]] = True
    ok = above < width
    near[rows[ok], above[ok]] = True
    return near


def solve_general_table(
    c: np.ndarray, budget: int, labels: np.ndarray | None = None, hint: float | None = None
) -> tuple[np.ndarray, float, np.ndarray, float]:
    """Exact optimum of an arbitrary table (+inf = forbidden); ``labels`` [N] or [Q, N] (ascending
    per row) give each column's count when the columns are not 0..N-1; ``hint``: a guess of the
    Lagrange multiplier. Returns (counts, t, phi, the optimum's total slack)."""
    t = _dual_multiplier(c, budget, labels, hint)
    phi, base_col, _ = lagrangian(c, t, labels)
    lab = np.arange(c.shape[1], dtype=float) if labels is None else np.asarray(labels, dtype=float)
    lab2 = np.broadcast_to(lab, c.shape)
    base = _label_of(labels, base_col)
    slack = np.maximum(c - t * lab2 - phi[:, None], 0.0)  # inf stays inf
    dev = lab2.astype(np.int64) - base[:, None]
    delta = budget - int(base.sum())
    finite = np.isfinite(slack)
    tol = 1e-12 * max(1.0, float(np.max(np.abs(c[finite]), initial=0.0)))
    if delta == 0:
        return base, t, phi, 0.0
    out, total = _dp_candidates(slack, dev, slack <= tol, delta)  # ties at t only: often enough
    if out is not None:
        return base + out, t, phi, total
    out, total = _dp_candidates(slack, dev, _near_candidates(slack, base_col, tol), delta)  # an incumbent
    if out is not None and total <= tol:
        return base + out, t, phi, total
    gap = total if out is not None else 0.0
    finite_slack = slack[finite]
    positive = finite_slack[finite_slack > tol]
    top = float(finite_slack.max()) if finite_slack.size else 0.0
    while True:
        # every allocation with a (q, n) of slack > gap costs more than the best found: exact
        out, total = _dp_candidates(slack, dev, slack <= gap + tol, delta)
        if out is not None:
            if total <= gap + tol:
                return base + out, t, phi, total
            gap = total
            continue
        # a kernel-level feasibility check: +inf entries inside a row can leave no way to the
        # budget although the bounds allow it (the entry checks cannot see the table's entries)
        if gap + tol >= top:  # every finite count is already a candidate (also ends the loop when all
            # slacks are <= tol, e.g. subnormal costs, where gap would otherwise stay 0 forever)
            raise InfeasibleBudgetError(
                f"budget={budget} cannot be met exactly: the allowed counts of the "
                "table rows (finite entries) never sum to it"
            )
        gap = float(positive.min()) if gap == 0.0 and positive.size else gap * 4.0
        gap = min(gap, top)

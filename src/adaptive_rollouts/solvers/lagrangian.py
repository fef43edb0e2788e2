"""Exact solver for any cost table: Lagrangian relaxation, reduced-cost fixing and a DP.

For a multiplier t, every feasible allocation costs ``D(t) + sum_q s_q(n_q)`` with
``D(t) = sum_q min_n (c_q(n) - t n) + t C`` and slacks ``s_q(n) = c_q(n) - t n - min_m (c_q(m) - t m)
>= 0``. An allocation whose total slack is S beats every allocation that uses a (q, n) with slack
> S, so the DP over the budget only needs, per prompt, the counts with slack <= S. Details:
docs/objectives.md, section 5.
"""

from __future__ import annotations

import numpy as np

from ..validation import InfeasibleBudgetError

__all__ = ["lagrangian", "solve_general_table"]


def lagrangian(c: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, at multiplier t: the minimum phi of c(n) - t n, and the first and last n reaching it."""
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
        _, first, last = lagrangian(c, t)
        if first.sum() > budget:
            hi = t
        elif last.sum() < budget:
            lo = t
        else:
            break
    return t


def _dp_candidates(
    slack: np.ndarray, base: np.ndarray, cand: np.ndarray, delta: int
) -> tuple[np.ndarray | None, float]:
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
    for i, (_q, lo_d, hi_d, seg) in enumerate(rows):
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


def _near_candidates(slack: np.ndarray, base: np.ndarray, tol: float) -> np.ndarray:
    """Zero-slack counts plus each row's nearest allowed count on either side of its base."""
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


def solve_general_table(c: np.ndarray, budget: int) -> tuple[np.ndarray, float, np.ndarray, float]:
    """Exact optimum of an arbitrary table (+inf = forbidden). Returns (counts, t, phi, slack)."""
    t = _dual_multiplier(c, budget)
    phi, base, _ = lagrangian(c, t)
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
    dev, total = _dp_candidates(slack, base, _near_candidates(slack, base, tol), delta)  # an incumbent
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
            raise InfeasibleBudgetError(
                f"budget={budget} cannot be met exactly: the allowed counts of the "
                "table rows (finite entries) never sum to it"
            )
        gap = float(positive.min()) if gap == 0.0 and positive.size else gap * 4.0
        gap = min(gap, top)

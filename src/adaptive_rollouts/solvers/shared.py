"""Selecting the smallest of the products w_q g[k] without building the Q x K matrix.

`allocate`'s fast path for a shared convex f: the marginal costs of prompt q are w_q g[k] with
g = diff(f) nondecreasing, so the optimum takes the `take` smallest products over all (q, k).
A bisection on the threshold (over the float's bit pattern, so it ends) counts each row's products
below it with `np.searchsorted`, O(Q log K) per step.
"""

from __future__ import annotations

import numpy as np

from .table import take_smallest

__all__ = ["shared_convex"]


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


def shared_convex(w: np.ndarray, g: np.ndarray, take: int) -> np.ndarray:
    """Extra counts selecting the `take` smallest of {w_q g[k]} (g nondecreasing, w >= 0),
    ties to the lower prompt index, without building the Q x K matrix."""
    q, k = w.size, g.size
    if take == 0:
        return np.zeros(q, dtype=np.int64)
    if q * k <= 200_000:
        return take_smallest(w[:, None] * g[None, :], take)[0]
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

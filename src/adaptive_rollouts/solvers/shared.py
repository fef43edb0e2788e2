"""Selecting the smallest of the products w_q g[k] without building the Q x K matrix.

`allocate`'s fast path for a shared convex f: the marginal costs of prompt q are w_q g[k] with
g = diff(f) nondecreasing, so the optimum takes the `take` smallest products over all (q, k).
A bisection on the threshold (over the float's bit pattern, so it ends) counts each row's products
below it, O(Q log K) per step. ``g`` is an array, or - when K is too large to hold (a budget of
10^9 over 4 prompts) - a function evaluating g at any indices: memory O(Q), never O(K).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .table import take_smallest

__all__ = ["shared_convex"]


def _float_key(x: float) -> int:
    i = int(np.array(x, dtype=np.float64).view(np.int64))
    return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF) - 1


def _key_float(k: int) -> float:
    i = k if k >= 0 else (-(k + 1)) | (-0x8000000000000000)
    return float(np.array(i, dtype=np.int64).view(np.float64))


Marginals = np.ndarray | Callable[[np.ndarray], np.ndarray]


def _g_at(g: Marginals, k: np.ndarray) -> np.ndarray:
    return g[k] if isinstance(g, np.ndarray) else np.asarray(g(k), dtype=float)


def _count_le(
    w: np.ndarray, g: Marginals, k: int, x: float, lo: np.ndarray | None = None, hi: np.ndarray | None = None
) -> np.ndarray:
    """Exact per-row count of j < k with w_q * g[j] <= x (rows nondecreasing since w >= 0); the
    answer is known to lie in [lo, hi] when given."""
    out = np.full(w.size, k if 0.0 <= x else 0, dtype=np.int64)  # w == 0: marginals are 0
    pos = w > 0
    if not pos.any():
        return out
    wp = w[pos]
    if isinstance(g, np.ndarray):
        y = x / wp
        pad = np.abs(y) * 1e-12 + 1e-300
        a = np.searchsorted(g, y - pad, side="left").astype(np.int64)
        b = np.searchsorted(g, y + pad, side="right").astype(np.int64)
    else:  # on demand: binary search between the bounds the caller already knows
        a = np.zeros(wp.size, dtype=np.int64) if lo is None else lo[pos].copy()
        b = np.full(wp.size, k, dtype=np.int64) if hi is None else hi[pos].copy()
    while True:  # binary search for the first j in [a, b) with w g[j] > x
        live = a < b
        if not live.any():
            break
        mid = (a + b) // 2
        ok = wp * _g_at(g, np.minimum(mid, k - 1)) <= x
        a = np.where(live & ok, mid + 1, a)
        b = np.where(live & ~ok, mid, b)
    out[pos] = a
    return out


def shared_convex(w: np.ndarray, g: Marginals, take: int, k: int | None = None) -> np.ndarray:
    """Extra counts selecting the `take` smallest of {w_q g[j]} (g nondecreasing, w >= 0),
    ties to the lower prompt index, without building the Q x K matrix. ``g`` is an array of K
    marginals, or a function of an index array with ``k`` = K given."""
    q = w.size
    if isinstance(g, np.ndarray):
        k = g.size
    elif k is None:
        raise ValueError("shared_convex: k (the number of marginals) is needed when g is a function")
    if take == 0:
        return np.zeros(q, dtype=np.int64)
    if isinstance(g, np.ndarray) and q * k <= 200_000:
        return take_smallest(w[:, None] * g[None, :], take)[0]
    g_first = _g_at(g, np.array([0]))[0]
    lo = _float_key(float((w * g_first).min())) - 1
    c_lo = np.zeros(q, dtype=np.int64)
    # the threshold is at most the largest marginal at the even split (every prompt taking
    # take // Q + 1 of them is already enough): it brackets the counts from the start
    even = min(k - 1, take // q)
    top = float((w * _g_at(g, np.array([even]))[0]).max())
    hi = _float_key(top)
    c_hi = _count_le(w, g, k, _key_float(hi))
    while hi - lo > 1 and int((c_hi - c_lo).sum()) > 4 * q:
        mid = lo + (hi - lo) // 2
        c_mid = _count_le(w, g, k, _key_float(mid), c_lo, c_hi)
        if c_mid.sum() >= take:
            hi, c_hi = mid, c_mid
        else:
            lo, c_lo = mid, c_mid
    # enumerate the remaining candidates (c_lo[q] <= j < c_hi[q]) and pick exactly
    need = take - int(c_lo.sum())
    lens = c_hi - c_lo
    if int(lens.sum()) > 4 * q:  # the keys met: every candidate equals the threshold, a tie
        before = np.cumsum(lens) - lens  # lower prompt index first, then smaller j
        return c_lo + np.clip(need - before, 0, lens)
    rows = np.repeat(np.arange(q), lens)
    ks = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(c_lo, lens)
    vals = w[rows] * _g_at(g, ks)
    order = np.lexsort((ks, rows, vals))[:need]
    return c_lo + np.bincount(rows[order], minlength=q)

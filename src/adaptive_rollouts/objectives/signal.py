"""What a group of rollouts is worth: its expected gradient signal, and what a skipped or cut group
loses (docs/saving.md derives it).

For a binary group of n rollouts with k successes, the estimators give every success the advantage
A_s(k) and every failure A_f(k) (`aggregation.binary_group_terms`). The group's update is
sum_i A_i grad log pi(a_i | q); its component along the prompt's expected direction is

    a(k; n) = sum_i A_i (r_i - k / n) = k A_s(k) (1 - k/n) - (n - k) A_f(k) k/n,

which is 0 for an all-equal group (k = 0 or k = n) under GRPO, Dr. GRPO and RLOO alike, and
k (n - k) / n under Dr. GRPO. Under a per-rollout loss weight (seq-mean, token-mean, constant) the
group enters with a(k; n); under prompt-mean with a(k; n) / n. The expected signal of completing a
prompt's group to n rollouts, after k drawn with s successes and a Beta(alpha, beta) belief
(which already holds those k outcomes), sums a(s + t; n) over the t successes of the n - k new
rollouts, t ~ BetaBinomial(n - k, alpha, beta).

Cost: the sum runs term by term (a [prompts, n - k + 1] table, in row blocks of bounded size) for
groups with at most `DENSE_LEFT` rollouts still to draw; above that, over the window where the
Beta-Binomial holds its mass when that is narrow, else exactly over the first and last `EDGE` terms
and by the Euler-Maclaurin formula (an adaptive integral of the summand's continuous extension plus
its end corrections) in between, so memory and time do not grow with the group size
(`tests/test_objectives_signal_large.py` checks it against the term-by-term sum).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import betaln, gammaln
from scipy.stats import betabinom, binom, hypergeom

from ..checks.validation import AGGREGATIONS, check_choice
from .estimator import Estimator
from .registry import get_estimator

__all__ = [
    "group_signal",
    "signal_at",
    "expected_group_signal",
    "known_p_group_signal",
    "sampled_group_signal",
    "MAX_GROUP",
]

DENSE_LEFT = 4096  # groups with at most this many rollouts left are summed term by term
EDGE = 64  # terms summed exactly at each end of a large group (where the summand is not smooth)
_CELLS = 1 << 20  # largest [prompts, terms] block evaluated at once (8 MiB per float array)
MAX_GROUP = 1 << 31
"""The largest group `expected_group_signal` evaluates (log-factorials of larger groups lose the
precision the sum needs); far beyond any real step."""


@lru_cache(maxsize=256)
def _signal_row(estimator: Estimator, n: int) -> np.ndarray:
    k, a_s, a_f = estimator.binary_group_terms(n)
    if n < 2:
        return np.zeros(n + 1)
    row = k * a_s * (1.0 - k / n) - (n - k) * a_f * (k / n)
    row.setflags(write=False)
    return row


def group_signal(estimator: str | Estimator, n: int, aggregation: str = "seq-mean") -> np.ndarray:
    """a(k; n) for k = 0..n successes: the signal of a binary group of n (divided by n under
    "prompt-mean", where a group weighs 1 / n per rollout).

    >>> group_signal("drgrpo", 4).tolist()  # k (n - k) / n
    [0.0, 0.75, 1.0, 0.75, 0.0]
    >>> group_signal("grpo", 2).round(4).tolist()    # GRPO: (n - 1) sd for a mixed group, unbiased sd
    [0.0, 0.7071, 0.0]
    """
    est = get_estimator(estimator)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    row = _signal_row(est, int(n))
    return row / n if aggregation == "prompt-mean" and n > 0 else row.copy()


def signal_at(estimator: str | Estimator, n: int, k: Any, aggregation: str = "seq-mean") -> np.ndarray:
    """a(k; n) at any (also non-integer) k in [0, n]: the formula of `group_signal` with the
    estimator's advantages (`Estimator.from_centred`) at real k, so it equals `group_signal` at the
    integers and is smooth in between (Dr. GRPO: k (n - k) / n; RLOO: k (n - k) / (n - 1); GRPO:
    sqrt(k (n - k) (n - 1) / n)); divided by n under "prompt-mean".

    >>> signal_at("drgrpo", 4, [0, 1, 2]).tolist()
    [0.0, 0.75, 1.0]
    """
    est = get_estimator(estimator)
    k = np.asarray(k, dtype=float)
    if n < 2:
        return np.zeros_like(k)
    mean = k / n
    sd = np.sqrt(np.clip(k * (n - k), 0.0, None) / (n * (n - 1.0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        a_s = est.from_centred(1.0 - mean, float(n), sd, 0.0, 1.0)
        a_f = est.from_centred(-mean, float(n), sd, 0.0, 1.0)
        value = np.where((k <= 0) | (k >= n), 0.0, k * a_s * (1.0 - mean) - (n - k) * a_f * mean)
    return value / n if aggregation == "prompt-mean" else value


def _dense(left: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray, value: Callable) -> np.ndarray:
    """The sum term by term, in blocks of rows with at most `_CELLS` terms; ``value(s + t)`` is a."""
    out = np.zeros(left.size)
    width = int(left.max()) + 1
    step = max(1, _CELLS // width)
    t = np.arange(width)[None, :]
    for lo in range(0, left.size, step):
        sl = slice(lo, lo + step)
        m = left[sl, None]
        pmf = np.where(t <= m, betabinom.pmf(t, m, a[sl, None], b[sl, None]), 0.0)
        out[sl] = (pmf * value(np.minimum(s[sl, None] + t, s[sl, None] + m))).sum(axis=1)
    return out


def _log_pmf(t: Any, m: int, a: float, b: float) -> Any:
    """log BetaBinomial(m, a, b) at real t in [0, m] (the pmf's continuous extension)."""
    return gammaln(m + 1.0) - gammaln(t + 1.0) - gammaln(m - t + 1.0) + betaln(t + a, m - t + b) - betaln(a, b)


_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)


def _quadrature(first: float, last: float, mean: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a 10-point Gauss-Legendre rule on panels of [first, last] that follow
    the summand: geometric (ratio 3/2) from each end, where a Beta-Binomial behaves like a power of
    the distance, and sd / 2 wide within 10 sd of its mean, where it peaks."""
    half = (first + last) / 2.0
    grow = np.geomspace(first, half, max(2, int(np.ceil(np.log(half / first) / np.log(1.5))) + 1))
    peak = mean + sd * np.arange(-10.0, 10.5, 0.5)
    cuts = np.unique(np.clip(np.concatenate([grow, first + last - grow, peak, [first, last]]), first, last))
    lo, width = cuts[:-1, None], np.diff(cuts)[:, None]
    return (lo + width * (_GL_X + 1.0) / 2.0).ravel(), (width * _GL_W / 2.0).ravel()


def _large(size: int, m: int, s: int, a: float, b: float, estimator: str | Estimator, aggregation: str) -> float:
    """E[a(s + t; size)], t ~ BetaBinomial(m, a, b), for one group with m > `DENSE_LEFT` left."""
    mean = m * a / (a + b)
    sd = float(np.sqrt(m * a * b * (a + b + m) / ((a + b) ** 2 * (a + b + 1.0))))
    lo, hi = max(0, int(mean - 60 * sd) - EDGE), min(m, int(np.ceil(mean + 60 * sd)) + EDGE)
    if hi - lo <= DENSE_LEFT:  # narrow: its mass lies in a window summed term by term
        t = np.arange(lo, hi + 1, dtype=float)
        return float(np.sum(np.exp(_log_pmf(t, m, a, b)) * signal_at(estimator, size, s + t, aggregation)))

    def f(x: Any) -> Any:  # the summand's continuous extension
        return np.exp(_log_pmf(x, m, a, b)) * signal_at(estimator, size, s + np.asarray(x, dtype=float), aggregation)

    ends = np.concatenate([np.arange(EDGE), np.arange(m - EDGE + 1, m + 1)]).astype(float)
    first, last = float(EDGE), float(m - EDGE)
    x, w = _quadrature(first, last, mean, sd)
    integral = float(np.sum(w * f(x)))
    slope = (f(last + 1) - f(last - 1) - f(first + 1) + f(first - 1)) / 2.0
    return float(np.sum(f(ends)) + integral + (f(first) + f(last)) / 2.0 + slope / 12.0)


def expected_group_signal(
    total: Any,
    drawn: Any,
    successes: Any,
    alpha: Any,
    beta: Any,
    *,
    estimator: str,
    aggregation: str = "seq-mean",
) -> np.ndarray:
    """Per prompt: E[a(s + t; n)] for a group completed to n = ``total`` rollouts after ``drawn`` = k
    with ``successes`` = s (rounded; graded rewards count their sum), t ~ BetaBinomial(n - k, alpha,
    beta). Prompts with n < 2 are worth 0.

    >>> expected_group_signal([4], [4], [2], [1.0], [1.0], estimator="drgrpo").tolist()  # nothing left to draw
    [1.0]
    >>> v = expected_group_signal([8, 8], [4, 4], [0, 0], [0.5, 0.5], [4.5, 40.5], estimator="grpo")
    >>> bool(v[0] > v[1] > 0)   # four failures: worth more when the belief allows successes
    True
    """
    n = np.asarray(total, dtype=np.int64).reshape(-1)
    k = np.asarray(drawn, dtype=np.int64).reshape(-1)
    s = np.clip(np.rint(np.asarray(successes, dtype=float)).astype(np.int64).reshape(-1), 0, None)
    a = np.asarray(alpha, dtype=float).reshape(-1)
    b = np.asarray(beta, dtype=float).reshape(-1)
    if not (n.shape == k.shape == s.shape == a.shape == b.shape):
        raise ValueError(f"total, drawn, successes, alpha, beta must have one entry per prompt, got {n.shape}")
    if np.any(k > n) or np.any(s > k) or np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("need 0 <= successes <= drawn <= total and alpha, beta > 0")
    if n.size and int(n.max()) > MAX_GROUP:
        raise ValueError(f"total: groups of at most {MAX_GROUP} rollouts are evaluated, got {int(n.max())}")
    get_estimator(estimator)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    out = np.zeros(n.size)
    for size in np.unique(n[n >= 2]).tolist():
        rows = np.flatnonzero(n == size)
        left = size - k[rows]
        small = left <= DENSE_LEFT
        if small.any():
            dense = rows[small]
            if size <= _CELLS:  # the cached row of a(k; size)
                row = group_signal(estimator, size, aggregation)
                value: Callable = row.__getitem__
            else:
                value = functools.partial(signal_at, estimator, size, aggregation=aggregation)
            out[dense] = _dense(left[small], s[dense], a[dense], b[dense], value)
        for i in rows[~small].tolist():
            out[i] = _large(size, int(n[i] - k[i]), int(s[i]), float(a[i]), float(b[i]), estimator, aggregation)
    return out


def known_p_group_signal(n: int, p: Any, *, estimator: str, aggregation: str = "seq-mean") -> np.ndarray:
    """Per prompt: E[a(K; n)], K ~ Binomial(n, p): the signal a group of n is expected to carry when
    p is known (what Uniform's group would have found; the benchmarks' yardstick for what a saving
    allocator keeps).

    >>> known_p_group_signal(2, [0.5, 0.0], estimator="drgrpo").round(6).tolist()  # a(1; 2) = 1/2 w.p. 1/2
    [0.25, 0.0]
    """
    prob = np.asarray(p, dtype=float).reshape(-1)
    if np.any(~np.isfinite(prob)) or np.any((prob < 0) | (prob > 1)):
        raise ValueError(f"p must lie in [0, 1], got {prob[~((prob >= 0) & (prob <= 1))][:5].tolist()}")
    row = group_signal(estimator, int(n), aggregation)
    return binom.pmf(np.arange(int(n) + 1)[None, :], int(n), prob[:, None]) @ row


def sampled_group_signal(
    n: int, successes: Any, samples: int, *, estimator: str, aggregation: str = "seq-mean"
) -> np.ndarray:
    """Per prompt: an unbiased estimate of E[a(K; n)], K ~ Binomial(n, p), from ``samples`` = m >= n
    independent 0/1 samples of which ``successes`` = c succeeded, p unknown: the mean of a(k; n) over
    every n-subset of the samples, sum_k a(k; n) C(c, k) C(m - c, n - k) / C(m, n) (a U-statistic:
    each n-subset is a group of n drawn at p, so its a(k; n) is unbiased, and so is their mean). It
    estimates what `known_p_group_signal` gives with the true p, without plugging in c / m (which
    reads 0 for every prompt none of whose samples succeeded).

    >>> sampled_group_signal(2, [2, 0], 4, estimator="drgrpo").round(6).tolist()  # 4 of 6 pairs mixed, a = 1/2
    [0.333333, 0.0]
    """
    m = int(samples)
    c = np.asarray(successes, dtype=np.int64).reshape(-1)
    if n < 0 or m < n:
        raise ValueError(f"need 0 <= n <= samples, got n={n}, samples={m}")
    if np.any(c < 0) or np.any(c > m):
        raise ValueError(f"successes must lie in [0, samples={m}], got {c[(c < 0) | (c > m)][:5].tolist()}")
    row = group_signal(estimator, int(n), aggregation)
    return hypergeom.pmf(np.arange(int(n) + 1)[None, :], m, c[:, None], int(n)) @ row

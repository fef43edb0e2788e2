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
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import betabinom, binom, hypergeom

from ..checks.validation import AGGREGATIONS, check_choice
from .estimator import Estimator
from .registry import get_estimator

__all__ = ["group_signal", "expected_group_signal", "known_p_group_signal", "sampled_group_signal"]


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
    out = np.zeros(n.size)
    for size in np.unique(n[n >= 2]).tolist():
        rows = np.flatnonzero(n == size)
        left = size - k[rows]
        t = np.arange(int(left.max()) + 1)[None, :]
        pmf = np.where(t <= left[:, None], betabinom.pmf(t, left[:, None], a[rows, None], b[rows, None]), 0.0)
        row = group_signal(estimator, size, aggregation)
        totals = np.minimum(s[rows, None] + t, size)
        out[rows] = (pmf * row[totals]).sum(axis=1)
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

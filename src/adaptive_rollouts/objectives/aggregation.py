"""Loss aggregation: the weight c(n) of a prompt's group in the batch gradient, and how the
counts enter the batch gradient's mean and second moment (docs/objectives.md, section 3).

`aggregation_weight` is the one definition of the weights: the planners (`batch_gradient_moments`,
`improvement_table`) and the simulator's training step (`sim.estimators.aggregation_weights`) both
call it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import binom

from ..checks.validation import AGGREGATIONS, check_choice
from .estimator import Estimator
from .registry import get_estimator

__all__ = ["AGGREGATIONS", "aggregation_weight", "batch_gradient_moments"]


def aggregation_weight(
    aggregation: str,
    n: Any,
    *,
    num_prompts: int,
    budget: float,
    constant: float | None = None,
    mean_length: float = 1.0,
) -> np.ndarray:
    """c(n): the factor multiplying a group's S_q = sum_i A_i z_i in the batch gradient.

    * "prompt-mean": 1 / (Q' n), the mean over a prompt's rollouts, then over prompts; 0 at n = 0.
      ``num_prompts`` is Q', the number of prompts **that got rollouts**: a trainer averages the
      per-prompt losses of the groups in its batch, and a skipped prompt contributes no term.
    * "seq-mean": 1 / C, C = ``budget`` (the rollouts of the batch).
    * "token-mean": 1 / (C lbar), lbar = ``mean_length`` (all tokens of the batch).
    * "constant": 1 / K, K = ``constant`` (default C).

    >>> aggregation_weight("prompt-mean", [0, 2, 4], num_prompts=2, budget=6).tolist()
    [0.0, 0.25, 0.125]
    """
    check_choice("aggregation", aggregation, AGGREGATIONS)
    n = np.asarray(n, dtype=float)
    if aggregation == "prompt-mean":
        return np.where(n > 0, 1.0 / (num_prompts * np.maximum(n, 1.0)), 0.0)
    if aggregation == "seq-mean":
        return np.full(n.shape, 1.0 / budget)
    if aggregation == "token-mean":
        return np.full(n.shape, 1.0 / (budget * mean_length))
    return np.full(n.shape, 1.0 / (budget if constant is None else constant))


def binary_group_terms(
    estimator: str | Estimator, n: int, eps: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per number of successes k = 0..n: (k, A_s(k), A_f(k)), the advantages of a success and of
    a failure in a binary group of n with k successes (`Estimator.binary_group_terms`; 0 where the
    group is all equal).

    >>> [x.tolist() for x in binary_group_terms("drgrpo", 2)]
    [[0.0, 1.0, 2.0], [0.0, 0.5, 0.0], [0.0, -0.5, 0.0]]
    """
    return get_estimator(estimator).binary_group_terms(n, eps)


def batch_gradient_moments(
    counts: Any,
    success_prob: Any,
    *,
    estimator: str | Estimator,
    aggregation: str,
    eps: float = 0.0,
    constant: float | None = None,
    mean_length: float = 1.0,
    length_cv: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How the counts enter the batch gradient G = sum_q c(n_q) S_q (binary rewards, known p).

    Returns per-prompt (mean_coef, signal_sq_coef, noise_coef) with
        E G      = sum_q mean_coef_q g_q,
        E |G|^2  = sum_q signal_sq_coef_q |g_q|^2 + D s^2 sum_q noise_coef_q,
    for orthogonal prompt gradients g_q (exact sums over the number of successes).
    mean_coef = c(n) E[a]/pq,  signal_sq_coef = c(n)^2 E[(sum_i A_i (r_i - p))^2] / (pq)^2,
    noise_coef = c(n)^2 E[sum_i A_i^2], with c from `aggregation_weight` (prompt-mean averages
    over the prompts with n_q > 0).
    token-mean / constant with random lengths l = lbar (1 + delta), delta independent of rewards
    with sd ``length_cv``: the signal's square gains cv^2 E[sum_i A_i^2 (r_i - p)^2]/(pq)^2, the
    noise is unchanged; the random token count T is replaced by C lbar (error O(cv^2 / C)).

    >>> m, _, _ = batch_gradient_moments([4, 0], [0.5, 0.5], estimator="rloo", aggregation="prompt-mean")
    >>> m.tolist()  # RLOO under prompt-mean: E G = g over the one prompt that got rollouts
    [1.0, 0.0]
    """
    est = get_estimator(estimator)
    counts = np.asarray(counts, dtype=np.int64)
    p = np.asarray(success_prob, dtype=float)
    if counts.shape != p.shape or counts.ndim != 1:
        raise ValueError(f"counts and success_prob must be 1-D of equal length, got {counts.shape}, {p.shape}")
    c = aggregation_weight(
        aggregation,
        counts,
        num_prompts=int(np.count_nonzero(counts)),
        budget=int(counts.sum()),
        constant=constant,
        mean_length=mean_length,
    )
    cv2 = length_cv**2 if aggregation in ("token-mean", "constant") else 0.0
    mean_coef, sq_coef, noise_coef = (np.zeros(counts.size) for _ in range(3))
    for i, (n, pi) in enumerate(zip(counts.tolist(), p.tolist())):
        pq = pi * (1 - pi)
        if n < 2 or pq == 0:
            continue
        k, a_s, a_f = est.binary_group_terms(n, eps)
        w = binom.pmf(k, n, pi)
        a = k * a_s * (1 - pi) - (n - k) * a_f * pi  # sum_i A_i (r_i - p)
        a2 = k * a_s**2 * (1 - pi) ** 2 + (n - k) * a_f**2 * pi**2
        sumsq = k * a_s**2 + (n - k) * a_f**2
        mean_coef[i] = c[i] * (w * a).sum() / pq
        sq_coef[i] = c[i] ** 2 * ((w * a**2).sum() + cv2 * (w * a2).sum()) / pq**2
        noise_coef[i] = c[i] ** 2 * (w * sumsq).sum()
    return mean_coef, sq_coef, noise_coef

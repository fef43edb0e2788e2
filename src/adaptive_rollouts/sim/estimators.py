"""Group advantages, loss aggregation and the policy gradient of the simulated policy (numpy).

Advantages are the estimator object's (`objectives.Estimator.advantages`), whose formula the torch
``adaptive_rollouts.advantages.group_advantages`` shares (a test cross-checks them): GRPO
``(r - m) / (s + eps)`` with the unbiased std s, Dr. GRPO ``r - m``, RLOO ``n / (n - 1) (r - m)``;
singleton and zero-variance groups get 0.

Loss aggregation decides the weight w_i of rollout i in the batch gradient
``g = sum_i w_i A_i grad log pi(a_i | q_i)`` (N rollouts in the batch, L_i tokens in rollout i,
n_q rollouts of prompt q, Q' prompts with at least one rollout). The group weight c(n_q) comes
from `adaptive_rollouts.objectives.aggregation_weight`, the function the planners use; seq-mean
also divides by L_i (the token mean within a sequence):

==============  ===========================  ==============================================
aggregation     w_i                          used by
==============  ===========================  ==============================================
prompt-mean     1 / (Q' n_q)                 VIP's theory (mean per prompt, then over prompts)
seq-mean        1 / (N L_i)                  TRL ``grpo`` (token mean per sequence, then mean)
token-mean      1 / sum_j L_j                TRL ``dapo``/``bnpo``, verl ``token-mean``
constant        1 / (N_budget L_max)         Dr. GRPO, verl ``seq-mean-token-sum-norm``
==============  ===========================  ==============================================

A rollout's tokens all share its advantage and its sequence log-probability is what the policy
assigns to the answer, so the token sum of grad log-probs is grad log pi(a | q).
"""

from __future__ import annotations

import numpy as np

from adaptive_rollouts.checks.rewards import ZERO_VARIANCE_TOL
from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, check_choice
from adaptive_rollouts.objectives import Estimator, aggregation_weight, get_estimator

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "group_advantages_np",
    "aggregation_weights",
    "policy_gradient",
    "expected_gradient",
]


def group_advantages_np(
    rewards: np.ndarray,
    group: np.ndarray,
    estimator: str | Estimator = "grpo",
    eps: float = 1e-6,
    std_tol: float = ZERO_VARIANCE_TOL,
) -> np.ndarray:
    """Advantages over ragged groups; ``group`` holds dense ids 0..G-1 (`Estimator.advantages`).

    >>> group_advantages_np(np.array([1., 0., 1., 5., 0., 0.]), np.array([0, 0, 0, 1, 2, 2]), "rloo")
    array([ 0.5, -1. ,  0.5,  0. ,  0. ,  0. ])
    """
    return get_estimator(estimator).advantages(rewards, group, eps=eps, std_tol=std_tol)


def aggregation_weights(
    group: np.ndarray,
    lengths: np.ndarray,
    aggregation: str,
    budget: int,
    max_length: int,
    uniform_rows: tuple[int, int] | None = None,
) -> np.ndarray:
    """Weight of each rollout in the batch loss (see the module table).

    ``uniform_rows`` = (rollouts, prompts) of the step as Uniform fills it: the loss is normalised as
    if every cut or skipped group were still there as rows of zero advantage (N and Q' at least
    these), so a step that trains on fewer rows has Uniform's scale instead of a larger one. None:
    normalised by the rows trained on.

    >>> g, L = np.array([0, 0, 1, 1]), np.ones(4)
    >>> aggregation_weights(g, L, "seq-mean", 8, 1).tolist(), aggregation_weights(g, L, "seq-mean", 8, 1, (8, 4)).tolist()
    ([0.25, 0.25, 0.25, 0.25], [0.125, 0.125, 0.125, 0.125])
    """
    check_choice("aggregation", aggregation, AGGREGATIONS)
    g = np.asarray(group, dtype=np.int64)
    N = g.size
    if N == 0:
        return np.zeros(0)
    L = np.asarray(lengths, dtype=float)
    n = np.bincount(g)
    rows, prompts = uniform_rows if uniform_rows is not None else (0, 0)
    c = aggregation_weight(
        aggregation,
        n[g],
        num_prompts=max(int(np.count_nonzero(n)), prompts),
        budget=max(N, rows),
        constant=float(budget * max_length),
        mean_length=float(L.mean()),
    )
    return c / L if aggregation == "seq-mean" else c


def policy_gradient(features: np.ndarray, probs: np.ndarray, answers: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """sum_i coef_i grad_W log pi(a_i | q_i) for a linear-softmax policy: [d, K].

    grad_W log softmax(x W + b)[a] = x (e_a - pi)^T, so the sum is X^T (C * (E_a - Pi)).
    ``features``/``probs`` are per rollout ([N, d], [N, K]).
    """
    M = -probs * coef[:, None]
    M[np.arange(answers.size), answers] += coef
    return features.T @ M


def expected_gradient(features: np.ndarray, probs: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """Exact gradient of mean_q sum_k pi(k|q) R[q,k] with respect to W: [d, K]."""
    pr = probs * rewards
    m = pr.sum(axis=1, keepdims=True)
    return features.T @ (pr - probs * m) / features.shape[0]

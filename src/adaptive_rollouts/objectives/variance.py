"""Gradient variance of one prompt's estimate under a per-prompt-mean loss, as a function of n.

Derivations: docs/objectives.md, sections 1 and 2. Rewards are {0, 1} unless stated
(``bernoulli_variance(p, -1, 1)`` gives the {-1, +1} scale).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import binom

from ..checks.validation import ESTIMATORS, check_choice, check_probabilities
from .mixing import mixed_probability
from .pricing import allocation_cost, no_signal_cost, singleton_penalty

__all__ = [
    "VARIANCE_OBJECTIVES",
    "bernoulli_variance",
    "unit_variance",
    "drgrpo_variance",
    "rloo_variance",
    "grpo_variance",
    "grpo_variance_graded",
    "variance",
    "variance_table",
]

VARIANCE_OBJECTIVES = ESTIMATORS

# the smallest n at which each estimator's variance is defined (RLOO needs a leave-one-out baseline)
_FIRST_N = {"rloo": 2, "drgrpo": 1, "grpo": 1}


def _as_float(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=float)


def bernoulli_variance(p: Any, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Variance of a reward that is `high` with probability p and `low` otherwise:
    (high - low)^2 p (1 - p). {0, 1}: p(1-p); {-1, +1}: 4 p(1-p).

    >>> float(bernoulli_variance(0.5, -1.0, 1.0))
    1.0
    """
    p = _as_float(p)
    return (high - low) ** 2 * p * (1.0 - p)


def unit_variance(estimator: str, n: Any) -> np.ndarray:
    """f(n), the variance per unit reward variance and unit score variance: 1/(n-1) for "rloo"
    (+inf for n < 2: no leave-one-out baseline), (n-1)/n^2 for "drgrpo" (+inf for n < 1; 0 at
    n = 1, where the advantage is identically 0).

    >>> unit_variance("rloo", [1, 2, 5]).tolist(), unit_variance("drgrpo", [1, 2]).tolist()
    ([inf, 1.0, 0.25], [0.0, 0.25])
    """
    n = _as_float(n)
    if estimator == "rloo":
        with np.errstate(divide="ignore"):
            return np.where(n >= 2, 1.0 / np.maximum(n - 1.0, 1.0), np.inf)
    if estimator == "drgrpo":
        return np.where(n >= 1, (n - 1.0) / np.maximum(n, 1.0) ** 2, np.inf)
    raise ValueError(f"unit_variance is defined for 'rloo' and 'drgrpo', got {estimator!r}")


def drgrpo_variance(n: Any, reward_var: Any, score_var: float = 1.0) -> np.ndarray:
    """Dr. GRPO (A_i = r_i - mean r), per-prompt mean: s^2 sigma^2 (n-1)/n^2 (n >= 1; 0 at n = 1).

    >>> round(float(drgrpo_variance(6, bernoulli_variance(0.3, -1, 1))), 6)  # 4 p(1-p) (n-1)/n^2
    0.116667
    """
    n = _as_float(n)
    if np.any(n < 1):
        raise ValueError(f"drgrpo_variance needs n >= 1, got n={np.unique(n[n < 1]).tolist()}")
    return score_var * _as_float(reward_var) * unit_variance("drgrpo", n)


def rloo_variance(n: Any, reward_var: Any, score_var: float = 1.0) -> np.ndarray:
    """RLOO (A_i = r_i - mean of the other n-1), per-prompt mean: s^2 sigma^2 / (n-1) (n >= 2).

    >>> round(float(rloo_variance(6, bernoulli_variance(0.3))), 6)
    0.042
    """
    n = _as_float(n)
    if np.any(n < 2):
        raise ValueError(f"rloo_variance needs n >= 2 (a leave-one-out baseline), got n={np.unique(n[n < 2]).tolist()}")
    return score_var * _as_float(reward_var) * unit_variance("rloo", n)


def _grpo_variance_eps(
    p: np.ndarray, n: np.ndarray, score_var: float, eps: float, low: float, high: float
) -> np.ndarray:
    """The exact binomial sum of `grpo_variance` for eps > 0."""
    out = np.zeros(p.shape)
    for n_val in np.unique(n):
        if n_val < 2:
            continue
        sel = n == n_val
        k = np.arange(int(n_val) + 1, dtype=float)
        sd2 = (high - low) ** 2 * k * (n_val - k) / (n_val * (n_val - 1.0))
        term = (n_val - 1.0) * sd2 / (np.sqrt(sd2) + eps) ** 2
        pmf = binom.pmf(k[None, :], n_val, p[sel][:, None])
        out[sel] = score_var / n_val**2 * (pmf * term[None, :]).sum(axis=1)
    return out


def grpo_variance(
    p: Any, n: Any, score_var: float = 1.0, eps: float = 0.0, low: float = 0.0, high: float = 1.0
) -> np.ndarray:
    """GRPO (A_i = (r_i - mean r) / (unbiased std + eps)), binary rewards, per-prompt mean.

    eps = 0:  s^2 (n-1)/n^2 (1 - p^n - (1-p)^n)   (exact; n = 1 gives 0).
    eps > 0:  s^2/n^2 sum_k Binom(k; n, p) (n-1) sd_k^2/(sd_k + eps)^2, sd_k^2 =
    (high-low)^2 k (n-k) / (n (n-1)); computed exactly by summing over k (cost O(n) per entry).

    p and n broadcast. TRL uses eps = 1e-4, verl 1e-6 (both negligible unless sd_k ~ eps).

    >>> round(float(grpo_variance(0.5, 2)), 6)   # (1/4) * (1 - 1/4 - 1/4)
    0.125
    """
    p = _as_float(p)
    n = _as_float(n)
    if np.any(n < 1):
        raise ValueError(f"grpo_variance needs n >= 1, got n={np.unique(n[n < 1]).tolist()}")
    if np.any((p < 0) | (p > 1) | np.isnan(p)):
        raise ValueError("grpo_variance needs success probabilities p in [0, 1]")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got eps={eps}")
    p, n = np.broadcast_arrays(p, n)
    if eps == 0.0:
        return score_var * (n - 1.0) / n**2 * mixed_probability(p, n)
    return _grpo_variance_eps(p, n, score_var, eps, low, high)


def grpo_variance_graded(n: Any, level_probs: Any, score_var: float = 1.0) -> np.ndarray:
    """GRPO with graded rewards on finitely many levels, eps = 0:
    s^2 (n-1)/n^2 (1 - sum_v pi_v^n), where level_probs[..., v] = pi_v is the chance a rollout
    gets reward level v (rewards i.i.d., independent of the score vectors). Continuous rewards:
    the bracket is 1.

    >>> round(float(grpo_variance_graded(2, [0.5, 0.5])), 6)
    0.125
    """
    pi = _as_float(level_probs)
    if pi.ndim == 0 or np.any(pi < 0) or not np.allclose(pi.sum(axis=-1), 1.0):
        raise ValueError("level_probs must be probabilities over reward levels (last axis sums to 1)")
    n = _as_float(n)
    all_equal = (pi[..., None, :] ** n[..., :, None]).sum(axis=-1) if n.ndim else (pi**n).sum(axis=-1)
    return score_var * (n - 1.0) / n**2 * np.maximum(1.0 - all_equal, 0.0)


def variance(
    objective: str,
    n: Any,
    *,
    success_prob: Any = None,
    reward_var: Any = None,
    score_var: float = 1.0,
    eps: float = 0.0,
) -> np.ndarray:
    """Per-prompt gradient variance for "rloo" | "drgrpo" | "grpo" (binary rewards in {0, 1}
    unless ``reward_var`` is given for RLOO / Dr. GRPO).

    >>> round(float(variance("rloo", 3, success_prob=0.5)), 6)
    0.125
    """
    check_choice("objective", objective, VARIANCE_OBJECTIVES)
    if objective in ("rloo", "drgrpo"):
        if reward_var is None:
            if success_prob is None:
                raise ValueError(f"objective={objective!r} needs reward_var or success_prob")
            reward_var = bernoulli_variance(success_prob)
        fn = rloo_variance if objective == "rloo" else drgrpo_variance
        return fn(n, reward_var, score_var)
    if success_prob is None:
        raise ValueError("objective='grpo' needs success_prob")
    return grpo_variance(success_prob, n, score_var, eps)


def _table_weights(objective: str, p: np.ndarray | None, weights: Any) -> np.ndarray:
    if weights is None:
        if p is None:
            raise ValueError("variance_table needs success_prob or weights")
        return bernoulli_variance(p) if objective in ("rloo", "drgrpo") else np.ones_like(p)
    w = _as_float(weights).reshape(-1)
    if np.any(~np.isfinite(w) | (w < 0)):
        raise ValueError("weights must be finite and >= 0")
    if p is not None and p.shape != w.shape:
        raise ValueError(f"success_prob has {p.size} entries but weights {w.size}")
    return w


def variance_table(
    objective: str,
    success_prob: Any = None,
    weights: Any = None,
    *,
    upper: int,
    lower: int = 2,
    score_var: float = 1.0,
    eps: float = 0.0,
    allow_skip: bool = False,
    skip_cost: float | None = None,
    mixed: Any = None,
) -> np.ndarray:
    """Cost table [Q, upper + 1] for `solvers.solve_table`: costs[q, n] = w_q c_q(n), the
    allocation cost of `objectives.pricing` (the gradient variance, with groups that carry no
    gradient priced as skipped prompts).

    * "rloo" / "drgrpo": c(n) = f(n) = 1/(n-1) or (n-1)/n^2 for n >= 2 (times ``score_var``);
      w_q defaults to the reward variance p_q (1 - p_q) from ``success_prob`` (pass ``weights``
      for graded rewards or the posterior expectation E[p(1-p)]).
    * "grpo": c_q(n) = f(n) P(mixed) + c0 (1 - P(mixed)); needs ``success_prob`` (or ``mixed``
      [Q, upper + 1], the chance of a group that is not all equal); ``weights`` default to 1 and
      act as importance multipliers (the std normalisation cancels the reward variance).
      ``eps`` > 0 uses the exact binomial sum of `grpo_variance` for the informative part.
    * n = 1 costs w_q c0 plus `pricing.singleton_penalty`, so a 1-rollout group is used only when
      the budget forces it; n < lower is +inf; column 0 is ``w_q * skip_cost`` when
      ``allow_skip`` (required then: the variance model cannot price skipping by itself).

    >>> variance_table("rloo", success_prob=[0.5], upper=4).round(4).tolist()
    [[inf, inf, 0.25, 0.125, 0.0833]]
    """
    if lower < 0 or upper < lower:
        raise ValueError(f"need 0 <= lower <= upper, got lower={lower}, upper={upper}")
    check_choice("objective", objective, VARIANCE_OBJECTIVES)
    p = None if success_prob is None else check_probabilities(success_prob).reshape(-1)
    w = _table_weights(objective, p, weights)
    if w.size == 0:
        raise ValueError("empty batch: no prompts")
    if allow_skip and lower > 0 and skip_cost is None:
        raise ValueError("allow_skip=True needs skip_cost for a variance objective")
    price = None if not allow_skip else skip_cost
    n = np.arange(upper + 1)
    if objective == "grpo":
        if p is None and mixed is None:
            raise ValueError("objective='grpo' needs success_prob")
        if mixed is None:
            assert p is not None
            mixed = mixed_probability(p[:, None], n[None, :])
        unit = allocation_cost("grpo", n[None, :], skip_cost=price, mixed=mixed)
        if eps > 0 and p is not None:  # informative part from the exact binomial sum
            c0 = no_signal_cost("grpo", price)
            informative = grpo_variance(p[:, None], np.maximum(n, 1)[None, :], 1.0, eps)
            unit = np.where(n[None, :] >= 1, informative + c0 * (1.0 - np.asarray(mixed)), unit)
    else:
        unit = allocation_cost(objective, n, skip_cost=price)[None, :]
    with np.errstate(invalid="ignore"):
        table = np.where(np.isinf(unit), np.inf, w[:, None] * score_var * unit)
    table = np.broadcast_to(table, (w.size, upper + 1)).copy()
    table[:, 1 : max(lower, 1)] = np.inf
    if lower > 0 and not allow_skip:
        table[:, 0] = np.inf
    if lower <= 1 <= upper:
        table[:, 1] += singleton_penalty(np.where(n[None, :] == 1, np.inf, table))
    return table

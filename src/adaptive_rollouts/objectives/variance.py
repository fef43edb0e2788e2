"""Gradient variance of one prompt's estimate under a per-prompt-mean loss, as a function of n.

Derivations: docs/objectives.md, sections 1 and 2. Rewards are {0, 1} unless stated
(``bernoulli_variance(p, -1, 1)`` gives the {-1, +1} scale).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import ESTIMATORS, check_probabilities
from .centred import RLOO, DrGRPO
from .estimator import Estimator
from .grpo import GRPO
from .mixing import bernoulli_variance
from .pricing import singleton_penalty
from .registry import get_estimator

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


def _as_float(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=float)


def unit_variance(estimator: str, n: Any) -> np.ndarray:
    """f(n), the variance per unit reward variance and unit score variance: 1/(n-1) for "rloo"
    (+inf for n < 2: no leave-one-out baseline), (n-1)/n^2 for "drgrpo" (+inf for n < 1; 0 at
    n = 1, where the advantage is identically 0); GRPO's depends on p (`variance`).

    >>> unit_variance("rloo", [1, 2, 5]).tolist(), unit_variance("drgrpo", [1, 2]).tolist()
    ([inf, 1.0, 0.25], [0.0, 0.25])
    """
    return get_estimator(estimator).unit_variance(n)


def drgrpo_variance(n: Any, reward_var: Any, score_var: float = 1.0) -> np.ndarray:
    """Dr. GRPO (A_i = r_i - mean r), per-prompt mean: s^2 sigma^2 (n-1)/n^2 (n >= 1; 0 at n = 1).

    >>> round(float(drgrpo_variance(6, bernoulli_variance(0.3, -1, 1))), 6)  # 4 p(1-p) (n-1)/n^2
    0.116667
    """
    return DrGRPO().variance(n, reward_var=reward_var, score_var=score_var)


def rloo_variance(n: Any, reward_var: Any, score_var: float = 1.0) -> np.ndarray:
    """RLOO (A_i = r_i - mean of the other n-1), per-prompt mean: s^2 sigma^2 / (n-1) (n >= 2).

    >>> round(float(rloo_variance(6, bernoulli_variance(0.3))), 6)
    0.042
    """
    return RLOO().variance(n, reward_var=reward_var, score_var=score_var)


def grpo_variance(
    p: Any, n: Any, score_var: float = 1.0, eps: float = 0.0, low: float = 0.0, high: float = 1.0
) -> np.ndarray:
    """GRPO (A_i = (r_i - mean r) / (unbiased std + eps)), binary rewards, per-prompt mean
    (`objectives.grpo.GRPO.variance`). p and n broadcast. TRL uses eps = 1e-4, verl 1e-6.

    >>> round(float(grpo_variance(0.5, 2)), 6)   # (1/4) * (1 - 1/4 - 1/4)
    0.125
    """
    return GRPO().variance(n, success_prob=p, score_var=score_var, eps=eps, low=low, high=high)


def grpo_variance_graded(n: Any, level_probs: Any, score_var: float = 1.0) -> np.ndarray:
    """GRPO with graded rewards on finitely many levels (`objectives.grpo.GRPO.graded_variance`).

    >>> round(float(grpo_variance_graded(2, [0.5, 0.5])), 6)
    0.125
    """
    return GRPO().graded_variance(n, level_probs, score_var)


def variance(
    objective: str | Estimator,
    n: Any,
    *,
    success_prob: Any = None,
    reward_var: Any = None,
    score_var: float = 1.0,
    eps: float = 0.0,
) -> np.ndarray:
    """Per-prompt gradient variance for a registered estimator (binary rewards in {0, 1} unless
    ``reward_var`` is given for RLOO / Dr. GRPO).

    >>> round(float(variance("rloo", 3, success_prob=0.5)), 6)
    0.125
    """
    est = get_estimator(objective, "objective")
    return est.variance(n, success_prob=success_prob, reward_var=reward_var, score_var=score_var, eps=eps)


def _table_weights(est: Estimator, p: np.ndarray | None, weights: Any) -> np.ndarray:
    if weights is None:
        if p is None:
            raise ValueError("variance_table needs success_prob or weights")
        return est.weights(bernoulli_variance(p))
    w = _as_float(weights).reshape(-1)
    if np.any(~np.isfinite(w) | (w < 0)):
        raise ValueError("weights must be finite and >= 0")
    if p is not None and p.shape != w.shape:
        raise ValueError(f"success_prob has {p.size} entries but weights {w.size}")
    return w


def variance_table(
    objective: str | Estimator,
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
    est = get_estimator(objective, "objective")
    p = None if success_prob is None else check_probabilities(success_prob).reshape(-1)
    w = _table_weights(est, p, weights)
    if w.size == 0:
        raise ValueError("empty batch: no prompts")
    if allow_skip and lower > 0 and skip_cost is None:
        raise ValueError("allow_skip=True needs skip_cost for a variance objective")
    price = None if not allow_skip else skip_cost
    n = np.arange(upper + 1)
    unit = est.table_unit_cost(n, p, mixed, price, eps)
    with np.errstate(invalid="ignore"):
        table = np.where(np.isinf(unit), np.inf, w[:, None] * score_var * unit)
    table = np.broadcast_to(table, (w.size, upper + 1)).copy()
    table[:, 1 : max(lower, 1)] = np.inf
    if lower > 0 and not allow_skip:
        table[:, 0] = np.inf
    if lower <= 1 <= upper:
        table[:, 1] += singleton_penalty(np.where(n[None, :] == 1, np.inf, table))
    return table

"""What the variance objectives minimise: the gradient variance, with groups that carry no
gradient priced as skipped prompts.

The variance of a prompt's gradient estimate is zero when the estimate is identically zero: a
group of one rollout (no baseline: every estimator's advantage is 0) or, under GRPO's std
normalisation, a group whose rewards are all equal. Minimising the raw variance would therefore
treat a prompt that teaches nothing as the best possible outcome (99 prompts with 1 rollout and
one with 701). The allocation cost per unit weight is instead

    c(n) = f(n)                                    n >= 2, RLOO and Dr. GRPO
    c(n) = f(n) P(mixed | n) + c0 (1 - P(mixed | n))   n >= 1, GRPO (P(mixed | 1) = 0)
    c(1) = c0                                      every estimator: no signal
    c(0) = skip_cost                               a skipped prompt (when skipping is allowed)

with f(n) = 1/(n-1) (RLOO) or (n-1)/n^2 (Dr. GRPO, GRPO) and the no-signal price
c0 = ``skip_cost`` when one is given, else f(2): a prompt without signal is never better than the
noisiest group with one (RLOO 1, Dr. GRPO and GRPO 1/4). On top of that, the solvers treat a
1-rollout group as a last resort: an allocation with fewer of them always wins (`lower=1` stays
allowed; 1-rollout groups appear only when the budget is below two rollouts per prompt). With
identical priors every prompt then has the same cost curve, and the optimum is as even as the
bounds allow wherever that curve is convex on the counts in play: always for RLOO; for Dr. GRPO
from 4 rollouts per prompt on and for GRPO (p = 1/2) from 5 - below that their cost is concave
between 2 and 4 or 5 rollouts, and the exact optimum mixes groups of 2 with larger ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .estimator import Estimator
from .registry import get_estimator

__all__ = ["no_signal_cost", "allocation_cost", "unit_cost", "unit_marginal", "singleton_penalty"]


def no_signal_cost(estimator: str | Estimator, skip_cost: float | None = None) -> float:
    """c0: the price per unit weight of a group that carries no gradient.

    >>> no_signal_cost("rloo"), no_signal_cost("grpo"), no_signal_cost("grpo", skip_cost=0.5)
    (1.0, 0.25, 0.5)
    """
    return get_estimator(estimator).no_signal_cost(skip_cost)


def unit_cost(estimator: str | Estimator, n: Any) -> np.ndarray:
    """f(n) for n >= 2 (1/(n-1) RLOO, (n-1)/n^2 Dr. GRPO and GRPO), as float; other n are not
    defined here (`allocation_cost` prices them).

    >>> unit_cost("rloo", [2, 3]).tolist(), unit_cost("drgrpo", [2, 4]).tolist()
    ([1.0, 0.5], [0.25, 0.1875])
    """
    return get_estimator(estimator).unit_cost(n)


def unit_marginal(estimator: str | Estimator, n: Any) -> np.ndarray:
    """f(n + 1) - f(n) for n >= 2, in closed form (no cancellation at large n): -1/(n (n-1)) for
    RLOO, (1 + n - n^2) / (n^2 (n+1)^2) for Dr. GRPO and GRPO.

    >>> unit_marginal("rloo", [2, 3]).tolist(), float(unit_marginal("drgrpo", 2))
    ([-0.5, -0.16666666666666666], -0.027777777777777776)
    """
    return get_estimator(estimator).unit_marginal(n)


def allocation_cost(
    estimator: str | Estimator, n: Any, success_prob: Any = None, skip_cost: float | None = None, mixed: Any = None
) -> np.ndarray:
    """c(n) per unit weight (module docstring); p and n broadcast. GRPO needs ``success_prob`` (or
    ``mixed``, the chance the group is not all equal, e.g. averaged over a posterior). n = 0 costs
    ``skip_cost`` (+inf when None: skipping not priced).

    >>> allocation_cost("drgrpo", [0, 1, 2, 3]).round(4).tolist()
    [inf, 0.25, 0.25, 0.2222]
    >>> allocation_cost("grpo", [1, 2, 3], success_prob=0.5).round(4).tolist()
    [0.25, 0.25, 0.2292]
    """
    return get_estimator(estimator).allocation_cost(n, success_prob, skip_cost, mixed)


def singleton_penalty(costs: np.ndarray) -> float:
    """An amount larger than any difference between two allocations' totals on the finite
    entries of ``costs`` [Q, N]: added to the cost of a 1-rollout group, it makes every solver
    minimise the number of such groups first.

    >>> singleton_penalty(np.array([[np.inf, 0.3, 0.2], [np.inf, 0.5, 0.1]]))
    2.6
    """
    finite = np.where(np.isfinite(costs), np.abs(costs), 0.0)
    return float(1.0 + 2.0 * finite.max(axis=1, initial=0.0).sum())

"""Glue between allocators and `objectives` / `solvers`: cost tables and exact solves with
per-prompt lower bounds (rollouts already drawn this step)."""

from __future__ import annotations

import numpy as np

from .. import objectives
from ..checks.validation import ESTIMATORS, InfeasibleBudgetError, check_choice
from ..objectives import Estimator, get_estimator, power_moments, variance_table
from ..solvers.table import solve_masked
from ..types import Prediction

__all__ = ["cost_table", "solve_increments", "ESTIMATORS", "OBJECTIVES", "VARIANCES"]

OBJECTIVES = ("improvement", "variance")
VARIANCES = ("plugin", "expected")


def bernoulli_weights(prediction: Prediction, variance: str) -> np.ndarray:
    """a_q: plug-in m (1 - m) (VIP as published) or the posterior expectation E[p (1 - p)]."""
    check_choice("variance", variance, VARIANCES)
    if variance == "plugin":
        return np.asarray(prediction.plugin_bernoulli_variance, dtype=float)
    return np.asarray(prediction.expected_bernoulli_variance, dtype=float)


def cost_table(
    prediction: Prediction,
    upper: int,
    lower: int,
    *,
    objective: str,
    estimator: str | Estimator,
    variance: str = "expected",
    aggregation: str | None = None,
    skip_cost: float | None = None,
    budget: int | None = None,
    options: dict | None = None,
) -> np.ndarray:
    """[Q, upper + 1] cost of giving prompt q n rollouts (lower is better).

    objective "variance": the per-prompt gradient variance a_q f(n) of `objectives.variance_table`
    (column 0, a skipped prompt, costs a_q skip_cost when skip_cost is given, else +inf);
    objective "improvement": minus the expected one-step improvement of
    `objectives.improvement_table`, which uses the posterior, not the plug-in, p;
    `budget` is its total_budget (n_bar of the prompt-mean weight), `options` its other keywords
    (lr_noise, noise_ratio, eps, constant).
    """
    check_choice("objective", objective, OBJECTIVES)
    est = get_estimator(estimator)
    if objective == "variance":
        mean = np.clip(np.asarray(prediction.mean, dtype=float), 0.0, 1.0)
        if est.cost_depends_on_p and variance == "expected":
            return _expected_table(est, mean, np.asarray(prediction.var, dtype=float), upper, lower, skip_cost)
        # the estimator's weights: the reward variance (RLOO, Dr. GRPO) or, where the std
        # normalisation cancels it (GRPO), plain importances (ones)
        weights = est.weights(bernoulli_weights(prediction, variance))
        return np.asarray(
            objectives.variance_table(
                est,
                success_prob=mean,
                weights=weights,
                upper=upper,
                lower=lower,
                allow_skip=skip_cost is not None,
                skip_cost=skip_cost,
            ),
            dtype=float,
        )
    kwargs = {"estimator": est, **(options or {})}
    if aggregation is not None:
        kwargs["aggregation"] = aggregation
    if budget is not None:
        kwargs.setdefault("total_budget", budget)
    mean = np.clip(np.asarray(prediction.mean, dtype=float), 0.0, 1.0)
    gain = np.asarray(
        objectives.improvement_table(Prediction(mean, np.asarray(prediction.var, dtype=float)), upper, **kwargs),
        dtype=float,
    )
    return -gain


def _expected_table(
    est: Estimator, mean: np.ndarray, var: np.ndarray, upper: int, lower: int, skip_cost: float | None
) -> np.ndarray:
    """The allocation cost (eps = 0) of an estimator whose cost depends on p (GRPO) averaged over the
    posterior p ~ Beta(mean, var):
    (n-1)/n^2 P(mixed) + c0 (1 - P(mixed)) with P(mixed) = 1 - E[p^n] - E[q^n] (groups that carry no
    gradient priced as skipped prompts, `objectives.pricing`); the plug-in table when var = 0."""
    n = np.arange(upper + 1, dtype=float)
    mixed = np.where(n[None, :] >= 1, 1.0 - power_moments(mean, np.clip(var, 0.0, None), np.maximum(n, 1.0)), 0.0)
    return variance_table(
        est,
        weights=est.weights(np.ones(mean.size)),
        mixed=np.maximum(mixed, 0.0),
        upper=upper,
        lower=lower,
        allow_skip=skip_cost is not None,
        skip_cost=skip_cost,
    )


def solve_increments(
    table: np.ndarray, current: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool
) -> np.ndarray | None:
    """Exact increments d_q >= 0, sum d = budget, minimising sum_q table[q, current_q + d_q],
    subject to current_q + d_q in [lower, upper] (or 0 when allow_skip and current_q == 0).
    Returns None when no such increments exist (e.g. a budget of 1 with only skipped prompts)."""
    q = table.shape[0]
    current = np.asarray(current, dtype=np.int64)
    span = upper - int(current.min())
    d = np.arange(span + 1)
    target = current[:, None] + d[None, :]
    inc = np.full((q, span + 1), np.inf)
    ok = target <= upper
    inc[ok] = table[np.nonzero(ok)[0], target[ok]]
    below = (target > 0) & (target < lower)  # a group of 1..lower-1 is not allowed
    if not allow_skip:
        below |= target == 0
    inc[below] = np.inf
    reachable = np.isfinite(inc)
    if not reachable.any(axis=1).all():
        return None
    try:  # inc is masked (+inf = not allowed): the table kernel's own range check decides
        increments = solve_masked(inc, budget)[0].astype(np.int64)
    except InfeasibleBudgetError:  # no allocation of the allowed increments sums to `budget` exactly
        return None
    if increments.sum() != budget or not reachable[np.arange(q), increments].all():
        raise RuntimeError(f"internal error: increments {increments.tolist()} break the bounds")
    return increments

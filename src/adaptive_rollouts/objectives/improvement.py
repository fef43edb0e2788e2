"""Expected one-step improvement of giving a prompt n rollouts, averaged over the predictor's
Beta belief about p (docs/objectives.md, section 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import AGGREGATIONS, check_choice
from ..types import Prediction
from .aggregation import aggregation_weight
from .estimator import Estimator
from .grpo import EXACT_UP_TO, grpo_moment_table
from .registry import get_estimator

__all__ = ["group_moments", "grpo_moment_table", "improvement_table"]


def group_moments(
    estimator: str | Estimator,
    n: Any,
    mean: Any,
    var: Any = 0.0,
    *,
    eps: float = 0.0,
    exact_up_to: int = EXACT_UP_TO,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior moments of one binary-reward group of n rollouts (p ~ Beta(mean, var)).

    Returns (signal, second, noise), arrays broadcast over (mean, n):
      signal = E[pq a]   (E <grad J_q, S_q> / kappa with |g_q|^2 = kappa p^2 q^2: the logistic
                          link, g = pq grad logit),
      second = E[a^2]    (E |signal part of S_q|^2 / kappa),
      noise  = E[sum A_i^2]  (E |noise part of S_q|^2 / (D s^2)).
    Dr. GRPO / RLOO use binomial factorial moments and Beta moments (closed form). GRPO sums over
    k exactly for n <= exact_up_to; above, E[pq a] uses S_k ~ sqrt(pq) (relative error O(1/(n pq))).
    n = 0 or 1 gives zeros (no group / a singleton has advantage 0).

    >>> [round(float(x), 4) for x in group_moments("drgrpo", 4, 0.5)]  # E[pq a] = (n-1) p^2 q^2
    [0.1875, 0.6562, 0.75]
    """
    est = get_estimator(estimator)
    n, mean, var = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n, mean, var)))
    return est.group_moments(n, mean, var, eps=eps, exact_up_to=exact_up_to)


def _belief(prediction_or_p: Any) -> tuple[np.ndarray, np.ndarray]:
    """(mean, var) of a Prediction-like object, or (p, 0) for plain probabilities, checked."""
    if isinstance(prediction_or_p, Prediction) or (
        hasattr(prediction_or_p, "mean")
        and hasattr(prediction_or_p, "var")
        and not isinstance(prediction_or_p, np.ndarray)
    ):
        mean = np.asarray(prediction_or_p.mean, dtype=float).reshape(-1)
        var = np.asarray(prediction_or_p.var, dtype=float).reshape(-1)
    else:
        mean = np.asarray(prediction_or_p, dtype=float).reshape(-1)
        var = np.zeros_like(mean)
    if mean.size == 0:
        raise ValueError("empty batch: no prompts")
    if np.any(~np.isfinite(mean) | (mean < 0) | (mean > 1)):
        raise ValueError(f"success probabilities must lie in [0, 1], got {mean[~((mean >= 0) & (mean <= 1))][:5]}")
    if np.any(~np.isfinite(var) | (var < 0)):
        raise ValueError("prediction.var must be finite and >= 0")
    if var.shape != mean.shape:
        raise ValueError(f"prediction mean has {mean.size} entries but var {var.size}")
    return mean, var


def improvement_table(
    prediction_or_p: Any,
    upper: int,
    *,
    aggregation: str = "seq-mean",
    estimator: str | Estimator = "grpo",
    lr_noise: float = 0.01,
    noise_ratio: float = 0.25,
    total_budget: int | None = None,
    eps: float = 0.0,
    constant: float | None = None,
) -> np.ndarray:
    """Expected one-step improvement of giving prompt q n rollouts: GAIN table [Q, upper + 1]
    (higher is better; column 0 = 0: a skipped prompt gains nothing). Maximise with
    ``solve_table(-improvement_table(...), ...)``.

        gain_q(n) = w(n) E[pq a] - lr_noise w(n)^2 (E[a^2] + noise_ratio E[sum A^2])

    with w(n) = C c(n) the relative weight of `aggregation_weight` (1 for seq-mean and token-mean,
    1 / ``constant`` for "constant" with ``constant`` = K / C (default 1), n_bar / n for
    prompt-mean with n_bar = C / Q, C = ``total_budget``, default 8 per prompt), expectations over
    the posterior p ~ Beta(mean, var) and the group's rewards (`group_moments`);
    lr_noise = L eta Q / (2 C) (the step size, dimensionless), noise_ratio = D s^2 / kappa
    (per-sample score noise relative to the prompt's signal). Derivation and assumptions:
    docs/objectives.md, section 4.

    >>> t = improvement_table(np.array([0.5, 0.02]), 4, estimator="drgrpo")
    >>> bool(t[0, 4] > t[1, 4]) and t[:, 0].tolist() == [0.0, 0.0]
    True
    """
    mean, var = _belief(prediction_or_p)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    est = get_estimator(estimator)
    if upper < 0:
        raise ValueError(f"upper must be >= 0, got upper={upper}")
    if lr_noise < 0 or noise_ratio < 0:
        raise ValueError(f"lr_noise and noise_ratio must be >= 0, got {lr_noise}, {noise_ratio}")
    q = mean.size
    n = np.arange(upper + 1, dtype=float)
    # a zero budget allows only the empty allocation: any positive C gives the same (unused) table
    budget = 8.0 * q if total_budget is None else max(float(total_budget), 1.0)
    # the planner's Q' is the batch size Q: which prompts will be skipped is what it decides
    c = aggregation_weight(
        aggregation, n, num_prompts=q, budget=budget, constant=None if constant is None else constant * budget
    )
    w = c / aggregation_weight("seq-mean", 1.0, num_prompts=q, budget=budget)  # C c(n), exactly 1 for seq-mean
    sig, sec, noi = est.moment_table(mean, var, upper, eps=eps)
    gain = w * sig - lr_noise * w**2 * (sec + noise_ratio * noi)
    gain[:, 0] = 0.0
    return gain

"""Per-prompt objectives: how the number of rollouts n shapes the policy-gradient estimate.

* `estimator` / `centred` / `grpo` / `registry`: one object per advantage estimator (GRPO, Dr. GRPO,
  RLOO) holding its advantages, variance, price and moments; `get_estimator` resolves a name.

* `variance`: gradient variance under a per-prompt-mean loss (RLOO, Dr. GRPO, GRPO; graded rewards)
  and its cost table for the solvers.
* `aggregation`: the weight of a prompt's group in the batch gradient under each loss aggregation,
  and how the counts enter the batch gradient's moments.
* `improvement`: expected one-step improvement (gain table), averaged over the predictor's belief.
* `beta`: the Beta belief fitted to a prediction, and its moments.

Derivations and their assumptions: docs/objectives.md.
"""

from __future__ import annotations

from ..checks.validation import AGGREGATIONS, ESTIMATORS
from .aggregation import aggregation_weight, batch_gradient_moments
from .beta import beta_from_moments, beta_mean_var, beta_moment, power_moments
from .centred import RLOO, DrGRPO
from .estimator import CentredEstimator, Estimator
from .grpo import GRPO
from .improvement import group_moments, grpo_moment_table, improvement_table
from .mixing import mixed_probability
from .registry import get_estimator
from .variance import (
    VARIANCE_OBJECTIVES,
    bernoulli_variance,
    drgrpo_variance,
    grpo_variance,
    grpo_variance_graded,
    rloo_variance,
    unit_variance,
    variance,
    variance_table,
)

__all__ = [
    "AGGREGATIONS",
    "CentredEstimator",
    "DrGRPO",
    "ESTIMATORS",
    "Estimator",
    "GRPO",
    "RLOO",
    "get_estimator",
    "VARIANCE_OBJECTIVES",
    "aggregation_weight",
    "batch_gradient_moments",
    "bernoulli_variance",
    "beta_from_moments",
    "beta_mean_var",
    "beta_moment",
    "drgrpo_variance",
    "group_moments",
    "grpo_moment_table",
    "grpo_variance",
    "grpo_variance_graded",
    "improvement_table",
    "mixed_probability",
    "power_moments",
    "rloo_variance",
    "unit_variance",
    "variance",
    "variance_table",
]

"""VIP: predict each prompt's success probability, then allocate to minimise gradient variance."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import (
    AGGREGATIONS,
    check_choice,
    check_lower_upper,
    check_probabilities,
    check_weights,
)
from ..objectives import get_estimator
from ..solvers import reachable_upper, solve_allocation, solve_bounded
from ..types import Prediction
from ._objective import VARIANCES, bernoulli_weights, cost_table
from .predictive import PredictiveAllocator

__all__ = ["VIP"]


class VIP(PredictiveAllocator):
    """Variance-Informed Predictive allocation (Nguyen et al., arXiv 2602.01601, ICLR 2026).

    Rule: predict p_q, set a_q = p_q (1 - p_q), then

        minimise  sum_q a_q f(n_q)   s.t.  sum_q n_q = C,  L <= n_q <= U,

    with f(n) = 1/(n-1) (RLOO), (n-1)/n^2 (Dr. GRPO) or the GRPO variance of `objectives`, solved
    exactly by `solvers.allocate` (its kernel `solve_allocation`); after the step the predictor is updated with the rewards.

    Options: `estimator` ("rloo" as in the paper's runs, "drgrpo", "grpo"); `lower` / `upper`;
    `predictor` ("paper-gp" = `PaperGP`, the paper's GP; "gp" = our `GaussianProcess`, the default;
    or any Predictor object); `variance` ("plugin" a = m(1-m) as published, or "expected"
    E[p(1-p)] = m(1-m) - Var[p] from the posterior); `aggregation` (None = the paper's
    per-prompt-mean variance objective; a loss aggregation name - "prompt-mean", "seq-mean",
    "token-mean", "constant" - switches to the expected-improvement objective of
    `objectives.improvement_table` for that aggregation (docs/objectives.md, section 4), with
    `improvement_options` such as lr_noise / noise_ratio passed through; it prices skipping, so
    `allow_skip=True` needs no `skip_cost` there).

    What is minimised: ``sum_q a_q c(n_q)`` with c the allocation cost of `objectives.pricing` -
    the variance f(n) above, where a group that carries no gradient (1 rollout; under GRPO an
    all-equal group) is priced as a skipped prompt (``skip_cost``, else f(2)), and 1-rollout groups
    are used only when the budget is below 2 per prompt (``lower=1`` is allowed).

    First step (no data yet): the predictor returns its prior, the same p for every prompt, so
    every a_q is equal and the allocation is as even as the bounds allow (the solver breaks ties)
    for RLOO, and for Dr. GRPO / GRPO from 4 / 5 rollouts per prompt on (below that their cost is
    concave in n and the optimum mixes groups of 2 with larger ones).
    With no arguments, `VIP()` works on prompt texts: the default offline MiniLM encoder and our
    GP are created on first use.

    >>> import numpy as np
    >>> from adaptive_rollouts.types import Prediction
    >>> class Known:  # a predictor stub that knows p
    ...     def __init__(self, p): self.p = dict(p)
    ...     def predict(self, prompts):
    ...         m = np.array([self.p[x] for x in prompts]); return Prediction(m, np.zeros_like(m))
    ...     def update(self, prompts, rewards): pass
    ...     def state_dict(self): return {}
    ...     def load_state_dict(self, state): pass
    >>> p = dict(zip("abcdefgh", [.01, .1, .2, .4, .5, .8, .95, .99]))
    >>> VIP(Known(p), estimator="rloo", lower=4, upper=12).plan(list("abcdefgh"), 64).counts.tolist()
    [4, 7, 10, 11, 12, 10, 6, 4]
    """

    name = "vip"

    def __init__(
        self,
        predictor: Any = "gp",
        *,
        features: Any = None,
        estimator: str = "rloo",
        lower: int = 2,
        upper: int | None = None,
        variance: str = "plugin",
        aggregation: str | None = None,
        allow_skip: bool = False,
        skip_cost: float | None = None,
        improvement_options: dict | None = None,
        seed: int | None = 0,
    ):
        super().__init__(predictor, features, seed)
        get_estimator(estimator)  # an unknown name is refused here, where it enters
        check_choice("variance", variance, VARIANCES)
        if aggregation is not None:
            check_choice("aggregation", aggregation, AGGREGATIONS)
        lower, upper = check_lower_upper(lower, upper)
        self.estimator, self.variance, self.aggregation = estimator, variance, aggregation
        self.lower, self.upper, self.allow_skip = lower, upper, bool(allow_skip)
        self.skip_cost = skip_cost
        self.improvement_options = dict(improvement_options or {})
        if allow_skip and aggregation is None and skip_cost is None:
            raise ValueError(
                "allow_skip=True with the paper's variance objective needs skip_cost "
                "(or set aggregation= for the improvement objective, which prices skipping)"
            )

    def weights(self, prediction: Prediction) -> np.ndarray:
        """a_q: the estimator's weights from the reward variance (ones for GRPO, whose std
        normalisation cancels it)."""
        return get_estimator(self.estimator).weights(bernoulli_weights(prediction, self.variance))

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        assert prediction is not None
        if self.aggregation is not None:  # expected improvement for the trainer's aggregation
            return self._solve_table(prediction, budget, "improvement")
        if get_estimator(self.estimator).cost_depends_on_p and self.variance == "expected":
            return self._solve_table(prediction, budget, "variance")  # posterior-averaged cost (GRPO)
        # the budget was checked by `plan`; the predictor's output is checked here, where it enters
        weights = check_weights(self.weights(prediction), "weights from the prediction")
        p = check_probabilities(np.clip(np.asarray(prediction.mean, dtype=float), 0, 1), "prediction.mean")
        return solve_allocation(
            weights, budget, self.lower, self.upper, self.estimator, p, self.allow_skip, self.skip_cost
        )

    def _solve_table(self, prediction: Prediction, budget: int, objective: str) -> np.ndarray:
        """The exact optimum of a per-prompt cost table (`cost_table`) for `objective`."""
        upper = reachable_upper(len(prediction.mean), budget, self.lower, self.upper, self.allow_skip)
        table = cost_table(
            prediction,
            upper,
            self.lower,
            objective=objective,
            estimator=self.estimator,
            variance=self.variance,
            aggregation=self.aggregation,
            budget=budget,
            options=self.improvement_options,
            skip_cost=self.skip_cost if self.allow_skip and objective == "variance" else None,
        )
        return solve_bounded(table, budget, self.lower, upper, allow_skip=self.allow_skip)

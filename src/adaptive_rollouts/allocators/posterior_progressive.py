"""PosteriorProgressive: progressive rounds like VIGOR, but planned from the predictor and refined
by the per-step posterior that combines the prediction with the outcomes already seen this step."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..checks.validation import AGGREGATIONS, ESTIMATORS, check_choice, check_lower_upper, check_prompts, check_range
from ..objectives import beta_from_moments, beta_mean_var
from ..solvers import reachable_upper
from ..types import Prediction, Prompt, Rewards, SampleFn, StateDict
from ._objective import OBJECTIVES, cost_table, solve_increments
from .base import BaseAllocator, RolloutCollector
from .predictive import PredictorSlot

__all__ = ["PosteriorProgressive", "Round", "beta_prior", "beta_posterior"]


def beta_prior(prediction: Prediction, max_strength: float) -> tuple[np.ndarray, np.ndarray]:
    """Beta(a, b) with the prediction's mean and variance (moment matching); the strength a + b
    = m(1-m)/v - 1 is capped at `max_strength` pseudo-rollouts, so an over-confident predictor
    (v -> 0) can still be overruled by this step's rollouts."""
    return beta_from_moments(prediction.mean, prediction.var, min_strength=0.1, max_strength=max_strength)


def beta_posterior(a: np.ndarray, b: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> Prediction:
    """Posterior mean and variance of p after `successes` in `trials` (graded rewards: their sum
    counts as fractional successes, a pseudo-count approximation)."""
    return Prediction(*beta_mean_var(a + successes, b + trials - successes))


class Round(NamedTuple):
    """What one round of a step is planned from."""

    number: int  # 0 for the step's first round
    belief: Prediction  # Beta posterior of p: the prediction updated with this step's rollouts
    counts: np.ndarray  # rollouts drawn per prompt so far in this step
    size: int  # rollouts to spend in this round
    upper: int  # per-prompt upper bound
    budget: int  # the whole step's budget
    prior_strength: np.ndarray  # a + b of the prediction's Beta prior, in pseudo-rollouts


class PosteriorProgressive(BaseAllocator):
    """Prior-informed progressive allocation (this library's method; docs/allocators.md).

    Rule: the budget C is spent in R rounds of sizes C_r = round(C f_r) (f = `round_fractions`).
    Before round r every prompt has a belief Beta(a_q + s_q, b_q + k_q - s_q): the predictor's
    (mean, var) moment-matched to Beta(a_q, b_q), updated with the s_q successes among the k_q
    rollouts already drawn for q in this step. With cost_q(n) the objective under that belief,
    round r draws increments d_q >= 0 with sum d_q = C_r solving exactly

        minimise  sum_q cost_q(k_q + d_q)   s.t.  k_q + d_q in {0 if allowed} U [L, U],

    i.e. it spends the round where the expected reduction of the objective per rollout is largest.
    Round one uses the prediction alone (not a flat m0 each, as VIGOR does); later rounds never tie
    at the same two-sample outcome, because the prior still separates prompts, and a prompt with
    two equal rewards but a confident mid-range prediction is not written off (VIGOR's false
    negatives). The first round gets at least L Q rollouts when skipping is not allowed.

    objective: "variance" (a_q f(n) with a_q = E[p(1-p)] under the belief) or "improvement"
    (expected one-step improvement of `objectives.improvement_table`, for `aggregation`:
    "prompt-mean" | "seq-mean" (TRL grpo) | "token-mean" (DAPO, verl token-mean) | "constant"
    (Dr. GRPO); None = that function's default, "seq-mean"; `improvement_options` such as
    lr_noise / noise_ratio pass through). `estimator` ("grpo" by default, as TRL's GRPOTrainer and
    verl's GRPO; "rloo", "drgrpo") must match the trainer's advantages.
    Default: "improvement". Skipping a prompt
    (`allow_skip`) is priced by the improvement objective (gain 0); the variance objective needs an
    explicit `skip_cost` (a skipped prompt costs a_q skip_cost).
    max_prior_strength (default 8 pseudo-rollouts, from benchmarks/aggregation.py: tuned over {2, 8, 64}
    on the simulator's tune seeds, confirmed on its test seeds) caps how far the prediction is
    trusted against this step's rollouts.
    Upper default: min(C, max(4 ceil(C/Q), 32)) - caps the solve, and is never binding at C = 8Q
    for typical spreads. A round whose size cannot be spent exactly within the bounds (e.g. one
    rollout while every prompt is skipped) is carried into the next round.

    >>> import numpy as np
    >>> from adaptive_rollouts.types import Prediction
    >>> class Known:
    ...     def __init__(self, p): self.p = dict(p)
    ...     def predict(self, prompts):
    ...         m = np.array([self.p[x] for x in prompts]); return Prediction(m, np.full(m.size, 0.01))
    ...     def update(self, prompts, rewards): pass
    ...     def state_dict(self): return {}
    ...     def load_state_dict(self, state): pass
    >>> def sample(idx, counts):  # "b" (index 1) always fails, the others alternate
    ...     return [np.zeros(c) if i == 1 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
    >>> alloc = PosteriorProgressive(Known({"a": 0.5, "b": 0.05, "c": 0.5}), objective="variance",
    ...                              estimator="rloo")
    >>> [len(r) for r in alloc.run(["a", "b", "c"], 24, sample)]  # rounds of 12, 6, 6
    [10, 4, 10]
    """

    name = "posterior-progressive"
    aggregation_aware = True

    def __init__(
        self,
        predictor: Any = "gp",
        *,
        features: Any = None,
        round_fractions: Sequence[float] = (0.5, 0.25, 0.25),
        objective: str | None = None,
        estimator: str = "grpo",
        aggregation: str | None = None,
        lower: int = 2,
        upper: int | None = None,
        allow_skip: bool = False,
        skip_cost: float | None = None,
        improvement_options: dict | None = None,
        max_prior_strength: float = 8.0,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        fractions = np.asarray(round_fractions, dtype=float)
        if fractions.ndim != 1 or fractions.size < 1 or np.any(fractions <= 0) or abs(fractions.sum() - 1) > 1e-9:
            raise ValueError(f"round_fractions must be positive and sum to 1, got {list(round_fractions)}")
        check_choice("estimator", estimator, ESTIMATORS)
        if aggregation is not None:
            check_choice("aggregation", aggregation, AGGREGATIONS)
        if objective is not None:
            check_choice("objective", objective, OBJECTIVES)
        lower, upper = check_lower_upper(lower, upper)
        max_prior_strength = check_range(max_prior_strength, "max_prior_strength", 0.0, None)  # finite, > 0
        self.slot = PredictorSlot(predictor, features)
        self.round_fractions = fractions
        self._objective = objective
        self.estimator, self.aggregation = estimator, aggregation
        self.lower, self.upper, self.allow_skip = int(lower), upper, bool(allow_skip)
        self.max_prior_strength = float(max_prior_strength)
        self.skip_cost = skip_cost
        self.improvement_options = dict(improvement_options or {})
        if allow_skip and objective == "variance" and skip_cost is None:
            raise ValueError(
                "allow_skip=True with objective='variance' needs skip_cost: the variance model "
                "cannot price the signal a skipped prompt loses (use objective='improvement')"
            )

    @property
    def predictor(self) -> Any:
        return self.slot.predictor

    @property
    def objective(self) -> str:
        return "improvement" if self._objective is None else self._objective

    @property
    def rounds(self) -> int:
        return int(self.round_fractions.size)

    def effective_upper(self, q: int, budget: int) -> int:
        """``upper`` (default: max(4 ceil(C / Q), 32)), lowered to what one prompt can reach
        (`solvers.reachable_upper`)."""
        cap = self.upper if self.upper is not None else max(4 * math.ceil(budget / q), 32, self.lower)
        return reachable_upper(q, budget, self.lower, cap, self.allow_skip)

    def round_budgets(self, q: int, budget: int) -> list[int]:
        """Rollouts per round: cumulative rounding of C f_r; round one >= L Q without skipping."""
        marks = np.round(np.cumsum(self.round_fractions) * budget).astype(np.int64)
        marks[-1] = budget
        if not self.allow_skip:
            marks = np.maximum(marks, min(self.lower * q, budget))
        return np.diff(np.concatenate([[0], marks])).tolist()

    def _table(self, belief: Prediction, upper: int, budget: int) -> np.ndarray:
        return cost_table(
            belief,
            upper,
            self.lower,
            objective=self.objective,
            estimator=self.estimator,
            variance="expected",
            aggregation=self.aggregation,
            budget=budget,
            options=self.improvement_options,
            skip_cost=self.skip_cost if self.allow_skip and self.objective == "variance" else None,
        )

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        start = time.perf_counter()
        prompts = check_prompts(prompts)
        budget = self._check_budget(prompts, budget)
        self._check_storable(prompts)  # before any rollout is drawn
        q = len(prompts)
        upper = self.effective_upper(q, budget)  # holds the budget: Q upper >= C once _check_budget passed
        prediction = self.predictor.predict(prompts)
        a, b = beta_prior(prediction, self.max_prior_strength)
        collector = RolloutCollector(prompts, sample)
        carry = 0
        budgets = self.round_budgets(q, budget)
        for r, round_budget in enumerate(budgets):
            round_budget += carry
            if round_budget == 0:
                continue
            successes = np.array([g.sum() for g in collector.rewards()])
            belief = beta_posterior(a, b, successes, collector.scored.astype(float))
            inc = self._round_increments(Round(r, belief, collector.counts, round_budget, upper, budget, a + b))
            if inc is None:  # this round's size cannot be spent exactly (e.g. 1 rollout, all skipped)
                if r == len(budgets) - 1:
                    raise RuntimeError(
                        f"internal error: cannot spend the last {round_budget} rollouts within [{self.lower}, {upper}]"
                    )
                carry = round_budget
                continue
            carry = 0
            collector.draw(inc)
        self._check_counts(collector.counts, budget, upper)
        rewards = collector.rewards()
        seen = [i for i, r in enumerate(rewards) if r.size]
        if seen:
            self.predictor.update([prompts[i] for i in seen], [rewards[i] for i in seen])
        return self._finish(prompts, collector, start, prediction)

    def _round_increments(self, rnd: Round) -> np.ndarray | None:
        """The round's increments: the exact minimiser of the objective under its belief (None when
        its size cannot be spent within the bounds). Subclasses may temper it."""
        table = self._table(rnd.belief, rnd.upper, rnd.budget)
        return solve_increments(table, rnd.counts, rnd.size, self.lower, rnd.upper, self.allow_skip)

    def _extra_state(self) -> StateDict:
        return {"predictor": self.slot.state_dict()}

    def _load_extra_state(self, state: StateDict) -> None:
        self.slot.load_state_dict(state["predictor"])

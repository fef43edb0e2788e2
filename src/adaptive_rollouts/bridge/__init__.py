"""The bridge between any trainer and any allocator (no torch, TRL or verl here).

A trainer plug-in adapts its framework's hooks and calls, for everything else, these functions:

1. settings -> ``estimator`` / ``aggregation`` (`settings`), then `build_allocator` from a name, a
   ``"package.module:Class"`` or an object, with the user's options (`build`);
2. prompts are dataset rows (`keys.row_key`); their texts reach predictors that embed text through
   `text_features` (`prompts`), and `prompt_text` reads a prompt's text;
3. per step: `TrainerStep` (`step`) owns the whole step: ``run(keys, budget, generate)`` wraps the
   trainer's own round ``generate(indices, counts) -> raw rewards`` into the allocator's ``sample``
   (or ``plan`` / ``observe`` where `is_single_shot`), maps each round's raw rewards to the
   allocator's success signal (`scored_draw`), holds the counts to the allocator's kind
   (`check_counts` / `check_spent`), times the allocator, runs the ``policy_features`` pass for an
   allocator that reads it, and returns a `StepResult`: counts, successes, raw rewards, unscored,
   rounds, allocator seconds, the metrics (computed once; ``tokens_spent`` / ``tokens_saved`` when
   ``generate`` answers with completion lengths, `Generated`), the regime fingerprints and the
   running totals; `StepResult.log` is what the trainer logs;
4. `step_values` / `step_log` (`logs`): the standard metrics and log of counts and successes a
   trainer already has (what `TrainerStep` computes for an allocator without ``last_metrics``).
"""

from __future__ import annotations

from .book import Generated, PerPrompt, RoundFn, RoundIncomplete, RunningTotals, StepBook
from .build import (
    DEFAULT_NAMES,
    OptionsError,
    allocator_factory,
    build_allocator,
    check_options,
    configure_allocator,
    load_object,
)
from .logs import scalar, step_log, step_values
from .prompts import TEXT_PREDICTORS, needs_pool, needs_text, prompt_text, text_features
from .settings import trl_aggregation, trl_estimator, verl_aggregation, verl_estimator
from .step import NOT_LOGGED, PlannedStep, StepResult, TrainerStep, check_policy_features, round_clock
from .steps import (
    allocator_kind,
    check_counts,
    check_request,
    check_spent,
    is_single_shot,
    plan_or_prompts,
    scored_draw,
    scored_successes,
)

__all__ = [
    "DEFAULT_NAMES",
    "Generated",
    "NOT_LOGGED",
    "PerPrompt",
    "PlannedStep",
    "RoundFn",
    "RoundIncomplete",
    "RunningTotals",
    "StepBook",
    "StepResult",
    "TrainerStep",
    "round_clock",
    "check_policy_features",
    "OptionsError",
    "TEXT_PREDICTORS",
    "allocator_factory",
    "allocator_kind",
    "build_allocator",
    "check_counts",
    "check_options",
    "check_request",
    "check_spent",
    "configure_allocator",
    "is_single_shot",
    "load_object",
    "needs_pool",
    "needs_text",
    "plan_or_prompts",
    "prompt_text",
    "scalar",
    "scored_draw",
    "scored_successes",
    "step_log",
    "step_values",
    "text_features",
    "trl_aggregation",
    "trl_estimator",
    "verl_aggregation",
    "verl_estimator",
]

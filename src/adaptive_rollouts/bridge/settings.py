"""What each trainer's loss and advantage settings mean for the allocator: its ``estimator`` (one
of `checks.validation.ESTIMATORS`) and ``aggregation`` (one of `checks.validation.AGGREGATIONS`).
One table and one function per trainer setting; a new trainer adds its own here.

TRL (``GRPOConfig``): `trl_aggregation` of ``loss_type``, `trl_estimator` of ``scale_rewards`` /
``advantage_estimator`` / ``multi_objective_aggregation``.
verl: `verl_aggregation` of ``actor.loss_agg_mode``, `verl_estimator` of ``algorithm.adv_estimator``
and ``norm_adv_by_std_in_grpo``; each with the ``adaptive.`` override (``"auto"``: follow verl).
"""

from __future__ import annotations

from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, check_choice

__all__ = [
    "AGGREGATION_FROM_LOSS_AGG_MODE",
    "ESTIMATOR_FROM_ADV_ESTIMATOR",
    "LOSS_TYPE_AGGREGATION",
    "MULTI_OBJECTIVE",
    "SCALE_REWARDS",
    "normalize_scale_rewards",
    "trl_aggregation",
    "trl_estimator",
    "verl_aggregation",
    "verl_estimator",
]

# TRL loss_type -> how the loss weighs the rollouts of a batch:
#   seq-mean: each completion's token mean, averaged over completions ("grpo", "sapo")
#   token-mean: every token alike over the batch ("bnpo", "dapo", "cispo", "vespo")
#   constant: sum over tokens / a constant ("dr_grpo": batch x max_completion_length, "luspo": batch)
LOSS_TYPE_AGGREGATION = {
    "grpo": "seq-mean",
    "sapo": "seq-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "cispo": "token-mean",
    "vespo": "token-mean",
    "dr_grpo": "constant",
    "luspo": "constant",
}
SCALE_REWARDS = ("group", "none", "batch")
MULTI_OBJECTIVE = ("sum_then_normalize", "normalize_then_sum")

# verl actor.loss_agg_mode -> aggregation: how a sequence's score is weighted in the batch gradient
# (verl.trainer.ppo.core_algos.agg_loss). seq-mean-token-sum and token-sum divide a token sum by a
# number fixed before the step (the mini-batch's sequence count, or nothing), so every token weighs
# the same constant: "constant".
AGGREGATION_FROM_LOSS_AGG_MODE = {
    "token-mean": "token-mean",
    "seq-mean-token-mean": "seq-mean",
    "seq-mean-token-sum": "constant",
    "seq-mean-token-sum-norm": "constant",
    "token-sum": "constant",
}

# verl algorithm.adv_estimator -> estimator of adaptive_rollouts.advantages.group_advantages.
# adaptive_<name> are the verl plug-in's estimators (integrations.verl.advantage), one per ESTIMATORS.
ESTIMATOR_FROM_ADV_ESTIMATOR = {
    **{f"adaptive_{name}": name for name in ESTIMATORS},
    "grpo": "grpo",
    "rloo": "rloo",
    "rloo_vectorized": "rloo",
}


def trl_aggregation(loss_type: str) -> str:
    """The aggregation implied by TRL's ``loss_type``.

    >>> trl_aggregation("dr_grpo"), trl_aggregation("luspo")
    ('constant', 'constant')
    """
    try:
        return LOSS_TYPE_AGGREGATION[loss_type]
    except KeyError:
        raise ValueError(
            f"loss_type {loss_type!r} is not known to adaptive_rollouts; known: {sorted(LOSS_TYPE_AGGREGATION)}"
        ) from None


def normalize_scale_rewards(scale_rewards: str | bool) -> str:
    """TRL's ``scale_rewards`` as one of ``SCALE_REWARDS`` (older TRL used booleans).

    >>> normalize_scale_rewards(True), normalize_scale_rewards("batch")
    ('group', 'batch')
    """
    key = ("group" if scale_rewards else "none") if isinstance(scale_rewards, bool) else scale_rewards
    return check_choice("scale_rewards", key, SCALE_REWARDS)


def trl_estimator(
    scale_rewards: str | bool,
    advantage_estimator: str | None = None,
    multi_objective_aggregation: str = "sum_then_normalize",
) -> str:
    """The group advantage estimator TRL's trainer computes.

    ``scale_rewards="group"`` -> ``grpo``; ``"none"`` -> ``drgrpo``; ``"batch"`` -> ``drgrpo`` (centred by
    the group mean, then divided by one batch-wide std, which scales every prompt alike);
    ``normalize_then_sum`` -> ``grpo`` (each reward function normalised by its group std).
    ``advantage_estimator="rloo"`` gives RLOO, plain (``scale_rewards="none"``) or divided by the batch
    std (``"batch"``); ``"group"`` is refused: it would divide RLOO by each group's std.

    >>> trl_estimator("group"), trl_estimator("none"), trl_estimator("batch", "rloo")
    ('grpo', 'drgrpo', 'rloo')
    """
    scale = normalize_scale_rewards(scale_rewards)
    check_choice("multi_objective_aggregation", multi_objective_aggregation, MULTI_OBJECTIVE)
    check_choice("advantage_estimator (None: follow scale_rewards)", advantage_estimator, (None, "rloo"))
    if advantage_estimator == "rloo":
        if multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                "advantage_estimator='rloo' needs multi_objective_aggregation='sum_then_normalize': "
                "normalize_then_sum already normalises each reward function by its group std"
            )
        if scale == "group":
            raise ValueError(
                "advantage_estimator='rloo' needs scale_rewards='none' (plain RLOO) or 'batch' (RLOO divided by "
                "the batch std); scale_rewards='group' (TRL's default) would divide RLOO by each group's std"
            )
        return "rloo"
    if multi_objective_aggregation == "normalize_then_sum":
        return "grpo"
    return {"group": "grpo", "none": "drgrpo", "batch": "drgrpo"}[scale]


def verl_aggregation(loss_agg_mode: str | None, override: str | None = "auto") -> str | None:
    """The allocator's ``aggregation`` for verl's ``loss_agg_mode`` (``override`` wins unless 'auto').

    >>> verl_aggregation("token-sum"), verl_aggregation("seq-mean-token-mean"), verl_aggregation("x", "seq-mean")
    ('constant', 'seq-mean', 'seq-mean')
    """
    if override not in (None, "auto"):
        return check_choice("adaptive.aggregation", override, AGGREGATIONS)
    if override is None or loss_agg_mode is None:
        return None
    if loss_agg_mode not in AGGREGATION_FROM_LOSS_AGG_MODE:
        raise ValueError(
            f"actor.loss_agg_mode {loss_agg_mode!r} has no known aggregation; set adaptive.aggregation "
            f"explicitly (known modes: {sorted(AGGREGATION_FROM_LOSS_AGG_MODE)})"
        )
    return AGGREGATION_FROM_LOSS_AGG_MODE[loss_agg_mode]


def verl_estimator(adv_estimator: str | None, norm_by_std: bool = True, override: str | None = "auto") -> str | None:
    """The allocator's ``estimator`` for verl's ``algorithm.adv_estimator`` (None: not a group estimator).

    >>> verl_estimator("adaptive_grpo"), verl_estimator("adaptive_grpo", norm_by_std=False), verl_estimator("gae")
    ('grpo', 'drgrpo', None)
    """
    if override not in (None, "auto"):
        return check_choice("adaptive.estimator", override, ESTIMATORS)
    if override is None or adv_estimator is None:
        return None
    est = ESTIMATOR_FROM_ADV_ESTIMATOR.get(str(adv_estimator))
    if est == "grpo" and not norm_by_std:
        return "drgrpo"
    return est

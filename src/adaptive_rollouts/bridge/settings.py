"""What each trainer's loss and advantage settings mean for the allocator: its ``estimator`` (one
of `checks.validation.ESTIMATORS`) and ``aggregation`` (one of `checks.validation.AGGREGATIONS`).
One table and one function per trainer setting; a new trainer adds its own here.

TRL (``GRPOConfig``): `trl_aggregation` of ``loss_type``, `trl_estimator` of ``scale_rewards`` /
``advantage_estimator`` / ``multi_objective_aggregation``.
verl: `verl_aggregation` of ``actor.loss_agg_mode``, `verl_estimator` of ``algorithm.adv_estimator``
and ``norm_adv_by_std_in_grpo``; each with the ``adaptive.`` override (``"auto"``: follow verl).

Loss rows (one of `checks.validation.LOSS_ROWS`; `loss_rows_for` picks it): when a step trains on
N rows where Uniform's batch has C (a saving allocator cuts or skips groups), ``"uniform"`` multiplies
every advantage by the factor that makes the policy loss the one of Uniform's batch in which the
missing rows have advantage 0: `trl_loss_rows_scale` for TRL's ``loss_type``, `verl_loss_rows_scale`
for verl's ``loss_agg_mode``. The clipped PPO term is linear in a positive multiple of the
advantage, so scaling the advantage scales the policy term exactly.
"""

from __future__ import annotations

from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, LOSS_ROWS, check_choice

__all__ = [
    "AGGREGATION_FROM_LOSS_AGG_MODE",
    "ESTIMATOR_FROM_ADV_ESTIMATOR",
    "LOSS_TYPE_AGGREGATION",
    "MULTI_OBJECTIVE",
    "SCALE_REWARDS",
    "normalize_scale_rewards",
    "loss_rows_for",
    "trl_aggregation",
    "trl_estimator",
    "trl_loss_rows_scale",
    "verl_aggregation",
    "verl_estimator",
    "verl_loss_rows_scale",
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


# The loss rows a trainer uses when none is asked for, by allocator kind (`bridge.allocator_kind`):
# a filling allocator trains on Uniform's rows anyway; for a saving one the better of the two in the
# simulator's no-retune benchmark (results/loss_rows/loss_rows.json, docs/saving.md).
DEFAULT_LOSS_ROWS = {"fill": "kept", "save": "kept"}


def loss_rows_for(requested: str | None, kind: str, name: str = "loss_rows") -> str:
    """The loss rows to use: ``requested`` (checked against `LOSS_ROWS`, ``name`` in the error), or
    the default for the allocator's ``kind`` when None.

    >>> loss_rows_for(None, "save"), loss_rows_for("uniform", "save")
    ('kept', 'uniform')
    """
    if requested is None:
        return DEFAULT_LOSS_ROWS[check_choice("allocator kind", kind, tuple(DEFAULT_LOSS_ROWS))]
    return check_choice(name, requested, LOSS_ROWS)


def _check_rows(rows: int, padded_rows: int, budget: int) -> None:
    if not 0 <= rows <= padded_rows <= budget or budget < 1:
        raise ValueError(
            f"loss rows: need 0 <= rows <= padded_rows <= budget and budget >= 1, got rows={rows}, "
            f"padded_rows={padded_rows}, budget={budget}"
        )


def trl_loss_rows_scale(
    loss_type: str,
    *,
    rows: int,
    padded_rows: int,
    budget: int,
    prompts: int | None = None,
    budget_prompts: int | None = None,
) -> float:
    """The advantage factor that gives TRL's ``loss_type`` Uniform's normalisation (``"uniform"``
    loss rows) on a step of ``rows`` generated rows laid out as ``padded_rows`` (generated plus
    zero-weight padding, over all processes) where Uniform's generation batch has ``budget`` rows.

    * completion-level losses (``grpo``, ``sapo``: mean over a micro-batch's rows; ``dr_grpo``: token
      sum / (rows x max length); ``luspo``: mean of token sums) divide by the micro-batch's rows,
      padding included, and Uniform's micro-batches hold budget / padded_rows times as many:
      ``padded_rows / budget``, exact;
    * token-level losses (``bnpo``, ``dapo``, ``cispo``, ``vespo``) divide by the tokens generated;
      Uniform's batch would hold the missing rows' tokens too, counted at the generated rows' mean
      length: ``rows / budget`` (exact for ``dapo``/``cispo``/``vespo``, which divide by the whole
      generation batch; for ``bnpo``, whose micro-batches divide by their own tokens, exact when
      the generated rows are spread evenly over the micro-batches);
    * with equal prompt weights (``prompts`` = Q' prompts with rows, ``budget_prompts`` = Uniform's
      Q; the advantages already carry N / (Q' n_q)): the mean over Uniform's Q prompts, a skipped one
      counting as a prompt of zero advantage: ``padded_rows Q' / (rows Q)``.

    >>> trl_loss_rows_scale("grpo", rows=5, padded_rows=6, budget=12), trl_loss_rows_scale("dapo", rows=6, padded_rows=6, budget=12)
    (0.5, 0.5)
    >>> trl_loss_rows_scale("grpo", rows=5, padded_rows=6, budget=12, prompts=2, budget_prompts=3)
    0.8
    """
    _check_rows(rows, padded_rows, budget)
    aggregation = trl_aggregation(loss_type)
    if (prompts is None) != (budget_prompts is None):
        raise ValueError("trl_loss_rows_scale: give both prompts and budget_prompts (equal prompt weights), or neither")
    if prompts is not None and budget_prompts is not None:
        if aggregation != "seq-mean" or not 0 <= prompts <= budget_prompts or budget_prompts < 1:
            raise ValueError(
                f"equal prompt weights need a completion-mean loss_type and 0 <= prompts <= budget_prompts, got "
                f"loss_type={loss_type!r}, prompts={prompts}, budget_prompts={budget_prompts}"
            )
        return padded_rows * prompts / (rows * budget_prompts) if rows else 1.0
    if aggregation == "token-mean":
        return rows / budget
    return padded_rows / budget


def verl_loss_rows_scale(loss_agg_mode: str, *, rows: int, padded_rows: int) -> float:
    """The advantage factor that gives verl's ``loss_agg_mode`` Uniform's normalisation on a step of
    ``rows`` trajectory rows that verl padded to ``padded_rows`` (a multiple of the PPO mini-batch
    ``ppo_mini_batch_size x n``, each padding row with no loss tokens).

    * ``token-mean`` divides each mini-batch by its loss tokens; a mini-batch of Uniform's step holds
      generated rows only, so the padding rows are counted as rows at the generated rows' mean
      length: ``rows / padded_rows`` (exact with one mini-batch per step or padding spread evenly
      over the mini-batches; in the mean over the mini-batches otherwise);
    * ``seq-mean-token-mean``, ``seq-mean-token-sum``, ``seq-mean-token-sum-norm`` divide by the fixed
      ``ppo_mini_batch_size x n`` and ``token-sum`` by nothing: a missing row already counts as a row of
      zero advantage, factor 1.

    What no factor changes: a smaller batch has fewer mini-batches, so fewer optimizer steps.

    >>> verl_loss_rows_scale("token-mean", rows=9, padded_rows=16), verl_loss_rows_scale("seq-mean-token-mean", rows=9, padded_rows=16)
    (0.5625, 1.0)
    """
    if not 0 <= rows <= padded_rows:
        raise ValueError(f"loss rows: need 0 <= rows <= padded_rows, got rows={rows}, padded_rows={padded_rows}")
    if loss_agg_mode not in AGGREGATION_FROM_LOSS_AGG_MODE:
        raise ValueError(
            f"actor.loss_agg_mode {loss_agg_mode!r} has no known loss-rows factor (known modes: "
            f"{sorted(AGGREGATION_FROM_LOSS_AGG_MODE)})"
        )
    if loss_agg_mode == "token-mean":
        return rows / padded_rows if padded_rows else 1.0
    return 1.0

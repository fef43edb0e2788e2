"""What a TRL ``GRPOConfig`` means for the allocator, and how the allocator is built. No TRL or torch.

- `aggregation_for_loss_type`: how TRL's ``loss_type`` weighs rollouts in the loss;
- `estimator_for`: which advantage estimator the trainer's ``scale_rewards`` /
  ``multi_objective_aggregation`` / ``advantage_estimator`` amount to;
- `build_allocator`: ``None`` (the recommended default), a registry name, or an object, always
  agreeing with the trainer's estimator and aggregation (built with them, or configured);
- `text_features`: the `KeyedTexts` through which a text-based predictor sees prompt texts, since
  the allocator's prompts are row keys (``"train#17"``), not texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# TRL loss_type -> how the loss weighs the rollouts of a batch (names of adaptive_rollouts.validation.AGGREGATIONS):
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
IMAGE_COLUMNS = ("image", "images")
_TEXT_PREDICTORS = ("gp", "paper-gp", "ridge")  # predictors that embed prompt text


def aggregation_for_loss_type(loss_type: str) -> str:
    """The aggregation implied by TRL's ``loss_type``.

    >>> aggregation_for_loss_type("dr_grpo"), aggregation_for_loss_type("luspo")
    ('constant', 'constant')
    """
    try:
        return LOSS_TYPE_AGGREGATION[loss_type]
    except KeyError:
        raise ValueError(
            f"loss_type {loss_type!r} is not known to adaptive_rollouts; known: {sorted(LOSS_TYPE_AGGREGATION)}"
        ) from None


def normalize_scale_rewards(scale_rewards: str | bool) -> str:
    """TRL's ``scale_rewards`` as one of ``SCALE_REWARDS`` (older TRL used booleans)."""
    from adaptive_rollouts.validation import check_choice

    key = ("group" if scale_rewards else "none") if isinstance(scale_rewards, bool) else scale_rewards
    return check_choice("scale_rewards", key, SCALE_REWARDS)


def estimator_for(
    scale_rewards: str | bool,
    advantage_estimator: str | None = None,
    multi_objective_aggregation: str = "sum_then_normalize",
) -> str:
    """The group advantage estimator the trainer computes.

    ``scale_rewards="group"`` -> ``grpo``; ``"none"`` -> ``drgrpo``; ``"batch"`` -> ``drgrpo`` (centred by
    the group mean, then divided by one batch-wide std, which scales every prompt alike);
    ``normalize_then_sum`` -> ``grpo`` (each reward function normalised by its group std).
    ``advantage_estimator="rloo"`` gives RLOO, plain (``scale_rewards="none"``) or divided by the batch
    std (``"batch"``); ``"group"`` is refused: it would divide RLOO by each group's std.

    >>> estimator_for("group"), estimator_for("none"), estimator_for("batch", "rloo")
    ('grpo', 'drgrpo', 'rloo')
    """
    from adaptive_rollouts.validation import check_choice

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


def _registry_factory(name: str | None):
    from adaptive_rollouts.allocators import ALLOCATORS

    key = "default" if name is None else name.lower().replace("_", "-")
    return ALLOCATORS.get(key)


def build_allocator(spec: Any, estimator: str, aggregation: str) -> Any:
    """The trainer's allocator: ``None`` -> ``make_allocator()`` (the recommended default), a name ->
    ``make_allocator(name)``, each given ``estimator=`` / ``aggregation=`` when its constructor takes
    them; an object is configured by `configure_allocator`.

    >>> type(build_allocator("posterior-progressive", "drgrpo", "token-mean")).__name__
    'PosteriorProgressive'
    """
    from adaptive_rollouts.allocators import make_allocator, takes_keyword

    if spec is None or isinstance(spec, str):
        factory = _registry_factory(spec)
        kwargs = {}
        if factory is not None:
            for keyword, value in (("estimator", estimator), ("aggregation", aggregation)):
                if takes_keyword(factory, keyword):
                    kwargs[keyword] = value
        allocator = make_allocator(**kwargs) if spec is None else make_allocator(spec, **kwargs)
    else:
        allocator = spec
    if not callable(getattr(allocator, "run", None)):
        raise ValueError(f"allocator must have run(prompts, budget, sample), got {type(allocator).__name__}")
    configure_allocator(allocator, estimator, aggregation)
    return allocator


def configure_allocator(allocator: Any, estimator: str, aggregation: str) -> dict[str, tuple]:
    """Give an allocator object the trainer's estimator and aggregation, as a named one is built.

    Only allocators that model them have the attributes (VIP, PosteriorProgressive, the default);
    Uniform, VIGOR, ... are left alone. An ``aggregation`` of None is kept: it means the allocator
    optimises the variance of the advantage sum whatever the loss (VIP as published). Every change
    is logged as a warning and returned as ``{attribute: (old, new)}``; a value the trainer cannot
    hold raises.

    >>> class A: estimator, aggregation = "rloo", "seq-mean"
    >>> configure_allocator(A(), "grpo", "token-mean")
    {'estimator': ('rloo', 'grpo'), 'aggregation': ('seq-mean', 'token-mean')}
    """
    from adaptive_rollouts.validation import AGGREGATIONS, ESTIMATORS, check_choice

    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    changes: dict[str, tuple] = {}
    own = getattr(allocator, "estimator", None)
    if own is not None and own != estimator:
        changes["estimator"] = (own, estimator)
    own_agg = getattr(allocator, "aggregation", None)
    if own_agg is not None and own_agg != aggregation:
        changes["aggregation"] = (own_agg, aggregation)
    for attribute, (old, new) in changes.items():
        setattr(allocator, attribute, new)
        logger.warning(
            "allocator %s had %s=%r but the trainer computes %r (from scale_rewards / advantage_estimator / "
            "loss_type): set to %r",
            type(allocator).__name__,
            attribute,
            old,
            new,
            new,
        )
    return changes


def text_features(allocator: Any, pool: Callable[[], tuple[list[str], list[str]]] | None = None) -> Any:
    """The `KeyedTexts` through which the allocator's predictor reads prompt texts, or None.

    The trainer's prompts are row keys, so a predictor that embeds text needs the key -> text map.
    A predictor named ``"gp"`` or ``"ridge"`` gets its features (None: the default encoder; an
    encoder, or a `FeatureTable` keyed by prompt text) wrapped in a `KeyedTexts`, into which the
    trainer registers each batch's texts; so does a predictor object with ``features`` (except a
    `PaperGP` object, which must be built on row keys). ``"paper-gp"`` lives on a known pool: it gets a
    `FeatureTable` over ``pool()`` (the dataset's row keys and texts), embedded once with its
    features (or the default encoder); an unknown pool (iterable dataset) raises.
    """
    from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts, default_encoder
    from adaptive_rollouts.predictors import PaperGP

    slot = getattr(allocator, "slot", None)
    if slot is None:
        return None
    built = getattr(slot, "_predictor", None)
    if built is not None:
        if getattr(built, "features", None) is None or isinstance(built, PaperGP):
            return None
        if not isinstance(built.features, KeyedTexts):
            built.features = KeyedTexts(built.features)
        return built.features
    if not (isinstance(slot.spec, str) and slot.spec in _TEXT_PREDICTORS):
        return None
    if slot.spec == "paper-gp":
        if pool is None:
            raise ValueError(
                "predictor 'paper-gp' lives on a known prompt pool: pass a map-style train_dataset "
                "(its rows are the pool), or use predictor 'gp'"
            )
        keys, texts = pool()
        encoder = slot.features if slot.features is not None else default_encoder()
        slot.features = FeatureTable(keys, encoder.encode(texts))
        return None
    if not isinstance(slot.features, KeyedTexts):
        slot.features = KeyedTexts(slot.features)
    return slot.features


def prompt_text(prompt: Any) -> str:
    """The text of a dataset prompt, for embedding: the string, or the conversation's message contents.

    >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2="}])
    'Be brief.\\n2+2='
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        parts = []
        for message in prompt:
            content = message.get("content", "")
            if isinstance(content, list):  # content blocks
                content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            parts.append(str(content))
        return "\n".join(parts)
    return json.dumps(prompt, ensure_ascii=False, default=str)


def refuse_images(dataset: Any) -> None:
    """Image prompts are not supported (docs/trl.md, 'Not supported'): refuse a dataset with image columns."""
    columns = getattr(dataset, "column_names", None) or []
    found = [c for c in IMAGE_COLUMNS if c in columns]
    if found:
        raise ValueError(
            f"AdaptiveGRPOTrainer supports text prompts only: train_dataset has image column(s) {found} "
            "(see docs/trl.md, 'Not supported')"
        )

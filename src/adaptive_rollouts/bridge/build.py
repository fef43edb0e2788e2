"""An allocator from what a trainer's user wrote: a name, a class path or an object, plus options.

- `allocator_factory`: a registry name (``"vigor"``, ``"vip_paper"``: `allocators.registry_key`), a
  class name of ``adaptive_rollouts.allocators`` (``"VIGOR"``), ``"package.module:Class"``, or None /
  "default" for the recommended default -> the class or factory;
- `build_allocator`: the allocator, given the trainer's values (``estimator=``, ``aggregation=``,
  ``features=``, ``seed=``, ...) only where its constructor takes them and the user's options do not
  set them; an object is taken as it is and given the trainer's estimator and aggregation by
  `configure_allocator`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from adaptive_rollouts import allocators
from adaptive_rollouts.allocators import ALLOCATORS, registry_key, takes_keyword
from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, check_choice
from adaptive_rollouts.types import Allocator

__all__ = [
    "DEFAULT_NAMES",
    "OptionsError",
    "allocator_factory",
    "build_allocator",
    "check_options",
    "configure_allocator",
    "load_object",
]

logger = logging.getLogger(__name__)

DEFAULT_NAMES = (None, "", "default")
"""What names the recommended default allocator."""


class OptionsError(TypeError, ValueError):
    """Options an allocator's constructor does not take: a TypeError, as Python's own for a bad keyword,
    and a ValueError, as every bad input of this library."""


def load_object(spec: str, what: str) -> Any:
    """``"package.module:attr"`` -> the attribute (a class or a factory); ``what`` names the setting."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} must look like 'package.module:name', got {spec!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{what}: {attr!r} not found in {module_name}") from None


def allocator_factory(spec: str | None, what: str = "allocator") -> Callable[..., Any]:
    """The class or factory an allocator name stands for (see the module docstring).

    >>> allocator_factory("Posterior_Progressive").__name__, allocator_factory("VIGOR").__name__
    ('PosteriorProgressive', 'VIGOR')
    """
    if spec in DEFAULT_NAMES:
        return ALLOCATORS["default"]
    assert spec is not None
    if ":" in spec:
        return load_object(spec, what)
    key = registry_key(spec)
    if key in ALLOCATORS:
        return ALLOCATORS[key]
    if spec in allocators.__all__ and isinstance(getattr(allocators, spec), type):
        return getattr(allocators, spec)
    raise ValueError(f"{what}: unknown allocator {spec!r}; known: {', '.join(ALLOCATORS)}")


def build_allocator(
    spec: Any = None,
    options: Mapping[str, Any] | None = None,
    *,
    what: str = "allocator",
    options_name: str = "options",
    plan_only: bool = False,
    **provided: Any,
) -> Allocator:
    """The allocator ``spec`` names (None: the recommended default), built with ``options``.

    Each of ``provided`` (the trainer's ``estimator``, ``aggregation``, ``features``, ``seed``, ...;
    None values are ignored) is passed only where the constructor takes it and ``options`` does not
    set it: the user's options win. An object ``spec`` is returned as it is, given the trainer's
    ``estimator`` / ``aggregation`` by `configure_allocator`. Options the constructor rejects raise
    `OptionsError` naming ``what`` and ``options_name``. The allocator must offer
    ``run(prompts, budget, sample)``, or, where the trainer takes ``plan_only`` ones (verl), at least
    ``plan`` and ``observe``.

    >>> vip = build_allocator("vip", {"lower": 3}, estimator="drgrpo", aggregation="constant")
    >>> (type(vip).__name__, vip.estimator, vip.aggregation, vip.lower)
    ('VIP', 'drgrpo', 'constant', 3)
    >>> type(build_allocator("uniform", aggregation="token-mean")).__name__  # Uniform takes no aggregation
    'Uniform'
    """
    if spec is not None and not isinstance(spec, str):
        if options:
            raise ValueError(f"{what} is an object: its options {sorted(options)} cannot be applied")
        _check_halves(spec, what, plan_only)
        estimator, aggregation = provided.get("estimator"), provided.get("aggregation")
        if estimator is not None and aggregation is not None:
            configure_allocator(spec, estimator, aggregation)
        return spec
    factory = allocator_factory(spec, what)
    kwargs = dict(options or {})
    for name, value in provided.items():
        if value is not None and name not in kwargs and takes_keyword(factory, name):
            kwargs[name] = value
    check_options(spec, kwargs, what, options_name)
    allocator = factory(**kwargs)
    _check_halves(allocator, what, plan_only)
    return allocator


def _check_halves(allocator: Any, what: str, plan_only: bool) -> None:
    """``allocator`` offers ``run`` (or, when ``plan_only`` ones are taken, ``plan`` and ``observe``)."""
    if callable(getattr(allocator, "run", None)):
        return
    if plan_only and all(callable(getattr(allocator, m, None)) for m in ("plan", "observe")):
        return
    need = "run(prompts, budget, sample) or plan and observe" if plan_only else "run(prompts, budget, sample)"
    raise ValueError(f"{what} must have {need}, got a {type(allocator).__name__}")


def check_options(
    spec: str | None, options: Mapping[str, Any], what: str = "allocator", options_name: str = "options"
) -> Callable[..., Any]:
    """The factory of ``spec`` (`allocator_factory`), after checking that it takes ``options``: every
    keyword (also through ``**options`` forwarded to a base class, `allocators.takes_keyword`) and
    together (no required argument missing). Raises `OptionsError` naming ``what`` and ``options_name``.

    >>> check_options("vigor", {"lower": 2}, "adaptive.allocator", "adaptive.allocator_kwargs")
    Traceback (most recent call last):
    ...
    adaptive_rollouts.bridge.build.OptionsError: adaptive.allocator 'vigor' rejects adaptive.allocator_kwargs: it does not accept ['lower']
    """
    factory = allocator_factory(spec, what)
    label = f"{what} {spec or 'default'!r} rejects {options_name}"
    bad = [name for name in options if not takes_keyword(factory, name)]
    if bad:
        raise OptionsError(f"{label}: it does not accept {bad}")
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as err:
        raise OptionsError(f"{label}: {err}") from None
    except ValueError:  # no signature (a builtin): the call itself checks
        pass
    return factory


def configure_allocator(allocator: Allocator, estimator: str, aggregation: str) -> dict[str, tuple]:
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
            "allocator %s had %s=%r but the trainer computes %r (from its loss and advantage settings): set to %r",
            type(allocator).__name__,
            attribute,
            old,
            new,
            new,
        )
    return changes

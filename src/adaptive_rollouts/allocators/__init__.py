"""Allocators: how many rollouts each prompt gets in one step, all under one protocol.

`run(prompts, budget, sample)` spends exactly `budget` rollouts (a "save" allocator - GRESO,
Pilot, PilotCommit, SGPO - at most `budget`) and returns the rewards per prompt;
single-shot allocators also offer `plan(prompts, budget)` and `observe(plan, rewards)`.
After each step `allocator.last_metrics` holds `metrics.step_metrics(...)` of what was generated
(`types.ReportsMetrics`; unscored rollouts count as generated, not as skipped).

`make_allocator(name, **kwargs)` builds one by its registry name (CLI and benchmarks);
`make_allocator()` with no name builds the recommended default, `SavingProgressive` (a "save"
allocator: at most the budget); "guarded-progressive" is the budget-filling default of before.
"""

from __future__ import annotations

import inspect
from typing import Any

from .ar3po import AR3PO
from .base import BaseAllocator, SingleShotAllocator
from .dynamic_sampling import DynamicSampling
from .greso import GRESO, GRESOFill
from .guarded import GuardedProgressive
from .knapsack import Knapsack
from .pilot import Pilot
from .pilot_commit import PilotCommit
from .posterior_progressive import PosteriorProgressive
from .predictive import PredictiveAllocator
from .proportional import DynaMO, InverseAccuracy, InverseVariance
from .saving import SavingProgressive
from .sgpo import SGPO
from .speedrl import SpeedRL
from .uniform import Uniform
from .vigor import VIGOR
from .vip import VIP

__all__ = [
    "AR3PO",
    "BaseAllocator",
    "DynaMO",
    "DEFAULT_ALLOCATOR",
    "DynamicSampling",
    "GRESO",
    "GRESOFill",
    "GuardedProgressive",
    "InverseAccuracy",
    "InverseVariance",
    "Knapsack",
    "Pilot",
    "PilotCommit",
    "PosteriorProgressive",
    "PredictiveAllocator",
    "SavingProgressive",
    "SGPO",
    "SingleShotAllocator",
    "SpeedRL",
    "Uniform",
    "VIGOR",
    "VIP",
    "ALLOCATORS",
    "make_allocator",
    "registry_key",
    "saving_allocators",
    "takes_keyword",
]

DEFAULT_ALLOCATOR = "saving-progressive"
"""Registry name of the recommended default: it spends at most the budget and skips what would teach
nothing (docs/saving.md). The budget-filling default of earlier versions stays available as
"guarded-progressive"."""

ALLOCATORS: dict[str, Any] = {
    "default": SavingProgressive,
    "saving-progressive": SavingProgressive,
    "guarded-progressive": GuardedProgressive,
    "uniform": Uniform,
    "vip": VIP,
    "vip-paper": lambda **kw: VIP(**{"predictor": "paper-gp", "estimator": "rloo", "variance": "plugin", **kw}),
    "vigor": VIGOR,
    "posterior-progressive": PosteriorProgressive,
    "dynamic-sampling": DynamicSampling,
    "greso": GRESO,
    "greso-fill": GRESOFill,
    "pilot": Pilot,
    "pilot-commit": PilotCommit,
    "sgpo": SGPO,
    "knapsack": Knapsack,
    "dynamo": DynaMO,
    "inverse-accuracy": InverseAccuracy,
    "inverse-variance": InverseVariance,
    "ar3po": AR3PO,
    "speedrl": SpeedRL,
}


def saving_allocators() -> tuple[str, ...]:
    """Registry names of the saving allocators, in registry order: every entry whose class declares
    ``kind = "save"`` (at most the budget; a prompt may get no rollouts), one name per class (an alias
    such as "saving-progressive" of "default" is left out). The saving evidence (the saving map, the
    saving-signal benchmark, the demo's saving arms and the docs' tables of them) runs exactly these,
    so a new saving allocator joins it by being registered.

    >>> saving_allocators()
    ('default', 'greso', 'pilot', 'pilot-commit', 'sgpo')
    """
    seen: list[Any] = []
    names = []
    for name, factory in ALLOCATORS.items():
        if getattr(factory, "kind", "fill") == "save" and not any(factory is f for f in seen):
            seen.append(factory)
            names.append(name)
    return tuple(names)


def registry_key(name: str | None) -> str:
    """The registry key of an allocator name: lowercase, ``_`` read as ``-``; None is the default.
    The one name rule of the library (CLI, benchmarks and trainer plug-ins all go through it).

    >>> registry_key("Posterior_Progressive"), registry_key(None) == DEFAULT_ALLOCATOR
    ('posterior-progressive', True)
    """
    return (DEFAULT_ALLOCATOR if name is None else name).lower().replace("_", "-")


def takes_keyword(factory: Any, keyword: str) -> bool:
    """Whether ``factory`` (an allocator class or registry entry) accepts ``keyword=``; integrations
    use it to pass e.g. the trainer's loss ``aggregation`` only to allocators that model it.

    >>> takes_keyword(VIP, "aggregation"), takes_keyword(Uniform, "aggregation")
    (True, False)
    >>> takes_keyword(GuardedProgressive, "features"), takes_keyword(GuardedProgressive, "colour")
    (True, False)
    """
    # a class whose __init__ forwards **options to its base takes what the base takes
    chain = (
        [vars(c)["__init__"] for c in factory.__mro__ if "__init__" in vars(c)]
        if isinstance(factory, type)
        else [factory]
    )
    for fn in chain:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return False
        if keyword in params:
            return True
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return False
    # **kwargs all the way: a class reaches object (takes nothing more), a function may pass anything on
    return not isinstance(factory, type)


def make_allocator(name: str | None = None, **kwargs: Any) -> BaseAllocator:
    """Build an allocator by its lowercase registry name, e.g. ``make_allocator("vigor", seed=1)``;
    no name (or "default") gives the recommended default `SavingProgressive`, which needs no
    prompt text or embeddings and accepts ``predictor=``, ``estimator=``, ``aggregation=``, ``seed=``.

    "vip-paper" is VIP exactly as published (`PaperGP`, RLOO, plug-in p(1-p)); "vip" uses our GP.

    >>> make_allocator("uniform").plan(["a", "b"], 5).counts.tolist()
    [3, 2]
    >>> type(make_allocator(aggregation="seq-mean")).__name__
    'SavingProgressive'
    """
    key = registry_key(name)
    if key not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; known: {', '.join(ALLOCATORS)}")
    return ALLOCATORS[key](**kwargs)

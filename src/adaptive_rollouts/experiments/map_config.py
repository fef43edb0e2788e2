"""A regime map's configuration (`MapConfig`) and the method names the map gives a meaning of its own:
the default, the null control, Uniform's replicate, the marks of a run's settings (the engine that
times its rounds, the policy's view of its own margin), and the methods that run on the paired seeds.

>>> map_method(DEFAULT + ENGINE_MARK + "synchronous")
('default', {'engine': 'synchronous'})
>>> map_method(DEFAULT + VIEW_MARK + "view0.9"), map_method(DEFAULT + VIEW_MARK + "noview")
(('default', {'policy_view_auroc': 0.9}), ('default', {'policy_view_auroc': None}))
>>> seeds_for(MapConfig(cells=[], report_seeds=(0, 1), paired_seeds=(0, 1, 2)), NULL)
[0, 1, 2]
>>> seeds_for({"report_seeds": [0, 1], "paired_seeds": [0, 1, 2], "paired": ["uniform", "vigor"]}, "vigor")
[0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptive_rollouts.experiments.intervals import INTERVAL
from adaptive_rollouts.sim.regimes import Cell
from adaptive_rollouts.sim.step_time import ENGINES

__all__ = [
    "MapConfig",
    "DEFAULT",
    "NULL",
    "REPLICATE",
    "REPLICATE_SEED_OFFSET",
    "ENGINE_MARK",
    "VIEW_MARK",
    "PAIRED",
    "map_method",
    "seeds_for",
]

DEFAULT = "default"
NULL = "uniform-rounds"  # null control: Uniform's allocation with independent sampling noise
REPLICATE = "uniform-replicate"  # Uniform again, on the same problem instances with other sampling seeds
REPLICATE_SEED_OFFSET = 1_000_003  # the replicate's sampling and batch-order seed: the run's seed + this
# a map method name is an allocator method followed by marks, each at most once, each setting one
# `TrainConfig` field of its runs (`map_method`):
ENGINE_MARK = "~"  # "default~synchronous": rounds timed by that engine (`sim.step_time.ENGINES`)
# "default^view0.9": the policy's view of its margin at AUROC 0.9 (`sim.policy_view`); "^view1": the
# exact margin; "^noview": no view
VIEW_MARK = "^"
NO_VIEW = "noview"
_MARKS = {ENGINE_MARK: "engine", VIEW_MARK: "policy_view_auroc"}
PAIRED = ("uniform", DEFAULT, NULL, REPLICATE)  # methods run on the paired seeds unless a map names others


def _view_auroc(method: str, value: str) -> float | None:
    """The view AUROC a view mark's ``value`` names: ``noview`` -> None, ``view<AUROC>`` with the
    AUROC in [0.5, 1] (1: the exact margin; 0.5: a view that ranks no better than chance)."""
    if value == NO_VIEW:
        return None
    number = value[len("view") :] if value.startswith("view") else ""
    try:
        auroc = float(number)
    except ValueError:
        auroc = float("nan")
    if not 0.5 <= auroc <= 1.0:  # also refuses nan
        raise ValueError(
            f"method {method!r}: the view mark {VIEW_MARK!r} takes view<AUROC in [0.5, 1]> or {NO_VIEW}, got {value!r}"
        )
    return auroc


def map_method(method: str) -> tuple[str, dict[str, Any]]:
    """(allocator method, `TrainConfig` options of its runs) of a map method name: the allocator
    method (with its own ``[key=value]`` options, `bench.method_options`) followed by marks, each at
    most once: `ENGINE_MARK` + an engine of `sim.step_time.ENGINES` (the run's rounds timed,
    ``engine``), `VIEW_MARK` + ``view<AUROC>`` or ``noview`` (the policy's view of its margin,
    ``policy_view_auroc``; `sim.policy_view`). A name without marks runs with `TrainConfig`'s own
    settings. ValueError naming the method for an unknown engine, a bad view or a repeated mark.

    >>> map_method("default[pilot=2]~slots-64^view1"), map_method("uniform")
    (('default[pilot=2]', {'engine': 'slots-64', 'policy_view_auroc': 1.0}), ('uniform', {}))
    >>> map_method("default^view0.3")
    Traceback (most recent call last):
    ...
    ValueError: method 'default^view0.3': the view mark '^' takes view<AUROC in [0.5, 1]> or noview, got 'view0.3'
    """
    depth, cuts = 0, []
    for i, ch in enumerate(method):  # marks outside an allocator's [options] only
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and ch in _MARKS:
            cuts.append(i)
    name = method[: cuts[0]] if cuts else method
    options: dict[str, Any] = {}
    for start, end in zip(cuts, [*cuts[1:], len(method)]):
        mark, value = method[start], method[start + 1 : end]
        field_name = _MARKS[mark]
        if field_name in options:
            raise ValueError(f"method {method!r}: the mark {mark!r} is given twice")
        if mark == ENGINE_MARK and value not in ENGINES:
            raise ValueError(
                f"method {method!r}: unknown engine {value!r} after {mark!r} (known: {', '.join(ENGINES)})"
            )
        options[field_name] = value if mark == ENGINE_MARK else _view_auroc(method, value)
    if not name:
        raise ValueError(f"method {method!r}: no allocator method before its marks")
    return name, options


@dataclass
class MapConfig:
    cells: Sequence[Cell]
    methods: Sequence[str] = (
        "uniform",
        DEFAULT,
        "default@true-p",
        "posterior-progressive@true-p",
        "vip@true-p",
        "vigor",
    )
    tune_seeds: Sequence[int] = (100, 101, 102)
    report_seeds: Sequence[int] = (0, 1, 2, 3)
    paired_seeds: Sequence[int] = tuple(range(8))  # the seeds of the `paired` methods
    # the methods run on the paired seeds (the others on the report seeds): `PAIRED` and any arm a
    # study compares with the default seed for seed
    paired: Sequence[str] = PAIRED
    lr_grid: Sequence[float] = (0.1, 0.2, 0.4)
    lr_step: float = 2.0
    max_extensions: int = 4
    steps: int = 60
    n_test: int = 500
    estimator: str = "grpo"
    aggregation: str = "seq-mean"
    target_at: float = 0.5  # the target: Uniform's (running-max seed-mean) accuracy at this fraction of the run
    bootstrap: int = 1000  # paired bootstrap resamples of the seeds for the speedup's interval
    grad_var_every: int = 20
    grad_var_resamples: int = 6
    fingerprint_every: int = 20
    same_rate: Sequence[str] = (DEFAULT,)  # also run at Uniform's best rate (paired, no rate-choice noise)
    # run only at Uniform's best rate, never tuned: the controls (whose true rate is Uniform's) and
    # what a user who switches without retuning gets
    untuned: Sequence[str] = ()
    fractions: Sequence[float] = ()  # shares of the gain of the primary statistic (`gain_speedup`); () = off
    # the primary statistic's 90% interval over the paired seeds (`experiments.intervals`); a result
    # file whose configuration names none was read with the percentile bootstrap
    interval: str = INTERVAL
    extra: dict = field(default_factory=dict)


def seeds_for(cfg: MapConfig | Mapping[str, Any], method: str) -> list[int]:
    """The seeds ``method`` reports on: the paired seeds for the map's ``paired`` methods, else the
    report seeds. ``cfg``: a `MapConfig` or its dictionary as a result file stores it (one written
    before maps named their paired methods: `PAIRED`)."""
    if isinstance(cfg, Mapping):
        paired, seeds = cfg.get("paired", PAIRED), (cfg["paired_seeds"], cfg["report_seeds"])
    else:
        paired, seeds = cfg.paired, (cfg.paired_seeds, cfg.report_seeds)
    return list(seeds[0] if method in paired else seeds[1])

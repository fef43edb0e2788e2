"""A regime map's configuration (`MapConfig`) and the method names the map gives a meaning of its own:
the default, the null control, Uniform's replicate, the engine mark of a timed run, and the methods
that run on the paired seeds.

>>> timed_method(DEFAULT + ENGINE_MARK + "synchronous")
('default', 'synchronous')
>>> seeds_for(MapConfig(cells=[], report_seeds=(0, 1), paired_seeds=(0, 1, 2)), NULL)
[0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from adaptive_rollouts.experiments.intervals import INTERVAL
from adaptive_rollouts.sim.regimes import Cell

__all__ = [
    "MapConfig",
    "DEFAULT",
    "NULL",
    "REPLICATE",
    "REPLICATE_SEED_OFFSET",
    "ENGINE_MARK",
    "PAIRED",
    "timed_method",
    "seeds_for",
]

DEFAULT = "default"
NULL = "uniform-rounds"  # null control: Uniform's allocation with independent sampling noise
REPLICATE = "uniform-replicate"  # Uniform again, on the same problem instances with other sampling seeds
REPLICATE_SEED_OFFSET = 1_000_003  # the replicate's sampling and batch-order seed: the run's seed + this
ENGINE_MARK = (
    "~"  # "default~synchronous": the default in a run whose rounds that engine times (`sim.step_time.ENGINES`)
)
PAIRED = ("uniform", DEFAULT, NULL, REPLICATE)  # methods run on the paired seeds


def timed_method(method: str) -> tuple[str, str | None]:
    """(allocator method, engine or None) of a map method name: what follows `ENGINE_MARK` names the
    engine that times the run's rounds (`TrainConfig.engine`), for allocators that read the times.

    >>> timed_method("default~synchronous"), timed_method("uniform")
    (('default', 'synchronous'), ('uniform', None))
    """
    name, mark, engine = method.partition(ENGINE_MARK)
    return name, (engine if mark else None)


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
    paired_seeds: Sequence[int] = tuple(range(8))  # Uniform and the default
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


def seeds_for(cfg: MapConfig, method: str) -> list[int]:
    """The seeds ``method`` reports on: the paired seeds for the methods of `PAIRED`, else the report seeds."""
    return list(cfg.paired_seeds if method in PAIRED else cfg.report_seeds)

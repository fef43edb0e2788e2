"""One run on a cell of a map: what it is made of (`cell_run`: the problem instance, the training
settings and the method's allocator) and the map's record of it (`one_run`).

Every run on a map's cell, the map's own and a benchmark's that reruns the map's protocol with one
thing changed (an allocator's share, the loss's rows, the steps, ...), is built by `cell_run`, so a
benchmark's run is the map's run but for what it passes.

>>> from adaptive_rollouts.experiments.map_presets import SAVING_MAP
>>> run = cell_run(SAVING_MAP.cells[0], SAVING_MAP, seed=0, lr=0.4)
>>> run.config.steps, run.config.batch_prompts, run.config.budget, run.config.optimizer, run.config.grad_var_every
(60, 32, 256, 'adamw', 0)
>>> type(run.allocator("uniform")).__name__
'Uniform'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.experiments.map_config import DEFAULT, REPLICATE, REPLICATE_SEED_OFFSET, MapConfig, timed_method
from adaptive_rollouts.experiments.map_store import run_settings
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.sim.problem import Problem
from adaptive_rollouts.sim.regimes import Cell
from adaptive_rollouts.sim.train import TOKEN_TRACE, TrainConfig, train

__all__ = ["CellRun", "cell_run", "one_run"]

_CELL_STEP = ("batch_prompts", "budget")  # a run's step is its cell's


@dataclass(frozen=True)
class CellRun:
    """One run on a map's cell: the problem instance and the training settings (`cell_run`)."""

    problem: Problem
    config: TrainConfig

    def allocator(self, method: str) -> Any:
        """``method``'s allocator on this run's problem (`bench.build_allocator`), seeded with the run's
        training seed and given its estimator and aggregation."""
        allocator, _ = build_allocator(
            method, self.problem, self.config.seed, aggregation=self.config.aggregation, estimator=self.config.estimator
        )
        return allocator


def cell_run(
    cell: Cell,
    settings: MapConfig,
    seed: int,
    lr: float,
    *,
    train_seed: int | None = None,
    grad_var_every: int = 0,
    **options: Any,
) -> CellRun:
    """The problem and training settings of one run on ``cell`` under a map's ``settings``.

    - problem: instance ``seed`` of the cell (`Cell.problem`), ``settings.n_test`` held-out prompts;
    - step: ``cell.batch_prompts`` prompts and ``cell.budget`` = batch_prompts x per_prompt rollouts;
    - ``settings.steps`` steps, its estimator and aggregation; rate ``lr``; the optimizer and all
      else `TrainConfig`'s defaults (AdamW);
    - sampling and batch order seeded by ``train_seed`` (default ``seed``: the replicate's differs);
    - no gradient-variance probe unless ``grad_var_every`` > 0 (the map's probes are per method, `one_run`).

    ``options``: other `TrainConfig` fields, for a run that deliberately differs from the map's
    (``steps``, ``loss_rows``, ``engine``, the probes, ...); the cell's step cannot be among them.

    >>> from adaptive_rollouts.experiments.map_presets import SAVING_MAP
    >>> cell = SAVING_MAP.cells[0]
    >>> cell_run(cell, SAVING_MAP, 3, 0.2, steps=8, loss_rows="uniform").config.loss_rows
    'uniform'
    >>> cell_run(cell, SAVING_MAP, 3, 0.2, budget=64)
    Traceback (most recent call last):
    ...
    ValueError: cell_run: budget is the cell's (choose another cell), not an option
    """
    given = [k for k in options if k in _CELL_STEP]
    if given:
        raise ValueError(f"cell_run: {', '.join(given)} is the cell's (choose another cell), not an option")
    unknown = sorted(set(options) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise ValueError(f"cell_run: {unknown} are not TrainConfig fields")
    base = {"steps": settings.steps, "estimator": settings.estimator, "aggregation": settings.aggregation}
    config = TrainConfig(
        **{**base, **options},
        batch_prompts=cell.batch_prompts,
        budget=cell.budget,
        lr=lr,
        seed=seed if train_seed is None else train_seed,
        grad_var_every=grad_var_every,
    )
    return CellRun(cell.problem(seed, settings.n_test), config)


def _probes(cfg: MapConfig, method: str) -> dict[str, int]:
    """The map's probes of a run: the gradient variance on Uniform's and the default's runs, the
    per-rollout fingerprint on Uniform's."""
    return {
        "grad_var_every": cfg.grad_var_every if method == "uniform" or method.startswith(DEFAULT) else 0,
        "grad_var_resamples": cfg.grad_var_resamples,
        "fingerprint_every": cfg.fingerprint_every if method == "uniform" else 0,
    }


def one_run(cell: Cell, method: str, seed: int, lr: float, cfg: MapConfig) -> dict:
    """The map's run of ``method`` on ``cell`` (instance ``seed``, rate ``lr``) and its record: the
    curves, the probes, the regime fingerprints, a length cell's tokens, the settings it ran under.
    The replicate (`REPLICATE`) is Uniform on the same instance, its sampling and batch order from
    another seed; a method with an engine mark (`timed_method`) runs with its rounds timed."""
    name, engine = timed_method(method)
    train_seed = seed + REPLICATE_SEED_OFFSET if method == REPLICATE else seed
    run = cell_run(cell, cfg, seed, lr, train_seed=train_seed, engine=engine, **_probes(cfg, method))
    alloc = run.allocator(name)
    t0 = time.perf_counter()
    tr = train(run.problem, alloc, run.config)
    acc = np.asarray(tr["accuracy"])
    return {
        "cell": cell.key,
        "method": method,
        "seed": seed,
        "lr": lr,
        "rollouts": tr["rollouts"],
        "accuracy": tr["accuracy"],
        "accuracy0": tr["accuracy0"],
        "auc": float(acc.mean()),
        "final": final_level(acc),
        "probe": {k: tr[k] for k in ("probe_var", "probe_signal", "probe_oracle_var", "probe_oracle_signal")},
        "nsr_rollout": [float(x) for x in tr["nsr_rollout"]],
        "regime": {k: float(v) for k, v in tr["regime"].items()},
        "zero_variance_fraction": float(np.mean(tr["zero_variance_fraction"])),
        # a length cell's token accounting (`train`): the token axis of the primary statistic and the
        # step-time model read these
        **{k: tr[k] for k in TOKEN_TRACE if k in tr},
        "seconds": time.perf_counter() - t0,
        "settings": run_settings(cfg, cell, method),
    }

"""`adaptive-rollouts bench --map`: every method over a grid of regimes, AdamW, best rate each.

Per cell (a `Cell`) and method:

1. learning rate: every rate of the grid (x2 steps) runs on the *tune* seeds; the best is the
   highest mean held-out accuracy over the last third of the run (the level a rate reaches and
   holds, so a rate that rises fast and then stalls or collapses loses to one that keeps learning).
   When the best is at the grid's edge the grid is extended on that side (x ``lr_step``) up to
   ``max_extensions`` times; if the best is still at an edge the method is recorded as failed for
   the cell, with no number reported.
2. the *report* seeds (disjoint from the tune seeds) run at that rate; Uniform and the default
   allocator run on ``paired_seeds`` (>= 8) so the no-regret check pairs them seed by seed (same
   problem instance and sampling seed). Methods in ``same_rate`` (the default) also run at
   Uniform's best rate: with AdamW the step size is normalised, so this paired comparison isolates
   the allocation from the noise of choosing a rate on a few tune seeds.
3. speedup = rollouts Uniform needs to reach its target, over the rollouts the method needs, both
   read off the *running maximum of the seed-mean curve* (the best accuracy reached so far,
   averaged over seeds first: a single curve's wiggles cannot move the first crossing). The target
   is the accuracy the running max of the average of the two seed-mean curves has at
   ``target_at`` (half) of the run (symmetric, so a method that allocates like Uniform scores 1 in
   expectation; see `speedup`): on this toy curves end
   on plateaus whose height varies from instance to instance, so a target near the final level
   (e.g. 90% of the gain) falls on a plateau and its first crossing is decided by noise, while at
   half the run the curves are still climbing. A method that has not reached it by the end of the
   run is reported as 0. Per-seed ratios and a paired bootstrap interval over seeds
   give the spread.

Every finished run is appended to ``runs.jsonl`` in the output folder as it ends; a rerun with the
same folder skips what is there, so an interrupted map resumes where it stopped and gives the
same result as an uninterrupted one (each run is a pure function of cell, method, seed, rate and
`run_settings`). Each line records its cell and settings: a rerun into the folder with other
settings (``--steps``, ``--estimator``, ...) is refused with the differing settings named, never
mixed into one map; a line cut by a crash is dropped and its run redone (`run_store`). Each run
also records the commit it ran at (`experiments.results.git_commit`), so a map resumed on other code
can be told apart (`reporting.map_report` refuses to summarise runs of several commits unless allowed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import saving_allocators
from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.experiments.intervals import INTERVAL, check_interval
from adaptive_rollouts.experiments.map_runner import RunPool, check_jobs
from adaptive_rollouts.experiments.map_store import MapStore, cell_settings, run_settings
from adaptive_rollouts.experiments.results import git_commit
from adaptive_rollouts.experiments.run_store import read_json, setting_differences, write_json
from adaptive_rollouts.experiments.speedup import bootstrap_speedup, final_level, seed_mean_curve, speedup
from adaptive_rollouts.experiments.tuning import LearningRateAtEdge, tune_grid
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.regimes import Cell, measured_transfer
from adaptive_rollouts.sim.train import TOKEN_TRACE, TrainConfig, train

__all__ = [
    "MapConfig",
    "run_settings",
    "QUICK_MAP",
    "FULL_MAP",
    "SAVING_MAP",
    "run_map",
    "tune_grid",
    "LearningRateAtEdge",
    "final_level",
    "seed_mean_curve",
    "speedup",
    "bootstrap_speedup",
]

DEFAULT = "default"
NULL = "uniform-rounds"  # null control: Uniform's allocation with independent sampling noise
REPLICATE = "uniform-replicate"  # Uniform again, on the same problem instances with other sampling seeds
REPLICATE_SEED_OFFSET = 1_000_003  # the replicate's sampling and batch-order seed: the run's seed + this
ENGINE_MARK = (
    "~"  # "default~synchronous": the default in a run whose rounds that engine times (`sim.step_time.ENGINES`)
)


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


def _grid_cells(scenarios, regimes) -> list[Cell]:
    return [Cell(scenario=s, **r) for r in regimes for s in scenarios]


_LOW = {"dim": 16, "batch_prompts": 32}
_MID = {"dim": 128, "batch_prompts": 16}
_NOISY = {**_MID, "reasoning_tokens": 16}  # noise-dominated: batch noise/signal 4-10 under Uniform
QUICK_MAP = MapConfig(
    cells=_grid_cells(("hard-heavy", "pareto"), (_LOW, _NOISY)),
    methods=("uniform", DEFAULT, "uniform-rounds", "default@true-p", "posterior-progressive@true-p", "vigor"),
    report_seeds=(0, 1, 2),
)
FULL_MAP = MapConfig(
    cells=_grid_cells(
        ("hard-heavy", "bimodal", "pareto"),
        (
            _LOW,
            _MID,
            _NOISY,
            {**_MID, "reasoning_tokens": 64},
            {"dim": 1024, "batch_prompts": 8},
            {**_MID, "transfer": 0.3},
            {**_MID, "n_prompts": 200},
            {**_MID, "n_prompts": 200, "reasoning_tokens": 64},  # noisy, and prompts recur every ~12 steps
        ),
    ),
    methods=(
        "uniform",
        DEFAULT,
        "uniform-rounds",
        "default@true-p",
        "optimum@true-p",
        "posterior-progressive@true-p",
        "vip@true-p",
        "vigor",
        "posterior-progressive",
        "vip",
        "vip-paper",
        "dynamic-sampling",
        "greso",
        "knapsack",
        "dynamo",
        "inverse-accuracy",
        "inverse-variance",
        "ar3po",
        "speedrl",
    ),
    # 16 tune seeds and a x sqrt(2) grid: with 8 tune seeds the rate choice alone moved the null
    # control (Uniform's allocation) to 0.71x-1.37x of Uniform (neighbouring rates)
    tune_seeds=tuple(range(100, 116)),
    lr_grid=(0.1, 0.141, 0.2, 0.283, 0.4),
    lr_step=2**0.5,
    max_extensions=8,  # x sqrt(2) steps: up to 16x beyond the grid (the d16 rows want 1-2)
    report_seeds=tuple(range(16)),
    paired_seeds=tuple(range(32)),
    steps=100,
)


SAVING_METHODS = (  # the controls and the default first: a map cut short still holds them
    "uniform",
    NULL,
    REPLICATE,
    DEFAULT,
    "oracle-skip",
    *(name for name in saving_allocators() if name != DEFAULT),  # every registered saving allocator
    "guarded-progressive",
    "vigor",
)
_RECURRING_NOISY = {**_MID, "n_prompts": 200, "reasoning_tokens": 16}  # prompts recur every ~12 steps
_SAVING_ROWS = [
    *_grid_cells(("hard-heavy", "pareto", "cold-start", "bimodal", "easy-heavy"), (_LOW, _NOISY)),
    *_grid_cells(("hard-heavy", "cold-start"), (_RECURRING_NOISY,)),
]
SAVING_CELLS = 20
SAVING_MAP = MapConfig(
    # its own rows first (five difficulty scenarios, a cold start among them), then the full map's
    # other cells in its order, up to 20 cells
    cells=[*_SAVING_ROWS, *(c for c in FULL_MAP.cells if c not in _SAVING_ROWS)][:SAVING_CELLS],
    methods=SAVING_METHODS,
    # every arm runs at Uniform's rate, tuned on the tune seeds: the controls' true rate is Uniform's,
    # and a user who switches to the default keeps the rate they tuned (the default's own best rate
    # is not run here: it costs a tuning per cell)
    untuned=tuple(m for m in SAVING_METHODS if m != "uniform"),
    same_rate=(DEFAULT,),
    tune_seeds=tuple(range(100, 106)),
    # 32 paired seeds with the jackknife-t interval, fixed before the run: where the true speedup is 1
    # (twin curves, and pairs resampled from the 16-seed maps' controls) it covers 1 at about its
    # 90% where the percentile bootstrap covers less (`experiments.intervals`,
    # benchmarks/interval_coverage.py); the other arms (report seeds) keep 16
    report_seeds=tuple(range(16)),
    paired_seeds=tuple(range(32)),
    grad_var_every=0,  # the gradient probes are the full map's; this map reads learning curves
    fractions=(0.5, 0.75, 0.9),
)
"""The saving evidence: the default against Uniform, the null control (Uniform's counts drawn in the
default's rounds), a Uniform-vs-Uniform replicate, the known-p skip rule (``oracle-skip``), every other
registered saving allocator, the budget-filling default and VIGOR, all at Uniform's rate, on the quick
map's rows for five difficulty scenarios (a cold start among them), a noisy row whose prompts recur, and the full map's next cells (20 cells), 32 paired seeds each; read
with `gain_speedup` (rollouts to 50/75/90% of the gain) and its jackknife-t interval. Cost is every generated rollout."""


PAIRED = ("uniform", DEFAULT, NULL, REPLICATE)  # methods run on the paired seeds


def _seeds_for(cfg: MapConfig, method: str) -> list[int]:
    return list(cfg.paired_seeds if method in PAIRED else cfg.report_seeds)


def _one_run(cell: Cell, method: str, seed: int, lr: float, cfg: MapConfig) -> dict:
    problem = cell.problem(seed, cfg.n_test)
    # the replicate: Uniform on the same instance, its sampling and batch order from another seed
    train_seed = seed + REPLICATE_SEED_OFFSET if method == REPLICATE else seed
    name, engine = timed_method(method)
    alloc, _ = build_allocator(name, problem, train_seed, aggregation=cfg.aggregation, estimator=cfg.estimator)
    tcfg = TrainConfig(
        steps=cfg.steps,
        batch_prompts=cell.batch_prompts,
        budget=cell.budget,
        lr=lr,
        estimator=cfg.estimator,
        aggregation=cfg.aggregation,
        seed=train_seed,
        grad_var_every=cfg.grad_var_every if method == "uniform" or method.startswith(DEFAULT) else 0,
        grad_var_resamples=cfg.grad_var_resamples,
        fingerprint_every=cfg.fingerprint_every if method == "uniform" else 0,
        engine=engine,
    )
    t0 = time.perf_counter()
    tr = train(problem, alloc, tcfg)
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


def _task_run(task: tuple[Cell, str, int, float], cfg: MapConfig) -> dict:
    """`_one_run` of one (cell, method, seed, rate) task (what `RunPool` hands to a worker)."""
    return _one_run(*task, cfg)


class _NotRunYet(Exception):
    pass


def run_map(
    cfg: MapConfig, folder: str | Path, progress: bool = True, run_missing: bool = True, jobs: int = 1
) -> dict[str, Any]:
    """Run (or resume) the map into ``folder``; return {"config", "cells", "lr", "errors", "runs",
    "missing"}. ``run_missing=False`` only reads what is there (a partial map): method/cell pairs
    with runs still missing are listed in "missing" and left out of the results. ``jobs`` worker
    processes run the runs (`map_runner.RunPool`); the result and ``runs.jsonl`` do not depend on it."""
    check_jobs(jobs)
    if check_interval(cfg.interval) == "jackknife-t" and cfg.fractions and len(cfg.paired_seeds) < 3:
        raise ValueError(f"the jackknife-t interval needs >= 3 paired seeds, got {list(cfg.paired_seeds)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    store = MapStore(folder, cfg)
    with RunPool(partial(_task_run, cfg=cfg), jobs if run_missing else 1) as pool:
        return _run_map(cfg, folder, store, pool, progress, run_missing)


def _run_map(cfg: MapConfig, folder: Path, store: MapStore, pool: RunPool, progress: bool, run_missing: bool) -> dict:
    commit = git_commit()  # the code this invocation runs
    n_est = len(cfg.cells) * sum(
        (0 if m in cfg.untuned else len(cfg.tune_seeds) * len(cfg.lr_grid)) + len(_seeds_for(cfg, m))
        for m in cfg.methods
    )
    bar = progress_bar(n_est, progress)

    def run(cell: Cell, method: str, seed: int, lr: float) -> dict:
        r = store.get(cell.key, method, seed, lr)
        if r is None and not run_missing:
            raise _NotRunYet
        if r is None:
            r = {**pool.get((cell, method, seed, lr)), "commit": commit}
            store.add(r)
        bar.set_postfix_str(f"{cell.key} {method}", refresh=False)
        bar.update(1)
        return r

    def run_seeds(cell: Cell, method: str, seeds: Sequence[int], lr: float) -> list[dict]:
        pool.prefetch((cell, method, s, lr) for s in seeds if store.get(cell.key, method, s, lr) is None)
        return [run(cell, method, s, lr) for s in seeds]

    def prefetch(method: str) -> None:
        # what the method's column will surely run: at Uniform's rate (untuned), or the first grid
        tasks = []
        for cell in cfg.cells:
            uniform_lr = best_lr.get(cell.key, {}).get("uniform")
            if method in cfg.untuned:
                tasks += [(cell, method, s, uniform_lr) for s in _seeds_for(cfg, method)] if uniform_lr else []
            else:
                tasks += [(cell, method, s, float(lr)) for lr in cfg.lr_grid for s in cfg.tune_seeds]
        pool.prefetch(t for t in tasks if store.get(t[0].key, t[1], t[2], t[3]) is None)

    best_lr: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    missing: list[str] = []
    cells_info = {}
    for cell in cfg.cells:
        info_path = folder / f"cell_{cell.key.replace('/', '_')}.json"
        saved = read_json(info_path)
        wanted = cell_settings(cfg, cell)
        if isinstance(saved, dict) and not setting_differences(saved.pop("settings", {}), wanted):
            cells_info[cell.key] = saved
        elif not run_missing:
            cells_info[cell.key] = {**cell.as_dict(), "transfer_measured": float("nan")}
        else:
            values = np.array([measured_transfer(cell.problem(s, cfg.n_test), seed=s) for s in cfg.tune_seeds])
            transfer = float(values[np.isfinite(values)].mean()) if np.isfinite(values).any() else float("nan")
            cells_info[cell.key] = {**cell.as_dict(), "transfer_measured": transfer}
            write_json(info_path, {**cells_info[cell.key], "settings": wanted})
    # Method by method over every cell, so a partial map holds whole columns (the first methods).
    for method in cfg.methods:
        prefetch(method)
        for cell in cfg.cells:
            try:
                if method in cfg.untuned:
                    uniform_lr = best_lr.get(cell.key, {}).get("uniform")
                    if uniform_lr is None and f"{cell.key} uniform" in missing:
                        raise _NotRunYet
                    if uniform_lr is None:
                        raise ValueError(f"{method} runs at Uniform's rate, which this cell has none of")
                    run_seeds(cell, method, _seeds_for(cfg, method), uniform_lr)
                    best_lr.setdefault(cell.key, {})[method] = uniform_lr
                    continue
                lr, _ = tune_grid(
                    lambda lr: float(np.mean([r["final"] for r in run_seeds(cell, method, cfg.tune_seeds, lr)])),
                    cfg.lr_grid,
                    cfg.lr_step,
                    cfg.max_extensions,
                )
                run_seeds(cell, method, _seeds_for(cfg, method), lr)
                uniform_lr = best_lr.get(cell.key, {}).get("uniform")
                if method in cfg.same_rate and uniform_lr is not None:
                    run_seeds(cell, method, _seeds_for(cfg, method), uniform_lr)
            except (LearningRateAtEdge, ValueError) as err:
                errors[f"{cell.key} {method}"] = f"{type(err).__name__}: {err}"
                continue
            except _NotRunYet:
                missing.append(f"{cell.key} {method}")
                continue
            best_lr.setdefault(cell.key, {})[method] = lr
    bar.close()
    cfg_dict = asdict(cfg)
    cfg_dict["cells"] = [c.as_dict() for c in cfg.cells]
    out = {"config": cfg_dict, "cells": cells_info, "lr": best_lr, "errors": errors, "runs": store.runs}
    return {**out, "missing": missing}

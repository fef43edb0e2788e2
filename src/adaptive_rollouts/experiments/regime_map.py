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
also records the code it ran (`experiments.results.sim_code_version`: the commit and numpy's
kernels), so a map resumed on other code can be told apart (`reporting.map_report` refuses to
summarise runs of several commits unless allowed).

The map's configuration and the method names it gives a meaning (the null control, the replicate,
...) are `map_config`'s; the maps themselves (`QUICK_MAP`, `FULL_MAP`, `SAVING_MAP`) `map_presets`';
one run, and what every benchmark that reruns a map cell builds its run with, `map_run`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.intervals import check_interval
from adaptive_rollouts.experiments.map_config import (
    DEFAULT,
    ENGINE_MARK,
    NULL,
    PAIRED,
    REPLICATE,
    REPLICATE_SEED_OFFSET,
    VIEW_MARK,
    MapConfig,
    map_method,
    seeds_for,
)
from adaptive_rollouts.experiments.map_presets import FULL_MAP, QUICK_MAP, SAVING_CELLS, SAVING_MAP, SAVING_METHODS
from adaptive_rollouts.experiments.map_run import one_run
from adaptive_rollouts.experiments.map_runner import RunPool, check_jobs
from adaptive_rollouts.experiments.map_store import MapStore, cell_settings, run_settings
from adaptive_rollouts.experiments.results import sim_code_version
from adaptive_rollouts.experiments.run_store import read_json, setting_differences, write_json
from adaptive_rollouts.experiments.speedup import bootstrap_speedup, final_level, seed_mean_curve, speedup
from adaptive_rollouts.experiments.tuning import LearningRateAtEdge, tune_grid
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.regimes import Cell, measured_transfer

# the map's names, importable from here as before the configuration, the presets and the run got
# modules of their own (`map_config`, `map_presets`, `map_run`)
__all__ = (
    ["run_map", "MapConfig", "run_settings", "map_method", "tune_grid", "LearningRateAtEdge", "final_level"]
    + ["QUICK_MAP", "FULL_MAP", "SAVING_MAP", "SAVING_METHODS", "SAVING_CELLS", "seed_mean_curve", "speedup"]
    + ["DEFAULT", "NULL", "REPLICATE", "REPLICATE_SEED_OFFSET", "ENGINE_MARK", "VIEW_MARK", "PAIRED"]
    + ["bootstrap_speedup"]
)


def _task_run(task: tuple[Cell, str, int, float], cfg: MapConfig) -> dict:
    """`map_run.one_run` of one (cell, method, seed, rate) task (what `RunPool` hands to a worker)."""
    return one_run(*task, cfg)


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
    commit = sim_code_version()  # the code this invocation runs, and numpy's kernels
    n_est = len(cfg.cells) * sum(
        (0 if m in cfg.untuned else len(cfg.tune_seeds) * len(cfg.lr_grid)) + len(seeds_for(cfg, m))
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
                tasks += [(cell, method, s, uniform_lr) for s in seeds_for(cfg, method)] if uniform_lr else []
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
                    run_seeds(cell, method, seeds_for(cfg, method), uniform_lr)
                    best_lr.setdefault(cell.key, {})[method] = uniform_lr
                    continue
                lr, _ = tune_grid(
                    lambda lr: float(np.mean([r["final"] for r in run_seeds(cell, method, cfg.tune_seeds, lr)])),
                    cfg.lr_grid,
                    cfg.lr_step,
                    cfg.max_extensions,
                )
                run_seeds(cell, method, seeds_for(cfg, method), lr)
                uniform_lr = best_lr.get(cell.key, {}).get("uniform")
                if method in cfg.same_rate and uniform_lr is not None:
                    run_seeds(cell, method, seeds_for(cfg, method), uniform_lr)
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

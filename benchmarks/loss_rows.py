"""No retune: the default at Uniform's tuned rate with the loss normalised by the rows it trains on
("kept", the trainers' usual mean) or by Uniform's rows (a cut or skipped group counting as rows of
zero advantage, `TrainConfig.loss_rows="uniform"`), against Uniform, on cells of the saving map.

Uniform's rate per cell is read from a committed saving-map result file (``--map``, its ``lr``), so
the comparison is what a user who switches without retuning gets. Statistic: `sim.gain_speedup`
(rollouts to 50/75/90% of the gain, paired seeds, the saving map's 90% interval). Every run is appended to
``runs.jsonl`` in ``--out`` as it ends and reused on a rerun with the same settings.

Besides each arm against Uniform, the two normalisations are compared with each other on the same
seeds (the "uniform" arm's rollouts to 50/75/90% of the gain over the "kept" arm's), per cell and
pooled over the cells (geometric mean and the map's pooled 90% interval, `gain_speedup.pooled_gain`). The decision
rule, fixed before the run: "uniform" becomes the default's normalisation when the pooled interval of
that ratio lies above 1; otherwise "kept" stays.

Beside them, what retuning would buy: the default ("kept") at its own best rate, tuned exactly as
the map tuned Uniform's (`tuning.tune_grid` on the map's grid and tune seeds, scored by the final
level), against Uniform and against itself at Uniform's rate on the same seeds.

Run: .venv/bin/python benchmarks/loss_rows.py [--seeds 16] [--cells a,b] [--map results/map/saving-flatness-a.json ...]
(writes results/loss_rows/loss_rows.json and, beside it, every run's curve in
loss_rows.runs.jsonl.gz; rendered into docs/saving.md by ``make docs``).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.equal_cost import equal_cost_entry
from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval, gain_speedup, pooled_gain
from adaptive_rollouts.experiments.map_run import cell_run
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import command_line, load_result, sim_code_version, write_result
from adaptive_rollouts.experiments.run_store import append_jsonl, read_jsonl
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.experiments.tuning import LearningRateAtEdge, tune_grid
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.train import train
from adaptive_rollouts.state.atomic import atomic_write

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "loss_rows" / "loss_rows.json"
RECORDS = OUT.with_name("loss_rows.runs.jsonl.gz")
ARMS = (("uniform", "kept"), ("default", "kept"), ("default", "uniform"))
TUNE = tuple(SAVING_MAP.tune_seeds)  # the seeds the map tuned Uniform's rate on
INTERVAL = SAVING_MAP.interval  # the map's interval of the primary statistic (`experiments.intervals`)
DEFAULT_CELLS = (
    "hard-heavy/d16-Q32,cold-start/d16-Q32,easy-heavy/d16-Q32,"
    "hard-heavy/d128-Q16-L16,cold-start/d128-Q16-pool200-L16,hard-heavy/d128-Q16"
)


def _run(cell, method: str, loss_rows: str, seed: int, lr: float) -> dict:
    run = cell_run(cell, SAVING_MAP, seed, lr, loss_rows=loss_rows)
    tr = train(run.problem, run.allocator(method), run.config)
    return {"rollouts": tr["rollouts"], "accuracy": tr["accuracy"], "accuracy0": tr["accuracy0"]}


def _against(base: list[dict], arm: list[dict]) -> dict:
    """``arm`` against ``base`` on paired seeds: rollouts to 50/75/90% of the gain (`gain_speedup`)
    with its 90% interval (the saving map's, `gain_interval`), share of ``base``'s rollouts, final
    accuracy minus ``base``'s at equal steps and at equal cost (`equal_cost_entry`); ``_interval`` is what pools it over cells."""
    ci = gain_interval(base, arm, interval=INTERVAL)
    return {
        "gain_speedup": gain_speedup(base, arm),
        "ci90": [ci["low"], ci["high"]],
        "spend": float(np.mean([r["rollouts"][-1] for r in arm]) / np.mean([r["rollouts"][-1] for r in base])),
        "final_gap": float(
            np.mean([final_level(r["accuracy"]) - final_level(b["accuracy"]) for r, b in zip(arm, base)])
        ),
        **equal_cost_entry(base, arm),
        "_interval": ci,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--cells", default=DEFAULT_CELLS)
    parser.add_argument(
        "--map", nargs="+", default=sorted(str(p) for p in (ROOT / "results" / "map").glob("saving-flatness-*.json"))
    )
    parser.add_argument("--out", default="runs/loss_rows")
    parser.add_argument(
        "--allow-mixed-commits",
        action="store_true",
        help="use runs of other code versions found in --out (recorded in the result); refused otherwise",
    )
    args = parser.parse_args(argv)
    rates: dict[str, float] = {}
    for path in args.map:
        for cell, lrs in load_result(path).data["lr"].items():
            if "uniform" in lrs:
                rates[cell] = lrs["uniform"]
    cells = select_cells(SAVING_MAP.cells, args.cells.split(","))
    missing = [c.key for c in cells if c.key not in rates]
    if missing:
        raise SystemExit(f"--map: no tuned Uniform rate for {missing} in {args.map}")
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    store = {(r["cell"], r["method"], r["loss_rows"], r["seed"], r["lr"]): r for r in read_jsonl(folder / "runs.jsonl")}
    commit = sim_code_version()  # the code and numpy's kernels: runs of others are not mixed in unasked

    def get(cell, method: str, loss_rows: str, seed: int, lr: float) -> dict:
        key = (cell.key, method, loss_rows, seed, lr)
        if key not in store:
            store[key] = {"cell": cell.key, "method": method, "loss_rows": loss_rows, "seed": seed, "lr": lr}
            store[key].update(_run(cell, method, loss_rows, seed, lr), commit=commit)
            append_jsonl(folder / "runs.jsonl", store[key])
        return store[key]

    seeds = range(args.seeds)
    names = ("kept", "uniform", "uniform_over_kept", "own_rate", "own_over_uniform_rate")
    rows = []
    intervals: dict[str, dict[str, dict]] = {name: {} for name in names}
    for cell in cells:
        lr = rates[cell.key]
        runs = {arm: [get(cell, *arm, s, lr) for s in seeds] for arm in ARMS}
        uni, kept = runs[("uniform", "kept")], runs[("default", "kept")]
        row: dict = {"cell": cell.key, "lr": lr}
        for method, loss_rows in ARMS[1:]:
            row[loss_rows] = _against(uni, runs[(method, loss_rows)])
        row["uniform_over_kept"] = _against(kept, runs[("default", "uniform")])
        try:
            own, tried = tune_grid(
                lambda x: float(np.mean([final_level(get(cell, "default", "kept", s, x)["accuracy"]) for s in TUNE])),
                SAVING_MAP.lr_grid,
                SAVING_MAP.lr_step,
                SAVING_MAP.max_extensions,
            )
        except LearningRateAtEdge as err:
            raise SystemExit(f"{cell.key}: the default's own rate: {err}") from None
        own_runs = [get(cell, "default", "kept", s, own) for s in seeds]
        row["own_rate"] = {"lr": own, "tried": tried, **_against(uni, own_runs)}
        row["own_over_uniform_rate"] = _against(kept, own_runs)
        for name in names:
            intervals[name][cell.key] = row[name].pop("_interval")
        rows.append(row)
        print({k: {n: x for n, x in v.items() if n != "tried"} if isinstance(v, dict) else v for k, v in row.items()})
    cell_keys = {c.key for c in cells}
    used = [r for r in store.values() if r["cell"] in cell_keys and (r["seed"] < args.seeds or r["seed"] in TUNE)]
    commits = sorted({r["commit"] for r in used})
    if len(commits) > 1 and not args.allow_mixed_commits:
        raise SystemExit(
            f"{folder / 'runs.jsonl'} holds runs of {len(commits)} code versions {commits}: use another --out "
            "or --allow-mixed-commits"
        )
    pooled = {
        name: pooled_gain([r[name]["gain_speedup"] for r in rows], [intervals[name][r["cell"]] for r in rows])
        for name in names
    }
    better = "uniform" if pooled["uniform_over_kept"]["low"] > 1.0 else "kept"
    settings = {
        "seeds": args.seeds,
        "cells": [c.key for c in cells],
        "steps": SAVING_MAP.steps,
        "fractions": list(FRACTIONS),
        "interval": INTERVAL,
        "rates_from": [str(Path(m).resolve().relative_to(ROOT)) for m in args.map],
        "tune_seeds": list(TUNE),
        "lr_grid": list(SAVING_MAP.lr_grid),
        "allow_mixed_commits": args.allow_mixed_commits,
        "decision": "uniform when the pooled 90% interval of uniform_over_kept lies above 1, else kept",
    }
    data = {"rows": rows, "pooled": pooled, "better": better, "run_commits": commits, **settings}
    write_result(OUT, data, command=command_line(), settings=settings)
    order = sorted(used, key=lambda r: (r["cell"], r["method"], r["loss_rows"], r["lr"], r["seed"]))
    lines = [json.dumps(r, sort_keys=True) for r in order]
    atomic_write(RECORDS, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

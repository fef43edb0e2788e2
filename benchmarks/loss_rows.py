"""No retune: the default at Uniform's tuned rate with the loss normalised by the rows it trains on
("kept", the trainers' usual mean) or by Uniform's rows (a cut or skipped group counting as rows of
zero advantage, `TrainConfig.loss_rows="uniform"`), against Uniform, on cells of the saving map.

Uniform's rate per cell is read from a committed saving-map result file (``--map``, its ``lr``), so
the comparison is what a user who switches without retuning gets. Statistic: `sim.gain_speedup`
(rollouts to 50/75/90% of the gain, paired seeds, 90% bootstrap interval). Every run is appended to
``runs.jsonl`` in ``--out`` as it ends and reused on a rerun with the same settings.

Run: .venv/bin/python benchmarks/loss_rows.py [--seeds 16] [--cells a,b] [--map results/map/saving-paired-a.json]
(writes results/loss_rows/loss_rows.json, rendered into docs/saving.md by ``make docs``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, bootstrap_gain_speedup, gain_speedup
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import command_line, git_commit, load_result, write_result
from adaptive_rollouts.experiments.run_store import append_jsonl, read_jsonl
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.train import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "loss_rows" / "loss_rows.json"
ARMS = (("uniform", "kept"), ("default", "kept"), ("default", "uniform"))
DEFAULT_CELLS = "cold-start/d16-Q32,hard-heavy/d128-Q16-L16,cold-start/d128-Q16-pool200-L16,hard-heavy/d128-Q16"


def _run(cell, method: str, loss_rows: str, seed: int, lr: float) -> dict:
    problem = cell.problem(seed, SAVING_MAP.n_test)
    alloc, _ = build_allocator(
        method, problem, seed, aggregation=SAVING_MAP.aggregation, estimator=SAVING_MAP.estimator
    )
    cfg = TrainConfig(
        steps=SAVING_MAP.steps,
        batch_prompts=cell.batch_prompts,
        budget=cell.budget,
        lr=lr,
        estimator=SAVING_MAP.estimator,
        aggregation=SAVING_MAP.aggregation,
        seed=seed,
        grad_var_every=0,
        loss_rows=loss_rows,
    )
    tr = train(problem, alloc, cfg)
    return {"rollouts": tr["rollouts"], "accuracy": tr["accuracy"], "accuracy0": tr["accuracy0"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--cells", default=DEFAULT_CELLS)
    parser.add_argument(
        "--map", nargs="+", default=sorted(str(p) for p in (ROOT / "results" / "map").glob("saving-paired-*.json"))
    )
    parser.add_argument("--out", default="runs/loss_rows")
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
    commit = git_commit()
    rows = []
    for cell in cells:
        lr = rates[cell.key]
        runs: dict[tuple[str, str], list[dict]] = {}
        for method, loss_rows in ARMS:
            for seed in range(args.seeds):
                key = (cell.key, method, loss_rows, seed, lr)
                if key not in store:
                    store[key] = {"cell": cell.key, "method": method, "loss_rows": loss_rows, "seed": seed, "lr": lr}
                    store[key].update(_run(cell, method, loss_rows, seed, lr), commit=commit)
                    append_jsonl(folder / "runs.jsonl", store[key])
                runs.setdefault((method, loss_rows), []).append(store[key])
        uni = runs[("uniform", "kept")]
        row = {"cell": cell.key, "lr": lr}
        for method, loss_rows in ARMS[1:]:
            arm = runs[(method, loss_rows)]
            lo, hi, _ = bootstrap_gain_speedup(uni, arm)
            row[loss_rows] = {
                "gain_speedup": gain_speedup(uni, arm),
                "ci90": [lo, hi],
                "spend": float(np.mean([r["rollouts"][-1] for r in arm]) / np.mean([r["rollouts"][-1] for r in uni])),
                "final_gap": float(
                    np.mean([final_level(r["accuracy"]) - final_level(u["accuracy"]) for r, u in zip(arm, uni)])
                ),
            }
        rows.append(row)
        print(row, flush=True)
    commits = sorted({r["commit"] for r in store.values() if r["cell"] in {c.key for c in cells}})
    settings = {
        "seeds": args.seeds,
        "cells": [c.key for c in cells],
        "steps": SAVING_MAP.steps,
        "fractions": list(FRACTIONS),
    }
    write_result(OUT, {"rows": rows, "run_commits": commits, **settings}, command=command_line(), settings=settings)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

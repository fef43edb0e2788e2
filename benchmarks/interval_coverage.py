"""How often the 90% interval of the map's primary statistic covers the truth where the truth is
1.00, for the percentile bootstrap (the 16-seed maps' interval) and the jackknife-t on log speedup
(the map's interval from 32 paired seeds on), at 16 and 32 paired seeds:

- twin curves (`experiments.coverage.twin_curves`): two arms of one distribution with heavy-tailed
  per-seed pace and wandering trajectories;
- the committed maps' controls (`experiments.coverage.resampled_control_coverage`): pairs drawn
  from the runs of Uniform, the null control and the replicate on the same problem instances of
  each cell of the committed saving maps read with the primary statistic (their true speedup to
  each other is 1), ``--trials-per-cell`` draws per cell.

The interval and seed count of the saving map were chosen from these numbers before its run.

Run: .venv/bin/python benchmarks/interval_coverage.py [--trials 400] [--trials-per-cell 20]
(writes results/interval_coverage/interval_coverage.json).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
from collections import defaultdict
from pathlib import Path

from adaptive_rollouts.experiments.coverage import interval_coverage, resampled_control_coverage
from adaptive_rollouts.experiments.map_records import read_run_records, records_path
from adaptive_rollouts.experiments.results import load_result, write_result

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "interval_coverage" / "interval_coverage.json"
CONTROLS = ("uniform", "uniform-rounds", "uniform-replicate")  # one distribution: Uniform's allocation


def control_instances(maps: list[Path]) -> tuple[list[list[list[dict]]], list[str]]:
    """Per cell of the maps, per paired seed (problem instance), the runs of the three controls at
    Uniform's rate."""
    cells, names = [], []
    for path in maps:
        data = load_result(path).data
        records = read_run_records(records_path(path))
        by_key: dict[tuple, dict] = defaultdict(dict)
        for r in records:
            by_key[(r["cell"], r["method"])][(r["seed"], round(r["lr"], 12))] = r
        for row in data["rows"]:
            rate = round(data["lr"][row["cell"]]["uniform"], 12)
            cell = [
                [by_key[(row["cell"], m)][(s, rate)] for m in CONTROLS if (s, rate) in by_key[(row["cell"], m)]]
                for s in data["config"]["paired_seeds"]
            ]
            if all(len(runs) == len(CONTROLS) for runs in cell):
                cells.append(cell)
                names.append(f"{path.stem}:{row['cell']}")
    return cells, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="twin-curve draws per seed count (default: 400)")
    parser.add_argument("--trials-per-cell", type=int, default=20, help="control draws per map cell (default: 20)")
    parser.add_argument("--seeds", default="16,32", help="paired seed counts (default: 16,32)")
    parser.add_argument("--maps", default="saving-flatness-a,saving-flatness-b", help="committed maps of the controls")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    seed_counts = [int(x) for x in args.seeds.split(",")]
    maps = [ROOT / "results" / "map" / f"{name}.json" for name in args.maps.split(",")]
    cells, names = control_instances(maps)
    rows = []
    for n in seed_counts:
        for source, cov in (
            ("twin curves", interval_coverage(seeds=n, trials=args.trials, seed=n)),
            ("committed controls", resampled_control_coverage(cells, seeds=n, trials=args.trials_per_cell, seed=n)),
        ):
            for interval, c in cov.items():
                rows.append({"source": source, "seeds": n, "interval": interval, **c})
                print(
                    f"{source:18s} {n:3d} seeds {interval:12s} covers 1.00 in {c['coverage']:.3f} "
                    f"(+- {c['se']:.3f}) of {c['trials']} draws, mean log-width {c['log_width']:.3f}",
                    flush=True,
                )
    settings = {
        "trials": args.trials,
        "trials_per_cell": args.trials_per_cell,
        "seeds": seed_counts,
        "maps": [p.stem for p in maps],
        "level": 0.9,
    }
    path = write_result(args.out, {"rows": rows, "cells": names, **settings}, settings=settings)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

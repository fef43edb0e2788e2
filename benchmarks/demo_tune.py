"""Learning-rate grid of the demo on tune seeds (never the reported ones): each method's best rate.

    python benchmarks/demo_tune.py --out runs/demo_tune            # LR_GRID x the tuned arms x TUNE_SEEDS

Every (method, rate, seed) run is the default demo run (same steps, budget, evaluation) at that
rate; it is saved as it finishes and reused on a rerun (resume). The score of a rate is the mean
over tune seeds of the final held-out greedy accuracy. Writes ``tune.md`` and ``tune.json``: the
table, each method's best rate, and whether that best is interior to the grid (a best at an edge
means the grid must be widened before the rate is trusted).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.results import write_result


def main(argv=None) -> int:
    from adaptive_rollouts.demo.allocation import LEARNING_RATES, LR_GRID, TUNE_SEEDS
    from adaptive_rollouts.demo.cli import add_demo_arguments, config_from_args
    from adaptive_rollouts.demo.jobs import run_all

    parser = add_demo_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--grid", default=",".join(f"{x:g}" for x in LR_GRID), help="comma list of rates")
    parser.set_defaults(
        out="runs/demo_tune", first_seed=TUNE_SEEDS[0], seeds=len(TUNE_SEEDS), methods=",".join(LEARNING_RATES)
    )
    args = parser.parse_args(argv)
    grid = [float(x) for x in args.grid.split(",")]
    out = Path(args.out)
    scores: dict[str, dict[str, float]] = {}
    for lr in grid:
        args.lr = lr
        cfg = config_from_args(args)
        results = run_all(cfg, out / f"lr{lr:g}", workers=args.workers)
        for method in cfg.methods:
            finals = [r.held_out[-1] for r in results if r.method == method]
            scores.setdefault(method, {})[f"{lr:g}"] = float(np.mean(finals))
    lines = [
        "| method | " + " | ".join(f"{lr:g}" for lr in grid) + " | best | interior |",
        "|" + "---|" * (len(grid) + 3),
    ]
    best = {}
    for method, by_lr in scores.items():
        values = [by_lr[f"{lr:g}"] for lr in grid]
        i = int(np.argmax(values))
        best[method] = {"lr": grid[i], "held_out_final": values[i], "interior": 0 < i < len(grid) - 1}
        lines.append(
            f"| {method} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {grid[i]:g} | {best[method]['interior']} |"
        )
    text = "\n".join(lines)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    head = f"Final held-out greedy accuracy, mean over tune seeds {seeds}, {args.steps} steps.\n\n"
    (out / "tune.md").write_text(head + text + "\n")
    write_result(out / "tune.json", {"grid": grid, "seeds": seeds, "scores": scores, "best": best})
    print(head + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

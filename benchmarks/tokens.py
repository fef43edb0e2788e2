"""Tokens and modelled step time: the default, the default timed by each engine, and the null control against Uniform on the length cells.

The length cells (`sim.regimes.TOKEN_CELLS`: failures on the hardest prompts 2.5 and 4 times as long as
successes, a cap at 8,192 tokens, lengths growing over training; `sim.lengths`) run through the saving
map's protocol (`experiments.regime_map.run_map` with the saving map's settings: Uniform's rate tuned
on the tune seeds, every other arm at Uniform's rate, paired seeds fixed here before the run). Arms:
the default as a trainer that reports no round times runs it (its own rounds), the same with a pilot
of 2 instead of 4 (another round plan: smaller pilots, more of each group left to the rounds that
follow), the default in runs
whose rounds an engine of `sim.step_time.ENGINES` times (``default~<engine>``: it prices each round,
`allocators.round_plan`), the null control, and, for what is attainable on the token axis, the
known-p skip rule (``oracle-skip``) and Pilot-Commit. Per cell and arm: the primary statistic on the
rollout, token and each engine's time axes, each engine's modelled step time per step against
Uniform's, rounds per step, the break-even overhead per round, where the saved rollouts would have
fallen, and the measured lengths (`experiments.token_summary`).

Lengths have a generator of their own, so Uniform and the null control (which never weigh lengths)
learn in a length cell exactly as in its base cell; the default weighs a rollout by its expected
tokens (the simulator hands it the lengths), so its runs differ from its base-cell runs.

Run: nice python benchmarks/tokens.py [--seeds 16] [--cells a,b] [--out runs/tokens]
(resumes from ``--out``; writes results/tokens/tokens.json, rendered into docs/tokens.md by ``make docs``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from adaptive_rollouts.allocators import DEFAULT_ALLOCATOR
from adaptive_rollouts.experiments.map_records import records_path, write_run_records
from adaptive_rollouts.experiments.regime_map import DEFAULT, ENGINE_MARK, NULL, SAVING_MAP, run_map
from adaptive_rollouts.experiments.results import command_line, write_result
from adaptive_rollouts.experiments.token_summary import length_stats, token_comparison
from adaptive_rollouts.sim.lengths import LengthModel
from adaptive_rollouts.sim.regimes import TOKEN_CELLS, select_cells
from adaptive_rollouts.sim.step_time import ENGINES

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "tokens" / "tokens.json"
# the default with its own rounds, with a pilot of 2, timed by each engine; the null control; the
# known-p skip rule and Pilot-Commit (what tokens over rollouts a rule that knows p, or pilots every
# prompt, reaches in these cells)
ARMS = (
    DEFAULT,
    DEFAULT + "[pilot=2]",
    *(DEFAULT + ENGINE_MARK + e for e in ENGINES),
    NULL,
    "oracle-skip",
    "pilot-commit",
)


def _runs(result: dict, cell: str, method: str, lr: float, seeds: list[int]) -> list[dict]:
    runs = {r["seed"]: r for (c, m, _, x), r in result["runs"].items() if c == cell and m == method and x == lr}
    return [runs[s] for s in seeds]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--cells", default=",".join(c.key for c in TOKEN_CELLS))
    parser.add_argument("--out", default="runs/tokens")
    args = parser.parse_args(argv)
    seeds = tuple(range(args.seeds))
    cells = select_cells(TOKEN_CELLS, args.cells.split(","))
    cfg = dataclasses.replace(
        SAVING_MAP,
        cells=cells,
        methods=("uniform", *ARMS),
        untuned=ARMS,
        same_rate=(DEFAULT,),
        report_seeds=seeds,
        paired_seeds=seeds,
    )
    result = run_map(cfg, args.out, progress=False)
    if result["errors"]:
        raise SystemExit(f"map errors: {result['errors']}")
    rows = []
    for cell in cells:
        lr = result["lr"][cell.key]["uniform"]
        uni = _runs(result, cell.key, "uniform", lr, list(seeds))
        row = {"cell": cell.key, "failure_ratio": cell.failure_ratio, "lr": lr, "arms": {}}
        for arm in ARMS:
            runs = _runs(result, cell.key, arm, lr, list(seeds))
            row["arms"][arm] = token_comparison(
                uni, runs, cfg.fractions, cap=LengthModel().max_tokens, interval=cfg.interval
            )
        row["uniform_lengths"] = length_stats(uni)
        rows.append(row)
        print(cell.key, {a: round(row["arms"][a]["tokens_over_rollouts"], 3) for a in ARMS}, flush=True)
    keys = {c.key for c in cells}
    commits = sorted({r["commit"] for r in result["runs"].values() if r["cell"] in keys})
    settings = {
        "seeds": list(seeds),
        "cells": [c.key for c in cells],
        "steps": cfg.steps,
        "fractions": list(cfg.fractions),
        "interval": cfg.interval,
        "tune_seeds": list(cfg.tune_seeds),
        "default_allocator": DEFAULT_ALLOCATOR,
        "length_model": {**dataclasses.asdict(LengthModel()), "ratio": "per cell"},
        # throughput None: no bound (a synchronous engine)
        "engines": {
            name: {k: (None if v == float("inf") else v) for k, v in dataclasses.asdict(e).items()}
            for name, e in ENGINES.items()
        },
        "time_unit": "token-times (the time to decode one token of one rollout)",
    }
    write_result(OUT, {"rows": rows, "run_commits": commits, **settings}, command=command_line(), settings=settings)
    # every run the rows read (and every tuning run's score), so the file can be recomputed (a test does)
    kept = {**result, "runs": {k: r for k, r in result["runs"].items() if k[0] in keys}}
    n = write_run_records(kept, records_path(OUT))
    print(f"wrote {OUT} and {n} run records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

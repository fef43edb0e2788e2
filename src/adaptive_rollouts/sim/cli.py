"""`adaptive-rollouts bench`: the learning-simulator benchmark from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any

from adaptive_rollouts.checks.arguments import positive_int
from adaptive_rollouts.sim.bench import FULL, QUICK, BenchConfig, run_benchmark
from adaptive_rollouts.sim.map_report import write_map_report
from adaptive_rollouts.sim.problem import SCENARIOS
from adaptive_rollouts.sim.regime_map import FULL_MAP, QUICK_MAP, run_map
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.report import theory_checks, write_report
from adaptive_rollouts.validation import AGGREGATIONS, ESTIMATORS, check_choice

__all__ = ["add_bench_arguments", "run_bench", "run_map_command", "config_from_args"]


def _csv(text: str) -> list[str]:
    """Comma list; commas inside [...] (method options such as default[round_fractions=(0.5,0.5)]) stay."""
    return [t.strip() for t in re.split(r",(?![^\[]*\])", text) if t.strip()]


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/bench", help="run folder for report.md, results.json, PNGs")
    parser.add_argument("--quick", action="store_true", help="the small configuration (default; with --map: 4 cells)")
    parser.add_argument(
        "--map",
        action="store_true",
        help="the regime map: every method over regime cells, AdamW at each method's best rate; "
        "resumable (runs.jsonl in --out); --quick for the small map",
    )
    parser.add_argument("--full", action="store_true", help="the full sweep documented in docs/benchmark.md")
    parser.add_argument("--scenarios", type=_csv, help=f"comma list from {','.join(SCENARIOS)}")
    parser.add_argument("--methods", type=_csv, help="comma list of allocator names (see docs/benchmark.md)")
    parser.add_argument(
        "--cells", type=_csv, help="with --map: comma list of cells (hard-heavy/d16-Q32) or regimes (d128-Q16-L16)"
    )
    parser.add_argument("--aggregations", type=_csv, help=f"comma list from {','.join(AGGREGATIONS)}")
    parser.add_argument("--seeds", type=positive_int, help="number of seeds")
    parser.add_argument("--steps", type=positive_int, help="training steps per run")
    parser.add_argument("--prompts", type=positive_int, help="train-pool size")
    parser.add_argument("--budget", type=positive_int, help="rollouts per step")
    parser.add_argument("--batch-prompts", type=positive_int, help="prompts per step")
    parser.add_argument("--estimator", choices=ESTIMATORS, help="advantage estimator (default grpo)")
    parser.add_argument("--lr-grid", type=_csv, help="multipliers of the base learning rate, e.g. 0.333,1,3")
    parser.add_argument(
        "--features",
        choices=["synthetic", "minilm"],
        help="prompt features: synthetic clusters (default) or MiniLM embeddings of reasoning-gym questions",
    )
    parser.add_argument(
        "--lr-select",
        choices=["all", "first-seed"],
        help="pick the best learning rate on all seeds, or on the first seed only",
    )
    parser.add_argument(
        "--theory-draws",
        type=positive_int,
        default=200_000,
        help="Monte Carlo draws per cell of the variance-formula check",
    )
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--no-progress", action="store_true")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    cfg = FULL if getattr(args, "full", False) else QUICK
    changes = {}
    for attr, field in (
        ("scenarios", "scenarios"),
        ("methods", "methods"),
        ("aggregations", "aggregations"),
        ("steps", "steps"),
        ("prompts", "n_prompts"),
        ("budget", "budget"),
        ("batch_prompts", "batch_prompts"),
        ("estimator", "estimator"),
        ("features", "features"),
        ("lr_select", "lr_select"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            changes[field] = value
    if getattr(args, "seeds", None) is not None:
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
        changes["seeds"] = tuple(range(args.seeds))
    if getattr(args, "lr_grid", None):
        changes["lr_multipliers"] = tuple(float(x) for x in args.lr_grid)
    for s in changes.get("scenarios", ()):
        check_choice("--scenarios", s, SCENARIOS)
    for a in changes.get("aggregations", ()):
        check_choice("--aggregations", a, AGGREGATIONS)
    return dataclasses.replace(cfg, **changes)


def run_map_command(args: argparse.Namespace) -> int:
    cfg = FULL_MAP if getattr(args, "full", False) or not getattr(args, "quick", False) else QUICK_MAP
    changes: dict[str, Any] = {}
    if getattr(args, "methods", None):
        changes["methods"] = tuple(args.methods)
    if getattr(args, "steps", None):
        changes["steps"] = args.steps
    if getattr(args, "estimator", None):
        changes["estimator"] = args.estimator
    if getattr(args, "cells", None):
        try:
            changes["cells"] = select_cells(cfg.cells, args.cells)
        except ValueError as err:
            print(f"adaptive-rollouts bench --map: {err}", file=sys.stderr)
            return 2
    if getattr(args, "aggregations", None):
        if len(args.aggregations) != 1:
            print("adaptive-rollouts bench --map: give one aggregation", file=sys.stderr)
            return 2
        changes["aggregation"] = args.aggregations[0]
    cfg = dataclasses.replace(cfg, **changes)
    result = run_map(cfg, args.out, progress=not getattr(args, "no_progress", False))
    report = write_map_report(result, args.out, plots=not getattr(args, "no_plots", False))
    print(f"map: {report}")
    if result["errors"]:
        print(f"{len(result['errors'])} method/cell pairs not reported (see {report})", file=sys.stderr)
        return 1
    return 0


def run_bench(args: argparse.Namespace) -> int:
    if getattr(args, "map", False):
        return run_map_command(args)
    if getattr(args, "cells", None):
        print("adaptive-rollouts bench: --cells selects cells of the regime map; add --map", file=sys.stderr)
        return 2

    try:
        cfg = config_from_args(args)
    except ValueError as err:
        print(f"adaptive-rollouts bench: {err}", file=sys.stderr)
        return 2
    result = run_benchmark(cfg, progress=not getattr(args, "no_progress", False))
    theory = theory_checks(draws=max(int(getattr(args, "theory_draws", 200_000)), 1000))
    report = write_report(result, args.out, theory=theory, plots=not getattr(args, "no_plots", False))
    print(f"report: {report}  ({result['seconds']:.0f} s)")
    return 0

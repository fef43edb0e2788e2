"""`adaptive-rollouts bench`: the learning-simulator benchmark from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from adaptive_rollouts.checks.arguments import (
    UsageError,
    check_output_folder,
    positive_float_list,
    positive_int,
    reports_usage_errors,
)
from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, check_choice
from adaptive_rollouts.experiments.bench import FULL, QUICK, BenchConfig, run_benchmark
from adaptive_rollouts.experiments.regime_map import FULL_MAP, QUICK_MAP, SAVING_MAP, run_map
from adaptive_rollouts.experiments.results import MixedResultsError
from adaptive_rollouts.reporting.bench_report import write_report
from adaptive_rollouts.reporting.map_report import write_map_report
from adaptive_rollouts.sim.bench_checks import check_methods
from adaptive_rollouts.sim.problem import SCENARIOS
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.theory import theory_checks

__all__ = ["add_bench_arguments", "run_bench", "run_map_command", "config_from_args"]

THEORY_DRAWS = 200_000
# options of the per-scenario benchmark that the regime map has no use for (its cells fix them)
_NOT_FOR_MAP = (
    "scenarios",
    "seeds",
    "prompts",
    "budget",
    "batch_prompts",
    "lr_grid",
    "features",
    "lr_select",
    "theory_draws",
)


def _csv(text: str) -> list[str]:
    """Comma list; commas inside [...] (method options such as default[round_fractions=(0.5,0.5)]) stay."""
    return [t.strip() for t in re.split(r",(?![^\[]*\])", text) if t.strip()]


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/bench", help="run folder for report.md, results.json, PNGs")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the small configuration (the default without --map; with --map: the 4-cell map instead of the full one)",
    )
    parser.add_argument(
        "--map",
        action="store_true",
        help="the regime map: every method over regime cells, AdamW at each method's best rate; "
        "resumable (runs.jsonl in --out); --quick for the small map",
    )
    parser.add_argument("--full", action="store_true", help="the full sweep documented in docs/benchmark.md")
    parser.add_argument(
        "--saving",
        action="store_true",
        help="with --map: the saving evidence (the default, the null control, a Uniform replicate, Pilot-Commit and the known-p skip rule at Uniform's rate)",
    )
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
    parser.add_argument(
        "--lr-grid", type=positive_float_list, help="multipliers of the base learning rate, e.g. 0.333,1,3"
    )
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
        help=f"Monte Carlo draws per cell of the variance-formula check (default {THEORY_DRAWS:,})",
    )
    parser.add_argument(
        "--results-dir",
        default="results/map",
        help="with --map: also write map.json as <this folder>/<name of --out>.json, the file the docs "
        "render from ('' to skip)",
    )
    parser.add_argument(
        "--allow-mixed-commits",
        action="store_true",
        help="with --map: summarise runs.jsonl even if its runs ran at several commits (the tables say so)",
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
        changes["lr_multipliers"] = tuple(float(x) for x in args.lr_grid)  # positive_float_list: finite, > 0
    for s in changes.get("scenarios", ()):
        check_choice("--scenarios", s, SCENARIOS)
    for a in changes.get("aggregations", ()):
        check_choice("--aggregations", a, AGGREGATIONS)
    return dataclasses.replace(cfg, **changes)


def _check_common(args: argparse.Namespace) -> None:
    if getattr(args, "quick", False) and getattr(args, "full", False):
        raise UsageError("give one of --quick and --full")
    check_output_folder(args.out)


def _map_config(args: argparse.Namespace) -> Any:
    """The regime map's configuration from the arguments; UsageError for what it cannot take."""
    ignored = [f"--{a.replace('_', '-')}" for a in _NOT_FOR_MAP if getattr(args, a, None) is not None]
    if ignored:
        raise UsageError(
            f"{', '.join(ignored)} not used by --map (its cells fix them; choose cells with --cells, "
            "or run without --map)"
        )
    cfg = QUICK_MAP if getattr(args, "quick", False) else FULL_MAP
    if getattr(args, "saving", False):
        cfg = SAVING_MAP
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
            raise UsageError(str(err)) from None
    if getattr(args, "aggregations", None):
        if len(args.aggregations) != 1:
            raise UsageError("--aggregations: give one aggregation with --map")
        try:
            check_choice("--aggregations", args.aggregations[0], AGGREGATIONS)
        except ValueError as err:
            raise UsageError(str(err)) from None
        changes["aggregation"] = args.aggregations[0]
    cfg = dataclasses.replace(cfg, **changes)
    _check_methods(cfg.methods, {(c.batch_prompts, c.budget) for c in cfg.cells})
    return cfg


def _check_methods(methods: Any, steps: set[tuple[int, int]]) -> None:
    try:
        for batch_prompts, budget in sorted(steps):
            check_methods(methods, batch_prompts, budget)
    except ValueError as err:
        raise UsageError(str(err)) from None


@reports_usage_errors
def run_map_command(args: argparse.Namespace) -> int:
    _check_common(args)
    cfg = _map_config(args)
    try:
        result = run_map(cfg, args.out, progress=not getattr(args, "no_progress", False))
    except ValueError as err:  # runs.jsonl of other settings, a damaged line: named, nothing mixed
        raise UsageError(str(err)) from None
    results_dir = getattr(args, "results_dir", "")
    copy = Path(results_dir) / f"{Path(args.out).resolve().name}.json" if results_dir else None
    command = "adaptive-rollouts " + shlex.join(sys.argv[1:])  # the console script's or `python -m`'s arguments
    try:
        report = write_map_report(
            result,
            args.out,
            plots=not getattr(args, "no_plots", False),
            command=command,
            results_copy=copy,
            allow_mixed_commits=getattr(args, "allow_mixed_commits", False),
        )
    except MixedResultsError as err:
        print(f"adaptive-rollouts bench --map: {Path(args.out) / 'runs.jsonl'}: {err}", file=sys.stderr)
        return 2
    print(f"map: {report}" + (f"; result file for the docs: {copy}" if copy else ""))
    if result["errors"]:
        print(f"{len(result['errors'])} method/cell pairs not reported (see {report})", file=sys.stderr)
        return 1
    return 0


@reports_usage_errors
def run_bench(args: argparse.Namespace) -> int:
    """`adaptive-rollouts bench`: every setting is checked (`UsageError`) before any set-up."""
    if getattr(args, "map", False):
        return run_map_command(args)
    if getattr(args, "cells", None):
        raise UsageError("--cells selects cells of the regime map; add --map")
    if getattr(args, "saving", False):
        raise UsageError("--saving selects the saving evidence map; add --map")
    _check_common(args)
    try:
        cfg = config_from_args(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if cfg.batch_prompts > cfg.n_prompts:
        raise UsageError(f"--batch-prompts {cfg.batch_prompts} exceeds the pool of --prompts {cfg.n_prompts}")
    _check_methods(cfg.methods, {(cfg.batch_prompts, cfg.budget)})
    result = run_benchmark(cfg, progress=not getattr(args, "no_progress", False))
    theory = theory_checks(draws=max(int(getattr(args, "theory_draws", None) or THEORY_DRAWS), 1000))
    report = write_report(result, args.out, theory=theory, plots=not getattr(args, "no_plots", False))
    print(f"report: {report}  ({result['seconds']:.0f} s)")
    return 0

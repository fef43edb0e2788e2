"""`adaptive-rollouts bench`: the learning-simulator benchmark from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

from adaptive_rollouts.allocators import DEFAULT_ALLOCATOR
from adaptive_rollouts.checks.arguments import (
    UsageError,
    check_output_folder,
    name_list,
    positive_float_list,
    positive_int,
    reports_usage_errors,
    seed_list,
)
from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS, check_choice
from adaptive_rollouts.commands.bench_checks import check_methods
from adaptive_rollouts.experiments.bench import FULL, QUICK, BenchConfig, run_benchmark
from adaptive_rollouts.experiments.regime_map import FULL_MAP, QUICK_MAP, SAVING_MAP, run_map
from adaptive_rollouts.experiments.results import MixedResultsError
from adaptive_rollouts.reporting.bench_report import write_report
from adaptive_rollouts.reporting.map_report import write_map_report
from adaptive_rollouts.sim.problem import SCENARIOS
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.theory import theory_checks

__all__ = ["BENCH_DESCRIPTION", "add_bench_arguments", "run_bench", "run_map_command", "config_from_args"]

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


BENCH_DESCRIPTION = f"""\
The learning simulator: a small policy trained with every allocator at equal rollout budget.

bench --quick (the default without --map): the per-scenario sweep, small. Methods
  {", ".join(QUICK.methods)}
  (the default is {DEFAULT_ALLOCATOR}; pilot-commit a published saving method) on
  {", ".join(QUICK.scenarios)}, {len(QUICK.seeds)} seeds, {QUICK.steps} steps. Each method at its best learning
  rate (the grid grows at an edge until the best is interior); the table has the speedup over
  Uniform and each method's share of Uniform's rollouts. --full: every registered allocator.
bench --map [--quick]: the regime map that docs/benchmark.md reports: methods over regime cells,
  paired seeds, resumable (runs.jsonl in --out); --quick runs its {len(QUICK_MAP.cells)}-cell version
  ({", ".join(QUICK_MAP.methods)}); --saving the saving evidence of docs/saving.md.
List options take comma-separated names, each at most once; a bad value is refused before any work.
"""


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/bench", help="run folder for report.md, results.json and the PNGs")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the small configuration: without --map the per-scenario sweep (the default), with --map the "
        "4-cell map instead of the full one",
    )
    parser.add_argument(
        "--map",
        action="store_true",
        help="the regime map: every method over regime cells, AdamW at each method's best rate; "
        "resumable (runs.jsonl in --out); --quick for the small map",
    )
    parser.add_argument("--full", action="store_true", help="the full per-scenario sweep (all registered allocators)")
    parser.add_argument(
        "--saving",
        action="store_true",
        help="with --map: the saving evidence (the default, the null control, a Uniform replicate, Pilot-Commit and the known-p skip rule at Uniform's rate)",
    )
    parser.add_argument(
        "--scenarios",
        type=name_list(f"scenarios such as {','.join(SCENARIOS[:2])}"),
        help=f"comma list from {','.join(SCENARIOS)} (default: {','.join(QUICK.scenarios)}; --full: all five)",
    )
    parser.add_argument(
        "--methods",
        type=name_list("methods such as uniform,default"),
        help="comma list of allocator names (docs/benchmark.md) (default: "
        f"{','.join(QUICK.methods)}; with --map the map's own list)",
    )
    parser.add_argument(
        "--paired",
        type=name_list("methods such as default[flat_chance=None]"),
        help="with --map: arms also run on the map's paired seeds, beside Uniform, the default, the null "
        "control and the replicate (an arm compared with the default seed for seed) (default: none)",
    )
    parser.add_argument(
        "--map-seeds",
        type=seed_list,
        help="with --map: run every arm on these seeds instead of the map's report and paired seeds (a check "
        "on fresh seeds, fixed before the run: 32-47 or a comma list); the rates are tuned on the map's own "
        "tune seeds (default: the map's)",
    )
    parser.add_argument(
        "--cells",
        type=name_list("cells such as hard-heavy/d16-Q32"),
        help="with --map: comma list of cells (hard-heavy/d16-Q32) or regimes (d128-Q16-L16) (default: every cell "
        "of the map)",
    )
    parser.add_argument(
        "--per-prompt",
        type=positive_int,
        help="with --map: Uniform's group size in every cell, the step's budget over its prompts (cells "
        "other than 8 are marked, d16-Q32-n4) (default: the cells' own, 8)",
    )
    parser.add_argument(
        "--aggregations",
        type=name_list("aggregations such as prompt-mean,seq-mean"),
        help=f"comma list from {','.join(AGGREGATIONS)} (default: {','.join(QUICK.aggregations)}; with --map "
        "one, default seq-mean)",
    )
    parser.add_argument("--seeds", type=positive_int, help=f"number of seeds (default: {len(QUICK.seeds)})")
    parser.add_argument(
        "--steps", type=positive_int, help=f"training steps per run (default: {QUICK.steps}; --map: the map's)"
    )
    parser.add_argument("--prompts", type=positive_int, help=f"train-pool size (default: {QUICK.n_prompts})")
    parser.add_argument("--budget", type=positive_int, help=f"rollouts per step (default: {QUICK.budget})")
    parser.add_argument("--batch-prompts", type=positive_int, help=f"prompts per step (default: {QUICK.batch_prompts})")
    parser.add_argument("--estimator", choices=ESTIMATORS, help="advantage estimator (default: grpo)")
    parser.add_argument(
        "--lr-grid",
        type=positive_float_list,
        help="multipliers of the base learning rate, e.g. 0.333,1,3; extended at an edge until the best is interior "
        f"(default: {','.join(f'{m:.3g}' for m in QUICK.lr_multipliers)})",
    )
    parser.add_argument(
        "--features",
        choices=["synthetic", "minilm"],
        help="prompt features: synthetic clusters or MiniLM embeddings of reasoning-gym questions (default: synthetic)",
    )
    parser.add_argument(
        "--lr-select",
        choices=["all", "first-seed"],
        help="pick the best learning rate on all seeds, or on the first seed only (default: first-seed; --full: all)",
    )
    parser.add_argument(
        "--theory-draws",
        type=positive_int,
        help=f"Monte Carlo draws per cell of the variance-formula check (default: {THEORY_DRAWS:,})",
    )
    parser.add_argument(
        "--results-dir",
        default="results/map",
        help="with --map: also write map.json as <this folder>/<name of --out>.json, the file the docs "
        "render from ('' to skip) (default: results/map)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        help="with --map: worker processes for the runs (seeds are independent; the runs and the map are the "
        "same as with one) (default: 1)",
    )
    parser.add_argument(
        "--allow-mixed-commits",
        action="store_true",
        help="with --map: summarise runs.jsonl even if its runs ran at several commits (the tables say so)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write report.md and results.json only, no PNGs")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


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
        if getattr(args, "saving", False):  # the saving map runs every arm but Uniform at Uniform's rate
            changes["untuned"] = tuple(dict.fromkeys([*cfg.untuned, *(m for m in args.methods if m != "uniform")]))
    if getattr(args, "paired", None):
        unknown = [m for m in args.paired if m not in changes.get("methods", cfg.methods)]
        if unknown:
            raise UsageError(f"--paired: {', '.join(unknown)} not among the map's methods (--methods)")
        changes["paired"] = tuple(dict.fromkeys([*cfg.paired, *args.paired]))
    if getattr(args, "map_seeds", None):
        if set(args.map_seeds) & set(cfg.tune_seeds):
            raise UsageError(f"--map-seeds: the map tunes its rates on seeds {list(cfg.tune_seeds)}; report on others")
        changes["report_seeds"] = changes["paired_seeds"] = tuple(args.map_seeds)
    if getattr(args, "steps", None):
        changes["steps"] = args.steps
    if getattr(args, "estimator", None):
        changes["estimator"] = args.estimator
    if getattr(args, "cells", None):
        try:
            changes["cells"] = select_cells(cfg.cells, args.cells)
        except ValueError as err:
            raise UsageError(str(err)) from None
    if getattr(args, "per_prompt", None):
        if args.per_prompt < 2:
            raise UsageError(f"--per-prompt {args.per_prompt}: a group needs 2 rollouts to carry a signal")
        cells = changes.get("cells", cfg.cells)
        changes["cells"] = [dataclasses.replace(c, per_prompt=args.per_prompt) for c in cells]
    if getattr(args, "aggregations", None):
        if len(args.aggregations) != 1:
            raise UsageError("--aggregations: give one aggregation with --map")
        try:
            check_choice("--aggregations", args.aggregations[0], AGGREGATIONS)
        except ValueError as err:
            raise UsageError(str(err)) from None
        changes["aggregation"] = args.aggregations[0]
    cfg = dataclasses.replace(cfg, **changes)
    _check_methods(cfg.methods, {(c.batch_prompts, c.budget) for c in cfg.cells}, map_marks=True)
    return cfg


def _check_methods(methods: Any, steps: set[tuple[int, int]], map_marks: bool = False) -> None:
    try:
        for batch_prompts, budget in sorted(steps):
            check_methods(methods, batch_prompts, budget, map_marks=map_marks)
    except ValueError as err:
        raise UsageError(str(err)) from None


@reports_usage_errors
def run_map_command(args: argparse.Namespace) -> int:
    _check_common(args)
    cfg = _map_config(args)
    results_dir = getattr(args, "results_dir", "")
    if results_dir:
        check_output_folder(results_dir, "--results-dir")
    try:
        result = run_map(
            cfg, args.out, progress=not getattr(args, "no_progress", False), jobs=getattr(args, "jobs", None) or 1
        )
    except ValueError as err:  # runs.jsonl of other settings, a damaged line: named, nothing mixed
        raise UsageError(str(err)) from None
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
    except MixedResultsError as err:  # names --out and --allow-mixed-commits
        raise UsageError(f"--out {Path(args.out) / 'runs.jsonl'}: {err}") from None
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
    if getattr(args, "paired", None):
        raise UsageError("--paired runs arms on the regime map's paired seeds; add --map")
    if getattr(args, "map_seeds", None):
        raise UsageError("--map-seeds sets the regime map's seeds; add --map")
    if getattr(args, "per_prompt", None):
        raise UsageError("--per-prompt sets the regime map's group size; add --map (else --budget)")
    if getattr(args, "jobs", None) is not None:
        raise UsageError("--jobs runs the regime map's runs in processes; add --map")
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

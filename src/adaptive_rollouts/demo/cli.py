"""``adaptive-rollouts demo``: arguments and entry point (`cli.py` dispatches to it)."""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path

from adaptive_rollouts.checks.arguments import (
    HelpFormatter,
    UsageError,
    check_output_folder,
    name_list,
    nonnegative_int,
    positive_int,
    reports_usage_errors,
)
from adaptive_rollouts.integrations.trl.settings import LOSS_TYPE_AGGREGATION

from .allocation import POLICY_VIEW_MARK, known_arms
from .jobs import run_all
from .report import write_report
from .run import DemoConfig, config_dict
from .tasks import TASKS


def add_demo_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = DemoConfig()
    parser.add_argument("--out", default="runs/demo", help="report folder")
    parser.add_argument(
        "--methods",
        type=name_list("arms such as uniform,default"),
        default=",".join(d.methods),
        help="comma list of arms (uniform, default, null, oracle, oracle-skip, default@true-p, vip-paper, uniform-drgrpo, vigor, "
        "or any allocator name; +view: the trainer gives the arm the policy's view): Uniform vs the saving default "
        "as the trainer gives it",
    )
    parser.add_argument(
        "--seeds", type=positive_int, default=1, help="number of seeds: first-seed .. first-seed + seeds - 1"
    )
    parser.add_argument("--first-seed", type=nonnegative_int, default=0, help="the first seed")
    parser.add_argument("--steps", type=positive_int, default=d.steps, help="RL steps per run")
    parser.add_argument(
        "--prompts-per-step", type=positive_int, default=d.prompts_per_step, help="prompts in each RL step"
    )
    parser.add_argument(
        "--mean-rollouts",
        type=_group_size,
        default=d.mean_rollouts,
        help="rollouts per prompt on average: the step's budget / prompts (>= 2)",
    )
    parser.add_argument(
        "--eval-every", type=positive_int, default=d.eval_every, help="RL steps between held-out evaluations"
    )
    parser.add_argument(
        "--lr", type=float, default=None, help="one rate for every method (default: each its tuned rate)"
    )
    parser.add_argument("--workers", type=positive_int, default=1, help="runs in parallel (processes, one thread each)")
    parser.add_argument("--model-dir", default=None, help="warm-start folder (default: the task's shipped weights)")
    parser.add_argument(
        "--task",
        default=d.task,
        choices=sorted(TASKS),
        help="sort (default: 3-8 digits) or ladder (3-12 digits, its own warm start supervised on 3-8 only: "
        "short lists mostly solved, lists longer than any it was supervised on almost never, a frontier between)",
    )
    parser.add_argument(
        "--loss-type",
        default=None,
        choices=sorted(LOSS_TYPE_AGGREGATION),
        help="TRL loss_type for every arm (default: each arm's own, grpo but dr_grpo for vip-paper and uniform-drgrpo)",
    )
    return parser


def _group_size(text: str) -> int:
    """argparse type of --mean-rollouts: an integer >= 2 (a group of one has no advantage)."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {value}")
    return value


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    """The DemoConfig of parsed ``add_demo_arguments`` arguments; `UsageError` (a ValueError) names a bad one."""

    methods = tuple(
        name_list("arms such as uniform,default")(args.methods) if isinstance(args.methods, str) else args.methods
    )
    # an arm may read the policy's view ("default+view"): the base name must be known
    unknown = [m for m in methods if m.removesuffix(POLICY_VIEW_MARK) not in known_arms()]
    if unknown or not methods:
        raise UsageError(f"--methods: unknown {unknown or methods}; choose from {list(known_arms())}")
    for name in ("seeds", "steps", "workers", "prompts_per_step", "eval_every"):  # when not parsed by argparse
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.mean_rollouts < 2:
        raise UsageError(f"--mean-rollouts must be >= 2, got {args.mean_rollouts}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise UsageError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.task not in TASKS:
        raise UsageError(f"--task: unknown {args.task!r}; choose from {sorted(TASKS)}")
    if args.model_dir is not None and not Path(args.model_dir).is_dir():
        raise UsageError(f"--model-dir: {args.model_dir!r} is not a folder")
    return DemoConfig(
        methods=methods,
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.mean_rollouts,
        eval_every=args.eval_every,
        learning_rates=None if args.lr is None else {m: args.lr for m in methods},
        model_dir=args.model_dir,
        loss_type=args.loss_type,
        task=args.task,
    )


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; a bad value raises `UsageError` before any set-up (the command line reports
    it through `reports_usage_errors`)."""

    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notes, once per run
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    cfg = config_from_args(args)  # every value checked before any set-up
    check_output_folder(args.out)

    out = Path(args.out)
    start = time.time()
    results = run_all(cfg, out, workers=args.workers)
    text = write_report(results, config_dict(cfg), out)
    print(text)
    print(f"report: {out / 'report.md'} ({time.time() - start:.0f}s)")
    return 0


def main(argv=None) -> int:
    parser = add_demo_arguments(argparse.ArgumentParser(prog="adaptive-rollouts demo", formatter_class=HelpFormatter))
    args = parser.parse_args(argv)
    args.parser = parser
    return reports_usage_errors(run_demo)(args)


if __name__ == "__main__":
    raise SystemExit(main())

"""`adaptive-rollouts` command line: demo | bench | allocate.

The subcommands' modules import their heavy dependencies (torch, TRL, matplotlib) only when they
run. Every bad value is refused before any set-up, as argparse refuses a bad argument: exit status
2, the usage line and one ``error:`` line naming the option and the value, no traceback (a
subcommand raises `UsageError`, reported by `checks.arguments.reports_usage_errors`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from adaptive_rollouts.checks.arguments import (
    UsageError,
    check_output_folder,
    nonnegative_int,
    positive_float,
    positive_float_list,
    positive_int,
    probability_list,
    reports_usage_errors,
)
from adaptive_rollouts.checks.validation import ESTIMATORS
from adaptive_rollouts.demo.cli import add_demo_arguments, run_demo
from adaptive_rollouts.objectives import get_estimator
from adaptive_rollouts.sim.cli import add_bench_arguments, run_bench
from adaptive_rollouts.solvers import allocate

__all__ = [
    "main",
    "build_parser",
    "positive_int",
    "nonnegative_int",
    "probability_list",
    "positive_float",
    "positive_float_list",
    "UsageError",
    "reports_usage_errors",
    "check_output_folder",
]


def _cmd_allocate(args: argparse.Namespace) -> int:
    p = np.array(args.p, dtype=float)
    # the estimator's weights from the reward variance p(1-p) (ones for GRPO, whose cost holds it)
    weights = get_estimator(args.objective).weights(p * (1 - p))
    try:
        counts = allocate(
            weights,
            budget=args.budget,
            lower=args.lower,
            upper=args.upper,
            objective=args.objective,
            success_prob=p,
        )
    except ValueError as err:  # infeasible budget, lower > upper: an input error, not a crash
        print(f"adaptive-rollouts allocate: error: {err}", file=sys.stderr)
        return 2
    print(" ".join(str(int(c)) for c in counts))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptive-rollouts",
        description="Decide how many rollouts each prompt gets in RLVR, under a fixed budget.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="RLVR on a tiny LM through TRL: Uniform vs VIP vs VIGOR vs PosteriorProgressive")
    add_demo_arguments(demo)
    demo.set_defaults(func=reports_usage_errors(run_demo), parser=demo)

    bench = sub.add_parser("bench", help="learning-simulator benchmark of every allocator")
    add_bench_arguments(bench)
    bench.set_defaults(func=run_bench, parser=bench)

    alloc = sub.add_parser("allocate", help="exact allocation for given success probabilities")
    alloc.add_argument("--p", required=True, type=probability_list, help="comma-separated success probabilities")
    alloc.add_argument("--budget", type=nonnegative_int, required=True)
    alloc.add_argument("--lower", type=positive_int, default=2, help="at least this many rollouts per prompt (>= 1)")
    alloc.add_argument("--upper", type=positive_int, default=None)
    alloc.add_argument("--objective", default="rloo", choices=ESTIMATORS, help="advantage estimator")
    alloc.set_defaults(func=_cmd_allocate, parser=alloc)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

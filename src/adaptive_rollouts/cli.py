"""`adaptive-rollouts` command line: demo | bench | allocate.

The subcommands' modules import their heavy dependencies (torch, TRL, matplotlib) only when they
run. Every bad value is refused before any set-up, as argparse refuses a bad argument: exit status
2, the usage line and one ``error:`` line naming the option and the value, no traceback (a
subcommand raises `UsageError`, reported by `checks.arguments.reports_usage_errors`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from adaptive_rollouts.checks.arguments import (
    HelpFormatter,
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
from adaptive_rollouts.commands.bench import BENCH_DESCRIPTION, add_bench_arguments, run_bench
from adaptive_rollouts.demo.cli import add_demo_arguments, run_demo
from adaptive_rollouts.objectives import get_estimator
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


def _check_allocate_budget(q: int, budget: int, lower: int, upper: int | None) -> None:
    """`UsageError` naming the flag to change when ``budget`` cannot be spent exactly over ``q``
    prompts with ``lower <= n <= upper`` (only the bounds the user set are named)."""
    if upper is not None and upper < lower:
        raise UsageError(f"--upper {upper} is below --lower {lower}: raise --upper or lower --lower")
    if budget < q * lower:
        raise UsageError(
            f"--budget {budget} is below --lower {lower} x {q} prompts = {q * lower}: "
            f"raise --budget to >= {q * lower} or lower --lower"
        )
    if upper is not None and budget > q * upper:
        raise UsageError(
            f"--budget {budget} is above --upper {upper} x {q} prompts = {q * upper}: "
            f"lower --budget to <= {q * upper} or raise --upper"
        )


def _cmd_allocate(args: argparse.Namespace) -> int:
    p = np.array(args.p, dtype=float)
    _check_allocate_budget(p.size, args.budget, args.lower, args.upper)
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
    except ValueError as err:  # what the checks above cannot foresee: still one line, no traceback
        raise UsageError(str(err)) from None
    upper = "no limit but the budget" if args.upper is None else args.upper
    print(f"objective: {args.objective} (the summed gradient variance of its advantage estimator, minimised exactly)")
    print(f"budget: {args.budget} rollouts over {p.size} prompts, lower {args.lower}, upper {upper}")
    cells = [(f"{prob:g}", str(int(count))) for prob, count in zip(args.p, counts)]
    widths = [max(len(a), len(b)) for a, b in cells]
    print("p:        " + " ".join(a.rjust(w) for (a, _), w in zip(cells, widths)))
    print("rollouts: " + " ".join(b.rjust(w) for (_, b), w in zip(cells, widths)))
    return 0


DESCRIPTION = """\
Decide how many rollouts each prompt gets in RLVR training (GRPO, Dr. GRPO, RLOO).

The library's default allocator treats the budget as a ceiling: it pilots every prompt with 2
rollouts, completes the groups whose rewards varied, and pays for more of a flat group only while
the expected signal is worth the rollouts, so rollouts that would teach nothing are not generated
(kind "save"). VIP, VIGOR and the other published fixed-budget methods spend the budget exactly
(kind "fill"). Python API, TRL and verl plug-ins: see README.md.

"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptive-rollouts", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{allocate,demo,bench}")

    demo = sub.add_parser(
        "demo",
        help="RLVR on a tiny LM through TRL: Uniform vs the saving default",
        description="RLVR on a tiny Qwen2-style LM (digit sorting from reasoning-gym) through TRL: Uniform vs\n"
        "the saving default by default, one seed; writes report.md into --out (docs/demo.md).",
        formatter_class=HelpFormatter,
    )
    add_demo_arguments(demo)
    demo.set_defaults(func=reports_usage_errors(run_demo), parser=demo)

    bench = sub.add_parser(
        "bench",
        help="the learning simulator: every allocator at equal rollout budget",
        description=BENCH_DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    add_bench_arguments(bench)
    bench.set_defaults(func=run_bench, parser=bench)

    alloc = sub.add_parser(
        "allocate",
        help="exact integer allocation of a budget for given success probabilities",
        description="The exact integer allocation of --budget rollouts over prompts with the given success\n"
        "probabilities: it minimises the summed gradient variance of the --objective estimator (reward\n"
        "variance p(1-p) times the estimator's cost of n rollouts). Prints the settings it solved, then\n"
        "each prompt's p and its rollouts.",
        formatter_class=HelpFormatter,
    )
    alloc.add_argument(
        "--p", required=True, type=probability_list, help="comma-separated success probabilities, one per prompt"
    )
    alloc.add_argument("--budget", type=nonnegative_int, required=True, help="rollouts to spend in total (exactly)")
    alloc.add_argument("--lower", type=positive_int, default=2, help="at least this many rollouts per prompt (>= 1)")
    alloc.add_argument(
        "--upper",
        type=positive_int,
        default=None,
        help="at most this many rollouts per prompt (default: no limit but the budget)",
    )
    alloc.add_argument(
        "--objective",
        default="rloo",
        choices=ESTIMATORS,
        help="the advantage estimator whose gradient variance is minimised",
    )
    alloc.set_defaults(func=reports_usage_errors(_cmd_allocate), parser=alloc)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

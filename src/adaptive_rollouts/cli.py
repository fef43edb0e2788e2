"""`adaptive-rollouts` command line: demo | bench | allocate.

Each subcommand imports its (possibly heavy) module only when it runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "positive_int", "nonnegative_int", "probability_list"]


def _integer(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the error names the value typed)."""
    return _integer(text, 1, ">= 1")


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (the error names the value typed)."""
    return _integer(text, 0, ">= 0")


def probability_list(text: str) -> list[float]:
    """argparse type: comma-separated probabilities in [0, 1], e.g. ``0.1,0.5``."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated probabilities such as 0.1,0.5, got {text!r}")
    values = []
    for t in items:
        try:
            v = float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{t!r} is not a number (in {text!r})") from None
        if not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise argparse.ArgumentTypeError(f"success probabilities must lie in [0, 1], got {t} (in {text!r})")
        values.append(v)
    return values


def _cmd_allocate(args: argparse.Namespace) -> int:
    import numpy as np

    from adaptive_rollouts.solvers import allocate

    p = np.array(args.p, dtype=float)
    # GRPO's variance already contains the reward-variance factor; the others are weighted by it
    weights = np.ones_like(p) if args.objective == "grpo" else p * (1 - p)
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
    try:
        from adaptive_rollouts.demo.cli import add_demo_arguments, run_demo
    except ImportError as err:  # the demo needs the [demo] extra
        demo.set_defaults(func=lambda _a, err=err: _missing("demo", err))
    else:
        add_demo_arguments(demo)
        demo.set_defaults(func=run_demo)

    bench = sub.add_parser("bench", help="learning-simulator benchmark of every allocator")
    try:
        from adaptive_rollouts.sim.cli import add_bench_arguments, run_bench
    except ImportError as err:
        bench.set_defaults(func=lambda _a, err=err: _missing("bench", err))
    else:
        add_bench_arguments(bench)
        bench.set_defaults(func=run_bench)

    alloc = sub.add_parser("allocate", help="exact allocation for given success probabilities")
    alloc.add_argument("--p", required=True, type=probability_list, help="comma-separated success probabilities")
    alloc.add_argument("--budget", type=nonnegative_int, required=True)
    alloc.add_argument("--lower", type=nonnegative_int, default=2)
    alloc.add_argument("--upper", type=positive_int, default=None)
    alloc.add_argument("--objective", default="rloo", choices=["rloo", "drgrpo", "grpo"])
    alloc.set_defaults(func=_cmd_allocate)
    return parser


def _missing(command: str, err: Exception) -> int:
    print(f"`adaptive-rollouts {command}` is unavailable: {err}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

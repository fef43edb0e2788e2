"""`adaptive-rollouts` command line: demo | bench | allocate.

Each subcommand imports its (possibly heavy) module only when it runs. Every bad value is refused
before any set-up, as argparse refuses a bad argument: exit status 2, the usage line and one
``error:`` line naming the option and the value, no traceback (a subcommand raises `UsageError`,
which `main` reports through the subcommand's ``parser.error``).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

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

_INT64_MAX = 2**63 - 1  # counts and budgets are int64 arrays downstream


class UsageError(ValueError):
    """A bad command-line value found after parsing (`reports_usage_errors` reports it as argparse would)."""


def reports_usage_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a subcommand so that a `UsageError` prints the usage line and one ``error:`` line, as
    argparse's ``parser.error`` does, and returns exit status 2 (no traceback)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except UsageError as err:
            parser = getattr(args, "parser", None)
            if parser is not None:
                parser.print_usage(sys.stderr)
            prog = parser.prog if parser is not None else f"adaptive-rollouts {getattr(args, 'command', '')}".strip()
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2

    return run


def _integer(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    if value > _INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be <= {_INT64_MAX}, got {value}")
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


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (the error names the value typed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def positive_float_list(text: str) -> list[float]:
    """argparse type: comma-separated finite numbers > 0, e.g. ``0.333,1,3``."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 0.5,1,2, got {text!r}")
    values = []
    for t in items:
        try:
            values.append(positive_float(t))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"{err} (in {text!r})") from None
    return values


def check_output_folder(path: str | os.PathLike, option: str = "--out") -> Path:
    """``path`` as a folder the run can write into (created if missing), else `UsageError` naming
    ``option`` and the path: an existing file, a folder that cannot be created or written."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option}: {str(folder)!r} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{option}: cannot create {str(folder)!r} ({err.strerror or err})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option}: cannot write into {str(folder)!r} (permission denied)")
    return folder


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
        demo.set_defaults(func=reports_usage_errors(run_demo), parser=demo)

    bench = sub.add_parser("bench", help="learning-simulator benchmark of every allocator")
    try:
        from adaptive_rollouts.sim.cli import add_bench_arguments, run_bench
    except ImportError as err:
        bench.set_defaults(func=lambda _a, err=err: _missing("bench", err))
    else:
        add_bench_arguments(bench)
        bench.set_defaults(func=run_bench, parser=bench)

    alloc = sub.add_parser("allocate", help="exact allocation for given success probabilities")
    alloc.add_argument("--p", required=True, type=probability_list, help="comma-separated success probabilities")
    alloc.add_argument("--budget", type=nonnegative_int, required=True)
    alloc.add_argument("--lower", type=positive_int, default=2, help="at least this many rollouts per prompt (>= 1)")
    alloc.add_argument("--upper", type=positive_int, default=None)
    alloc.add_argument("--objective", default="rloo", choices=["rloo", "drgrpo", "grpo"])
    alloc.set_defaults(func=_cmd_allocate, parser=alloc)
    return parser


def _missing(command: str, err: Exception) -> int:
    print(f"`adaptive-rollouts {command}` is unavailable: {err}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

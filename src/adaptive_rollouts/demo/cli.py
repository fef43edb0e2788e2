"""``adaptive-rollouts demo``: arguments and entry point (wired into cli.py by the lead)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .run import DemoConfig


def add_demo_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = DemoConfig()
    parser.add_argument("--out", default="runs/demo", help="report folder (default runs/demo)")
    parser.add_argument(
        "--methods",
        default=",".join(d.methods),
        help="comma list of arms (uniform, default, null, oracle, oracle-skip, vip-paper, uniform-drgrpo, vigor, "
        "or any allocator name); default: Uniform vs the default",
    )
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds (first-seed .. first-seed + seeds - 1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=d.steps, help="RL steps per run")
    parser.add_argument("--prompts-per-step", type=int, default=d.prompts_per_step)
    parser.add_argument("--mean-rollouts", type=int, default=d.mean_rollouts, help="budget per step / prompts")
    parser.add_argument("--eval-every", type=int, default=d.eval_every)
    parser.add_argument(
        "--lr", type=float, default=None, help="one rate for every method (default: each its tuned rate)"
    )
    parser.add_argument("--workers", type=int, default=1, help="runs in parallel (processes, one thread each)")
    parser.add_argument("--model-dir", default=None, help="warm-start folder (default: the shipped weights)")
    return parser


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    """The DemoConfig of parsed ``add_demo_arguments`` arguments; ValueError names a bad one."""
    from .allocation import known_arms

    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = [m for m in methods if m not in known_arms()]
    if unknown or not methods:
        raise ValueError(f"--methods: unknown {unknown or methods}; choose from {list(known_arms())}")
    if args.seeds < 1 or args.steps < 1 or args.workers < 1:
        raise ValueError(f"--seeds, --steps and --workers must be >= 1, got {args.seeds}, {args.steps}, {args.workers}")
    if args.lr is not None and not args.lr > 0:
        raise ValueError(f"--lr must be > 0, got {args.lr}")
    return DemoConfig(
        methods=methods,
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.mean_rollouts,
        eval_every=args.eval_every,
        learning_rates=None if args.lr is None else {m: args.lr for m in methods},
        model_dir=args.model_dir,
    )


def run_demo(args: argparse.Namespace) -> int:
    import os
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notes, once per run
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    cfg = config_from_args(args)
    from .jobs import run_all
    from .report import write_report
    from .run import config_dict

    out = Path(args.out)
    start = time.time()
    results = run_all(cfg, out, workers=args.workers)
    text = write_report(results, config_dict(cfg), out)
    print(text)
    print(f"report: {out / 'report.md'} ({time.time() - start:.0f}s)")
    return 0


def main(argv=None) -> int:
    return run_demo(add_demo_arguments(argparse.ArgumentParser(prog="adaptive-rollouts demo")).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

"""``adaptive-rollouts demo``: arguments and entry point (wired into cli.py by the lead)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .run import EXTRA_METHODS, METHODS, DemoConfig


def add_demo_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = DemoConfig()
    parser.add_argument("--out", default="runs/demo", help="report folder (default runs/demo)")
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma list of " + ", ".join(METHODS + EXTRA_METHODS)
    )
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds (0 .. seeds-1)")
    parser.add_argument("--steps", type=int, default=d.steps, help="RL steps per run")
    parser.add_argument("--prompts-per-step", type=int, default=d.prompts_per_step)
    parser.add_argument("--mean-rollouts", type=int, default=d.mean_rollouts, help="budget per step / prompts")
    parser.add_argument("--eval-every", type=int, default=d.eval_every)
    parser.add_argument("--lr", type=float, default=d.learning_rate)
    parser.add_argument("--loss-type", default=d.loss_type, help="TRL loss_type (grpo, dapo, dr_grpo, ...)")
    return parser


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    """The DemoConfig of parsed ``add_demo_arguments`` arguments; ValueError names a bad one."""
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS + EXTRA_METHODS]
    if unknown or not methods:
        raise ValueError(f"--methods: unknown {unknown or methods}; choose from {list(METHODS + EXTRA_METHODS)}")
    if args.seeds < 1 or args.steps < 1:
        raise ValueError(f"--seeds and --steps must be >= 1, got {args.seeds}, {args.steps}")
    return DemoConfig(
        methods=methods,
        seeds=tuple(range(args.seeds)),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.mean_rollouts,
        eval_every=args.eval_every,
        learning_rate=args.lr,
        loss_type=args.loss_type,
    )


def run_demo(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    cfg = config_from_args(args)
    from .report import write_report
    from .run import config_dict, run_all

    out = Path(args.out)
    start = time.time()
    results = run_all(cfg, out)
    text = write_report(results, config_dict(cfg), out)
    print(text)
    print(f"report: {out / 'report.md'} ({time.time() - start:.0f}s)")
    return 0


def main(argv=None) -> int:
    return run_demo(add_demo_arguments(argparse.ArgumentParser(prog="adaptive-rollouts demo")).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

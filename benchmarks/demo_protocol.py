"""The demo's full protocol: every arm, two regimes, tuned rates, >= 5 report seeds; resumable.

    python benchmarks/demo_protocol.py                                  # both regimes, every arm
    python benchmarks/demo_protocol.py --regimes multi-epoch --arms uniform,null,default
    python benchmarks/demo_protocol.py --report-only                    # tables from what is there

Each run is saved as it finishes under ``--out/<regime>/runs/<arm>/`` (keyed by every setting that
changes its numbers, with its commit) and reused on a rerun, so an interrupted protocol resumes;
a folder made with other settings is refused, naming the setting. ``--report-only`` runs nothing
and lists the seeds / arms still missing. Writes ``--out/<regime>/summary.{json,md}``
(`adaptive_rollouts.demo.protocol_report`). See docs/demo.md for the protocol.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path


def _numbers(text: str, kind, option: str) -> tuple:
    """A comma list of numbers; ValueError naming ``option`` for anything else."""
    try:
        return tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{option}: expected a comma list of {kind.__name__} values, got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    from adaptive_rollouts.demo.protocol import ProtocolConfig

    d = ProtocolConfig()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/demo_protocol")
    p.add_argument("--regimes", default="single-pass,multi-epoch")
    p.add_argument("--arms", default=None, help="comma list (default: every protocol arm the library has)")
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--prompts-per-step", type=int, default=d.prompts_per_step)
    p.add_argument("--mean-rollouts", type=int, default=d.mean_rollouts)
    p.add_argument("--visits", type=int, default=d.visits, help="multi-epoch: visits of every pool prompt")
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--held-out", type=int, default=d.held_out)
    p.add_argument("--lr-grid", default=",".join(f"{x:g}" for x in d.lr_grid))
    p.add_argument("--tune-seeds", default=",".join(map(str, d.tune_seeds)))
    p.add_argument("--report-seeds", default=",".join(map(str, d.report_seeds)))
    p.add_argument("--oracle-samples", type=int, default=d.oracle_samples)
    p.add_argument("--probe-every", type=int, default=d.probe_every)
    p.add_argument("--task", default=d.task, help="sort (default) or ladder (`adaptive_rollouts.demo.tasks.TASKS`)")
    p.add_argument(
        "--rates-from", default=None, help="take every arm's learning rate from this regime's tuning (no tuning here)"
    )
    p.add_argument(
        "--same-rate",
        default=",".join(d.same_rate),
        help="comma list of arms run at Uniform's tuned rate instead of tuning their own (listed after uniform)",
    )
    p.add_argument(
        "--map-results",
        default="results/map,results/demo_protocol/map",
        help="comma list of regime-map result files or folders, for placing the regimes on the map",
    )
    p.add_argument("--report-only", action="store_true", help="run nothing; tables and what is missing")
    p.add_argument("--no-progress", action="store_true")
    return p


def default_arms() -> tuple[str, ...]:
    """The protocol's arms, plus every other saving allocator of the registry."""
    from adaptive_rollouts.demo.protocol import ARMS, SAVING_BASELINES

    return (*ARMS, *SAVING_BASELINES)


def main(argv=None) -> int:
    from adaptive_rollouts.demo.protocol import run_protocol
    from adaptive_rollouts.demo.protocol_report import write_regime_report

    cli = parser()
    args = cli.parse_args(argv)
    try:
        configs = _configs(args)
    except ValueError as err:  # a setting that cannot run: named before any run starts
        cli.error(str(err))
    command = ("python benchmarks/demo_protocol.py " + shlex.join(sys.argv[1:] if argv is None else list(argv))).strip()
    for cfg in configs:
        show = not (args.no_progress or args.report_only)
        state = run_protocol(cfg, Path(args.out), run_missing=not args.report_only, progress=show, command=command)
        maps = [Path(x.strip()) for x in args.map_results.split(",") if x.strip()]
        print(write_regime_report(cfg, state, Path(args.out), command, maps))
    return 0


def _configs(args: argparse.Namespace) -> list:
    from adaptive_rollouts.demo.protocol import ProtocolConfig, check_config

    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip()) if args.arms else default_arms()
    base = ProtocolConfig(
        arms=arms,
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.mean_rollouts,
        visits=args.visits,
        eval_every=args.eval_every,
        held_out=args.held_out,
        lr_grid=_numbers(args.lr_grid, float, "--lr-grid"),
        tune_seeds=_numbers(args.tune_seeds, int, "--tune-seeds"),
        report_seeds=_numbers(args.report_seeds, int, "--report-seeds"),
        oracle_samples=args.oracle_samples,
        probe_every=args.probe_every,
        task=args.task,
        same_rate=tuple(a.strip() for a in args.same_rate.split(",") if a.strip()),
    )
    if args.rates_from:
        base = replace(base, rates_from=args.rates_from)
    regimes = [r.strip() for r in args.regimes.split(",") if r.strip()]
    if not regimes:
        raise ValueError("--regimes: give at least one of single-pass, multi-epoch")
    return [check_config(replace(base, regime=r)) for r in regimes]


if __name__ == "__main__":
    raise SystemExit(main())

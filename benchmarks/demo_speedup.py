"""Demo benchmark: rollouts each allocator needs to reach Uniform's final held-out accuracy, and its
allocator overhead as a share of step time (goal <= 1%), over the reported seeds.

    python benchmarks/demo_speedup.py --seeds 5 --workers 2 --out runs/demo_speedup

Runs the real demo (tiny LM through AdaptiveGRPOTrainer, each method at its tuned rate). Each
(method, seed) run is saved under ``--out/runs`` as it finishes and reused on a rerun, so an
interrupted benchmark resumes. Rollouts to target are read off the seed-mean held-out curve
(`report.summarise`); the full report (tables, plots, results.json) goes to ``--out``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def main(argv=None) -> int:
    from adaptive_rollouts.demo.cli import add_demo_arguments, config_from_args
    from adaptive_rollouts.demo.jobs import run_all
    from adaptive_rollouts.demo.report import summarise, write_report
    from adaptive_rollouts.demo.run import config_dict

    parser = add_demo_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.set_defaults(seeds=5, out="runs/demo_speedup")
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    results = run_all(cfg, Path(args.out), workers=args.workers)
    write_report(results, config_dict(cfg), Path(args.out))
    print(
        f"{'method':9s} {'held-out final':>15s} {'acc. at half of Uniform spend':>30s} {'speedup':>8s} {'overhead':>9s}"
    )
    for r in summarise(results):
        ci = "" if math.isnan(r["held_out_final_ci"]) else f" +- {r['held_out_final_ci']:.3f}"
        print(
            f"{r['method']:9s} {r['held_out_final']:.3f}{ci:>9s} {r['accuracy_at_uniform_spend'][1]:30.3f} "
            f"{r['speedup_to_uniform_gain']:7.2f}x {r['allocator_overhead_pct']:8.2f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

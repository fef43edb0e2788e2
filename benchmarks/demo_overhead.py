"""Demo benchmark: rollouts each allocator needs to reach the Uniform run's final
pool accuracy (same seed), as a ratio to Uniform's own, and allocator overhead as a share of
training time (goal <= 1%). Runs the real demo (tiny LM through AdaptiveGRPOTrainer).

    .venv/bin/python benchmarks/demo_overhead.py --seeds 3 --out runs/demo_bench

Prints one line per method; the full report (table, plots, results.json) goes to --out.
"""

from __future__ import annotations

import argparse
import math

from adaptive_rollouts.demo.cli import add_demo_arguments


def main(argv=None) -> int:
    parser = add_demo_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.set_defaults(seeds=3, out="runs/demo_bench")
    args = parser.parse_args(argv)
    from pathlib import Path

    from adaptive_rollouts.demo.cli import config_from_args
    from adaptive_rollouts.demo.report import summarise, write_report
    from adaptive_rollouts.demo.run import config_dict, run_all

    cfg = config_from_args(args)
    results = run_all(cfg, Path(args.out))
    write_report(results, config_dict(cfg), Path(args.out))
    rows = summarise(results)
    uniform = next((r for r in rows if r["method"] == "uniform"), None)
    base = uniform["uniform_rollouts_to_its_final"] if uniform else math.nan
    print(f"{'method':10s} {'rollouts to Uniform final':>26s} {'ratio to Uniform':>17s} {'allocator overhead':>19s}")
    for r in rows:
        ratio = r["rollouts_to_uniform_final"] / base if base and math.isfinite(base) else math.nan
        print(
            f"{r['method']:10s} {r['rollouts_to_uniform_final']:26.0f} {ratio:17.2f} {r['allocator_overhead_pct']:18.2f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

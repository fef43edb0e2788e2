"""The docs' blocks of the map's interval and cost: the Monte Carlo coverage of the primary
statistic's 90% interval where the truth is 1.00 (``benchmarks/interval_coverage.py``) and what
one 32-seed cell costs in one process and in several (``benchmarks/map_seeds.py``)."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.blocks import block, load_note, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["INTERVAL_COVERAGE", "MAP_SEEDS", "render_interval_coverage", "render_map_seeds"]

INTERVAL_COVERAGE = "results/interval_coverage/interval_coverage.json"
MAP_SEEDS = "results/map_seeds/map_seeds.json"


def render_interval_coverage(root: Path) -> str:
    r = load_relative(root, INTERVAL_COVERAGE)
    body = [
        [
            x["source"],
            str(x["seeds"]),
            x["interval"],
            f"{x['coverage']:.1%} (+- {x['se']:.1%})",
            str(x["trials"]),
            f"{x['log_width']:.2f}",
        ]
        for x in r.data["rows"]
    ]
    lines = table(
        ["draws", "paired seeds", "interval", "covers 1.00 (Monte Carlo se)", "draws", "mean log-width"], body
    )
    lines += [
        "",
        f"Nominal level 90%. Committed controls: pairs from the runs of {', '.join(r.data['maps'])} "
        f"({len(r.data['cells'])} cells, {r.data['trials_per_cell']} draws per cell at each seed count).",
    ]
    return block(lines, [r])


def render_map_seeds(root: Path) -> str:
    r = load_relative(root, MAP_SEEDS)
    d = r.data
    cal = d["calibration"]
    lines = [
        f"- One cell (`{d['cell']}`, {d['seeds']} paired seeds, arms {', '.join(d['methods'])}; {d['runs']} runs "
        f"with Uniform's tuning): {d['one_process_s']:.0f} s in one process, {d['processes_s']:.0f} s with "
        f"`--jobs {d['jobs']}` ({d['speedup']:.2f}x; the same runs: {'yes' if d['same_runs'] else 'NO'})"
        + (
            f"; CPU time {d['one_process_cpu_s']:.0f} s and {d['processes_cpu_s']:.0f} s (what the cell costs "
            "where the cores are free)."
            if "one_process_cpu_s" in d
            else "."
        ),
        f"- The policy view's calibration per run: {cal['earlier_s']:.2f} s written the earlier way, "
        f"{cal['present_s']:.2f} s now (the same sigma: {'yes' if cal['same_sigma'] else 'NO'}).",
        "",
        f"Wall time on {d['cpus']} CPUs{load_note(d)}.",
    ]
    return block(lines, [r])

"""The docs' block of the demo's learning-rate grid (``benchmarks/demo_tune.py``): the scores the
rates `make demo` uses were chosen by (`demo.allocation.LEARNING_RATES` holds each method's best,
tested against this file)."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["DEMO_TUNE", "render_demo_tune"]

DEMO_TUNE = "results/demo_tune/tune.json"


def render_demo_tune(root: Path) -> str:
    """Each method's final held-out greedy accuracy at every rate of the grid, its best rate and
    whether that best is inside the grid."""
    r = load_relative(root, DEMO_TUNE)
    grid, scores, best = r.data["grid"], r.data["scores"], r.data["best"]
    rows = []
    for method, by_rate in scores.items():
        rows.append(
            [
                method,
                *(f"{by_rate[f'{lr:g}']:.3f}" for lr in grid),
                f"{best[method]['lr']:g}",
                "yes" if best[method]["interior"] else "no (at an edge)",
            ]
        )
    header = ["method", *(f"{lr:g}" for lr in grid), "best (`make demo` uses it)", "inside the grid"]
    seeds = ", ".join(map(str, r.data["seeds"]))
    lines = [
        f"Final held-out greedy accuracy after the demo's default run at each rate, tune seed(s) {seeds} "
        "(never a reported seed):",
        "",
        *table(header, rows),
    ]
    return block(lines, [r])

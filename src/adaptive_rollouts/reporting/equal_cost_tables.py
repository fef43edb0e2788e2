"""The docs' summary of final accuracy at equal steps and at equal cost (`experiments.equal_cost`)
for the saving maps that hold it: per map file and arm, in how many cells the arm ends above
Uniform, below it, or neither (by the 90% interval of the equal-cost gap), and the range of both gaps
over the cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.map_tables import MAP_DIR

__all__ = ["EQUAL_COST_MAPS", "equal_cost_line", "gap_counts", "mean_final_gaps", "render_equal_cost_summary"]

EQUAL_COST_MAPS = (
    "default-bound-a",
    "default-bound-b",
    "saving-32-a",
    "saving-32-b",
)  # the present default, then the previous one


def gap_counts(cis: list[list[float]]) -> tuple[int, int, int]:
    """(cells whose interval lies above 0, below 0, covers 0).

    >>> gap_counts([[0.01, 0.03], [-0.02, 0.01], [-0.05, -0.01]])
    (1, 1, 1)
    """
    above = sum(lo > 0 for lo, _ in cis)
    below = sum(hi < 0 for _, hi in cis)
    return above, below, len(cis) - above - below


def mean_final_gaps(rows: list[dict], arm: str) -> tuple[float, float]:
    """``arm``'s final accuracy minus Uniform's, averaged over a map's cells (``rows``): at equal
    cost and at equal steps (`experiments.equal_cost`).

    >>> rows = [{"methods": {"a": {"final_gap_equal_cost": 0.02, "final_gap": -0.1}}},
    ...         {"methods": {"a": {"final_gap_equal_cost": 0.04, "final_gap": -0.3}}}]
    >>> [round(x, 3) for x in mean_final_gaps(rows, "a")]
    [0.03, -0.2]
    """
    entries = [row["methods"].get(arm) or {} for row in rows]
    cost = [e["final_gap_equal_cost"] for e in entries if e.get("final_gap_equal_cost") is not None]
    steps = [e["final_gap"] for e in entries if e.get("final_gap") is not None]
    return float(np.mean(cost)), float(np.mean(steps))


def equal_cost_line(rows: list[dict], arm: str) -> str | None:
    es = [r["methods"][arm] for r in rows if "final_gap_equal_cost" in r["methods"].get(arm, {})]
    if not es:
        return None
    above, below, neither = gap_counts([e["final_gap_equal_cost_ci90"] for e in es])
    cost = [e["final_gap_equal_cost"] for e in es]
    steps = [e["final_gap"] for e in es]
    seeds = sorted({len(e["seeds"]) for e in es})
    return (
        f"  - {arm} ({'/'.join(map(str, seeds))} seeds): at equal cost {min(cost):+.3f} to {max(cost):+.3f}, "
        f"above Uniform in {above}, below in {below}, interval covering 0 in {neither} of {len(es)} cells; "
        f"at equal steps {min(steps):+.3f} to {max(steps):+.3f}."
    )


def render_equal_cost_summary(root: Path) -> str:
    """One line per arm of each map in `EQUAL_COST_MAPS` (see the module docstring); a map file
    summarised before the equal-cost gap existed says so."""
    parts = []
    for name in EQUAL_COST_MAPS:
        rel = f"{MAP_DIR}/{name}.json"
        if not (root / rel).exists():
            continue
        r = load_relative(root, rel)
        arms = [m for m in r.data["config"]["methods"] if m != "uniform"]
        lines = [x for arm in arms if (x := equal_cost_line(r.data["rows"], arm))]
        if not lines:
            lines = [
                "  - summarised before the equal-cost gap existed; its command (the source line), re-run on its run "
                "folder, re-summarises it without training."
            ]
        parts.append(block([f"`{name}`, final accuracy minus Uniform's:", "", *lines], [r]))
    return "\n\n".join(parts) if parts else "No saving map result file is committed yet."

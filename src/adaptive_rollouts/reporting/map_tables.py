"""The docs' regime-map block: every result file results/map/*.json (written by
``adaptive-rollouts bench --map``), each as its own section with the tables of map.md
(`reporting.map_report.map_markdown`) and its source line. Maps of different commands are never merged
into one table, and a file whose runs ran at several commits is refused unless it was written
with ``--allow-mixed-commits`` (its tables then say so); with no file there, the block says which
command produces one."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import MixedResultsError, Result, load_result, provenance
from adaptive_rollouts.reporting.map_report import map_markdown

__all__ = ["MAP_DIR", "MAP_COMMAND", "render_map", "render_saving_summary", "map_files"]

MAP_DIR = "results/map"
MAP_COMMAND = "adaptive-rollouts bench --map --out runs/<name>"


def map_files(root: Path) -> list[Path]:
    return sorted((root / MAP_DIR).glob("*.json"))


def render_map(root: Path) -> str:

    files = map_files(root)
    if not files:
        return (
            f"No regime-map result is committed yet. `{MAP_COMMAND}` (with `--cells` / `--methods` for part of "
            f"the map), run from the repository root, writes `{MAP_DIR}/<name>.json`; `make docs` then renders "
            "its tables here."
        )
    lines: list[str] = []
    for path in files:
        loaded = load_result(path)
        r = Result(str(path.relative_to(root)), loaded.header, loaded.data)
        commits = r.data.get("run_commits", {})
        if len(commits) > 1 and not r.data.get("allow_mixed_commits"):
            raise MixedResultsError(f"result file {r.path}: runs of {len(commits)} commits ({', '.join(commits)})")
        lines += [f"### Map `{path.stem}`", "", f"`{r.command}`", ""]
        lines += map_markdown(r.data, level=4)
        lines += ["", provenance([r]), ""]
    return "\n".join(lines)


def render_saving_summary(root: Path) -> str:
    """One line per map result file that ran the default: how many of its cells met the saving
    target, the range of the default's speedups and of its rollouts (share of Uniform's), the runs'
    commits, and the cells below 0.97x."""
    lines = []
    for path in map_files(root):
        loaded = load_result(path)
        targets = loaded.data.get("saving_targets") or []
        if not targets:
            continue
        speed = [t["speedup"] for t in targets]
        spend = [t["spend"] for t in targets]
        below = [t["cell"] for t in targets if t["speedup"] < 0.97]
        commits = ", ".join(c[:10] for c in loaded.data.get("run_commits", {}))
        lines.append(
            f"  - `{path.stem}` (runs at {commits}): target met in {sum(t['met'] for t in targets)} of {len(targets)} "
            f"cells; speedup {min(speed):.2f}-{max(speed):.2f}x at {min(spend):.2f}-{max(spend):.2f} of Uniform's "
            f"rollouts; below 0.97x: {', '.join(below) if below else 'none'}."
        )
    if not lines:
        return "  No map result with the default is committed yet."
    return "\n".join(lines)

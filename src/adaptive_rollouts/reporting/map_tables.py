"""The docs' regime-map block: every result file results/map/*.json (written by
``adaptive-rollouts bench --map``), each as its own section with the tables of map.md
(`reporting.map_report.map_markdown`) and its source line. Maps of different commands are never merged
into one table, and a file whose runs ran at several commits is refused unless it was written
with ``--allow-mixed-commits`` (its tables then say so); with no file there, the block says which
command produces one."""

from __future__ import annotations

import math
from pathlib import Path

from adaptive_rollouts.experiments.map_summary import pooled_arm
from adaptive_rollouts.experiments.results import (
    MixedResultsError,
    Result,
    data_number,
    load_result,
    provenance,
    short_commit,
)
from adaptive_rollouts.reporting.blocks import left_out_reason, pooled_interval
from adaptive_rollouts.reporting.gain_report import coverage, interval_words, targets_with_verdicts
from adaptive_rollouts.reporting.map_report import map_markdown

__all__ = ["MAP_DIR", "MAP_COMMAND", "render_map", "render_saving_summary", "render_map_protocol", "map_files"]

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


def _repooled(data: dict) -> dict:
    """A map's pooled effects, re-read from its stored cells where they carry jackknife standard
    errors (`map_summary.pooled_arm`: a cell without one is left out and counted), else as stored."""
    pooled = dict(data.get("pooled") or {})
    for name in pooled:
        base, _, at = name.partition("@")
        prefix = "same_rate_" if at == "uniform-rate" else ""
        entries = [row["methods"].get(base) for row in data["rows"]]
        entries = [e for e in entries if e and f"{prefix}gain_speedup" in e]
        if entries and all(f"{prefix}gain_log_se" in e for e in entries):
            pooled[name] = pooled_arm(entries, prefix)
    return pooled


def _cells(p: dict | None, cells: int) -> str:
    """How many cells a pooled effect is read over, and why any are left out."""
    if not p or not p.get("left_out"):
        return f"{cells} cells"
    return f"{p['cells']} of {cells} cells ({p['left_out']} left out: {left_out_reason(p)})"


def _interval(p: dict | None) -> str:
    return "-" if not p else f"{p['effect']:.2f}x ({pooled_interval(p)})"


def undefined_speedup(target: dict) -> bool:
    """Whether a cell's saving target has no statistic (NaN speedup and interval: the seed-mean
    curves never reach a share of the gain on these seeds), which reads "unresolved", never a number.

    >>> nan = float("nan")
    >>> undefined_speedup({"speedup": nan, "ci90": [nan, nan], "verdict": "unresolved"})
    True
    >>> undefined_speedup({"speedup": nan, "ci90": [0.5, 2.0], "verdict": "unresolved"})  # half a statistic: bad data
    False
    """
    value, ci = target.get("speedup"), target.get("ci90") or []
    nan = [isinstance(x, float) and math.isnan(x) for x in [value, *ci]]
    return all(nan) and len(ci) == 2 and target.get("verdict") == "unresolved"


def render_saving_summary(root: Path) -> str:
    """One line per map result file that ran the default: its verdicts from the intervals (met /
    below / unresolved, `sim.gain_report.targets_with_verdicts`), the default's rollouts (share of
    Uniform's), the runs' commits and, for maps read with the primary statistic, the pooled effect
    of the default at Uniform's rate, of the null control and of the replicate, and how often the
    controls' intervals cover 1.00."""
    lines = []
    for path in map_files(root):
        loaded = load_result(path)
        data = loaded.data
        targets = targets_with_verdicts(data)
        if not targets:
            continue
        result = Result(str(path.relative_to(root)), loaded.header, data)
        for i, t in enumerate(targets):
            if undefined_speedup(t):  # the cell's statistic is undefined on these seeds: unresolved, said so
                continue
            data_number(result, f"saving_targets/{i}/speedup", t["speedup"], 0.0, True)
        spend = [data_number(result, f"saving_targets/{i}/spend", t["spend"], 0.0) for i, t in enumerate(targets)]
        counts = {v: sum(t["verdict"] == v for t in targets) for v in ("met", "below", "unresolved")}
        commits = ", ".join(short_commit(c) for c in data.get("run_commits", {}))
        text = f"  - `{path.stem}` (runs at {commits}; {len(data['config']['paired_seeds'])} paired seeds): "
        pooled = _repooled(data)
        if pooled:
            # the controls the map ran (a check on fresh seeds may run the null control alone)
            controls = [
                (a, n)
                for a, n in (("uniform-rounds", "null control"), ("uniform-replicate", "Uniform replicate"))
                if a in data["config"]["methods"]
            ]
            hits = [coverage(data, a) for a, _ in controls]
            text += (
                f"the default at Uniform's rate {_interval(pooled.get('default@uniform-rate'))} pooled over "
                f"{_cells(pooled.get('default@uniform-rate'), len(targets))}"
            )
            if controls:
                text += (
                    ", "
                    + ", ".join(f"the {n} {_interval(pooled.get(a))}" for a, n in controls)
                    + f"; {' / '.join(n for _, n in controls)} intervals cover 1.00 in "
                    f"{' / '.join(str(h[0]) for h in hits)} of {hits[0][1]} cells; "
                )
            else:  # a rerun of the default beside Uniform alone (a before/after check): no control
                text += ", no control run; "
        else:
            text += "single-target speedup at each arm's own rate; "
        text += (
            f"target met in {counts['met']}, below in {counts['below']}, unresolved in {counts['unresolved']} of "
            f"{len(targets)} cells, at {min(spend):.2f}-{max(spend):.2f} of Uniform's rollouts."
        )
        lines.append(text)
    if not lines:
        return "  No map result with the default is committed yet."
    return "\n".join(lines)


def _seed_span(seeds: list) -> str:
    return f"{len(seeds)} ({seeds[0]}-{seeds[-1]})" if seeds else "none"


def render_map_protocol(root: Path) -> str:
    """One line per committed map result file with the protocol it ran with, read from its header's
    settings: steps, tune seeds, rate grid, report and paired seeds, the statistic and its interval, which arms ran
    at Uniform's rate only."""
    lines = []
    for path in map_files(root):
        cfg = load_result(path).header["settings"]
        if cfg.get("fractions"):
            statistic = "rollouts to " + "/".join(f"{f:.0%}" for f in cfg["fractions"]) + " of the gain"
            statistic += f", 90% interval: {interval_words(cfg)}"
        else:
            statistic = f"rollouts to one target at {cfg['target_at']:.0%} of the run"
        untuned = ", ".join(cfg.get("untuned", ())) or "none"
        lines.append(
            f"  - `{path.stem}`: {len(cfg['cells'])} cells, {cfg['steps']} steps, tune seeds "
            f"{_seed_span(list(cfg['tune_seeds']))}, grid {list(cfg['lr_grid'])} (x{cfg['lr_step']:g} at an "
            f"edge, up to {cfg['max_extensions']} times), report seeds {_seed_span(list(cfg['report_seeds']))}, "
            f"paired seeds {_seed_span(list(cfg['paired_seeds']))}; statistic: {statistic}; at Uniform's rate "
            f"only: {untuned}."
        )
    return "\n".join(lines) if lines else "  No map result file is committed yet."

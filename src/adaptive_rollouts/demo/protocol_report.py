"""Tables of the demo protocol, read exactly as the regime map reads its runs.

Per arm against Uniform, the speedups of `protocol_speed` (rollouts, completion tokens and modelled
synchronous time to target, with paired intervals). Per regime the map's
fingerprints of Uniform's runs (`experiments.map_summary.uniform_fingerprints`) and the nearest map cell.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.map_summary import summarize_map, uniform_fingerprints
from adaptive_rollouts.experiments.regime_map import FULL_MAP, run_map
from adaptive_rollouts.experiments.results import load_result, write_result
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.reporting.token_tables import overhead_text
from adaptive_rollouts.state.atomic import atomic_write

from .protocol import code_version
from .protocol_speed import TIME_AXIS, arm_rows, report_runs
from .regime import group_rewards
from .report import persistence_cell

MAP_ARMS = {"null": "uniform-rounds", "oracle": "optimum@true-p"}  # the map's name of a demo arm (else its own)
FINGERPRINT_AXES = ("noise_to_signal_batch", "zero_variance_fraction", "p_persistence")


def regime_metrics(groups: list[list[list[int]]]) -> dict[str, float]:
    """`RegimeTracker` metrics of a run's recorded groups (as the map records them per run)."""
    tracker = RegimeTracker()
    for step in groups:
        keys, rewards = group_rewards(step)
        tracker.update(keys, rewards)
    return tracker.metrics()


def map_shaped(run: dict) -> dict[str, Any]:
    """A saved Uniform run in the shape `uniform_fingerprints` reads (probes and regime metrics)."""
    probes = run["result"].get("probes") or {}
    return {
        "nsr_rollout": list(probes.get("nsr_rollout", [])),
        "probe": {"probe_var": list(probes.get("probe_var", [])), "probe_signal": list(probes.get("probe_signal", []))},
        "regime": regime_metrics(run["result"]["groups"]),
    }


def regime_fingerprints(cfg, state) -> dict[str, float]:
    """The map's fingerprints of the regime, from Uniform's report runs."""

    uniform = list(report_runs(cfg, state, "uniform").values())
    if not uniform:
        return {}
    return uniform_fingerprints([map_shaped(r) for r in uniform], cfg.prompts_per_step * cfg.mean_rollouts)


def nearest_cell(fingerprints: dict[str, float], map_rows: list[dict]) -> dict | None:
    """The map row nearest to ``fingerprints`` over `FINGERPRINT_AXES` (batch noise/signal on a log10
    scale; an axis missing on either side is left out), or None if no row shares an axis.

    >>> rows = [{"cell": "a", "fingerprints": {"noise_to_signal_batch": 0.5, "zero_variance_fraction": 0.7}},
    ...         {"cell": "b", "fingerprints": {"noise_to_signal_batch": 20.0, "zero_variance_fraction": 0.7}}]
    >>> nearest_cell({"noise_to_signal_batch": 0.4, "zero_variance_fraction": 0.4}, rows)["cell"]
    'a'
    """

    def point(f: dict) -> np.ndarray:
        x = [f.get(k, np.nan) for k in FINGERPRINT_AXES]
        x[0] = np.log10(x[0]) if x[0] is not None and x[0] > 0 else np.nan
        return np.asarray(x, dtype=float)

    here, best, best_d = point(fingerprints), None, np.inf
    for row in map_rows:
        there = point(row["fingerprints"])
        shared = np.isfinite(here) & np.isfinite(there)
        if shared.any():
            d = float(np.sqrt(np.mean((here[shared] - there[shared]) ** 2)))
            if d < best_d:
                best, best_d = row, d
    return None if best is None else {**best, "distance": best_d}


def load_map_summary(path: Path) -> list[dict] | None:
    """The map's cell rows (`experiments.map_summary.summarize_map`) from a map result file (``bench --map``'s
    ``map.json``: ``{"header", "data": {"rows": ...}}``), a folder of them, or a map's run folder
    (``runs.jsonl`` and ``cell_*.json``, read with the full map's settings); None if there is none."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.json")) if path.is_dir() else []
    rows: list[dict] = []
    for file in files:
        data = load_result(file).data  # ResultFileError (a ValueError) naming a file that is not one
        rows += data.get("rows", []) if isinstance(data, dict) else []
    if rows:
        return rows
    if path.is_dir() and (path / "runs.jsonl").exists():
        found = {p.stem.removeprefix("cell_") for p in path.glob("cell_*.json")}
        cells = [c for c in FULL_MAP.cells if c.key.replace("/", "_") in found]
        if cells:
            return summarize_map(run_map(replace(FULL_MAP, cells=cells), path, progress=False, run_missing=False))[
                "rows"
            ]
    return None


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    if isinstance(x, float) and np.isinf(x):
        return "never"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _tried(row: dict) -> str:
    if row["lr_from"] != "tuned here":
        return f"rate of {row['lr_from']}" if row["lr_from"] == "uniform's" else f"tuned in {row['lr_from']}"
    return ", ".join(f"{x:g}" for x in row["lr_tried"])


def _speed(entry: dict | None) -> str:
    if not entry:
        return "-"
    return (
        f"{_fmt(entry['speedup'])} (90% {_fmt(entry['ci90'][0])}-{_fmt(entry['ci90'][1])}; "
        f"95% {_fmt(entry['ci95'][0])}-{_fmt(entry['ci95'][1])})"
    )


def markdown(cfg, state, rows: list[dict], prints: dict, placed: dict | None, map_note: str) -> str:
    """The regime's report: arms table, commits, what is missing, fingerprints and map placement."""
    lines = [
        f"## Regime {cfg.regime} (pool {cfg.pool_size()} prompts, {cfg.steps} steps x {cfg.prompts_per_step} prompts "
        f"x {cfg.mean_rollouts} rollouts, held-out greedy accuracy every {cfg.eval_every} steps)",
        "",
        "| arm | objective | loss | lr (tried) | seeds | final acc | rollouts/step | skipped | uncharged samples/step "
        "| against | rollouts to target (it / arm) | speedup, rollouts | speedup, completion tokens "
        "| speedup, modelled time (synchronous) | break-even overhead per call |",
        "|" + "---|" * 15,
    ]
    for r in rows:
        ro = r.get("rollouts") or {}
        lines.append(
            f"| {r['arm']} | {r['objective']} | {r['loss']} | {r['lr']:g} ({_tried(r)}) "
            f"| {len(r['seeds'])} | {_fmt(r['final_accuracy'], 3)} | {_fmt(r['rollouts_per_step'], 1)} "
            f"| {_fmt(r['skipped_fraction'])} | {_fmt(r['oracle_rollouts_per_step'], 0)} | {r['against']} | {_fmt(ro.get('uniform'), 0)} / {_fmt(ro.get('arm'), 0)} "
            f"| {_speed(r.get('rollouts'))} | {_speed(r.get('tokens'))} | {_speed(r.get(TIME_AXIS))} "
            f"| {overhead_text(r['break_even_overhead']) if 'break_even_overhead' in r else '-'} |"
        )
    lines += targets(rows)
    code = sorted({c for r in rows for c in r["code"]})
    if len(code) > 1:
        lines += ["", f"Runs from {len(code)} code versions (git trees of src/adaptive_rollouts) in this table:"]
        lines += [f"- {r['arm']}: source {', '.join(r['code'])} (commits {', '.join(r['commits'])})" for r in rows]
    elif code:
        commits = sorted({c for r in rows for c in r["commits"]})
        lines += ["", f"Every run on one source tree ({code[0]}; commits {', '.join(commits)})."]
    if state.errors:
        lines += ["", *[f"- {arm}: no number ({err})" for arm, err in state.errors.items()]]
    if state.missing:
        lines += ["", "Missing:", *[f"- {arm}: {', '.join(todo)}" for arm, todo in state.missing.items()]]
    lines += ["", "Fingerprints (the map's, on Uniform's report runs):", ""]
    lines += _placement(prints, placed, map_note, rows)
    return "\n".join(lines)


def targets(rows: list[dict], goal: float = 1.3) -> list[str]:
    """The saving targets on the tiny LM: the default >= ``goal`` x Uniform in rollouts to target with
    a paired 95% interval above 1, and how far it is from the known-p skip rule (``oracle-skip``).

    >>> row = {"arm": "default", "rollouts": {"speedup": 1.4, "ci95": [1.1, 1.7]}}
    >>> targets([row])[1]
    '- default >= 1.3x Uniform with a paired 95% interval above 1: met (1.40, 95% 1.10-1.70)'
    """
    by_arm = {r["arm"]: r.get("rollouts") for r in rows}
    default, bound = by_arm.get("default"), by_arm.get("oracle-skip")
    if not default:
        return ["", "Targets: the default has no report runs yet."]
    met = default["speedup"] >= goal and default["ci95"][0] > 1
    lines = [
        "",
        f"- default >= {goal:g}x Uniform with a paired 95% interval above 1: {'met' if met else 'missed'} "
        f"({_fmt(default['speedup'])}, 95% {_fmt(default['ci95'][0])}-{_fmt(default['ci95'][1])})",
    ]
    if bound:
        share = default["speedup"] / bound["speedup"] if bound["speedup"] > 0 else float("nan")
        lines.append(f"- known-p skip rule: {_fmt(bound['speedup'])}x; the default reaches {_fmt(share)} of it")
    else:
        lines.append("- known-p skip rule: no report runs yet")
    return lines


def side_by_side(rows: list[dict], methods: dict[str, dict]) -> list[str]:
    """Each arm's measured speedup beside the map's for the same method in the nearest cell.

    >>> side_by_side([{"arm": "null", "rollouts": {"speedup": 0.9, "ci90": [0.8, 1.1]}}],
    ...              {"uniform-rounds": {"speedup": 1.2, "ci90": [1.0, 1.5]}})[2]
    '| null | uniform-rounds | 0.90 (90% 0.80-1.10) | 1.20 (90% 1.00-1.50) |'
    """

    def cell(e: dict | None) -> str:
        return "-" if not e else f"{_fmt(e['speedup'])} (90% {_fmt(e['ci90'][0])}-{_fmt(e['ci90'][1])})"

    lines = ["| arm | map's method | measured here | the map's prediction |", "|---|---|---|---|"]
    for r in rows:
        name = MAP_ARMS.get(r["arm"], r["arm"])
        lines.append(
            f"| {r['arm']} | {name if name in methods else '(not on the map)'} | {cell(r.get('rollouts'))} "
            f"| {cell(methods.get(name))} |"
        )
    return lines


def _placement(prints: dict, placed: dict | None, map_note: str, rows: list[dict] | None = None) -> list[str]:

    def persistence(f: dict) -> str:
        p = f.get("p_persistence")
        return persistence_cell(float("nan") if p is None else float(p))

    lines = [
        "| | batch noise/signal (resampled step) | per rollout / budget | zero-variance groups | persistence of p |",
        "|---|---|---|---|---|",
    ]
    if prints:
        lines.append(
            f"| this regime | {_fmt(prints['noise_to_signal_batch'])} | {_fmt(prints['noise_to_signal_rollout_over_budget'])} "
            f"| {_fmt(prints['zero_variance_fraction'])} | {persistence(prints)} |"
        )
    if placed is None:
        return [*lines, "", map_note]
    f = placed["fingerprints"]
    lines.append(
        f"| nearest map cell {placed['cell']} | {_fmt(f.get('noise_to_signal_batch'))} "
        f"| {_fmt(f.get('noise_to_signal_rollout_over_budget'))} | {_fmt(f.get('zero_variance_fraction'))} "
        f"| {persistence(f)} |"
    )
    lines += ["", "Speedup in rollouts to target, measured here and in that map cell (its prediction):", ""]
    lines += side_by_side(rows or [], placed["methods"])
    others = [m for m in placed["methods"] if m not in {MAP_ARMS.get(r["arm"], r["arm"]) for r in rows or []}]
    if others:
        lines += [
            "",
            "The cell's other methods: " + "; ".join(f"{m} {_fmt(placed['methods'][m]['speedup'])}" for m in others),
        ]
    return lines


def write_regime_report(cfg, state, out: Path, command: str, maps: Path | list[Path] | None) -> str:
    """``summary.json`` and ``summary.md`` of one regime under ``out/<regime>``, placed on the map by
    the cells of the map results ``maps`` (files or folders); returns the Markdown."""

    rows = arm_rows(cfg, state)
    prints = regime_fingerprints(cfg, state)
    paths = [] if maps is None else [maps] if isinstance(maps, Path) else list(maps)
    map_rows = [row for p in paths for row in (load_map_summary(p) or [])]
    placed = nearest_cell(prints, map_rows) if map_rows and prints else None
    where = ", ".join(map(str, paths)) or "(none given)"
    note = f"No regime-map results at {where}: `adaptive-rollouts bench --map` writes them (results/map)."
    text = markdown(cfg, state, rows, prints, placed, note)
    folder = Path(out) / cfg.regime
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "arms": rows,
        "fingerprints": prints,
        "map_cell": None if placed is None else {k: placed[k] for k in ("cell", "fingerprints", "methods", "distance")},
        "best_lr": state.best_lr,
        "errors": state.errors,
        "missing": state.missing,
    }

    write_result(folder / "summary.json", data, command=command, settings=asdict(cfg), commit=code_version()["commit"])
    atomic_write(folder / "summary.md", f"Made by `{command}`.\n\n{text}\n".encode())
    return text

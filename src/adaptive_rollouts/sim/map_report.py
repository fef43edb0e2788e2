"""The regime map's outputs: summary table, target checks, map.md, map.json, one heatmap per method."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.sim.regime_map import DEFAULT, NULL, bootstrap_speedup, speedup

__all__ = ["summarize_map", "write_map_report", "NOISE_DOMINATED"]

NOISE_DOMINATED = 1.0  # batch noise-to-signal of Uniform's step (resampled) at or above this


def _runs_at(
    result: dict, cell: str, method: str, seeds: Sequence[int] | None = None, lr: float | None = None
) -> list[dict]:
    lr = result["lr"].get(cell, {}).get(method) if lr is None else lr
    if lr is None:
        return []
    runs = [r for (c, m, s, x), r in result["runs"].items() if c == cell and m == method and abs(x - lr) < 1e-12]
    seeds_ok = set(
        result["config"]["paired_seeds"] if method in ("uniform", DEFAULT, NULL) else result["config"]["report_seeds"]
    )
    runs = [r for r in runs if r["seed"] in seeds_ok and (seeds is None or r["seed"] in seeds)]
    return sorted(runs, key=lambda r: r["seed"])


def _nanmean(values) -> float:
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


def _ratio_of_sums(num: list[float], den: list[float]) -> float:
    n, d = float(np.sum(num)), float(np.sum(den))
    return n / d if d > 0 else float("inf")


def _fingerprints(result: dict, cell: str) -> dict[str, float]:
    uni = _runs_at(result, cell, "uniform")
    info = result["cells"][cell]
    if not uni:
        return {"transfer": info.get("transfer_measured", float("nan"))}
    nsr = float(np.median([x for r in uni for x in r["nsr_rollout"] if np.isfinite(x)] or [np.nan]))
    probes = [r["probe"] for r in uni if r["probe"]["probe_var"]]
    batch = (
        _ratio_of_sums([x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]])
        if probes
        else float("nan")
    )
    return {
        "noise_to_signal_rollout": nsr,
        "noise_to_signal_rollout_over_budget": nsr / info["budget"],
        "noise_to_signal_batch": batch,
        "zero_variance_fraction": float(np.mean([r["regime"]["regime/zero_variance_fraction_mean"] for r in uni])),
        "p_persistence": _nanmean(r["regime"]["regime/p_persistence"] for r in uni),
        "transfer": info.get("transfer_measured", float("nan")),
    }


def summarize_map(result: dict) -> dict[str, Any]:
    """Per cell: fingerprints, and per method speedup (seed-mean curves) with per-seed min-max."""
    frac = result["config"]["target_at"]
    rows = []
    for cell in result["cells"]:
        uni = _runs_at(result, cell, "uniform")
        row: dict[str, Any] = {"cell": cell, **result["cells"][cell], "fingerprints": _fingerprints(result, cell)}
        row["methods"] = {}
        for method in result["config"]["methods"]:
            runs = _runs_at(result, cell, method)
            if not runs or not uni:
                continue
            seeds = [r["seed"] for r in runs]
            u_same = [u for u in uni if u["seed"] in seeds]
            if len(u_same) != len(runs):
                continue
            per_seed = [speedup([u], [r], frac) for u, r in zip(u_same, runs)]
            lo, hi = bootstrap_speedup(u_same, runs, frac, result["config"].get("bootstrap", 1000))
            entry = {
                "speedup": speedup(u_same, runs, frac),
                "min": float(np.min(per_seed)),
                "max": float(np.max(per_seed)),
                "per_seed": per_seed,
                "ci90": [lo, hi],
                "seeds": seeds,
                "lr": result["lr"][cell][method],
            }
            uniform_lr = result["lr"][cell].get("uniform")
            same = (
                _runs_at(result, cell, method, lr=uniform_lr) if method in result["config"].get("same_rate", ()) else []
            )
            if len(same) == len(u_same) and same:
                entry["same_rate_speedup"] = speedup(u_same, same, frac)
                entry["same_rate_ci90"] = list(
                    bootstrap_speedup(u_same, same, frac, result["config"].get("bootstrap", 1000))
                )
                entry["same_rate_per_seed"] = [speedup([u], [r], frac) for u, r in zip(u_same, same)]
            probes = [r["probe"] for r in runs if r["probe"]["probe_var"]]
            if probes:
                nsr = _ratio_of_sums(
                    [x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]]
                )
                nsr_o = _ratio_of_sums(
                    [x for p in probes for x in p["probe_oracle_var"]],
                    [x for p in probes for x in p["probe_oracle_signal"]],
                )
                entry["batch_nsr"], entry["batch_nsr_true_p_optimum"] = nsr, nsr_o
                entry["batch_nsr_ratio"] = nsr / nsr_o if nsr_o > 0 and np.isfinite(nsr_o) else float("nan")
            row["methods"][method] = entry
        rows.append(row)
    return {"rows": rows, "targets": _targets(rows), "errors": result["errors"]}


def _targets(rows: list[dict]) -> dict[str, Any]:
    noisy = [r for r in rows if r["fingerprints"].get("noise_to_signal_batch", 0) >= NOISE_DOMINATED]
    learned_best = []
    for r in noisy:
        cands = [
            (e["speedup"], m, r["methods"].get(f"{m}@true-p", {}).get("speedup"))
            for m, e in r["methods"].items()
            if "@" not in m and m != "uniform"
        ]
        if cands:
            s, m, t = max(cands)
            learned_best.append({"cell": r["cell"], "method": m, "speedup": s, "true_p": t})
    default = [
        {
            "cell": r["cell"],
            **{
                k: r["methods"][DEFAULT].get(k)
                for k in ("speedup", "min", "max", "ci90", "seeds", "same_rate_speedup", "same_rate_ci90")
            },
        }
        for r in rows
        if DEFAULT in r["methods"]
    ]
    nsr = [
        {"cell": r["cell"], "ratio": r["methods"][DEFAULT].get("batch_nsr_ratio", float("nan"))}
        for r in rows
        if DEFAULT in r["methods"]
    ]
    return {
        "noise_dominated_cells": [r["cell"] for r in noisy],
        "learned_best_in_noise_dominated": learned_best,
        "learned_target_met": bool(learned_best)
        and all(x["speedup"] >= 1.5 and x["true_p"] and x["speedup"] >= 0.9 * x["true_p"] for x in learned_best),
        "default_vs_uniform": default,
        "no_regret_met": bool(default) and all(x["speedup"] >= 0.97 for x in default),
        "no_regret_same_rate_met": bool(default)
        and all(x["same_rate_speedup"] is not None and x["same_rate_speedup"] >= 0.97 for x in default),
        "default_batch_nsr_ratio": nsr,
        "nsr_target_met": bool(nsr) and all(np.isfinite(x["ratio"]) and x["ratio"] <= 1.10 for x in nsr),
    }


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{nd}f}"


def _heatmaps(summary: dict, methods: Sequence[str], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    scenarios = sorted({r["scenario"] for r in rows})
    regimes = sorted({r["regime"] for r in rows})
    files = []
    for method in methods:
        grid = np.full((len(regimes), len(scenarios)), np.nan)
        for r in rows:
            e = r["methods"].get(method)
            if e is not None:
                grid[regimes.index(r["regime"]), scenarios.index(r["scenario"])] = e["speedup"]
        if np.all(np.isnan(grid)):
            continue
        fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(scenarios), 1.2 + 0.55 * len(regimes)))
        logs = np.log2(np.clip(grid, 0.25, 4.0))
        im = ax.imshow(logs, cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto")
        for i in range(len(regimes)):
            for j in range(len(scenarios)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(scenarios)), scenarios, rotation=20)
        ax.set_yticks(range(len(regimes)), regimes)
        ax.set_title(f"{method}: speedup vs Uniform (AdamW, best rate each)", fontsize=9)
        fig.colorbar(im, ax=ax, label="log2 speedup")
        fig.tight_layout()
        name = f"heatmap_{method.replace('@', '_at_')}.png"
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def write_map_report(result: dict, folder: str | Path, plots: bool = True) -> Path:
    """map.md, map.json (summary + config; the runs stay in runs.jsonl) and heatmaps in ``folder``."""
    folder = Path(folder)
    summary = summarize_map(result)
    methods = list(result["config"]["methods"])
    (folder / "map.json").write_text(
        json.dumps({"config": result["config"], "lr": result["lr"], **summary}, indent=1, default=float)
    )
    lines = ["# Regime map: speedup in rollouts to Uniform's target (AdamW, each method at its best rate)", ""]
    cfg = result["config"]
    lines.append(
        f"Estimator {cfg['estimator']}, aggregation {cfg['aggregation']}, {cfg['steps']} steps, target "
        f"Uniform's accuracy at {cfg['target_at']:.0%} of the run, on the running max of the seed-mean curves "
        f"(0 = not reached by the end, i.e. slower than {cfg['target_at']:g}x); rates tuned "
        f"(mean accuracy over the last third of the run) on seeds "
        f"{list(cfg['tune_seeds'])} (grid {list(cfg['lr_grid'])}, extended x{cfg['lr_step']:g} at an edge), "
        f"reported on seeds {list(cfg['report_seeds'])} (Uniform and the default: {list(cfg['paired_seeds'])}, paired)."
    )
    lines += ["", "## Fingerprints (measured on Uniform's rollouts)", ""]
    lines.append(
        "| cell | noise/signal per rollout | same / rollouts per step | batch noise/signal (resampled step) "
        "| zero-var fraction | persistence of p | transfer |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for r in summary["rows"]:
        f = r["fingerprints"]
        lines.append(
            f"| {r['cell']} | {_fmt(f.get('noise_to_signal_rollout'), 0)} | "
            f"{_fmt(f.get('noise_to_signal_rollout_over_budget'))} | {_fmt(f.get('noise_to_signal_batch'))} | "
            f"{_fmt(f.get('zero_variance_fraction'))} | {_fmt(f.get('p_persistence'))} | {_fmt(f.get('transfer'))} |"
        )
    lines += ["", "## Speedup vs Uniform: seed-mean (90% paired-bootstrap interval) [per-seed min-max] (rate)", ""]
    shown = [m for m in methods if m != "uniform"]
    lines.append("| cell | " + " | ".join(shown) + " |")
    lines.append("|---|" + "---|" * len(shown))
    for r in summary["rows"]:
        cells = []
        for m in shown:
            e = r["methods"].get(m)
            cells.append(
                "-"
                if e is None
                else f"{_fmt(e['speedup'])} ({_fmt(e['ci90'][0])}-{_fmt(e['ci90'][1])}) "
                f"[{_fmt(e['min'])}-{_fmt(e['max'])}] ({e['lr']:.3g})"
            )
        lines.append(f"| {r['cell']} | " + " | ".join(cells) + " |")
    lines += ["", "## The default against Uniform (paired seeds)", ""]
    lines.append(
        "| cell | at its own best rate (90% CI) | at Uniform's best rate (90% CI) | null control (90% CI) "
        "| batch noise/signal: Uniform | default | true-p optimum | default@true-p |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in summary["rows"]:
        d = r["methods"].get(DEFAULT)
        if d is None:
            continue
        same = d.get("same_rate_speedup")
        same_txt = (
            "-" if same is None else f"{_fmt(same)} ({_fmt(d['same_rate_ci90'][0])}-{_fmt(d['same_rate_ci90'][1])})"
        )
        tp = r["methods"].get(f"{DEFAULT}@true-p", {})
        nul = r["methods"].get(NULL)
        null_txt = "-" if nul is None else f"{_fmt(nul['speedup'])} ({_fmt(nul['ci90'][0])}-{_fmt(nul['ci90'][1])})"
        lines.append(
            f"| {r['cell']} | {_fmt(d['speedup'])} ({_fmt(d['ci90'][0])}-{_fmt(d['ci90'][1])}) | {same_txt} | {null_txt} | "
            f"{_fmt(r['fingerprints'].get('noise_to_signal_batch'))} | {_fmt(d.get('batch_nsr'))} | "
            f"{_fmt(d.get('batch_nsr_true_p_optimum'))} | {_fmt(tp.get('batch_nsr'))} |"
        )
    t = summary["targets"]
    lines += ["", "## Targets", ""]
    lines.append(
        f"- noise-dominated cells (batch noise/signal >= {NOISE_DOMINATED:g}): {t['noise_dominated_cells'] or 'none'}"
    )
    for x in t["learned_best_in_noise_dominated"]:
        lines.append(
            f"  - {x['cell']}: best learned-predictor allocator {x['method']} {_fmt(x['speedup'])}x "
            f"(same allocator with true p: {_fmt(x['true_p'])}x)"
        )
    lines.append(f"- learned >= 1.5x and >= 90% of true p in every noise-dominated cell: {t['learned_target_met']}")
    worst = min(t["default_vs_uniform"], key=lambda x: x["speedup"], default=None)
    lines.append(
        f"- no regret (default >= 0.97x in every cell): {t['no_regret_met']}"
        + (
            f"; worst {worst['cell']} {_fmt(worst['speedup'])}x over {len(worst['seeds'])} paired seeds"
            if worst
            else ""
        )
    )
    same = [x for x in t["default_vs_uniform"] if x["same_rate_speedup"] is not None]
    if same:
        w = min(same, key=lambda x: x["same_rate_speedup"])
        lines.append(
            f"- no regret at Uniform's rate: {t['no_regret_same_rate_met']}; worst {w['cell']} "
            f"{_fmt(w['same_rate_speedup'])}x"
        )
    ratios = [x["ratio"] for x in t["default_batch_nsr_ratio"]]
    lines.append(
        f"- default's batch noise/signal <= 1.10x the true-p optimum's in every cell: {t['nsr_target_met']}"
        + (f" (ratios {_fmt(min(ratios))}-{_fmt(max(ratios))})" if ratios else "")
    )
    if summary["errors"]:
        lines += ["", "## Not reported (learning rate at the grid's edge after extensions, or errors)", ""]
        lines += [f"- {k}: {v}" for k, v in summary["errors"].items()]
    if result.get("missing"):
        lines += ["", f"## Not run yet (partial map: {len(result['missing'])} method/cell pairs)", ""]
        lines.append(", ".join(result["missing"]))
    if plots:
        files = _heatmaps(summary, shown, folder)
        lines += ["", "## Heatmaps", ""] + [f"![{f}]({f})" for f in files]
    path = folder / "map.md"
    path.write_text("\n".join(lines) + "\n")
    return path

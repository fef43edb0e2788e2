"""The regime map's outputs: map.md, map.json and one heatmap per method (the summary table and
target checks are `map_summary`'s). map.json is a result file (`experiments.results`: command,
commit, settings = the map's configuration); `map_markdown` turns its data into the tables of
map.md, and the docs' renderer (`reporting.map_tables`) calls it on the committed copies under
results/map/."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.map_records import records_path, write_run_records
from adaptive_rollouts.experiments.map_summary import NOISE_DOMINATED, summarize_map
from adaptive_rollouts.experiments.regime_map import DEFAULT, NULL, PAIRED
from adaptive_rollouts.experiments.results import AVX512_TAG, MixedResultsError, short_commit, write_result
from adaptive_rollouts.reporting.gain_report import equal_cost_lines, gain_lines, verdict_lines
from adaptive_rollouts.reporting.markdown import fmt as _fmt
from adaptive_rollouts.reporting.markdown import section, table
from adaptive_rollouts.state.atomic import atomic_write

__all__ = [
    "summarize_map",
    "write_map_report",
    "map_markdown",
    "map_data",
    "run_commits",
    "NOISE_DOMINATED",
]


def _with_ci(value: float | None, ci: Sequence[float]) -> str:
    """A speedup and its interval, "1.20 (1.05-1.31)"."""
    return f"{_fmt(value)} ({_fmt(ci[0])}-{_fmt(ci[1])})"


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
        name = "heatmap_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", method.replace("@", "_at_")).strip("_") + ".png"
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def _fingerprint_cells(f: dict) -> list[str]:
    keys = ["noise_to_signal_rollout_over_budget", "noise_to_signal_batch", "zero_variance_fraction"]
    keys += ["p_persistence", "transfer"]
    return [_fmt(f.get("noise_to_signal_rollout"), 0), *(_fmt(f.get(k)) for k in keys)]


def _speedup_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    return f"{_with_ci(e['speedup'], e['ci90'])} [{_fmt(e['min'])}-{_fmt(e['max'])}] ({e['lr']:.3g})"


def _default_cells(row: dict) -> list[str]:
    """The default's row of the paired comparison against Uniform."""
    d = row["methods"][DEFAULT]
    same = d.get("same_rate_speedup")
    nul = row["methods"].get(NULL)
    tp = row["methods"].get(f"{DEFAULT}@true-p", {})
    return [
        row["cell"],
        _with_ci(d["speedup"], d["ci90"]),
        "-" if same is None else _with_ci(same, d["same_rate_ci90"]),
        "-" if nul is None else _with_ci(nul["speedup"], nul["ci90"]),
        _fmt(row["fingerprints"].get("noise_to_signal_batch")),
        *(_fmt(d.get(k)) for k in ("batch_nsr", "batch_nsr_true_p_optimum")),
        _fmt(tp.get("batch_nsr")),
    ]


def run_commits(result: dict) -> dict[str, int]:
    """How many of the map's runs ran at each commit (``unknown``: a run recorded without one)."""
    counts: dict[str, int] = {}
    for r in result["runs"].values():
        counts[r.get("commit", "unknown")] = counts.get(r.get("commit", "unknown"), 0) + 1
    return dict(sorted(counts.items()))


def map_data(result: dict, allow_mixed_commits: bool = False) -> dict:
    """What map.json holds: the configuration, the tuned rates, the summary (`summarize_map`), the
    method/cell pairs not run yet and the commits the runs ran at. Runs of several commits raise
    `MixedResultsError` unless ``allow_mixed_commits`` (then the tables say so)."""
    commits = run_commits(result)
    if len(commits) > 1 and not allow_mixed_commits:
        kernels = len({AVX512_TAG in c for c in commits}) > 1
        raise MixedResultsError(
            f"the map's runs ran at {len(commits)} commits ({_commit_list(commits)}): rerun them in a fresh --out "
            "folder, or allow it (bench --map --allow-mixed-commits), which the tables then state"
            + (
                f"; {AVX512_TAG} marks runs made with numpy's AVX-512 kernels, which do not reproduce runs made "
                'without them: set NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" to match those'
                if kernels
                else ""
            )
        )
    return {
        "config": result["config"],
        "lr": result["lr"],
        **summarize_map(result),
        "missing": result.get("missing", []),
        "run_commits": commits,
        "allow_mixed_commits": allow_mixed_commits,
    }


def _commit_list(commits: dict[str, int]) -> str:
    return ", ".join(f"{short_commit(c)} ({n} runs)" for c, n in commits.items())


def _paired_arms(cfg: dict) -> str:
    """The arms run on the paired seeds, in words (a result file that names none: `PAIRED`'s)."""
    extra = [m for m in cfg.get("paired", PAIRED) if m not in PAIRED]
    return "Uniform, the default and the null control" + "".join(f", {m}" for m in extra)


def map_markdown(data: dict, level: int = 2) -> list[str]:
    """The tables and target checks of a map, from map.json's data; sections at ``level``."""
    cfg = data["config"]
    commits = data.get("run_commits", {})
    lines = []
    if len(commits) > 1:
        lines += [f"**Mixed runs: this map's runs ran at {len(commits)} commits:** {_commit_list(commits)}.", ""]
    lines += [
        ("Secondary statistic (the older maps' primary): " if cfg.get("fractions") else "")
        + f"Estimator {cfg['estimator']}, aggregation {cfg['aggregation']}, {cfg['steps']} steps, target "
        f"the accuracy of the average of Uniform's and the method's seed-mean curves at {cfg['target_at']:.0%} "
        f"of the run, on their running max "
        f"(0 = not reached by the end; inf = Uniform did not reach it by the end, the method did); rates tuned "
        f"(mean accuracy over the last third of the run) on seeds "
        f"{list(cfg['tune_seeds'])} (grid {list(cfg['lr_grid'])}, extended x{cfg['lr_step']:g} at an edge), "
        f"reported on seeds {list(cfg['report_seeds'])} ({_paired_arms(cfg)}: {list(cfg['paired_seeds'])}, paired)."
    ]
    if cfg.get("fractions"):
        lines += ["", *gain_lines(data, level)]
    lines += section("Fingerprints (measured on Uniform's rollouts)", level)
    lines += table(
        [
            "cell",
            "noise/signal per rollout",
            "same / rollouts per step",
            "batch noise/signal (resampled step)",
            "zero-var fraction",
            "persistence of p",
            "transfer",
        ],
        ([r["cell"], *_fingerprint_cells(r["fingerprints"])] for r in data["rows"]),
    )
    single = "Speedup vs Uniform, one target" + (" (secondary)" if cfg.get("fractions") else "")
    lines += section(f"{single}: seed-mean (90% paired-bootstrap interval) [per-seed min-max] (rate)", level)
    shown = [m for m in cfg["methods"] if m != "uniform"]
    lines += table(
        ["cell", *shown], ([r["cell"], *(_speedup_cell(r["methods"].get(m)) for m in shown)] for r in data["rows"])
    )
    if cfg.get("grad_var_every"):  # the gradient probes ran
        lines += section("The default against Uniform (paired seeds)", level)
        header = ["cell", "at its own best rate (90% CI)", "at Uniform's best rate (90% CI)", "null control (90% CI)"]
        header += ["batch noise/signal: Uniform", "default", "true-p optimum", "default@true-p"]
        lines += table(header, (_default_cells(r) for r in data["rows"] if DEFAULT in r["methods"]))
    if data.get("saving_targets"):
        lines += _saving_lines(data, level)
    lines += section("Targets", level)
    lines += _target_lines(data["targets"])
    if data["errors"]:
        lines += section("Not reported (learning rate at the grid's edge after extensions, or errors)", level)
        lines += [f"- {k}: {v}" for k, v in data["errors"].items()]
    if data.get("missing"):
        lines += section(f"Not run yet (partial map: {len(data['missing'])} method/cell pairs)", level)
        lines.append(", ".join(data["missing"]))
    return lines


def _saving_lines(data: dict, level: int) -> list[str]:
    """Rollouts generated (share of Uniform's) and final accuracy per method, at equal steps and (where
    the file holds it) at equal cost; the saving targets."""
    shown = [m for m in data["config"]["methods"] if m != "uniform"]
    lines = section(
        "Rollouts generated over the run, as a share of Uniform's (final accuracy minus Uniform's, at equal steps)",
        level,
    )
    lines += table(
        ["cell", *shown],
        (
            [
                r["cell"],
                *(
                    f"{e['spend']:.2f} ({e['final_gap']:+.3f})" if (e := r["methods"].get(m)) and "spend" in e else "-"
                    for m in shown
                ),
            ]
            for r in data["rows"]
        ),
    )
    lines += equal_cost_lines(data, level)
    lines += verdict_lines(data, level)
    return lines


def _target_lines(t: dict) -> list[str]:
    lines = [
        f"- noise-dominated cells (batch noise/signal >= {NOISE_DOMINATED:g}): {t['noise_dominated_cells'] or 'none'}"
    ]
    for x in t["learned_best_in_noise_dominated"]:
        lines.append(
            f"  - {x['cell']}: best learned-predictor allocator {x['method']} {_fmt(x['speedup'])}x "
            + (f"(same allocator with true p: {_fmt(x['true_p'])}x)" if x["true_p"] else "(no true-p variant run)")
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
    return lines


def write_map_report(
    result: dict,
    folder: str | Path,
    plots: bool = True,
    command: str | None = None,
    results_copy: str | Path | None = None,
    allow_mixed_commits: bool = False,
) -> Path:
    """map.md, map.json (a result file: summary + config; the runs stay in runs.jsonl) and heatmaps
    in ``folder``; with ``results_copy`` the same result file there too (for results/map/)."""
    folder = Path(folder)
    data = map_data(result, allow_mixed_commits)
    settings = dict(result["config"])
    written = write_result(folder / "map.json", data, command=command, settings=settings)
    if results_copy is not None:  # the same bytes, header included, and the compact per-run record
        atomic_write(results_copy, written.read_bytes())
        write_run_records(result, records_path(results_copy))
    lines = ["# Regime map: speedup in rollouts to the target (AdamW, each method at its best rate)", ""]
    lines += map_markdown(data)
    shown = [m for m in result["config"]["methods"] if m != "uniform"]
    if plots:
        files = _heatmaps(data, shown, folder)
        lines += section("Heatmaps") + [f"![{f}]({f})" for f in files]
    path = folder / "map.md"
    atomic_write(path, ("\n".join(lines) + "\n").encode())
    return path

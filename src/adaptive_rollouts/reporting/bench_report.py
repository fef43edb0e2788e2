"""Benchmark output: report.md, results.json (a result file, `experiments.results`) and PNG plots in
one run folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.reporting.markdown import fmt, section
from adaptive_rollouts.reporting.markdown import table as markdown_table
from adaptive_rollouts.state.atomic import atomic_write

__all__ = ["write_report"]

OURS = ("posterior-progressive",)
PUBLISHED = ("vip-paper", "vigor")
ORACLES = ("oracle-vip", "oracle-fill", "oracle-skip")


def _fmt(x: float, nd: int = 2) -> str:
    return fmt(x, nd, inf="never")  # an infinite rollouts-to-target: the target was never reached


def _verdicts(table: list[dict[str, Any]]) -> list[str]:
    lines = []
    learned = [
        r
        for r in table
        if r["method"] not in ORACLES
        and "@true-p" not in r["method"]
        and r["method"] != "uniform"
        and np.isfinite(r["speedup_mean"])
    ]
    if learned:
        b = max(learned, key=lambda r: r["speedup_mean"])
        yes = b["speedup_mean"] >= 2.5
        lines.append(
            f"- Best non-oracle allocator: **{b['method']}** in {b['scenario']} / {b['aggregation']}, "
            f"{b['speedup_mean']:.2f}x fewer rollouts to target than Uniform "
            f"(seeds {b['speedup_min']:.2f}-{b['speedup_max']:.2f}). "
            f">= 2.5x somewhere: **{'yes' if yes else 'no'}**."
        )
    orc = [r for r in table if r["method"] in ORACLES and np.isfinite(r["speedup_mean"])]
    if orc:
        b = max(orc, key=lambda r: r["speedup_mean"])
        lines.append(
            f"- Best oracle (true p): {b['method']} in {b['scenario']} / {b['aggregation']}: {b['speedup_mean']:.2f}x."
        )
    ours = [m for m in {r["method"] for r in table} if m in OURS]
    for m in ours:
        for pub in PUBLISHED:
            worse = []
            cells = 0
            for r in table:
                if r["method"] != m:
                    continue
                other = next(
                    (
                        x
                        for x in table
                        if x["method"] == pub
                        and x["scenario"] == r["scenario"]
                        and x["aggregation"] == r["aggregation"]
                    ),
                    None,
                )
                if other is None:
                    continue
                cells += 1
                # "at least as good" = not below the published method's seed spread
                if r["speedup_mean"] < other["speedup_min"] and r["final_accuracy"] < other["final_accuracy"]:
                    worse.append(
                        f"{r['scenario']}/{r['aggregation']} ({r['speedup_mean']:.2f}x vs {other['speedup_mean']:.2f}x)"
                    )
            if cells:
                verdict = "yes, in all" if not worse else f"no: worse in {len(worse)} of"
                verdict = "(worse = speedup below the other's worst seed and lower final accuracy) " + verdict
                lines.append(
                    f"- {m} at least as good as {pub}: {verdict} {cells} cells"
                    + (f" - {'; '.join(worse)}" if worse else "")
                    + "."
                )
    return lines


_METHOD_COLUMNS = ["scenario", "method", "lr", "speedup", "speedup at Uniform's lr", "final acc", "acc @ half"]
_METHOD_COLUMNS += ["grad var / oracle", "noise-to-signal / oracle", "zero-var groups", "wasted rollouts", "skipped"]
_METHOD_COLUMNS += ["calib MAE", "alloc ms/step"]


def _method_cells(r: dict[str, Any]) -> list[str]:
    """One method's row of an aggregation's table (``*``: the best rate is at the grid's edge)."""
    return [
        r["scenario"],
        r["method"],
        f"{r['lr']:g}{'*' if r.get('lr_at_grid_edge') else ''}",
        f"{_fmt(r['speedup_mean'])} [{_fmt(r['speedup_min'])}-{_fmt(r['speedup_max'])}]",
        _fmt(r.get("speedup_at_uniform_lr", float("nan"))),
        _fmt(r["final_accuracy"], 3),
        _fmt(r["accuracy_at_half"], 3),
        *(
            _fmt(r[k])
            for k in (
                "grad_var_ratio",
                "noise_to_signal_ratio",
                "zero_variance_fraction",
                "wasted_frac",
                "skipped_frac",
            )
        ),
        _fmt(r["calib_mae"], 3),
        _fmt(r["allocator_seconds"] * 1e3, 2),  # shown in ms
    ]


def _plots(out: Path, result: dict[str, Any]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    table = result["summary"]["table"]
    runs = result["runs"]
    best_lr = {(r["scenario"], r["aggregation"], r["method"]): r["lr"] for r in table}
    scenarios = list(dict.fromkeys(r["scenario"] for r in table))
    aggs = list(dict.fromkeys(r["aggregation"] for r in table))
    methods = list(dict.fromkeys(r["method"] for r in table))
    files = []
    for agg in aggs:
        fig, axes = plt.subplots(1, len(scenarios), figsize=(4 * len(scenarios), 3.4), squeeze=False)
        for ax, sc in zip(axes[0], scenarios):
            for m in methods:
                rs = [
                    r
                    for r in runs
                    if r["scenario"] == sc
                    and r["aggregation"] == agg
                    and r["method"] == m
                    and r["lr"] == best_lr.get((sc, agg, m))
                ]
                if not rs:
                    continue
                acc = np.mean([r["accuracy"] for r in rs], axis=0)
                ax.plot(rs[0]["rollouts"], acc, label=m, lw=1.2, ls="--" if m in ORACLES else "-")
            ax.set_title(f"{sc}", fontsize=9)
            ax.set_xlabel("rollouts")
        axes[0][0].set_ylabel("held-out accuracy")
        axes[0][-1].legend(fontsize=6)
        fig.suptitle(f"learning curves, {agg} aggregation (best lr each, mean over seeds)", fontsize=10)
        fig.tight_layout()
        name = f"curves_{agg}.png"
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        files.append(name)
    # allocation vs true p (first seed, first aggregation, mid-run step)
    agg = aggs[0]
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4 * len(scenarios), 3.2), squeeze=False)
    for ax, sc in zip(axes[0], scenarios):
        for m in methods:
            r = next(
                (
                    r
                    for r in runs
                    if r["scenario"] == sc
                    and r["aggregation"] == agg
                    and r["method"] == m
                    and r["lr"] == best_lr.get((sc, agg, m))
                ),
                None,
            )
            if r and r["alloc_p"]:
                ax.scatter(r["alloc_p"], r["alloc_n"], s=6, label=m, alpha=0.6)
        ax.set_title(sc, fontsize=9)
        ax.set_xlabel("true p")
    axes[0][0].set_ylabel("rollouts n_q")
    axes[0][-1].legend(fontsize=6)
    fig.suptitle(f"allocation against true p (mid-run, {agg})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "allocation.png", dpi=90)
    plt.close(fig)
    files.append("allocation.png")
    # calibration
    fig, ax = plt.subplots(figsize=(4.2, 4))
    bins = np.linspace(0, 1, 11)
    for m in methods:
        pred = np.concatenate([np.asarray(r["calib_pred"], float) for r in runs if r["method"] == m] or [np.zeros(0)])
        true = np.concatenate([np.asarray(r["calib_true"], float) for r in runs if r["method"] == m] or [np.zeros(0)])
        if pred.size == 0 or m in ORACLES or "@true-p" in m:
            continue
        which = np.clip(np.digitize(pred, bins) - 1, 0, 9)
        xs = [pred[which == b].mean() for b in range(10) if np.any(which == b)]
        ys = [true[which == b].mean() for b in range(10) if np.any(which == b)]
        ax.plot(xs, ys, marker="o", label=m)
    ax.plot([0, 1], [0, 1], "k:", lw=0.8)
    ax.set_xlabel("predicted p")
    ax.set_ylabel("true p")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.set_title("predictor calibration (all runs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "calibration.png", dpi=90)
    plt.close(fig)
    files.append("calibration.png")
    return files


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def write_report(result: dict[str, Any], out: str | Path, theory: dict[str, Any], plots: bool = True) -> Path:
    """Write report.md, results.json and plots into ``out``; return the report path. ``theory`` is
    `sim.theory.theory_checks`'s dict (the caller runs the checks, so reporting imports no simulator)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(result, theory=theory)
    files = _plots(out, result) if plots else []
    cfg = result["config"]
    table = result["summary"]["table"]
    L = ["# adaptive-rollouts simulator benchmark", ""]
    L.append(
        f"Scenarios {', '.join(cfg['scenarios'])}; seeds {list(cfg['seeds'])}; {cfg['steps']} steps of "
        f"{cfg['batch_prompts']} prompts and {cfg['budget']} rollouts; {cfg['n_prompts']} train prompts; "
        f"estimator {cfg['estimator']}. Wall time {result.get('seconds', float('nan')):.0f} s."
    )
    L.append(
        f"Learning-rate grid: base {cfg['base_lr']} x {[round(m, 3) for m in cfg['lr_multipliers']]}; "
        "each method at its best rate (highest mean held-out accuracy over the run)."
    )
    L.append(
        "`*` after a learning rate: the best rate sits at an edge of the grid (the grid may not bracket it). "
        "'grad var / oracle' and 'noise-to-signal / oracle': trace of the batch-gradient covariance (and that "
        "over the squared norm of its mean) for the method's counts vs the oracle VIP (RLOO objective, true p) "
        "counts on the same prompts and policy, by resampling rollouts with the counts fixed."
    )
    L.append(
        f"Speedup = Uniform's rollouts to {int(cfg['target_frac'] * 100)}% of its final gain / the method's "
        "(mean, [min-max] over seeds; 0 = never reached)."
    )
    if result.get("errors"):
        L += ["", "Methods not run (could not be built):"] + [f"- {m}: {e}" for m, e in result["errors"].items()]
    L += section("Verdict (computed from the table below)") + _verdicts(table)
    for agg in dict.fromkeys(r["aggregation"] for r in table):
        L += section(f"Aggregation: {agg}")
        L += markdown_table(_METHOD_COLUMNS, (_method_cells(r) for r in table if r["aggregation"] == agg))
    L += section("Theory checks") + [
        "Per-prompt gradient variance g = mean_i A_i Z_i, rewards in {-1,+1}, "
        "Z ~ N(0,1) independent of the reward; formula from `adaptive_rollouts.objectives` (GRPO: exact sum over "
        "the binomial number of successes, eps = 1e-6):",
        "",
    ]
    L += markdown_table(
        ["estimator", "p", "n", "formula", "Monte Carlo", "s.e."],
        (
            [
                v["estimator"],
                str(v["p"]),
                str(v["n"]),
                _fmt(v["formula"], 4),
                f"{v['monte_carlo']:.4f}",
                f"{v['se']:.4f}",
            ]
            for v in theory["variance"]
        ),
    )
    L += [
        "",
        f"VIGOR Theorem 2 (alpha 0.5, gamma 2, T 4): the pareto scenario draws the reward std with tail "
        f"index k = {theory['pareto_k']:g} (Hill estimate on the initial policy: {_fmt(theory['pareto_k_hill'])}); "
        f"predicted speedup eta^(1/3) = {theory['vigor_predicted']:.3f} "
        f"(with the Hill k: {_fmt(theory['vigor_predicted_hill'], 3)}).",
        "",
    ]
    for r in table:
        if r["scenario"] == "pareto" and r["method"] == "vigor":
            L.append(
                f"- measured VIGOR speedup, pareto / {r['aggregation']}: {_fmt(r['speedup_mean'])} "
                f"[{_fmt(r['speedup_min'])}-{_fmt(r['speedup_max'])}]"
            )
    if files:
        L += section("Plots") + [f"![{f}]({f})" for f in files]
    report = out / "report.md"
    atomic_write(report, ("\n".join(L) + "\n").encode())
    write_result(out / "results.json", _json_safe(result), settings=cfg)
    return report

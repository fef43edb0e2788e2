"""Summary, Markdown report, JSON and plots of the demo runs."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.state.atomic import atomic_write

from .evaluate import KS
from .reading import GAIN_SHARES, ONE_SEED_NOTE, SPEND_SHARES, accuracy_at_spend, rollouts_to_gain
from .regime import reward_fingerprints
from .stats import fmt_interval, t_interval

SAMPLED = tuple(f"{m}@{k}" for m in ("pass", "mean") for k in KS)


def _curves(runs) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.asarray(r.rollouts, dtype=float), np.asarray(r.held_out, dtype=float)) for r in runs]


def _glance(by_method: dict) -> dict[str, dict]:
    """Per method, against Uniform (`reading`): seed-mean accuracy at 25/50/100% of Uniform's
    rollouts, rollouts to 50/75/90% of Uniform's gain, and Uniform's over the method's (geometric mean)."""
    if "uniform" not in by_method:
        return {}
    uni = _curves(by_method["uniform"])
    total = float(np.mean([c[0][-1] for c in uni]))
    start = float(np.mean([c[1][0] for c in uni]))
    gain = float(np.mean([c[1][-1] for c in uni])) - start
    need_u = rollouts_to_gain(uni, start, gain, GAIN_SHARES)
    out = {}
    for method, runs in by_method.items():
        need = rollouts_to_gain(_curves(runs), start, gain, GAIN_SHARES)
        ratio = np.where(np.isfinite(need), need_u / need, 0.0)
        out[method] = {
            "accuracy_at_uniform_spend": accuracy_at_spend(_curves(runs), SPEND_SHARES, total).tolist(),
            "rollouts_to_uniform_gain": need.tolist(),
            "speedup_to_uniform_gain": float(np.exp(np.mean(np.log(ratio)))) if np.all(ratio > 0) else 0.0,
        }
    return out


def summarise(results) -> list[dict]:
    """One row per method, means over seeds with 95% t-interval half-widths (``*_ci``): held-out
    greedy accuracy at the start and the end and its gain, held-out pass@k / mean@k at the start and
    the end, greedy accuracy on the RL pool, accuracy at equal rollouts and rollouts to shares of
    Uniform's gain (`_glance`), allocator overhead (share of training time without evaluation),
    distinct prompts and the most rollouts given to one prompt."""
    by_method = {m: [r for r in results if r.method == m] for m in dict.fromkeys(r.method for r in results)}
    glance = _glance(by_method)
    rows = []
    for method, runs in by_method.items():
        gain = [r.held_out[-1] - r.held_out[0] for r in runs]
        row = dict(
            method=method,
            seeds=len(runs),
            learning_rate=runs[0].learning_rate,
            held_out_start=float(np.mean([r.held_out[0] for r in runs])),
            held_out_final=t_interval([r.held_out[-1] for r in runs])[0],
            held_out_final_ci=t_interval([r.held_out[-1] for r in runs])[1],
            held_out_gain=t_interval(gain)[0],
            held_out_gain_ci=t_interval(gain)[1],
            pool_start=float(np.mean([r.pool[0] for r in runs])),
            pool_final=float(np.mean([r.pool[-1] for r in runs])),
            **glance.get(method, {}),
            allocator_overhead_pct=float(100 * np.mean([r.allocator_seconds / r.train_seconds for r in runs])),
            seconds_per_run=float(np.mean([r.train_seconds for r in runs])),
            distinct_prompts_per_step=float(np.mean([r.distinct_prompts_per_step for r in runs])),
            max_rollouts_per_prompt=int(max(max(c) for r in runs for c in r.counts)),
            rollouts_generated=float(np.mean([r.rollouts[-1] for r in runs])),
            tokens_generated=float(np.mean([r.tokens[-1] for r in runs])) if all(r.tokens for r in runs) else np.nan,
            skipped_fraction=float(np.mean([np.mean(np.asarray(c) == 0) for r in runs for c in r.counts])),
        )
        prints = [reward_fingerprints(r.groups) for r in runs if r.groups]
        for key in ("zero_variance_fraction", "all_fail_fraction", "all_pass_fraction", "p_persistence"):
            values = [p[key] for p in prints if not np.isnan(p[key])]
            row[key] = float(np.mean(values)) if values else float("nan")  # nan: no prompt visited twice
        for key in SAMPLED:
            if all(key in r.sampled_final for r in runs):
                row[f"{key}_start"] = float(np.mean([r.sampled_start[key] for r in runs]))
                row[f"{key}_final"], row[f"{key}_final_ci"] = t_interval([r.sampled_final[key] for r in runs])
        rows.append(row)
    return rows


def _reach(rollouts: float) -> str:
    return "never" if np.isinf(rollouts) else f"{rollouts:.0f}"


def glance_table(rows: list[dict]) -> list[str]:
    """At a glance: accuracy at equal rollouts and rollouts to shares of Uniform's gain."""
    if not rows or "accuracy_at_uniform_spend" not in rows[0]:
        return []
    spend = [f"accuracy at {s:.0%} of Uniform's rollouts" for s in SPEND_SHARES]
    reach = [f"rollouts to {s:.0%} of Uniform's gain" for s in GAIN_SHARES]
    lines = ["| method | " + " | ".join([*spend, *reach, "speedup (geometric mean)"]) + " |"]
    lines.append("|" + "---|" * (len(spend) + len(reach) + 2))
    for r in rows:
        acc = [f"{a:.3f}" if np.isfinite(a) else "ended before" for a in r["accuracy_at_uniform_spend"]]
        need = [_reach(x) for x in r["rollouts_to_uniform_gain"]]
        ratio = r["speedup_to_uniform_gain"]
        lines.append(f"| {r['method']} | " + " | ".join([*acc, *need, f"{ratio:.2f}x" if ratio else "-"]) + " |")
    return lines


def table(rows: list[dict], results) -> str:
    """The at-a-glance table, the headline table (held-out greedy) and the sampled-metrics table, Markdown."""
    lines = glance_table(rows)
    lines += [
        *([""] if lines else []),
        "| method | lr | held-out greedy start -> final | gain | rollouts generated | completion tokens "
        "| prompts skipped | pool greedy start -> final | max rollouts/prompt | allocator overhead |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        runs = [x for x in results if x.method == r["method"]]
        lines.append(
            f"| {r['method']} | {r['learning_rate']:g} | {r['held_out_start']:.3f} -> "
            f"{fmt_interval([x.held_out[-1] for x in runs])} | {fmt_interval([x.held_out[-1] - x.held_out[0] for x in runs])} "
            f"| {r['rollouts_generated']:.0f} | {r['tokens_generated']:.0f} | {100 * r['skipped_fraction']:.1f}% "
            f"| {r['pool_start']:.3f} -> {r['pool_final']:.3f} | {r['max_rollouts_per_prompt']} "
            f"| {r['allocator_overhead_pct']:.2f}% |"
        )
    lines += ["", "| method | " + " | ".join(SAMPLED) + " |", "|" + "---|" * (len(SAMPLED) + 1)]
    for r in rows:
        runs = [x for x in results if x.method == r["method"]]
        cells = [
            f"{r[f'{k}_start']:.3f} -> {fmt_interval([x.sampled_final[k] for x in runs])}" if f"{k}_final" in r else "-"
            for k in SAMPLED
        ]
        lines.append(f"| {r['method']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| method | zero-variance groups | all fail | all pass | persistence of p across visits |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['zero_variance_fraction']:.3f} | {r['all_fail_fraction']:.3f} "
            f"| {r['all_pass_fraction']:.3f} | {persistence_cell(r['p_persistence'])} |"
        )
    return "\n".join(lines)


def persistence_cell(value: float) -> str:
    """A persistence-of-p table cell: the value, or "no revisits" when no prompt was seen twice.

    >>> persistence_cell(float("nan")), persistence_cell(0.51234)
    ('no revisits', '0.512')
    """
    return "no revisits" if np.isnan(value) else f"{value:.3f}"


def plot(results, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r.method for r in results))
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in methods:
        runs = [r for r in results if r.method == method]
        x = np.asarray(runs[0].rollouts)
        cols = np.array([r.held_out for r in runs]).T
        mean, half = np.array([t_interval(c) for c in cols]).T
        (line,) = ax.plot(x, mean, marker="o", label=method)
        if len(runs) > 1:
            ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("rollouts consumed")
    ax.set_ylabel("held-out greedy accuracy (mean, 95% CI)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "held_out.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, kind in zip(axes, ("pass", "mean"), strict=True):
        for method in methods:
            runs = [r for r in results if r.method == method and r.sampled_final]
            if runs:
                ax.plot(
                    KS, [np.mean([r.sampled_final[f"{kind}@{k}"] for r in runs]) for k in KS], marker="o", label=method
                )
        start = [r for r in results if r.sampled_start]
        if start:
            ax.plot(
                KS, [np.mean([r.sampled_start[f"{kind}@{k}"] for r in start]) for k in KS], "k--", label="warm start"
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_title(f"held-out {kind}@k, final")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "pass_at_k.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(methods), figsize=(3 * len(methods), 3), sharey=True)
    for ax, method in zip(np.atleast_1d(axes), methods, strict=True):
        counts = np.concatenate([np.asarray(c) for r in results if r.method == method for c in r.counts])
        ax.hist(counts, bins=np.arange(counts.max() + 2) - 0.5)
        ax.set_title(method)
        ax.set_xlabel("rollouts per prompt")
    np.atleast_1d(axes)[0].set_ylabel("prompts (all steps)")
    fig.tight_layout()
    fig.savefig(out / "allocation.png", dpi=120)
    plt.close(fig)
    return ["held_out.png", "pass_at_k.png", "allocation.png"]


def write_report(results, config: dict, out: Path, extra_md: str = "") -> str:
    out.mkdir(parents=True, exist_ok=True)
    rows = summarise(results)
    text = table(rows, results)
    runs = [{k: v for k, v in asdict(r).items() if k != "groups"} for r in results]
    write_result(out / "results.json", {"summary": rows, "runs": runs}, settings=config)
    images = plot(results, out)
    seeds = sorted({r.seed for r in results})
    md = [
        "# adaptive-rollouts demo",
        "",
        "A tiny character-level Qwen2 (warm-started on digit sorting) trained with RLVR through",
        "`AdaptiveGRPOTrainer` (TRL's GRPO, AdamW); every method gets the same budget per step,",
        f"each at its tuned learning rate. Seeds {seeds}"
        + ("; intervals (+-) are 95% t-intervals over seeds." if len(seeds) > 1 else "."),
        "",
        *([ONE_SEED_NOTE, ""] if len(seeds) == 1 else []),
        text,
        "",
        "Held-out: problems never trained on, disjoint from the RL pool and the SFT set. Rollouts and",
        "completion tokens: every one generated (a saving allocator may spend less than the budget and",
        "skip prompts). Accuracy at a share of Uniform's rollouts: each seed's held-out curve, linear",
        "between evaluations, seed-mean ('ended before': the method generated fewer rollouts over its run).",
        "Rollouts to a share of Uniform's gain: where the running max of the seed-mean curve first reaches",
        "Uniform's start plus that share of Uniform's gain (interpolated; never: not by the end); the",
        "speedup is Uniform's rollouts over the method's, geometric mean over the shares.",
        "pass@k / mean@k: 8 sampled completions per held-out problem at temperature 1, start -> final.",
        "",
        extra_md,
        f"Config: `{json.dumps(config)}`",
        "",
        *[f"![{name}]({name})" for name in images],
        "",
    ]
    atomic_write(out / "report.md", "\n".join(md).encode())
    return text

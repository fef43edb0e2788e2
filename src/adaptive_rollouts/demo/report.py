"""Table, Markdown report, JSON and plots of the demo runs."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np


def rollouts_to_reach(rollouts: list[int], accuracy: list[float], target: float) -> float:
    """First evaluated rollout count whose accuracy reaches ``target`` (inf if never).

    >>> rollouts_to_reach([0, 100, 200], [0.1, 0.3, 0.5], 0.3)
    100.0
    """
    for r, a in zip(rollouts, accuracy, strict=True):
        if a >= target - 1e-12:
            return float(r)
    return float("inf")


def summarise(results) -> list[dict]:
    """One row per method: final pool accuracy (mean, sd over seeds), rollouts to reach the Uniform
    run's final pool accuracy of the same seed, held-out accuracy, allocator overhead (share of
    training time without evaluation), distinct prompts per step."""
    uniform_final = {r.seed: r.accuracy[-1] for r in results if r.method == "uniform"}
    rows = []
    for method in dict.fromkeys(r.method for r in results):
        runs = [r for r in results if r.method == method]
        final = np.array([r.accuracy[-1] for r in runs])
        reach = [
            rollouts_to_reach(r.rollouts, r.accuracy, uniform_final[r.seed]) for r in runs if r.seed in uniform_final
        ]
        uniform_reach = [
            rollouts_to_reach(u.rollouts, u.accuracy, u.accuracy[-1]) for u in results if u.method == "uniform"
        ]
        rows.append(
            dict(
                method=method,
                seeds=len(runs),
                start_accuracy=float(np.mean([r.accuracy[0] for r in runs])),
                final_accuracy=float(final.mean()),
                final_accuracy_sd=float(final.std(ddof=1)) if len(final) > 1 else 0.0,
                held_out_start=float(np.mean([r.held_out[0] for r in runs])),
                held_out_final=float(np.mean([r.held_out[-1] for r in runs])),
                rollouts_to_uniform_final=float(np.mean(reach)) if reach else float("nan"),  # inf if a seed never did
                seeds_reaching_uniform_final=int(np.isfinite(reach).sum()) if reach else 0,
                uniform_rollouts_to_its_final=float(np.mean(uniform_reach)) if uniform_reach else float("nan"),
                allocator_overhead_pct=float(100 * np.mean([r.allocator_seconds / r.train_seconds for r in runs])),
                seconds_per_run=float(np.mean([r.train_seconds for r in runs])),
                distinct_prompts_per_step=float(np.mean([r.distinct_prompts_per_step for r in runs])),
            )
        )
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "| method | pool acc start | final (sd) | rollouts to Uniform's final | held-out start -> final "
        "| distinct prompts/step | allocator overhead | s/run |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['start_accuracy']:.3f} | {r['final_accuracy']:.3f} ({r['final_accuracy_sd']:.3f}) "
            f"| {r['rollouts_to_uniform_final']:.0f} ({r['seeds_reaching_uniform_final']}/{r['seeds']} seeds) "
            f"| {r['held_out_start']:.3f} -> {r['held_out_final']:.3f} "
            f"| {r['distinct_prompts_per_step']:.1f} "
            f"| {r['allocator_overhead_pct']:.2f}% | {r['seconds_per_run']:.0f} |"
        )
    return "\n".join(lines)


def plot(results, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r.method for r in results))
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in methods:
        runs = [r for r in results if r.method == method]
        x = np.array(runs[0].rollouts)
        y = np.mean([r.accuracy for r in runs], axis=0)
        ax.plot(x, y, marker="o", label=method)
    ax.set_xlabel("rollouts consumed")
    ax.set_ylabel("greedy accuracy on the RL pool")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(methods), figsize=(3 * len(methods), 3), sharey=True)
    for ax, method in zip(np.atleast_1d(axes), methods, strict=True):
        counts = np.concatenate(
            [np.concatenate([np.asarray(c) for c in r.counts]) for r in results if r.method == method]
        )
        ax.hist(counts, bins=np.arange(counts.max() + 2) - 0.5)
        ax.set_title(method)
        ax.set_xlabel("rollouts per prompt")
    np.atleast_1d(axes)[0].set_ylabel("prompts (all steps)")
    fig.tight_layout()
    fig.savefig(out / "allocation.png", dpi=120)
    plt.close(fig)
    return ["accuracy.png", "allocation.png"]


def write_report(results, config: dict, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    rows = summarise(results)
    text = table(rows)
    (out / "results.json").write_text(
        json.dumps({"config": config, "summary": rows, "runs": [asdict(r) for r in results]}, indent=1) + "\n"
    )
    images = plot(results, out)
    md = [
        "# adaptive-rollouts demo",
        "",
        "Tiny char-level Qwen2 (warm-started on reasoning-gym arithmetic) trained with RLVR through",
        "`AdaptiveGRPOTrainer`; every method spends the same rollouts per step.",
        "",
        text,
        "",
        "Accuracy: greedy, on the RL pool (the prompts RL trains on); held-out: greedy on unseen problems.",
        "'rollouts to Uniform's final': first evaluation at which the method matched Uniform's final pool",
        "accuracy (inf: never). Skipping prompts: 'distinct prompts/step' below the batch's prompt count",
        "means the method gave some prompts zero rollouts.",
        "",
        f"Config: `{json.dumps(config)}`",
        "",
        *[f"![{name}]({name})" for name in images],
        "",
    ]
    (out / "report.md").write_text("\n".join(md))
    return text

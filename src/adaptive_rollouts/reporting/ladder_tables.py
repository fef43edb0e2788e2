"""The docs' block of the ladder task (``benchmarks/demo_ladder.py``, and the demo protocol run on
the ladder when one is committed): the per-prompt success histogram at the warm start and after a
Uniform run, success by list length, and what the known-p skip rule saves there."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["DEMO_LADDER", "LADDER_PROTOCOL", "render_demo_ladder"]

DEMO_LADDER = "results/demo_ladder/ladder.json"
LADDER_PROTOCOL = "results/demo_ladder/protocol"


def _parts(d: dict) -> list[tuple[str, dict]]:
    parts = [("warm start", d["warm_start"])]
    if d.get("after_rl"):
        parts.append((f"after {d['after_rl']['steps']} Uniform steps", d["after_rl"]))
    return parts


def render_demo_ladder(root: Path) -> str:
    r = load_relative(root, DEMO_LADDER)
    s, parts = r.settings, _parts(r.data)
    names = [name for name, _ in parts]
    edges = parts[0][1]["histogram"]["edges"]
    bins = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    hist = [[b, *(f"{x['histogram']['shares'][i]:.2f}" for _, x in parts)] for i, b in enumerate(bins)]
    tails = [
        ["p < 0.05 (almost never)", *(f"{x['histogram']['below_0.05']:.2f}" for _, x in parts)],
        ["p > 0.95 (almost always)", *(f"{x['histogram']['above_0.95']:.2f}" for _, x in parts)],
        ["no sample solved it", *(f"{x['histogram']['at_0']:.2f}" for _, x in parts)],
        ["every sample solved it", *(f"{x['histogram']['at_1']:.2f}" for _, x in parts)],
        ["mean p", *(f"{x['mean']:.3f}" for _, x in parts)],
    ]
    lengths = list(parts[0][1]["by_length"])
    by_len = [
        [n, str(parts[0][1]["by_length"][n]["prompts"]), *(f"{x['by_length'][n]['mean']:.2f}" for _, x in parts)]
        for n in lengths
    ]
    skip = [
        [
            name,
            f"{x['skip_rule']['spent']:.2f}",
            f"{x['skip_rule']['kept']:.2f}",
            f"{x['skip_rule']['signal_per_rollout']:.2f}",
        ]
        for name, x in parts
    ]
    lines = [
        f"{s['pool']} pool prompts of the ladder, {s['samples']} completions each at temperature "
        f"{s['temperature']:g}; share of prompts per bin of per-prompt success p:",
        "",
        *table(["p", *names], hist + tails),
        "",
        "Mean p by list length (the rungs of the ladder):",
        "",
        *table(["digits", "prompts", *names], by_len),
        "",
        f"The known-p skip rule at Uniform's group of {s['group']} (skip when P(all-equal) > 0.9; p from "
        f"{s['samples'] // 2} samples, signal estimated on the other {s['samples'] // 2}):",
        "",
        *table(["policy", "share of Uniform's rollouts", "share of its signal kept", "signal per rollout"], skip),
    ]
    lines += _learning(r.data, s)
    return block(lines, [r]) + _protocol(root)


def _learning(d: dict, s: dict) -> list[str]:
    """The learning runs (Uniform vs the known-p skip rule at one rate) and the speedup, when run."""
    runs = d.get("runs") or []
    if not runs:
        return []
    rows = []
    for arm in dict.fromkeys(r["arm"] for r in runs):
        mine = [r for r in runs if r["arm"] == arm]
        start = np.mean([r["held_out"][0] for r in mine]) if all("held_out" in r for r in mine) else float("nan")
        final = np.mean([r["held_out"][-1] for r in mine]) if all("held_out" in r for r in mine) else float("nan")
        rows.append(
            [
                arm,
                ", ".join(str(r["seed"]) for r in mine),
                f"{np.mean([r['rollouts_per_step'] for r in mine]):.1f}",
                f"{np.mean([r['extra_rollouts'] for r in mine]):.0f}",
                f"{start:.3f} -> {final:.3f}",
            ]
        )
    out = [
        "",
        f"Learning runs at lr {s['lr']:g} (one rate for both arms, not tuned on the ladder), single pass:",
        "",
        *table(
            ["arm", "seeds", "rollouts / step", "uncharged oracle samples", "held-out greedy, start -> final"], rows
        ),
    ]
    c = d.get("comparison")
    if c:
        per_seed = ", ".join(f"{x:.2f}" for x in c["per_seed"])
        out += [
            "",
            f"Rollouts to the common target {c['target']:.3f} (seed means): Uniform {c['uniform_rollouts']:.0f}, "
            f"known-p skip rule {c['oracle_skip_rollouts']:.0f}: speedup {c['speedup']:.2f} (per seed: {per_seed}).",
        ]
    return out


def _protocol(root: Path) -> str:
    """The protocol's tables on the ladder (Uniform vs the known-p skip rule), when committed."""
    out = []
    for path in sorted((root / LADDER_PROTOCOL).glob("*/summary.json")):
        r = load_relative(root, str(path.relative_to(root)))
        rows = []
        for arm in r.data["arms"]:
            if "rollouts" not in arm:
                continue
            lo, hi = arm["rollouts"]["ci95"]
            rows.append(
                [
                    arm["arm"],
                    str(len(arm["seeds"])),
                    f"{arm['lr']:g}",
                    f"{arm['rollouts']['speedup']:.2f} (95% {lo:.2f}-{hi:.2f})",
                    f"{arm['rollouts_per_step']:.1f}",
                    f"{arm['final_accuracy']:.3f}",
                ]
            )
        header = ["arm", "seeds", "lr", "speedup, rollouts to target", "rollouts / step", "final held-out"]
        out.append(block([f"Protocol on the ladder, {path.parent.name}:", "", *table(header, rows)], [r]))
    return "".join("\n\n" + x for x in out)

"""The docs' block of the ladder task (``benchmarks/demo_ladder.py``, and the demo protocol run on
the ladder when one is committed): the per-prompt success histogram at the warm start and after a
Uniform run, success by list length, and what the known-p skip rule saves there."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.experiments.token_summary import SYNCHRONOUS_TIME as TIME_AXIS
from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.ladder_folders import (
    BEFORE_SHORT,
    BEFORE_SWITCH,
    FOLDERS,
    LADDER_CARRIED,
    LADDER_FRESH,
    LADDER_LATEST,
    LADDER_PRIOR,
    LADDER_PRIOR_BEFORE,
    LADDER_PROTOCOL,
    LADDER_SHARP,
    LADDER_SHARP_BEFORE,
    LADDER_SHORT,
    LADDER_SKIP,
    LADDER_WIDE,
    NOTES,
    RENAMED,
    SUBJECTS,
)
from adaptive_rollouts.reporting.ladder_reading import (
    GAIN_STATISTIC,
    TARGET_STATISTIC,
    ladder_reading,
    primary,
)
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.saving_tables import speedup_interval

__all__ = [
    "BEFORE_SHORT",
    "BEFORE_SWITCH",
    "DEMO_LADDER",
    "LADDER_FRESH",
    "LADDER_PROTOCOL",
    "LADDER_LATEST",
    "LADDER_SHARP",
    "LADDER_SHARP_BEFORE",
    "LADDER_CARRIED",
    "LADDER_PRIOR",
    "LADDER_SKIP",
    "LADDER_PRIOR_BEFORE",
    "LADDER_SHORT",
    "LADDER_WIDE",
    "NOTES",
    "SUBJECTS",
    "ladder_reading",
    "render_demo_ladder",
    "render_ladder_summary",
]

DEMO_LADDER = "results/demo_ladder/ladder.json"


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
    """The protocol's tables on the ladder, when committed: every arm against Uniform in rollouts,
    completion tokens and modelled synchronous time to target, and the ladder target's reading."""
    out = []
    paths = [(f, p) for f in FOLDERS for p in sorted((root / f).glob("*/summary.json"))]
    for folder, path in paths:
        r = load_relative(root, str(path.relative_to(root)))
        arms = {a["arm"]: a for a in r.data["arms"] if "rollouts" in a}
        rows = [
            [
                name,
                str(len(a["seeds"])),
                f"{a['lr']:g} ({a['lr_from']})",
                speedup_interval(primary(a["rollouts"])),
                speedup_interval(primary(a["tokens"])),
                speedup_interval(primary(a[TIME_AXIS])) if TIME_AXIS in a else "-",
                f"{a['rollouts_per_step']:.1f}",
                f"{a['oracle_rollouts_per_step']:.1f}",
                f"{a['final_accuracy']:.3f}",
            ]
            for name, a in arms.items()
        ]
        header = ["arm", "seeds", "lr (chosen)", "speedup, rollouts", "speedup, tokens", "speedup, modelled time"]
        header += ["rollouts / step", "uncharged oracle rollouts / step", "final held-out"]
        seeds = r.header["settings"].get("report_seeds")
        title = "Protocol on the ladder" if folder == LADDER_PROTOCOL else "On fresh report seeds"
        title += f", {path.parent.name}" + (f" (report seeds {', '.join(map(str, seeds))})" if seeds else "")
        gain = all("gain" in a["rollouts"] for a in arms.values())
        lines = [f"{title}:", "", *table(header, rows), "", GAIN_STATISTIC if gain else TARGET_STATISTIC]
        for name, err in (r.data.get("errors") or {}).items():
            lines += ["", f"{name}: no number ({err})"]
        missing = r.data.get("missing") or {}
        if missing:
            lines += ["", "Still missing: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in missing.items())]
        subject = next((a for a in SUBJECTS[folder] if a in arms), "default")
        reading = ladder_reading(arms, subject)
        lines += ["", NOTES[folder]] if folder in NOTES else []
        lines += ["", *reading] if reading else []
        out.append(block(lines, [r]))
    return "".join("\n\n" + x for x in out)


def render_ladder_summary(root: Path) -> str:
    """README's line on the tiny LM: the latest check on 32 further seeds (`LADDER_LATEST`), the default
    as a trainer gives it against Uniform, with the null control, the rule before it and the known-p
    rule beside it, and the ladder target's reading."""
    path = root / LADDER_LATEST / "single-pass" / "summary.json"
    if not path.exists():
        return f"No result file yet: `benchmarks/demo_protocol.py --task ladder` writes `{LADDER_LATEST}`."
    r = load_relative(root, str(path.relative_to(root)))
    arms = {a["arm"]: a for a in r.data["arms"] if "rollouts" in a}
    seeds = r.header["settings"].get("report_seeds") or []
    subject = next((a for a in SUBJECTS[LADDER_LATEST] if a in arms), "default")
    others = {
        "default": "without the policy's view",
        "default+view": "with the policy's view",
        "default[flat_chance=None]+view": "the rule without the bound per group (with the view)",
        "default[short_pilots=False]": "the rule before, with full pilots",
        "default[short_pilots=False]+view": "the rule before with the view",
        "default[belief_from='results/carried_belief/belief_dev1.npz']+view": (
            "with the view and a belief carried from one earlier run"
        ),
        "default[belief_from='results/carried_belief/belief_dev16.npz']+view": (
            "with the view and a belief carried from sixteen earlier runs"
        ),
        "default[belief_from='results/carried_belief/belief_dev16.npz';bound_skips=True]+view": (
            "the same that also skips unseen"
        ),
        "default[share=0.2]+view": "with the view and the share 0.2",
        "null": "the null control",
        "oracle-skip": "the known-p skip rule",
    }
    others |= RENAMED.get(LADDER_LATEST, {})
    label = "the default as the trainer gives it" + (" (with the policy's view)" if "+view" in subject else "")
    names = {subject: label, **{n: x for n, x in others.items() if n != subject}}
    parts = [f"{label} {speedup_interval(primary(arms[n]['rollouts']))}" for n, label in names.items() if n in arms]
    lines = [
        f"A tiny LM trained through TRL on the difficulty ladder (single pass, {len(seeds)} report seeds fixed "
        "before the run, every arm at Uniform's tuned rate, every generated rollout counted): Uniform's "
        "rollouts to its targets over the arm's"
        + (" (50%, 75% and 90% of its gain, 95% jackknife-t intervals)" if "gain" in arms[subject]["rollouts"] else "")
        + ", "
        + "; ".join(parts)
        + ".",
        "",
        *ladder_reading(arms, subject),
    ]
    later, used = _later_check(root)
    if not used:
        return block(lines, [r])
    # runs at different commits: one source line each
    return "\n".join([*lines, *later, "", *(provenance([x]) for x in (r, *used))])


def _later_check(root: Path) -> tuple[list[str], list]:
    """The shipped default with the view on the next 32 seeds (`LADDER_PRIOR_BEFORE`), with the arms
    that do not depend on the belief run on the same seeds (`LADDER_PRIOR`: the null control, the
    known-p skip rule)."""
    paths = [root / f / "single-pass" / "summary.json" for f in (LADDER_PRIOR_BEFORE, LADDER_PRIOR)]
    if not all(p.exists() for p in paths):
        return [], []
    results = [load_relative(root, str(p.relative_to(root))) for p in paths]
    shipped, beside = results
    independent = ("null", "oracle-skip")  # arms the belief does not enter: read from the other folder
    arms = {a["arm"]: a for a in beside.data["arms"] if "rollouts" in a and a["arm"] in independent}
    arms.update({a["arm"]: a for a in shipped.data["arms"] if "rollouts" in a})
    seeds = results[0].header["settings"].get("report_seeds") or []
    if "default+view" not in arms:
        return [], []
    named = (
        ("default+view", "the default with the view"),
        ("null", "the null control"),
        ("oracle-skip", "the known-p skip rule"),
    )
    parts = [f"{label} {speedup_interval(primary(arms[a]['rollouts']))}" for a, label in named if a in arms]
    line = f"On {len(seeds)} other seeds ({seeds[0]}-{seeds[-1]}), the same protocol: " + "; ".join(parts) + "."
    return ["", line, "", *ladder_reading(arms, "default+view")], results

"""The flatness work's targets in one table (docs/flatness.md, "The targets, where they stand"):
each read off the committed result file that measures it, met or missed and by how much. The
readings are the ones the blocks beside each measurement give; this block only gathers them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.map_config import DEFAULT, NULL
from adaptive_rollouts.experiments.map_summary import NO_REGRET, verdict
from adaptive_rollouts.experiments.results import Result, provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.bound_tables import map_runs
from adaptive_rollouts.reporting.equal_cost_tables import mean_final_gaps
from adaptive_rollouts.reporting.flatness_tables import (
    FLATNESS_CALIBRATION,
    FLATNESS_TINYLM,
    FLATNESS_TINYLM_FRESH,
    FLATNESS_TINYLM_HELDOUT,
)
from adaptive_rollouts.reporting.ladder_folders import LADDER_LATEST, SUBJECTS
from adaptive_rollouts.reporting.ladder_reading import (
    LADDER_SHARE_OF_KNOWN_P,
    LADDER_SPEEDUP,
    ladder_target_met,
    primary,
)
from adaptive_rollouts.reporting.markdown import fmt, table
from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL, speedup_interval
from adaptive_rollouts.reporting.share_tables import (
    KEEP_TARGET,
    POOL_BELIEFS,
    POOL_SPEND_TARGETS,
    SHARE_ARM,
    SHARE_CHECK_MAPS,
    SHARE_PILOT_MAPS,
    SPEND_TARGET,
    meets_signal_target,
)
from adaptive_rollouts.reporting.versus_tables import head_to_head

__all__ = ["TARGET_MAPS", "below_no_regret", "both_met", "render_flatness_targets", "missed_by"]

# the maps of the shipped default on fresh seeds since its last change, and its arm's name in each
# (the no-regret target is read on each; the last one also ran Pilot-Commit)
TARGET_MAPS = ((SHARE_CHECK_MAPS[0], SHARE_ARM), (SHARE_PILOT_MAPS[0], DEFAULT))


def missed_by(value: float, target: float, at_most: bool = False) -> str:
    """'met' where ``value`` reaches ``target`` (at least it; ``at_most``: at most it), else 'missed
    by' the distance.

    >>> missed_by(0.85, 0.9), missed_by(0.4, 0.5, at_most=True), missed_by(0.60, 0.5, at_most=True)
    ('missed by 0.05', 'met', 'missed by 0.10')
    """
    ok = value <= target if at_most else value >= target
    return "met" if ok else f"missed by {abs(value - target):.2f}"


def both_met(**readings: str) -> str:
    """'met' where every reading is, else each named with its reading.

    >>> both_met(ECE="met", Brier="met"), both_met(spend="met", kept="missed by 0.08")
    ('met', 'spend met; kept missed by 0.08')
    """
    if all(r == "met" for r in readings.values()):
        return "met"
    return "; ".join(f"{name} {r}" for name, r in readings.items())


def _calibration(root: Path, rel: str, label: str) -> tuple[list[str], Result]:
    r = load_relative(root, rel)
    pooled, t = r.data["pooled"], r.settings["targets"]
    d = pooled["default"]
    ratio = d["brier"] / pooled["history"]["brier"]
    reading = both_met(
        ECE=missed_by(d["ece"], t["ece"], at_most=True), **{"Brier ratio": missed_by(ratio, t["brier_ratio"], True)}
    )
    asked = f"ECE <= {t['ece']:g}, Brier <= {t['brier_ratio']:g}x the history's"
    return [f"Calibration, {label}", asked, f"ECE {d['ece']:.3f}, Brier {ratio:.2f}x", reading], r


def _signal(root: Path) -> tuple[list[list[str]], Result]:
    r = load_relative(root, SAVING_SIGNAL)
    rows = [x for x in r.data["rows"] if x["method"] == DEFAULT]
    met = sum(meets_signal_target(x) for x in rows)
    spent, kept = [x["spent"] for x in rows], [x["kept"] for x in rows]
    out = [
        [
            "Signal kept on the simulator's cells",
            f">= {KEEP_TARGET:g} of Uniform's signal at <= {SPEND_TARGET:g} of its rollouts, every cell",
            f"{met} of {len(rows)} cells; spent {min(spent):.2f}-{max(spent):.2f}, kept {min(kept):.2f}-{max(kept):.2f}",
            "met"
            if met == len(rows)
            else f"missed in {len(rows) - met} cells (kept short by up to {KEEP_TARGET - min(kept):.2f})",
        ]
    ]
    pool = {x["n"]: x for x in r.data.get("pool_rows", []) if x["method"] == DEFAULT}
    bound = {}
    if (root / POOL_BELIEFS).exists():
        bound = {
            b["n"]: b["spent"]
            for b in load_relative(root, POOL_BELIEFS).data.get("bound", [])
            if b["keep"] == KEEP_TARGET
        }
    for n, spend in POOL_SPEND_TARGETS.items():
        if n not in pool:
            continue
        x = pool[n]
        reading = both_met(spend=missed_by(x["spent"], spend, at_most=True), kept=missed_by(x["kept"], KEEP_TARGET))
        if n in bound:
            reading += f" (with p known, keeping {KEEP_TARGET:g} takes at least {bound[n]:.2f})"
        asked = f"<= {spend:g} of the budget, >= {KEEP_TARGET:g} of the signal kept"
        out.append(
            [f"Recurring pool, {n} rollouts a prompt", asked, f"spent {x['spent']:.2f}, kept {x['kept']:.2f}", reading]
        )
    return out, r


def _ladder(root: Path) -> tuple[list[list[str]], Result]:
    r = load_relative(root, f"{LADDER_LATEST}/single-pass/summary.json")
    arms = {a["arm"]: a for a in r.data["arms"] if "rollouts" in a}
    subject = next(a for a in SUBJECTS[LADDER_LATEST] if a in arms)
    d, null = primary(arms[subject]["rollouts"]), primary(arms["null"]["rollouts"])
    null_hi = null["ci95"][1]
    known = primary(arms["oracle-skip"]["rollouts"])
    share = d["speedup"] / known["speedup"]
    seeds = r.header["settings"]["report_seeds"]
    where = f"tiny LM, difficulty ladder (seeds {seeds[0]}-{seeds[-1]})"
    return [
        [
            f"Learning speed, {where}",
            f">= {LADDER_SPEEDUP:g}x Uniform in rollouts, interval above 1 and above the null control's",
            f"{speedup_interval(d)}; null {fmt(null['ci95'][0])}-{fmt(null_hi)}",
            "met" if ladder_target_met(d, null) else "missed",
        ],
        [
            f"Share of the known-p rule's speedup, {where}",
            f">= {LADDER_SHARE_OF_KNOWN_P:g}",
            f"{fmt(share)} (known-p rule {fmt(known['speedup'])})",
            missed_by(share, LADDER_SHARE_OF_KNOWN_P),
        ],
    ], r


def below_no_regret(result: Result, arm: str) -> tuple[list[str], int]:
    """The cells of a map where ``arm`` over Uniform reads below `NO_REGRET` with an interval that
    says so (`experiments.map_summary.verdict`, beside the null control's interval), and the cells
    it has a statistic in."""
    below, cells = [], 0
    for row in result.data["rows"]:
        entry, null = row["methods"].get(arm) or {}, row["methods"].get(NULL) or {}
        ci = entry.get("gain_ci90")
        if ci is None or not all(np.isfinite(ci)):
            continue
        cells += 1
        if verdict(ci, NO_REGRET, null.get("gain_ci90")) == "below":
            below.append(row["key"])
    return below, cells


def _maps(root: Path) -> tuple[list[list[str]], list[Result]]:
    results = [load_relative(root, rel) for rel, _ in TARGET_MAPS]
    below: list[str] = []
    cells = 0
    for r, (_, arm) in zip(results, TARGET_MAPS):
        more, n = below_no_regret(r, arm)
        below, cells = below + more, cells + n
    spans = ", ".join(f"{s[0]}-{s[-1]}" for s in (r.data["config"]["paired_seeds"] for r in results))
    rows = [
        [
            f"No regret on the simulator's map (seeds {spans})",
            f"no cell below {NO_REGRET:g}x Uniform with an interval that says so",
            f"{len(below)} of {cells} cells below",
            "met" if not below else f"missed in {', '.join(below)}",
        ]
    ]
    versus, arm = results[-1], TARGET_MAPS[-1][1]
    runs = map_runs(root, versus)
    ahead = []
    for row in versus.data["rows"]:
        x = head_to_head(runs[(row["key"], arm)], runs[(row["key"], "pilot-commit")])
        if x is not None and x["low"] > 1.0:
            ahead.append(f"{row['key']} {x['speedup']:.2f}x")
    s = versus.data["config"]["paired_seeds"]
    gaps = {m: mean_final_gaps(versus.data["rows"], m) for m in (arm, "pilot-commit")}
    rows.append(
        [
            f"Ahead of the best baseline (seeds {s[0]}-{s[-1]})",
            "the default at least matches Pilot-Commit wherever it is ahead, without giving up final accuracy",
            f"Pilot-Commit ahead (paired, 90%) in {len(ahead)} of {len(versus.data['rows'])} cells; final accuracy "
            f"minus Uniform's, mean over the cells, at equal cost {gaps[arm][0]:+.3f} (Pilot-Commit "
            f"{gaps['pilot-commit'][0]:+.3f}), at equal steps {gaps[arm][1]:+.3f} ({gaps['pilot-commit'][1]:+.3f})",
            both_met(
                speed="met" if not ahead else "missed in " + ", ".join(f"{a} (Pilot-Commit over it)" for a in ahead),
                **{"final accuracy": "met" if gaps[arm][0] >= gaps["pilot-commit"][0] else "below Pilot-Commit's"},
            ),
        ]
    )
    return rows, results


def render_flatness_targets(root: Path) -> str:
    """The targets, one row each: what is asked, what the latest committed measurement says, and
    whether it is met (by how much it is missed); then each file's source line."""
    rows: list[list[str]] = []
    used: list[Result] = []
    for rel, label in (
        (FLATNESS_CALIBRATION, "simulator traces"),
        (FLATNESS_TINYLM, "tiny-LM traces"),
        (FLATNESS_TINYLM_FRESH, "fresh tiny-LM traces"),
        (FLATNESS_TINYLM_HELDOUT, "held-out tiny-LM traces"),
    ):
        row, r = _calibration(root, rel, label)
        rows.append(row)
        used.append(r)
    for part in (_signal, _ladder):
        more, r = part(root)
        rows += more
        used.append(r)
    more, results = _maps(root)
    rows += more
    used += results
    lines = [
        "Each target read off the latest committed measurement of it (the blocks beside each measurement, "
        "below and in docs/saving.md and docs/demo.md, give the details):",
        "",
        *table(["target", "asked", "measured", "reading"], rows),
        "",
        *(provenance([r]) for r in used),
    ]
    return "\n".join(lines)

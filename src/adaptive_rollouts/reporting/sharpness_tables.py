"""The docs' block comparing the calibration benchmark's scores on the held-out tiny-LM traces
before and after a change of the belief (``benchmarks/flatness_calibration.py --traces``, run at
two commits on the same traces)."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.flatness_tables import FLATNESS_TINYLM_HELDOUT
from adaptive_rollouts.reporting.markdown import table

__all__ = ["FLATNESS_HELDOUT_BEFORE", "render_flatness_sharper"]

FLATNESS_HELDOUT_BEFORE = "results/flatness_calibration/before/tinylm_heldout.json"
SHOWN = ("probe", "combined", "default")  # the predictors the change is about (the others are unchanged)


def render_flatness_sharper(root: Path) -> str:
    before, now = load_relative(root, FLATNESS_HELDOUT_BEFORE), load_relative(root, FLATNESS_TINYLM_HELDOUT)
    if before.settings.get("traces") != now.settings.get("traces"):
        raise ValueError(f"{before.path} and {now.path} scored different traces; the comparison needs the same")
    b, n = before.data, now.data
    rows = []
    for m in SHOWN:
        hist_b, hist_n = b["pooled"]["history"]["brier"], n["pooled"]["history"]["brier"]
        rows.append(
            [
                m,
                *(f"{x['pooled'][m]['auroc']:.3f}" for x in (b, n)),
                *(f"{x['after_pilot'][m]['auroc']:.3f}" for x in (b, n)),
                *(f"{x['pooled'][m]['ece']:.3f}" for x in (b, n)),
                f"{b['pooled'][m]['brier'] / hist_b:.2f}x",
                f"{n['pooled'][m]['brier'] / hist_n:.2f}x",
            ]
        )
    header = ["predictor"] + [
        f"{what}, {when}"
        for what in ("AUROC", "AUROC after a flat pilot", "ECE")
        for when in (f"before ({before.header['commit'][:7]})", "now")
    ]
    header += [f"Brier / history's, before ({before.header['commit'][:7]})", "Brier / history's, now"]
    groups = n["pooled"][SHOWN[0]]["n"]
    lines = [
        f"The same {len(n['traces'])} held-out traces ({groups} groups), scored by the belief before the change and "
        "now (AUROC: how well P(all-equal) tells the all-equal groups from the others, pooled over steps and "
        "traces; after a flat pilot: the same for the chance that the rest of a group repeats its pilot of 2):",
        "",
        *table(header, rows),
    ]
    return "\n".join([*lines, "", provenance([before]), provenance([now])])  # two commits: one line each

"""The docs' block on a belief carried from earlier runs (``benchmarks/carried_belief.py``): the
default's belief fresh and started from states learned on other runs, scored on held-out traces."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["CARRIED_BELIEF", "render_carried_belief"]

CARRIED_BELIEF = "results/carried_belief/carried_belief.json"


def render_carried_belief(root: Path) -> str:
    """Per start of the belief (fresh, or a saved state of one or sixteen earlier runs): AUROC of
    P(all-equal at n) pooled and within a step, ECE, and the AUROC minus the fresh belief's."""
    r = load_relative(root, CARRIED_BELIEF)
    d, states = r.data, r.settings["states"]
    rows = []
    for key, x in d["scores"].items():
        m = x["minus_fresh"]
        delta = "-" if m is None else f"{m['mean']:+.3f} ({m['low']:+.3f} to {m['high']:+.3f})"
        start = "fresh" if key == "fresh" else f"{key} (`{states[key]['file']}`)"
        rows.append([start, f"{x['auroc']:.3f}", f"{x['within_step_auroc']:.3f}", f"{x['ece']:.3f}", delta])
    header = ["the default's belief, started", "AUROC", "AUROC within a step", "ECE", "minus fresh (90%)"]
    lines = [
        f"P(all-equal at n) of the default's belief (the policy's view and the prompt history) on the "
        f"{len(r.settings['heldout'])} held-out traces ({d['groups']} groups, {d['all_equal_share']:.2f} "
        f"all-equal), fresh or started from what it learned on the first or on all "
        f"{len(r.settings['dev'])} development traces (other seeds of the same warm-started model; no prompt "
        "history carried). The interval: a paired bootstrap over whole traces.",
        "",
        *table(header, rows),
        "",
        provenance([r]),
    ]
    return "\n".join(lines)

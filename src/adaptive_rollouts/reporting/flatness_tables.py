"""The docs' blocks of the calibration benchmark of P(all-equal at n)
(``benchmarks/flatness_calibration.py``) and of the saving-signal benchmark's recurring pool."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL

__all__ = ["FLATNESS_CALIBRATION", "render_flatness_calibration", "render_saving_pool"]

FLATNESS_CALIBRATION = "results/flatness_calibration/flatness_calibration.json"


def render_flatness_calibration(root: Path) -> str:
    r = load_relative(root, FLATNESS_CALIBRATION)
    d, s = r.data, r.settings
    names = list(s["predictors"])
    history = d["pooled"]["history"]["brier"]
    pooled = [
        [
            m,
            f"{d['pooled'][m]['brier']:.3f}",
            f"{d['pooled'][m]['brier'] / history:.2f}x",
            f"{d['pooled'][m]['log_loss']:.3f}",
            f"{d['pooled'][m]['ece']:.3f}",
        ]
        for m in names
    ]
    cells = [[c["cell"], f"{c['all_equal_share']:.2f}", *(f"{c[m]['ece']:.3f}" for m in names)] for c in d["cells"]]
    groups = d["pooled"][names[0]]["n"]
    lines = [
        f"P(all-equal at n = {s['n']}) before each step, scored on {groups} of Uniform's groups "
        f"({s['seeds']} seeds x {s['steps']} steps on each of {len(d['cells'])} cells; the policy view at "
        f"AUROC {s['policy_view_auroc']:g}). Pooled over the cells:",
        "",
        *table(["predictor", "Brier", "Brier / history's", "log-loss", "ECE"], pooled),
        "",
        "ECE per cell (share of groups that were all-equal in the second column):",
        "",
        *table(["cell", "all-equal", *names], cells),
        "",
        "![Reliability diagram](../results/flatness_calibration/reliability.png)",
    ]
    return block(lines, [r])


def render_saving_pool(root: Path) -> str:
    r = load_relative(root, SAVING_SIGNAL)
    d = r.data
    pool = d.get("pool") or {}
    rows = [[str(x["n"]), x["method"], f"{x['spent']:.2f}", f"{x['kept']:.2f}"] for x in d.get("pool_rows", [])]
    if not rows:
        return block(["The committed saving-signal result holds no recurring-pool run (`--pool`)."], [r])
    lines = [
        f"A recurring pool of {pool['size']} prompts, {pool['extreme']:.0%} of them at p within 0.02 of 0 or 1 "
        f"(the rest uniform on [0.1, 0.9], p fixed), {pool['batch']} prompts a step for {pool['steps']} steps, "
        f"no policy view; mean of {d['seeds']} seeds:",
        "",
        *table(["rollouts per prompt", "method", "share of the budget spent", "share of Uniform's signal kept"], rows),
    ]
    return block(lines, [r])

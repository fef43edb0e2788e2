"""Renderers of the predictor benchmark's blocks (benchmarks/predictors.py --full): synthetic
next-step quality, cost per step, the README summary and the next-visit table on simulator traces."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import Result
from adaptive_rollouts.reporting.blocks import block, fmt_ms, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["PREDICTORS", "RECURRING_COLUMNS", "HISTORY_ONLY", "recurring_verdict", "blend_vs_logloss"]

PREDICTORS = "results/predictors/predictors-full.json"


def _pct_lower(ratio_a: float, ratio_b: float) -> float:
    return 100.0 * (1.0 - ratio_a / ratio_b)


def render_predictors_quality(root: Path) -> str:
    r = load_relative(root, PREDICTORS)
    body = []
    for sc in r.data["quality"]:
        q = sc["ratio_to_paper_gp"]
        gp = q["GaussianProcess"]
        body.append(
            [
                sc["scenario"],
                f"{sc['paper_gp']['log_loss']:.3f}",
                f"{gp['log_loss']:.3f}",
                f"{q['DiscountedBeta']['log_loss']:.3f}",
                f"{_pct_lower(gp['log_loss'], 1.0):.0f}%",
                f"{_pct_lower(gp['log_loss'], q['DiscountedBeta']['log_loss']):.0f}%",
                f"{gp['mae']:.3f}",
            ]
        )
    head = ["scenario", "PaperGP log-loss", "GP / PaperGP", "DiscountedBeta / PaperGP", "GP lower than PaperGP"]
    head += ["GP lower than DiscountedBeta", "GP MAE / PaperGP"]
    seeds = r.settings.get("seeds")
    lines = [f"Next-step log-loss on the synthetic traces, seeds {seeds} (ratios to PaperGP, lower is better):", ""]
    lines += table(head, body)
    return block(lines, [r])


def render_predictors_cost(root: Path) -> str:
    r = load_relative(root, PREDICTORS)
    body = [
        [x["predictor"], f"{x['pool']:,}", fmt_ms(x["cpu_ms"]), fmt_ms(x["wall_ms"]), fmt_ms(x["state_mb"])]
        for x in r.data["cost"]
    ]
    lines = [f"Cost per step (predict + update of {r.settings.get('batch')} prompts, 1 BLAS thread):", ""]
    lines += table(["predictor", "pool", "CPU ms", "wall ms", "state MB"], body)
    return block(lines, [r])


def blend_vs_logloss(r: Result) -> tuple[list[float], list[float]]:
    """Per synthetic scenario, how much higher the default GP's log-loss and MAE are than those of
    its log-loss blend option, in percent."""
    ll, mae = [], []
    for sc in r.data["quality"]:
        q = sc["ratio_to_paper_gp"]
        ll.append(100 * (q["GaussianProcess"]["log_loss"] / q["GP, log-loss blend"]["log_loss"] - 1))
        mae.append(100 * (q["GaussianProcess"]["mae"] / q["GP, log-loss blend"]["mae"] - 1))
    return ll, mae


def render_predictors_summary(root: Path) -> str:
    r = load_relative(root, PREDICTORS)
    gp_vs_paper = [_pct_lower(sc["ratio_to_paper_gp"]["GaussianProcess"]["log_loss"], 1) for sc in r.data["quality"]]
    gp_vs_beta = [
        _pct_lower(
            sc["ratio_to_paper_gp"]["GaussianProcess"]["log_loss"],
            sc["ratio_to_paper_gp"]["DiscountedBeta"]["log_loss"],
        )
        for sc in r.data["quality"]
    ]
    gp_cost = max((x for x in r.data["cost"] if x["predictor"] == "GaussianProcess"), key=lambda x: x["pool"])
    ll, mae = blend_vs_logloss(r)
    text = (
        f"On synthetic drifting traces (seeds {r.settings.get('seeds')}) our `GaussianProcess` has "
        f"{min(gp_vs_paper):.0f}% to {max(gp_vs_paper):.0f}% lower next-step log-loss than `PaperGP` and "
        f"{min(gp_vs_beta):.0f}% to {max(gp_vs_beta):.0f}% lower than `DiscountedBeta` in the "
        f"{len(gp_vs_paper)} scenarios; {fmt_ms(gp_cost['cpu_ms'])} ms CPU per {r.settings.get('batch')}-prompt step "
        f"on a {gp_cost['pool']:,}-prompt pool, {fmt_ms(gp_cost['state_mb'])} MB of state. Its default blend is "
        f"within {min(ll):+.1f}% to {max(ll):+.1f}% (log-loss) and {min(mae):+.1f}% to {max(mae):+.1f}% (MAE) "
        f"of the log-loss blend option there."
    )
    return block([text], [r])


RECURRING_COLUMNS = (
    "GaussianProcess",
    "GP, one strength",
    "GP, log-loss blend",
    "GP, no blend",
    "GP, residual_var 9",
    "last visit",
    "WindowedMean(4)",
    "DiscountedBeta",
    "CumulativeMean",
)


def render_predictors_recurring(root: Path) -> str:
    r = load_relative(root, PREDICTORS)
    lines = [
        f"Log-loss per rollout / MAE of the mean / MAE of E[p(1-p)], seeds {r.settings.get('seeds')}, prompts with "
        "history only (bold: lowest of the row):",
        "",
    ]
    body = []
    for cell in r.data["recurring"]:
        s = cell["predictors"]
        names = [n for n in RECURRING_COLUMNS if n in s]
        best = {k: min(s[n][k] for n in names) for k in ("log_loss", "mae", "variance_mae")}
        row = [cell["cell"]]
        for n in names:
            row.append(
                " / ".join(
                    (f"**{s[n][k]:.3f}**" if s[n][k] == best[k] else f"{s[n][k]:.3f}")
                    for k in ("log_loss", "mae", "variance_mae")
                )
            )
        body.append(row)
    names = [n for n in RECURRING_COLUMNS if n in r.data["recurring"][0]["predictors"]]
    lines += table(["cell", *names], body)
    lines += ["", *recurring_verdict(r)]
    return block(lines, [r])


HISTORY_ONLY = ("last visit", "WindowedMean(4)", "DiscountedBeta", "CumulativeMean")


def recurring_verdict(r: Result) -> list[str]:
    """Per cell: the default GP's MAE against the last visit's, and how much lower its log-loss is
    than that of the best history-only predictor."""
    out = []
    for cell in r.data["recurring"]:
        s = cell["predictors"]
        gp, last = s["GaussianProcess"], s["last visit"]
        best = min(HISTORY_ONLY, key=lambda n: s[n]["log_loss"])
        rel = "at or below" if gp["mae"] <= last["mae"] else "above"
        out.append(
            f"- {cell['cell']}: the default's MAE {gp['mae']:.4f} is {rel} the last visit's {last['mae']:.4f}; its "
            f"log-loss is {_pct_lower(gp['log_loss'], s[best]['log_loss']):.0f}% lower than the best history-only "
            f"predictor's ({best})."
        )
    return out

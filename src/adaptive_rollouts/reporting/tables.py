"""The renderers of the docs' results blocks: each reads committed result files under results/ and
returns Markdown ending with the source line (`results.provenance`). `RENDERERS` is the registry
`render_docs` uses; the regime map's renderer is in `map_tables`, the predictor benchmark's in
`predictor_tables`, the reliability ones in `reliability_tables`, the ladder task's in `ladder_tables`,
the tokens benchmark's in `token_tables`, what a probe buys on the saving map in `view_tables`, the
bound per group on the saving map in `bound_tables`."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import Result
from adaptive_rollouts.reporting.blocks import block, fmt_ms, load_note, load_relative
from adaptive_rollouts.reporting.bound_tables import (
    render_default_bound,
    render_fresh_bound,
    render_fresh_pilot_commit,
    render_group_four,
    render_saving_bound,
    render_short_pilots,
)
from adaptive_rollouts.reporting.carry_tables import render_carried_belief
from adaptive_rollouts.reporting.equal_cost_tables import render_equal_cost_summary
from adaptive_rollouts.reporting.flatness_tables import (
    render_flatness_calibration,
    render_flatness_tinylm,
    render_flatness_tinylm_fresh,
    render_flatness_tinylm_heldout,
    render_probe_cost,
    render_saving_pool,
)
from adaptive_rollouts.reporting.interval_tables import render_interval_coverage, render_map_seeds
from adaptive_rollouts.reporting.ladder_tables import render_demo_ladder, render_ladder_summary
from adaptive_rollouts.reporting.map_tables import render_map, render_map_protocol, render_saving_summary
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.predictor_tables import (
    render_predictors_cost,
    render_predictors_quality,
    render_predictors_recurring,
    render_predictors_summary,
)
from adaptive_rollouts.reporting.reliability_tables import RELIABILITY_RENDERERS
from adaptive_rollouts.reporting.saving_tables import (
    render_demo_saving,
    render_loss_rows,
    render_loss_rows_summary,
    render_saving_given,
    render_saving_signal,
)
from adaptive_rollouts.reporting.share_tables import (
    render_pool_beliefs,
    render_saving_share,
    render_share_check,
    render_share_group4,
    render_share_versus_pilot,
)
from adaptive_rollouts.reporting.sharpness_tables import (
    render_flatness_sharper,
    render_prior_before,
    render_prior_map,
    render_probe_variants,
    render_sharper_before,
    render_sharper_map,
    render_shipped_versus_pilot,
    render_versus_pilot_again,
    render_view_information,
)
from adaptive_rollouts.reporting.skip_tables import (
    render_skip_measured,
    render_skip_measured_first,
    render_skip_unseen,
    render_skip_unseen_again,
)
from adaptive_rollouts.reporting.targets_tables import render_flatness_targets
from adaptive_rollouts.reporting.token_tables import render_tokens
from adaptive_rollouts.reporting.tune_tables import render_demo_tune
from adaptive_rollouts.reporting.versus_tables import render_saving_versus
from adaptive_rollouts.reporting.view_tables import render_flatness_view

__all__ = ["RENDERERS", "SOLVER", "ADVANTAGES", "AGGREGATION_TIMING", "kkt_gaps"]

SOLVER = "results/solver/solver.json"
ADVANTAGES = "results/advantages/advantages.json"


# ---- solver ---------------------------------------------------------------------------------------


def _ratio(x: float | None, y: float) -> str:
    return "-" if x is None else f"{x / y:,.0f}x"


def _gap(x: float | None) -> str:
    return "-" if x is None else ("0" if x == 0 else f"{x:.1e}")


def _unit(r: Result) -> str:
    """ "CPU ms" when the benchmark timed process time (its settings say so), else "ms"."""
    return "CPU ms" if "CPU" in str(r.settings.get("timing", "")) else "ms"


def solver_rows(root: Path) -> tuple[Result, list[dict]]:
    r = load_relative(root, SOLVER)
    return r, list(r.data["rows"])


def render_solver_table(root: Path) -> str:
    r, rows = solver_rows(root)
    body = [
        [
            x["objective"],
            str(x["q"]),
            fmt_ms(x["allocate_ms"]),
            fmt_ms(x["kkt_ms"]),
            fmt_ms(x["slsqp_ms"]),
            _ratio(x["slsqp_ms"], x["allocate_ms"]),
            _gap(x["gap_kkt"]),
            _gap(x["gap_slsqp"]),
        ]
        for x in rows
    ]
    unit = _unit(r)
    head = ["objective", "Q", f"allocate {unit}", f"solve_kkt {unit}", f"SLSQP {unit}", "SLSQP / allocate"]
    head += ["gap KKT", "gap SLSQP"]
    lines = table(head, body)
    at = {x["objective"]: x for x in rows if x["q"] == 1024}
    if at:
        worst = max(x["allocate_ms"] for x in at.values())
        parts = ", ".join(f"{fmt_ms(x['allocate_ms'])} {unit} {o}" for o, x in at.items())
        lines += [
            "",
            f"Target Q = 1024 in <= 5 ms: {'met' if worst <= 5 else 'not met'} ({parts}){load_note(r.data)}.",
        ]
    ran = [x for x in rows if x["slsqp_ms"] is not None]
    if ran:
        short = [f"{x['objective']} at Q = {x['q']} ({_ratio(x['slsqp_ms'], x['allocate_ms'])})" for x in ran]
        short = [t for t, x in zip(short, ran) if x["slsqp_ms"] / x["allocate_ms"] < 100]
        lines.append(
            f"Target >= 100x faster than SLSQP: met in {len(ran) - len(short)} of the {len(ran)} cases where SLSQP ran"
            + (f"; not met for {', '.join(short)}." if short else ".")
        )
    gaps = [g for x in rows for g in (x["gap_kkt"], x["gap_slsqp"]) if g is not None]
    lines.append(f"Objective never worse than KKT or SLSQP: {'met' if min(gaps) >= 0 else 'not met'}.")
    return block(lines, [r])


def render_solver_summary(root: Path) -> str:
    r, rows = solver_rows(root)
    big = max(x["q"] for x in rows)
    at = {x["objective"]: x for x in rows if x["q"] == (1024 if any(x["q"] == 1024 for x in rows) else big)}
    q = next(iter(at.values()))["q"]
    times = " and ".join(f"{fmt_ms(x['allocate_ms'])} {_unit(r)} for {o}" for o, x in at.items())
    sl = [(x["slsqp_ms"] / x["allocate_ms"], x["q"]) for x in rows if x["slsqp_ms"] is not None]
    text = f"`allocate` at Q = {q} takes {times}{load_note(r.data)}, exactly optimal"
    if sl:
        text += (
            f"; VIP's SLSQP + rounding is {min(sl)[0]:,.0f}x-{max(sl)[0]:,.0f}x slower "
            f"where it ran (Q <= {max(s[1] for s in sl)})"
        )
    text += "; the paper's KKT + rounding is " + kkt_gaps(rows) + "."
    return block([text], [r])


def kkt_gaps(rows: list[dict]) -> str:
    """How far the paper's KKT + rounding lands above the exact optimum, per objective."""
    parts = []
    for objective in dict.fromkeys(x["objective"] for x in rows):
        gaps = [x["gap_kkt"] for x in rows if x["objective"] == objective]
        if max(gaps) == 0 and min(gaps) == 0:
            parts.append(f"equal to the optimum on {objective}")
        else:
            parts.append(f"{min(gaps):.0e} to {max(gaps):.0e} above the optimum on {objective}")
    return ", ".join(parts)


# ---- advantages -----------------------------------------------------------------------------------


def render_advantages_summary(root: Path) -> str:
    r = load_relative(root, ADVANTAGES)
    d = r.data
    ms = d["ms"]
    text = (
        f"{d['n']:,} rewards in {d['groups']:,} ragged groups: "
        + ", ".join(f"{est} {v:.1f} {_unit(r)}" for est, v in ms.items())
        + f" against a target of {d['target_ms']:g} ms{load_note(d)}; a per-group Python loop takes "
        f"{d['loop_ms'] / d['vectorised_ms']:.0f}x longer on {d['loop_n']:,} rewards."
    )
    return block([text], [r])


AGGREGATION_TIMING = "results/aggregation/timing.json"


def render_aggregation_timing(root: Path) -> str:
    r = load_relative(root, AGGREGATION_TIMING)
    body = []
    for x in r.data["rows"]:
        shape = f"Q = {x['q']}" + "".join(
            f", {label} {x[k]}" for k, label in (("upper", "upper"), ("budget", "C ="), ("features", "D =")) if k in x
        )
        body.append([f"`{x['piece']}`", shape, fmt_ms(x["ms"])])
    lines = table(["piece", "shape", "median wall ms"], body)
    lines += ["", f"Wall time{load_note(r.data)}."] if "load_average" in r.data else []
    return block(lines, [r])


RENDERERS = {
    "aggregation-timing": render_aggregation_timing,
    "solver-table": render_solver_table,
    "solver-summary": render_solver_summary,
    "advantages-summary": render_advantages_summary,
    "predictors-quality": render_predictors_quality,
    "predictors-cost": render_predictors_cost,
    "predictors-summary": render_predictors_summary,
    "predictors-recurring": render_predictors_recurring,
    "map": render_map,
    "saving-summary": render_saving_summary,
    "map-protocol": render_map_protocol,
    "interval-coverage": render_interval_coverage,
    "map-seeds": render_map_seeds,
    "saving-signal": render_saving_signal,
    "saving-given": render_saving_given,
    "saving-versus": render_saving_versus,
    "saving-bound": render_saving_bound,
    "saving-bound-fresh": render_fresh_bound,
    "saving-default-bound": render_default_bound,
    "saving-group-four": render_group_four,
    "saving-short-pilots": render_short_pilots,
    "saving-skip-unseen": render_skip_unseen,
    "saving-skip-unseen-again": render_skip_unseen_again,
    "saving-skip-measured-first": render_skip_measured_first,
    "saving-skip-measured": render_skip_measured,
    "saving-fresh-pilot-commit": render_fresh_pilot_commit,
    "loss-rows": render_loss_rows,
    "loss-rows-summary": render_loss_rows_summary,
    "demo-saving": render_demo_saving,
    "flatness-calibration": render_flatness_calibration,
    "flatness-tinylm": render_flatness_tinylm,
    "flatness-tinylm-fresh": render_flatness_tinylm_fresh,
    "flatness-tinylm-heldout": render_flatness_tinylm_heldout,
    "flatness-sharper": render_flatness_sharper,
    "flatness-probe-variants": render_probe_variants,
    "flatness-view-information": render_view_information,
    "flatness-carried-belief": render_carried_belief,
    "saving-sharper-map": render_sharper_map,
    "saving-sharper-before": render_sharper_before,
    "saving-prior-map": render_prior_map,
    "saving-prior-before": render_prior_before,
    "saving-shipped-versus-pilot": render_shipped_versus_pilot,
    "saving-versus-pilot-again": render_versus_pilot_again,
    "flatness-view": render_flatness_view,
    "probe-cost": render_probe_cost,
    "saving-pool": render_saving_pool,
    "flatness-targets": render_flatness_targets,
    "saving-share": render_saving_share,
    "saving-share-check": render_share_check,
    "saving-share-pilot": render_share_versus_pilot,
    "saving-share-group4": render_share_group4,
    "pool-beliefs": render_pool_beliefs,
    "saving-equal-cost": render_equal_cost_summary,
    "demo-ladder": render_demo_ladder,
    "demo-tune": render_demo_tune,
    "ladder-summary": render_ladder_summary,
    "tokens": render_tokens,
    **RELIABILITY_RENDERERS,
}

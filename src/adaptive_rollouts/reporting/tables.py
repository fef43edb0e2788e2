"""The renderers of the docs' results blocks: each reads committed result files under results/ and
returns Markdown ending with the source line (`results.provenance`). `RENDERERS` is the registry
`render_docs` uses; the regime map's renderer is in `map_tables`, the reliability ones in
`reliability_tables`."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.map_tables import render_map
from adaptive_rollouts.reporting.reliability_tables import RELIABILITY_RENDERERS
from adaptive_rollouts.reporting.results import Result, load_result, provenance
from adaptive_rollouts.sim.markdown import table

__all__ = ["RENDERERS", "SOLVER", "ADVANTAGES", "PREDICTORS", "RECURRING"]

SOLVER = "results/solver/solver.json"
ADVANTAGES = "results/advantages/advantages.json"
PREDICTORS = "results/predictors/predictors-full.json"
RECURRING = "results/predictors/predictors-full.json"


def _load(root: Path, rel: str) -> Result:
    r = load_result(root / rel)
    return Result(rel, r.header, r.data)  # show the path relative to the repository


def _block(lines: list[str], results: list[Result]) -> str:
    return "\n".join([*lines, "", provenance(results)])


def _load_note(data: dict) -> str:
    load = data.get("load_average")
    return "" if load is None else f", at a 1-minute load average of {load:.1f} on the machine that ran it"


# ---- solver ---------------------------------------------------------------------------------------


def _ratio(x: float | None, y: float) -> str:
    return "-" if x is None else f"{x / y:,.0f}x"


def _gap(x: float | None) -> str:
    return "-" if x is None else ("0" if x == 0 else f"{x:.1e}")


def _ms(x: float | None) -> str:
    if x is None:
        return "not run"
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _unit(r: Result) -> str:
    """ "CPU ms" when the benchmark timed process time (its settings say so), else "ms"."""
    return "CPU ms" if "CPU" in str(r.settings.get("timing", "")) else "ms"


def solver_rows(root: Path) -> tuple[Result, list[dict]]:
    r = _load(root, SOLVER)
    return r, list(r.data["rows"])


def render_solver_table(root: Path) -> str:
    r, rows = solver_rows(root)
    body = [
        [
            x["objective"],
            str(x["q"]),
            _ms(x["allocate_ms"]),
            _ms(x["kkt_ms"]),
            _ms(x["slsqp_ms"]),
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
        parts = ", ".join(f"{_ms(x['allocate_ms'])} {unit} {o}" for o, x in at.items())
        lines += [
            "",
            f"Target Q = 1024 in <= 5 ms: {'met' if worst <= 5 else 'not met'} ({parts}){_load_note(r.data)}.",
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
    return _block(lines, [r])


def render_solver_summary(root: Path) -> str:
    r, rows = solver_rows(root)
    big = max(x["q"] for x in rows)
    at = {x["objective"]: x for x in rows if x["q"] == (1024 if any(x["q"] == 1024 for x in rows) else big)}
    q = next(iter(at.values()))["q"]
    times = " and ".join(f"{_ms(x['allocate_ms'])} {_unit(r)} for {o}" for o, x in at.items())
    sl = [(x["slsqp_ms"] / x["allocate_ms"], x["q"]) for x in rows if x["slsqp_ms"] is not None]
    text = f"`allocate` at Q = {q} takes {times}{_load_note(r.data)}, exactly optimal"
    if sl:
        text += (
            f"; VIP's SLSQP + rounding is {min(sl)[0]:,.0f}x-{max(sl)[0]:,.0f}x slower "
            f"where it ran (Q <= {max(s[1] for s in sl)})"
        )
    text += "; the paper's KKT + rounding is " + kkt_gaps(rows) + "."
    return _block([text], [r])


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
    r = _load(root, ADVANTAGES)
    d = r.data
    ms = d["ms"]
    text = (
        f"{d['n']:,} rewards in {d['groups']:,} ragged groups: "
        + ", ".join(f"{est} {v:.1f} {_unit(r)}" for est, v in ms.items())
        + f" against a target of {d['target_ms']:g} ms{_load_note(d)}; a per-group Python loop takes "
        f"{d['loop_ms'] / d['vectorised_ms']:.0f}x longer on {d['loop_n']:,} rewards."
    )
    return _block([text], [r])


# ---- predictors -----------------------------------------------------------------------------------


def _pct_lower(ratio_a: float, ratio_b: float) -> float:
    return 100.0 * (1.0 - ratio_a / ratio_b)


def render_predictors_quality(root: Path) -> str:
    r = _load(root, PREDICTORS)
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
    return _block(lines, [r])


def render_predictors_cost(root: Path) -> str:
    r = _load(root, PREDICTORS)
    body = [
        [x["predictor"], f"{x['pool']:,}", _ms(x["cpu_ms"]), _ms(x["wall_ms"]), _ms(x["state_mb"])]
        for x in r.data["cost"]
    ]
    lines = [f"Cost per step (predict + update of {r.settings.get('batch')} prompts, 1 BLAS thread):", ""]
    lines += table(["predictor", "pool", "CPU ms", "wall ms", "state MB"], body)
    return _block(lines, [r])


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
    r = _load(root, PREDICTORS)
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
        f"{len(gp_vs_paper)} scenarios; {_ms(gp_cost['cpu_ms'])} ms CPU per {r.settings.get('batch')}-prompt step "
        f"on a {gp_cost['pool']:,}-prompt pool, {_ms(gp_cost['state_mb'])} MB of state. Its default blend is "
        f"within {min(ll):+.1f}% to {max(ll):+.1f}% (log-loss) and {min(mae):+.1f}% to {max(mae):+.1f}% (MAE) "
        f"of the log-loss blend option there."
    )
    return _block([text], [r])


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
    r = _load(root, RECURRING)
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
    return _block(lines, [r])


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


AGGREGATION_TIMING = "results/aggregation/timing.json"


def render_aggregation_timing(root: Path) -> str:
    r = _load(root, AGGREGATION_TIMING)
    body = []
    for x in r.data["rows"]:
        shape = f"Q = {x['q']}" + "".join(
            f", {label} {x[k]}" for k, label in (("upper", "upper"), ("budget", "C ="), ("features", "D =")) if k in x
        )
        body.append([f"`{x['piece']}`", shape, _ms(x["ms"])])
    lines = table(["piece", "shape", "median wall ms"], body)
    lines += ["", f"Wall time{_load_note(r.data)}."] if "load_average" in r.data else []
    return _block(lines, [r])


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
    **RELIABILITY_RENDERERS,
}

"""The regime map's tables of the primary statistic (`gain_speedup`): per cell and arm the statistic
with its 90% paired interval (`interval_words`), the pooled effect over cells, and the saving verdicts read
from the intervals (`map_summary.verdict`), and the final accuracy at equal cost
(`experiments.equal_cost`). Called by `map_report.map_markdown` for maps run with
``fractions``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptive_rollouts.experiments.intervals import OLD_INTERVAL
from adaptive_rollouts.experiments.map_summary import verdict
from adaptive_rollouts.reporting.blocks import left_out_reason
from adaptive_rollouts.reporting.markdown import fmt, section, table

__all__ = [
    "gain_lines",
    "token_lines",
    "protocol_line",
    "interval_words",
    "verdict_lines",
    "targets_with_verdicts",
    "coverage",
    "gap_cell",
    "equal_cost_lines",
]

_DEFAULT = "default"


def _ci(value: float | None, ci: Sequence[float] | None) -> str:
    if value is None or ci is None:
        return "-"
    return f"{fmt(value)} ({fmt(ci[0])}-{fmt(ci[1])})"


def interval_words(cfg: dict) -> str:
    """How a map's 90% intervals of the primary statistic were computed, from its configuration."""
    seeds = len(cfg["paired_seeds"])
    if cfg.get("interval", OLD_INTERVAL) == "jackknife-t":
        return f"jackknife-t on log speedup over the {seeds} paired seeds (Student t, {seeds - 1} degrees of freedom)"
    return f"percentile of {cfg.get('bootstrap', 1000)} paired bootstrap resamples of the {seeds} seeds"


def protocol_line(cfg: dict) -> str:
    """How the map's primary statistic was measured, from its configuration (the result's header)."""
    shares = "/".join(f"{f:.0%}" for f in cfg["fractions"])
    untuned = ", ".join(cfg.get("untuned", ())) or "none"
    tuned = ", ".join(m for m in cfg["methods"] if m not in cfg.get("untuned", ()))
    return (
        f"Primary statistic: rollouts Uniform needs to reach {shares} of the gain over rollouts the arm needs, "
        f"geometric mean over the shares, on the running max of seed-mean curves; the gain is the lower of "
        f"the two curves' tops over the accuracy before training. {len(cfg['paired_seeds'])} paired "
        f"seeds {list(cfg['paired_seeds'])[:1]}-{list(cfg['paired_seeds'])[-1:]} (fixed in the configuration "
        f"before the run), {cfg['steps']} steps, estimator {cfg['estimator']}, aggregation {cfg['aggregation']}; "
        f"90% intervals: {interval_words(cfg)}. Rates tuned "
        f"on seeds {list(cfg['tune_seeds'])} (mean accuracy over the last third of the run; grid "
        f"{list(cfg['lr_grid'])}, extended x{cfg['lr_step']:g} at an edge) for {tuned}; run at Uniform's tuned "
        f"rate only: {untuned}. The replicate is Uniform on the same problem instances with other sampling "
        f"seeds; the null control is Uniform's counts drawn in the default's rounds: both read 1.00 in truth."
    )


def gain_lines(data: dict, level: int) -> list[str]:
    """The primary statistic's tables and lines (see the module docstring)."""
    cfg = data["config"]
    arms = [m for m in cfg["methods"] if m != "uniform"]
    lines = [protocol_line(cfg), ""]
    lines += section("Primary statistic against Uniform, all arms at Uniform's rate (90% interval)", level)
    own_rate = _DEFAULT in arms and _DEFAULT not in cfg.get("untuned", ())
    header = ["cell", "Uniform's rate", *arms]
    if own_rate:
        header.append("default at its own best rate (rate)")
    body = []
    for r in data["rows"]:
        ms = r["methods"]
        cells = [r["cell"], fmt(data["lr"].get(r["cell"], {}).get("uniform"))]
        for m in arms:
            e = ms.get(m, {})
            if m == _DEFAULT:
                cells.append(_ci(e.get("same_rate_gain_speedup"), e.get("same_rate_gain_ci90")))
            else:
                cells.append(_ci(e.get("gain_speedup"), e.get("gain_ci90")))
        if own_rate:
            e = ms.get(_DEFAULT, {})
            rate = f" ({e['lr']:.3g})" if "lr" in e else ""
            cells.append(_ci(e.get("gain_speedup"), e.get("gain_ci90")) + rate)
        body.append(cells)
    lines += table(header, body)
    lines += token_lines(data, level)
    lines += section("Pooled over the cells (geometric mean of the cells' statistics, 90% interval)", level)
    for name, p in data.get("pooled", {}).items():
        if name == "default" or name.startswith("uniform@"):
            continue
        label = "default at its own best rate" if name == "default" else name.replace("@uniform-rate", "")
        lines.append(
            f"- {label}: {fmt(p['effect'])} ({fmt(p['low'])}-{fmt(p['high'])}) over {p['cells']} cells"
            + (
                f" ({p['left_out']} cells left out: {left_out_reason(p, 'statistic 0 or undefined')})"
                if p["left_out"]
                else ""
            )
        )
    own = data.get("pooled", {}).get(_DEFAULT)
    if own and own_rate:
        lines.append(f"- default at its own best rate: {fmt(own['effect'])} ({fmt(own['low'])}-{fmt(own['high'])})")
    lines += _coverage_lines(data)
    return lines


def _arm_entry(ms: dict, arm: str) -> tuple[dict, str]:
    """The arm's entry and the key prefix of its statistic at Uniform's rate (the default's paired run)."""
    e = ms.get(arm, {})
    return e, ("same_rate_" if arm == _DEFAULT and "same_rate_gain_speedup" in e else "")


def token_lines(data: dict, level: int) -> list[str]:
    """For the cells whose runs recorded generated tokens (length cells): each arm's primary statistic
    on the rollout axis beside the same statistic on the token axis (tokens to 50/75/90% of the gain)."""
    cfg = data["config"]
    arms = [m for m in cfg["methods"] if m != "uniform"]
    entries = [(r, [_arm_entry(r["methods"], m) for m in arms]) for r in data["rows"]]
    rows = [(r, es) for r, es in entries if any(f"{p}token_gain_speedup" in e for e, p in es)]
    if not rows:
        return []
    lines = section("Rollouts and tokens to target, all arms at Uniform's rate (90% interval)", level)
    header = ["cell"] + [f"{m} {axis}" for m in arms for axis in ("rollouts", "tokens")]
    body = []
    for r, es in rows:
        cells = [r["cell"]]
        for e, p in es:
            cells.append(_ci(e.get(f"{p}gain_speedup"), e.get(f"{p}gain_ci90")))
            cells.append(_ci(e.get(f"{p}token_gain_speedup"), e.get(f"{p}token_gain_ci90")))
        body.append(cells)
    return lines + table(header, body)


def _coverage_lines(data: dict) -> list[str]:
    """How often the controls' intervals cover 1.00 (their true value)."""
    out = []
    for arm in ("uniform-rounds", "uniform-replicate"):
        hit, n = coverage(data, arm)
        if n:
            out.append(f"- {arm}: its 90% interval covers 1.00 in {hit} of {n} cells")
    return out


def targets_with_verdicts(data: dict) -> list[dict]:
    """The map's saving targets, each with its verdict (computed here, from the single-target
    intervals, for result files written before verdicts were recorded)."""
    nulls = {r["cell"]: r["methods"].get("uniform-rounds", {}) for r in data["rows"]}
    targets = []
    for t in data.get("saving_targets") or []:
        null_ci = t.get("null_ci90", nulls.get(t["cell"], {}).get("ci90"))
        found = t.get("verdict") or verdict(t["ci90"], t["needed"], null_ci)
        targets.append({**t, "null_ci90": null_ci, "verdict": found})
    return targets


def coverage(data: dict, arm: str) -> tuple[int, int]:
    """(cells whose 90% interval of the primary statistic covers 1.00, cells) for a control ``arm``."""
    cis = [r["methods"][arm]["gain_ci90"] for r in data["rows"] if "gain_ci90" in r["methods"].get(arm, {})]
    return sum(lo <= 1.0 <= hi for lo, hi in cis), len(cis)


def verdict_lines(data: dict, level: int) -> list[str]:
    """The saving targets with verdicts from the intervals (`targets_with_verdicts`)."""
    targets = targets_with_verdicts(data)
    lines = section(
        "Saving targets: the default >= 1.5x where >= 30% of Uniform's groups are all-equal, >= 0.97x everywhere; "
        "met / below only when the interval clears the threshold and the null control's interval",
        level,
    )
    lines += table(
        ["cell", "Uniform's all-equal groups", "default (90% CI)", "null control (90% CI)", "rollouts", "needed"]
        + ["verdict", "known-p skip rule"],
        (
            [
                t["cell"],
                f"{t['zero_variance_fraction']:.0%}",
                _ci(t["speedup"], t["ci90"]),
                "-" if t.get("null_ci90") is None else f"{fmt(t['null_ci90'][0])}-{fmt(t['null_ci90'][1])}",
                f"{t['spend']:.2f}",
                f"{t['needed']:g}",
                t["verdict"],
                fmt(t.get("known_p_rule", t.get("known_p_bound"))),
            ]
            for t in targets
        ),
    )
    return lines


def gap_cell(e: dict | None) -> str:
    """A method entry's final accuracy minus Uniform's at equal cost with its 90% interval,
    "+0.051 (+0.043, +0.059)"; "-" where the entry has none (maps summarised before it was).

    >>> gap_cell({"final_gap_equal_cost": 0.0512, "final_gap_equal_cost_ci90": [0.043, 0.0591]}), gap_cell({})
    ('+0.051 (+0.043, +0.059)', '-')
    """
    if not e or e.get("final_gap_equal_cost") is None:
        return "-"
    lo, hi = e["final_gap_equal_cost_ci90"]
    ci = f" ({lo:+.3f}, {hi:+.3f})" if np.isfinite(lo) and np.isfinite(hi) else ""
    return f"{e['final_gap_equal_cost']:+.3f}{ci}"


def equal_cost_lines(data: dict, level: int) -> list[str]:
    """Per cell and method: final accuracy minus Uniform's at equal cost (`experiments.equal_cost`);
    nothing for a map file summarised before the statistic existed."""
    shown = [m for m in data["config"]["methods"] if m != "uniform"]
    if not any("final_gap_equal_cost" in e for r in data["rows"] for e in r["methods"].values()):
        return []
    lines = section("Final accuracy minus Uniform's at equal cost (90% interval over the paired seeds)", level)
    lines += [
        "The arm's accuracy over the last third of its steps minus Uniform's accuracy at the same cumulative "
        "rollouts (Uniform's curve interpolated; held at its last step beyond it), mean over the seeds, "
        "jackknife-t interval. The table above compares after the same number of steps, when a saving arm "
        "has generated a fraction of Uniform's rollouts.",
        "",
    ]
    return lines + table(
        ["cell", *shown], ([r["cell"], *(gap_cell(r["methods"].get(m)) for m in shown)] for r in data["rows"])
    )

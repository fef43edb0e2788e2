"""The regime map's summary: per cell the fingerprints and per method the speedup, and the targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.equal_cost import equal_cost_entry
from adaptive_rollouts.experiments.gain_speedup import (
    gain_interval,
    gain_speedup,
    gain_speedup_parts,
    pooled_effect_t,
    pooled_gain,
)
from adaptive_rollouts.experiments.intervals import OLD_INTERVAL
from adaptive_rollouts.experiments.regime_map import DEFAULT, NULL, seeds_for
from adaptive_rollouts.experiments.speedup import bootstrap_speedup, speedup
from adaptive_rollouts.fingerprints import batch_noise_to_signal

__all__ = ["summarize_map", "uniform_fingerprints", "pooled_arm", "NOISE_DOMINATED"]

NOISE_DOMINATED = 1.0  # batch noise-to-signal of Uniform's step (resampled) at or above this


def _runs_at(
    result: dict, cell: str, method: str, seeds: Sequence[int] | None = None, lr: float | None = None
) -> list[dict]:
    lr = result["lr"].get(cell, {}).get(method) if lr is None else lr
    if lr is None:
        return []
    runs = [r for (c, m, s, x), r in result["runs"].items() if c == cell and m == method and abs(x - lr) < 1e-12]
    seeds_ok = set(seeds_for(result["config"], method))
    runs = [r for r in runs if r["seed"] in seeds_ok and (seeds is None or r["seed"] in seeds)]
    return sorted(runs, key=lambda r: r["seed"])


def _nanmean(values) -> float:
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


def uniform_fingerprints(uni: Sequence[dict], budget: int) -> dict[str, float]:
    """The map's fingerprints of a cell from Uniform's runs (each with ``nsr_rollout``, ``probe`` and
    ``regime`` as `regime_map` records them): median per-rollout noise/signal (and over the step's
    budget), batch noise/signal of the resampled step (sum of covariance traces over sum of debiased
    squared means over every probe), mean zero-variance fraction and persistence of p across visits
    (nan when no prompt was visited twice)."""
    nsr = float(np.median([x for r in uni for x in r["nsr_rollout"] if np.isfinite(x)] or [np.nan]))
    probes = [r["probe"] for r in uni if r["probe"]["probe_var"]]
    batch = (
        batch_noise_to_signal(
            [x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]]
        )
        if probes
        else float("nan")
    )
    return {
        "noise_to_signal_rollout": nsr,
        "noise_to_signal_rollout_over_budget": nsr / budget,
        "noise_to_signal_batch": batch,
        "zero_variance_fraction": float(np.mean([r["regime"]["regime/zero_variance_fraction_mean"] for r in uni])),
        "p_persistence": _nanmean(r["regime"]["regime/p_persistence"] for r in uni),
    }


def _fingerprints(result: dict, cell: str) -> dict[str, float]:
    uni = _runs_at(result, cell, "uniform")
    info = result["cells"][cell]
    if not uni:
        return {"transfer": info.get("transfer_measured", float("nan"))}
    return {**uniform_fingerprints(uni, info["budget"]), "transfer": info.get("transfer_measured", float("nan"))}


def _gain_entry(
    u: list[dict], m: list[dict], fractions: Sequence[float], resamples: int, interval: str, prefix: str = ""
) -> dict:
    """The primary statistic (`gain_speedup`) of ``m`` against ``u`` (paired seed lists), its parts,
    90% paired interval by ``interval`` (`gain_interval`; the jackknife-t's standard error on log
    speedup is kept), per-seed values and (not saved) what pools it over cells; where every run
    recorded its generated tokens (a length cell) also the statistic on the token axis
    (``token_gain_speedup``, ``token_gain_ci90``: tokens to the targets instead of rollouts)."""
    ci = gain_interval(u, m, fractions, interval, resamples)
    out = {
        f"{prefix}gain_speedup": gain_speedup(u, m, fractions),
        f"{prefix}gain_parts": gain_speedup_parts(u, m, fractions),
        f"{prefix}gain_ci90": [ci["low"], ci["high"]],
        f"{prefix}gain_per_seed": [gain_speedup([a], [b], fractions) for a, b in zip(u, m)],
        f"_{prefix}interval": ci,
    }
    if "se" in ci:
        out[f"{prefix}gain_log_se"] = ci["se"]
    if all("tokens" in r for r in [*u, *m]):
        tci = gain_interval(u, m, fractions, interval, resamples, cost="tokens")
        out[f"{prefix}token_gain_speedup"] = gain_speedup(u, m, fractions, cost="tokens")
        out[f"{prefix}token_gain_ci90"] = [tci["low"], tci["high"]]
    return out


def summarize_map(result: dict) -> dict[str, Any]:
    """Per cell: fingerprints, and per method speedup (seed-mean curves) with per-seed min-max, the
    rollouts spent and the final accuracy against Uniform's at equal steps and at equal cost; with
    ``fractions`` in the configuration also the primary statistic (`gain_speedup`), the pooled effect
    over cells per method (`pooled`) and the saving verdicts from the intervals."""
    frac = result["config"]["target_at"]
    fractions = tuple(result["config"].get("fractions") or ())
    resamples = result["config"].get("bootstrap", 1000)
    interval = result["config"].get("interval", OLD_INTERVAL)  # a map that names none was read with it
    rows = []
    for cell in result["cells"]:
        uni = _runs_at(result, cell, "uniform")
        row: dict[str, Any] = {"cell": cell, **result["cells"][cell], "fingerprints": _fingerprints(result, cell)}
        row["methods"] = {}
        for method in result["config"]["methods"]:
            runs = _runs_at(result, cell, method)
            if not runs or not uni:
                continue
            seeds = [r["seed"] for r in runs]
            u_same = [u for u in uni if u["seed"] in seeds]
            if len(u_same) != len(runs):
                continue
            per_seed = [speedup([u], [r], frac) for u, r in zip(u_same, runs)]
            lo, hi = bootstrap_speedup(u_same, runs, frac, result["config"].get("bootstrap", 1000))
            entry = {
                "speedup": speedup(u_same, runs, frac),
                # every generated rollout of the run, as a share of Uniform's on the same seeds
                "spend": float(
                    np.mean([r["rollouts"][-1] for r in runs]) / np.mean([u["rollouts"][-1] for u in u_same])
                ),
                # at equal steps; at equal cost: Uniform read at the method's rollouts (`equal_cost`)
                "final_gap": float(np.mean([r["final"] for r in runs]) - np.mean([u["final"] for u in u_same])),
                **equal_cost_entry(u_same, runs),
                "min": float(np.min(per_seed)),
                "max": float(np.max(per_seed)),
                "per_seed": per_seed,
                "ci90": [lo, hi],
                "seeds": seeds,
                "lr": result["lr"][cell][method],
            }
            if fractions:
                entry.update(_gain_entry(u_same, runs, fractions, resamples, interval))
            uniform_lr = result["lr"][cell].get("uniform")
            same = (
                _runs_at(result, cell, method, lr=uniform_lr) if method in result["config"].get("same_rate", ()) else []
            )
            if len(same) == len(u_same) and same:
                entry["same_rate_speedup"] = speedup(u_same, same, frac)
                entry["same_rate_ci90"] = list(
                    bootstrap_speedup(u_same, same, frac, result["config"].get("bootstrap", 1000))
                )
                entry["same_rate_per_seed"] = [speedup([u], [r], frac) for u, r in zip(u_same, same)]
                if fractions:
                    entry.update(_gain_entry(u_same, same, fractions, resamples, interval, prefix="same_rate_"))
            probes = [r["probe"] for r in runs if r["probe"]["probe_var"]]
            if probes:
                nsr = batch_noise_to_signal(
                    [x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]]
                )
                nsr_o = batch_noise_to_signal(
                    [x for p in probes for x in p["probe_oracle_var"]],
                    [x for p in probes for x in p["probe_oracle_signal"]],
                )
                entry["batch_nsr"], entry["batch_nsr_true_p_optimum"] = nsr, nsr_o
                entry["batch_nsr_ratio"] = nsr / nsr_o if nsr_o > 0 and np.isfinite(nsr_o) else float("nan")
            row["methods"][method] = entry
        rows.append(row)
    out = {"rows": rows, "targets": _targets(rows), "errors": result["errors"]}
    if any(DEFAULT in r["methods"] for r in rows):
        out["saving_targets"] = saving_targets(rows)
    if fractions:
        out["pooled"] = _pooled(rows, result["config"]["methods"])
    for r in rows:  # the bootstrap draws and standard errors served the pooled effect; draws are not kept
        for e in r["methods"].values():
            for k in [k for k in e if k.startswith("_")]:
                del e[k]
    return out


def _pooled(rows: list[dict], methods: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per method (and the default at Uniform's rate, ``default@uniform-rate``) the pooled effect of
    the primary statistic over the cells (`pooled_gain`: by the cells' interval method)."""
    out = {}
    arms = [(m, "") for m in methods if m != "uniform"] + [(f"{m}@uniform-rate", "same_rate_") for m in methods]
    for name, prefix in arms:
        base = name.split("@")[0] if prefix else name
        es = [r["methods"][base] for r in rows if f"{prefix}gain_speedup" in r["methods"].get(base, {})]
        if es:
            out[name] = pooled_gain([e[f"{prefix}gain_speedup"] for e in es], [e[f"_{prefix}interval"] for e in es])
    return out


def pooled_arm(entries: Sequence[dict | None], prefix: str = "") -> dict[str, float]:
    """The pooled effect re-read from stored cell entries of a jackknife-t map: the geometric mean
    over cells of the primary statistic over Uniform (``prefix`` "same_rate_": at Uniform's rate)
    and its 90% t interval from the cells' jackknife standard errors (`pooled_effect_t`); cells
    without the statistic or its standard error are left out and counted.

    >>> e = {"gain_speedup": 2.0, "gain_log_se": 0.1, "gain_per_seed": [2.0] * 8}
    >>> round(pooled_arm([e, {**e, "gain_speedup": 0.5}])["effect"], 6)
    1.0
    """
    kept = [e for e in entries if e and e.get(f"{prefix}gain_log_se") is not None]
    pooled = pooled_effect_t(
        [e[f"{prefix}gain_speedup"] for e in kept],
        [e[f"{prefix}gain_log_se"] for e in kept],
        [len(e[f"{prefix}gain_per_seed"]) - 1 for e in kept],
    )
    pooled["left_out"] = int(pooled.get("left_out", 0)) + len(entries) - len(kept)
    return pooled


SAVING_FLAT = 0.3  # cells where at least this share of Uniform's groups is all-equal
SAVING_SPEEDUP = 1.5  # the default's speedup asked for there
NO_REGRET = 0.97  # and everywhere


def verdict(ci: Sequence[float], need: float, null_ci: Sequence[float] | None) -> str:
    """ "met" when the interval ``ci`` lies above ``need`` and above the null control's interval;
    "below" when it lies below ``need`` (and, for a no-regret threshold ``need`` <= 1, below the null's
    interval too, so the null's own noise is never called a regression); "unresolved" otherwise.

    >>> verdict([1.6, 2.0], 1.5, [0.9, 1.1]), verdict([1.6, 2.0], 1.5, [0.9, 1.7]), verdict([1.0, 1.3], 1.5, None)
    ('met', 'unresolved', 'below')
    >>> verdict([0.8, 0.95], 0.97, [0.9, 1.1]), verdict([0.7, 0.85], 0.97, [0.9, 1.1])
    ('unresolved', 'below')
    """
    lo, hi = float(ci[0]), float(ci[1])
    null_lo, null_hi = (float(null_ci[0]), float(null_ci[1])) if null_ci is not None else (-np.inf, np.inf)
    if lo > need and (null_ci is None or lo > null_hi):
        return "met"
    if hi < need and (need > 1 or hi < null_lo):
        return "below"
    return "unresolved"


def saving_targets(rows: list[dict]) -> list[dict[str, Any]]:
    """Per cell with the default: Uniform's all-equal share, the default's speedup and interval (with
    the primary statistic: `gain_speedup` at Uniform's rate, what a user who switches without retuning
    gets; else the single-target speedup at its own rate), the null control's interval, the known-p
    skip rule's (``oracle-skip``) speedup, and the verdict (`verdict`) on the saving targets (>= 1.5x
    where >= 30% of Uniform's groups are all-equal, >= 0.97x everywhere)."""
    out = []
    for r in rows:
        d = r["methods"].get(DEFAULT)
        if d is None:
            continue
        flat = r["fingerprints"].get("zero_variance_fraction", float("nan"))
        need = SAVING_SPEEDUP if flat >= SAVING_FLAT else NO_REGRET
        nul = r["methods"].get(NULL, {})
        rule = r["methods"].get("oracle-skip", {})
        if "same_rate_gain_speedup" in d:
            value, ci, statistic = d["same_rate_gain_speedup"], d["same_rate_gain_ci90"], "gain_speedup@uniform-rate"
            null_ci, rule_value = nul.get("gain_ci90"), rule.get("gain_speedup")
            own = d.get("gain_speedup")
        else:
            value, ci, statistic = d["speedup"], d["ci90"], "speedup"
            null_ci, rule_value, own = nul.get("ci90"), rule.get("speedup"), None
        v = verdict(ci, need, null_ci)
        out.append(
            {
                "cell": r["cell"],
                "statistic": statistic,
                "zero_variance_fraction": flat,
                "speedup": value,
                "ci90": ci,
                "own_rate_speedup": own,
                "null_ci90": null_ci,
                "spend": d["spend"],
                "needed": need,
                "verdict": v,
                "met": v == "met",
                "known_p_rule": rule_value,
            }
        )
    return out


def _targets(rows: list[dict]) -> dict[str, Any]:
    noisy = [r for r in rows if r["fingerprints"].get("noise_to_signal_batch", 0) >= NOISE_DOMINATED]
    learned_best = []
    for r in noisy:
        cands = [
            (e["speedup"], m, r["methods"].get(f"{m}@true-p", {}).get("speedup"))
            for m, e in r["methods"].items()
            if "@" not in m and m not in ("uniform", NULL)  # the null control allocates like Uniform
        ]
        if cands:
            s, m, t = max(cands)
            learned_best.append({"cell": r["cell"], "method": m, "speedup": s, "true_p": t})
    default = [
        {
            "cell": r["cell"],
            **{
                k: r["methods"][DEFAULT].get(k)
                for k in ("speedup", "min", "max", "ci90", "seeds", "same_rate_speedup", "same_rate_ci90")
            },
        }
        for r in rows
        if DEFAULT in r["methods"]
    ]
    nsr = [
        {"cell": r["cell"], "ratio": r["methods"][DEFAULT].get("batch_nsr_ratio", float("nan"))}
        for r in rows
        if DEFAULT in r["methods"]
    ]
    return {
        "noise_dominated_cells": [r["cell"] for r in noisy],
        "learned_best_in_noise_dominated": learned_best,
        "learned_target_met": bool(learned_best)
        and all(x["speedup"] >= 1.5 and x["true_p"] and x["speedup"] >= 0.9 * x["true_p"] for x in learned_best),
        "default_vs_uniform": default,
        "no_regret_met": bool(default) and all(x["speedup"] >= 0.97 for x in default),
        "no_regret_same_rate_met": bool(default)
        and all(x["same_rate_speedup"] is not None and x["same_rate_speedup"] >= 0.97 for x in default),
        "default_batch_nsr_ratio": nsr,
        "nsr_target_met": bool(nsr) and all(np.isfinite(x["ratio"]) and x["ratio"] <= 1.10 for x in nsr),
    }

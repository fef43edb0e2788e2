"""The regime map's summary: per cell the fingerprints and per method the speedup, and the targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.regime_map import DEFAULT, NULL
from adaptive_rollouts.experiments.speedup import bootstrap_speedup, speedup

__all__ = ["summarize_map", "uniform_fingerprints", "NOISE_DOMINATED"]

NOISE_DOMINATED = 1.0  # batch noise-to-signal of Uniform's step (resampled) at or above this


def _runs_at(
    result: dict, cell: str, method: str, seeds: Sequence[int] | None = None, lr: float | None = None
) -> list[dict]:
    lr = result["lr"].get(cell, {}).get(method) if lr is None else lr
    if lr is None:
        return []
    runs = [r for (c, m, s, x), r in result["runs"].items() if c == cell and m == method and abs(x - lr) < 1e-12]
    seeds_ok = set(
        result["config"]["paired_seeds"] if method in ("uniform", DEFAULT, NULL) else result["config"]["report_seeds"]
    )
    runs = [r for r in runs if r["seed"] in seeds_ok and (seeds is None or r["seed"] in seeds)]
    return sorted(runs, key=lambda r: r["seed"])


def _nanmean(values) -> float:
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


def _ratio_of_sums(num: list[float], den: list[float]) -> float:
    n, d = float(np.sum(num)), float(np.sum(den))
    return n / d if d > 0 else float("inf")


def uniform_fingerprints(uni: Sequence[dict], budget: int) -> dict[str, float]:
    """The map's fingerprints of a cell from Uniform's runs (each with ``nsr_rollout``, ``probe`` and
    ``regime`` as `regime_map` records them): median per-rollout noise/signal (and over the step's
    budget), batch noise/signal of the resampled step (sum of covariance traces over sum of debiased
    squared means over every probe), mean zero-variance fraction and persistence of p across visits
    (nan when no prompt was visited twice)."""
    nsr = float(np.median([x for r in uni for x in r["nsr_rollout"] if np.isfinite(x)] or [np.nan]))
    probes = [r["probe"] for r in uni if r["probe"]["probe_var"]]
    batch = (
        _ratio_of_sums([x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]])
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


def summarize_map(result: dict) -> dict[str, Any]:
    """Per cell: fingerprints, and per method speedup (seed-mean curves) with per-seed min-max."""
    frac = result["config"]["target_at"]
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
                "final_gap": float(np.mean([r["final"] for r in runs]) - np.mean([u["final"] for u in u_same])),
                "min": float(np.min(per_seed)),
                "max": float(np.max(per_seed)),
                "per_seed": per_seed,
                "ci90": [lo, hi],
                "seeds": seeds,
                "lr": result["lr"][cell][method],
            }
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
            probes = [r["probe"] for r in runs if r["probe"]["probe_var"]]
            if probes:
                nsr = _ratio_of_sums(
                    [x for p in probes for x in p["probe_var"]], [x for p in probes for x in p["probe_signal"]]
                )
                nsr_o = _ratio_of_sums(
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
    return out


SAVING_FLAT = 0.3  # cells where at least this share of Uniform's groups is all-equal
SAVING_SPEEDUP = 1.5  # the default's speedup asked for there
NO_REGRET = 0.97  # and everywhere


def saving_targets(rows: list[dict]) -> list[dict[str, Any]]:
    """Per cell with the default: Uniform's all-equal share, the default's speedup and interval,
    the known-p bound's (``oracle-skip``) speedup and the default's share of it, and whether the
    saving targets hold (>= 1.5x where >= 30% of Uniform's groups are all-equal, >= 0.97x everywhere)."""
    out = []
    for r in rows:
        d = r["methods"].get(DEFAULT)
        if d is None:
            continue
        flat = r["fingerprints"].get("zero_variance_fraction", float("nan"))
        bound = r["methods"].get("oracle-skip", {}).get("speedup")
        need = SAVING_SPEEDUP if flat >= SAVING_FLAT else NO_REGRET
        out.append(
            {
                "cell": r["cell"],
                "zero_variance_fraction": flat,
                "speedup": d["speedup"],
                "ci90": d["ci90"],
                "spend": d["spend"],
                "needed": need,
                "met": bool(d["speedup"] >= need),
                "known_p_bound": bound,
                "share_of_bound": d["speedup"] / bound if bound else float("nan"),
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

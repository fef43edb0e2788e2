"""The demo protocol's speedups, read exactly as the regime map reads its runs.

Per arm against Uniform on the seeds both have: rollouts to a common target, completion tokens and
modelled synchronous generation time to it (`experiments.speedup.rollouts_needed`: the running max
of the seed-mean held-out curves, target at ``target_at`` of the run on the pooled curve), the
speedup and its paired bootstrap intervals (`experiments.speedup.bootstrap_speedup`, 90% as the map
reports and 95%); and, under ``gain``, the map's primary statistic on the same curves: Uniform's
cost to 50%, 75% and 90% of the gain over the arm's, geometric mean
(`experiments.gain_speedup.gain_speedup`), with jackknife-t intervals over the paired seeds (90%
and 95%). A single target near where a small gain plateaus is crossed early or late by small
shifts of the seed-mean curve; three targets and the jackknife read it more steadily. The modelled time is `sim.step_time.ENGINES["synchronous"]` (a call lasts its
longest completion, in token-times) on the generation calls each run recorded, with the overhead
per call at which the arm's mean step time would equal Uniform's
(`sim.step_time.break_even_overhead`). A variant with ``[options]`` is also read head to head against the
arms it adds options to (``versus``, `head_to_head`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval, gain_speedup
from adaptive_rollouts.experiments.speedup import bootstrap_speedup, rollouts_needed, speedup
from adaptive_rollouts.experiments.token_summary import SYNCHRONOUS_TIME as TIME_AXIS
from adaptive_rollouts.sim.step_time import ENGINES, break_even_overhead

from .allocation import arm_of, partner_arms

__all__ = [
    "TIME_AXIS",
    "COST_AXES",
    "has_axis",
    "modelled_time",
    "curve",
    "report_runs",
    "reference_arm",
    "gain_reading",
    "head_to_head",
    "arm_rows",
]

COST_AXES = ("rollouts", "tokens", TIME_AXIS)


def has_axis(run: dict, axis: str) -> bool:
    """Whether a saved run records what ``axis`` needs (runs saved before the generation calls were
    recorded have no modelled time)."""
    r = run["result"]
    return all(k in r for k in ("round_max_tokens", "round_tokens", "evaluated_at")) if axis == TIME_AXIS else axis in r


def modelled_time(run: dict) -> list[float]:
    """The run's cumulative modelled synchronous generation time at each evaluation (0 at the start).

    >>> modelled_time({"result": {"round_max_tokens": [[5, 2], [3]], "round_tokens": [[9, 2], [6]], "evaluated_at": [0, 2]}})
    [0.0, 10.0]
    """
    r = run["result"]
    per_step = ENGINES["synchronous"].steps_time(r["round_max_tokens"], r["round_tokens"])
    total = np.concatenate([[0.0], np.cumsum(per_step)])
    return [float(total[s]) for s in r["evaluated_at"]]


def curve(run: dict, axis: str = "rollouts") -> dict[str, Any]:
    """A saved run as the map's speedup functions read it: cost axis (``rollouts``, ``tokens`` or
    `TIME_AXIS`) at each evaluation after the start, held-out accuracy there, and the accuracy at the
    start."""
    r = run["result"]
    cost = modelled_time(run) if axis == TIME_AXIS else r[axis]
    return {"rollouts": cost[1:], "accuracy": r["held_out"][1:], "accuracy0": r["held_out"][0]}


def report_runs(cfg, state, arm: str) -> dict[int, dict]:
    """The arm's report runs at its chosen rate, by seed."""
    lr = state.best_lr.get(arm)
    return {s: state.runs[arm, s, lr] for s in cfg.report_seeds if (arm, s, lr) in state.runs}


def reference_arm(arm: str, arms) -> str:
    """The Uniform an arm is compared with: the one trained with the same loss.

    >>> reference_arm("vip-paper", ["uniform", "uniform-drgrpo", "vip-paper"]), reference_arm("vip-paper", ["uniform"])
    ('uniform-drgrpo', 'uniform')
    """

    loss = arm_of(arm).loss_type
    same = [a for a in ("uniform", "uniform-drgrpo") if a in arms and arm_of(a).loss_type == loss]
    return same[0] if same else "uniform"


def gain_reading(uniform: list[dict], arm: list[dict]) -> dict[str, Any]:
    """The map's primary statistic of ``arm`` over ``uniform`` (paired curves, one per seed): the
    geometric mean over `FRACTIONS` of the gain of Uniform's cost to each share over the arm's, and
    its 90% and 95% jackknife-t intervals (nan bounds with fewer than 3 seeds or where a
    leave-one-out subset has no statistic)."""
    out: dict[str, Any] = {"fractions": list(FRACTIONS), "speedup": gain_speedup(uniform, arm, FRACTIONS)}
    for level, key in ((0.9, "ci90"), (0.95, "ci95")):
        if len(arm) >= 3:
            x = gain_interval(uniform, arm, FRACTIONS, interval="jackknife-t", level=level)
            out[key] = [x["low"], x["high"]]
        else:
            out[key] = [float("nan"), float("nan")]
    return out


def head_to_head(cfg, state, arm: str, runs: dict[int, dict]) -> list[dict[str, Any]]:
    """A variant with ``[options]`` read against the arms it adds options to
    (`allocation.partner_arms`: the one without the option it adds, and the one it started from),
    each that ran: the map's statistic on rollouts with that arm in Uniform's place (its cost to
    50/75/90% of its own gain over the variant's) on the seeds both ran, with its intervals."""
    out = []
    for plain in partner_arms(arm, cfg.arms):
        base = report_runs(cfg, state, plain)
        seeds = sorted(set(base) & set(runs))
        if seeds:
            reading = gain_reading([curve(base[s]) for s in seeds], [curve(runs[s]) for s in seeds])
            out.append({"arm": plain, "seeds": len(seeds), **reading})
    return out


def arm_rows(cfg, state) -> list[dict[str, Any]]:
    """One row per arm with report runs: speedups in rollouts and tokens with paired intervals."""

    rows = []
    for arm in cfg.arms:
        runs = report_runs(cfg, state, arm)
        if not runs:
            continue
        reference = reference_arm(arm, cfg.arms)
        uniform = report_runs(cfg, state, reference)
        seeds = sorted(set(runs) & set(uniform))
        first = next(iter(runs.values()))
        spent = [sum(map(sum, r["result"]["counts"])) / len(r["result"]["counts"]) for r in runs.values()]
        skipped = [np.mean([np.mean(np.asarray(c) == 0) for c in r["result"]["counts"]]) for r in runs.values()]
        row: dict[str, Any] = {
            "arm": arm,
            "against": reference,
            "objective": first["result"]["objective"],
            "loss": f"{first['settings']['loss_type']} / scale_rewards={first['settings']['scale_rewards']}",
            "lr": state.best_lr[arm],
            "lr_tried": state.tried.get(arm, []),
            "lr_from": cfg.rates_from or ("uniform's" if arm in cfg.same_rate and arm != "uniform" else "tuned here"),
            "seeds": seeds,
            "final_accuracy": float(np.mean([r["result"]["held_out"][-1] for r in runs.values()])),
            "rollouts_per_step": float(np.mean(spent)),
            "skipped_fraction": float(np.mean(skipped)),
            "oracle_rollouts_per_step": float(
                np.mean([r["result"]["extra_rollouts"] / len(r["result"]["counts"]) for r in runs.values()])
            ),
            "code": sorted({r["code"] for r in runs.values()}),
            "commits": sorted({r["commit"] for r in runs.values()}),
        }
        if seeds:
            for axis in COST_AXES:
                if not all(has_axis(r, axis) for r in [*(uniform[s] for s in seeds), *(runs[s] for s in seeds)]):
                    continue
                u = [curve(uniform[s], axis) for s in seeds]
                m = [curve(runs[s], axis) for s in seeds]
                target, need_u, need_m = rollouts_needed(u, m, cfg.target_at)
                row[axis] = {
                    "target": target,
                    "uniform": need_u,
                    "arm": need_m,
                    "speedup": speedup(u, m, cfg.target_at),
                    "ci90": list(bootstrap_speedup(u, m, cfg.target_at, cfg.bootstrap)),
                    "ci95": list(bootstrap_speedup(u, m, cfg.target_at, cfg.bootstrap, level=0.95)),
                    "per_seed": [speedup([a], [b], cfg.target_at) for a, b in zip(u, m)],
                    "gain": gain_reading(u, m),
                }
            versus = head_to_head(cfg, state, arm, runs)
            if versus:
                row["versus"] = versus
            if TIME_AXIS in row:
                row["break_even_overhead"] = break_even_overhead(
                    [m for s in seeds for m in runs[s]["result"]["round_max_tokens"]],
                    [m for s in seeds for m in uniform[s]["result"]["round_max_tokens"]],
                )
        rows.append(row)
    return rows

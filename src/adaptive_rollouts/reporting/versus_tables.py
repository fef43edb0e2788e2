"""The default against Pilot-Commit and the known-p skip rule on the saving map: per cell, each
arm's speedup over Uniform (rollouts to 50/75/90% of the gain, at Uniform's rate, 90% interval) and
share of Uniform's rollouts, then the arms against each other on their common seeds, paired, with
the same statistic and interval (docs/saving.md, "Where Pilot-Commit is ahead")."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.gain_speedup import gain_speedup, jackknife_gain_speedup
from adaptive_rollouts.experiments.map_records import read_run_records, records_path
from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["VERSUS_MAPS", "ARMS", "head_to_head", "versus_reading", "render_saving_versus"]

VERSUS_MAPS = ("results/map/saving-32-a.json", "results/map/saving-32-b.json")
ARMS = (("default", "default"), ("pilot-commit", "Pilot-Commit"), ("oracle-skip", "known-p rule"))


def head_to_head(first: list[dict], second: list[dict]) -> dict | None:
    """``second``'s speedup over ``first`` (rollouts to 50/75/90% of the gain, `gain_speedup` with
    ``first`` in Uniform's place) on the seeds both ran at the same rate, and its 90% jackknife-t
    interval; None with fewer than 3 common seeds or where a subset of them has no gain.

    >>> run = lambda seed, scale: {"seed": seed, "lr": 0.1, "accuracy0": 0.0,
    ...     "rollouts": [10.0 * (t + 1) for t in range(5)], "accuracy": [scale * (t + 1) for t in range(5)]}
    >>> slow, fast = [run(s, 0.1) for s in range(4)], [run(s, 0.2) for s in range(4)]
    >>> round(head_to_head(slow, fast)["speedup"], 2)  # the fast arm reaches each target in half the rollouts
    2.0
    """
    by_seed = {(r["seed"], r["lr"]): r for r in first}
    pairs = [(by_seed[(r["seed"], r["lr"])], r) for r in second if (r["seed"], r["lr"]) in by_seed]
    if len(pairs) < 3:
        return None
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    speedup = gain_speedup(a, b)
    lo, hi, _, _ = jackknife_gain_speedup(a, b)
    if not all(np.isfinite([speedup, lo, hi])):
        return None
    return {"speedup": speedup, "low": lo, "high": hi, "seeds": len(pairs)}


def versus_reading(pilot_over_default: dict | None, known_over_pilot: dict | None) -> str:
    """What separates the default from Pilot-Commit in one cell, from the paired comparisons: who is
    ahead (interval wholly above or below 1), and where Pilot-Commit is, whether the known-p rule is
    ahead of it too (the default lacks prediction there) or behind it (Pilot-Commit's lead is
    bought with signal that knowing p would keep).

    >>> versus_reading({"low": 1.2, "high": 2.0}, {"low": 1.3, "high": 2.5})
    'Pilot-Commit ahead; the known-p rule ahead of it'
    >>> versus_reading({"low": 0.6, "high": 0.9}, None)
    'default ahead'
    """
    if pilot_over_default is None:
        return "-"
    if pilot_over_default["high"] < 1.0:
        return "default ahead"
    if pilot_over_default["low"] <= 1.0:
        return "not separated"
    if known_over_pilot is not None and known_over_pilot["low"] > 1.0:
        return "Pilot-Commit ahead; the known-p rule ahead of it"
    if known_over_pilot is not None and known_over_pilot["high"] < 1.0:
        return "Pilot-Commit ahead, also of the known-p rule"
    return "Pilot-Commit ahead; the known-p rule not separated from it"


def _over_uniform(arm: dict | None) -> str:
    if not arm:
        return "-"
    values = [arm.get("gain_speedup"), *(arm.get("gain_ci90") or [None, None])]
    if any(v is None or not np.isfinite(v) for v in values):
        return "-"
    speedup, lo, hi = values
    return f"{speedup:.2f}x ({lo:.2f}-{hi:.2f}), {arm['spend']:.2f}"


def _paired(x: dict | None) -> str:
    return "-" if x is None else f"{x['speedup']:.2f}x ({x['low']:.2f}-{x['high']:.2f})"


def render_saving_versus(root: Path) -> str:
    """Per cell of the `saving-32` maps: the default, Pilot-Commit and the known-p rule over Uniform
    (speedup, interval, share of Uniform's rollouts), Pilot-Commit over the default and the known-p
    rule over Pilot-Commit (paired, `head_to_head`), and `versus_reading`; then how often each
    reading occurs."""
    results = [load_relative(root, rel) for rel in VERSUS_MAPS]
    body, readings = [], []
    for result in results:
        runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for r in read_run_records(records_path(root / result.path)):
            runs[(r["cell"], r["method"])].append(r)
        for row in result.data["rows"]:
            key, methods = row["key"], row["methods"]
            pilot = head_to_head(runs[(key, "default")], runs[(key, "pilot-commit")])
            known = head_to_head(runs[(key, "pilot-commit")], runs[(key, "oracle-skip")])
            readings.append(versus_reading(pilot, known))
            body.append(
                (key, *(_over_uniform(methods.get(n)) for n, _ in ARMS), _paired(pilot), _paired(known), readings[-1])
            )
    counts = "; ".join(f"{r}: {readings.count(r)}" for r in dict.fromkeys(readings))
    lines = [
        "Per cell of the saving map, every arm at Uniform's tuned rate. Over Uniform: rollouts to 50/75/90% "
        "of the gain, Uniform's over the arm's (90% jackknife-t interval over the arm's paired seeds), and "
        "the arm's share of Uniform's rollouts. Head to head: the same statistic with the first arm in "
        "Uniform's place, on the seeds both ran (Pilot-Commit and the known-p rule ran the maps' 16 report "
        "seeds, the default 32). An arm is ahead where the head-to-head interval lies wholly above 1.",
        "",
        *table(
            [
                "cell",
                *(f"{label} over Uniform" for _, label in ARMS),
                "Pilot-Commit over the default",
                "known-p rule over Pilot-Commit",
                "reading",
            ],
            body,
        ),
        "",
        f"Readings over the {len(body)} cells: {counts}.",
        "",
        *(provenance([r]) for r in results),  # two maps, two commands
    ]
    return "\n".join(lines)

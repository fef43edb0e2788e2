"""Final accuracy at equal cost: a method's accuracy over the last third of its run against
Uniform's accuracy at the same cumulative rollouts, paired over seeds.

The map's ``final_gap`` compares the two arms at equal *steps*: the method's final level (mean
held-out accuracy over the last third of the run, `speedup.final_level`) minus Uniform's. A saving
method that generates a third of Uniform's rollouts has by then trained on far less, so that gap
mixes "spent less" with "learns worse". A user who pays per rollout compares at equal *cost*:

    U_s(x)   = Uniform's accuracy on seed s at x cumulative rollouts: linear interpolation of
               (0, a0_s), (R^U_s1, A^U_s1), ..., (R^U_sT, A^U_sT) (``np.interp``), held at A^U_sT
               beyond Uniform's last step (clipped to Uniform's range: a method that spends more
               than Uniform, a budget-filling one, is compared with where Uniform ended),
    d_s      = mean over the method's last-third steps t of (A^M_st - U_s(R^M_st))
             = final_level(A^M_s) - final_level(U_s(R^M_s)),
    gap      = mean_s d_s  over the paired seeds (Uniform's seed s and the method's share a problem
               instance).

The 90% interval is the jackknife-t over the paired seeds (`intervals.jackknife_t`), the map's
interval for its paired statistics, here on the difference itself (no log: a gap can be negative).
For a mean the leave-one-out values are (n mean - d_i) / (n - 1), whose jackknife standard error
is exactly s / sqrt(n), so the interval is the Student t interval on the per-seed differences: one
interval, however it is named. ``clipped`` is the share of the method's last-third steps whose
rollouts lay beyond Uniform's last step (read at Uniform's last accuracy), so the clipping is never
silent.

>>> u = {"rollouts": [10, 20, 30], "accuracy": [0.2, 0.4, 0.6], "accuracy0": 0.0}
>>> m = {"rollouts": [5, 10, 15], "accuracy": [0.1, 0.3, 0.5], "accuracy0": 0.0}
>>> [round(d, 6) for d in equal_cost_gaps([u], [m])]  # at 15 rollouts Uniform had 0.3; the method 0.5
[0.2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.intervals import jackknife_t
from adaptive_rollouts.experiments.speedup import final_level, final_steps

__all__ = ["uniform_at_cost", "equal_cost_gaps", "final_gap_equal_cost", "equal_cost_entry"]


def _curve(run: Mapping[str, Any], name: str) -> tuple[np.ndarray, np.ndarray]:
    missing = [k for k in ("rollouts", "accuracy", "accuracy0") if k not in run]
    if missing:
        raise ValueError(f"{name} run (seed {run.get('seed')}) records no {missing}")
    r, a = np.asarray(run["rollouts"], dtype=float), np.asarray(run["accuracy"], dtype=float)
    if r.size == 0 or r.shape != a.shape:
        raise ValueError(f"{name} run (seed {run.get('seed')}): rollouts {r.shape} and accuracy {a.shape} must match")
    if np.any(np.diff(r) < 0) or r[0] < 0:
        raise ValueError(f"{name} run (seed {run.get('seed')}): rollouts must be cumulative (non-decreasing, >= 0)")
    return r, a


def uniform_at_cost(uniform: Mapping[str, Any], at: Sequence[float] | np.ndarray) -> np.ndarray:
    """Uniform's accuracy at cumulative rollouts ``at``: linear between (0, accuracy0) and its
    recorded steps, held at its last accuracy beyond its last step (see the module docstring).

    >>> u = {"rollouts": [10, 20], "accuracy": [0.2, 0.4], "accuracy0": 0.1}
    >>> uniform_at_cost(u, [0, 5, 15, 40]).round(3).tolist()
    [0.1, 0.15, 0.3, 0.4]
    """
    r, a = _curve(uniform, "Uniform's")
    return np.interp(
        np.asarray(at, dtype=float), np.concatenate([[0.0], r]), np.concatenate([[uniform["accuracy0"]], a])
    )


def equal_cost_gaps(uniform: Sequence[Mapping[str, Any]], method: Sequence[Mapping[str, Any]]) -> list[float]:
    """d_s per paired seed (``uniform[i]`` pairs with ``method[i]``; see the module docstring)."""
    if len(uniform) != len(method) or not uniform:
        raise ValueError(f"need equally many paired runs, got {len(uniform)} and {len(method)}")
    out = []
    for u, m in zip(uniform, method):
        r, a = _curve(m, "the method's")
        out.append(final_level(a) - final_level(uniform_at_cost(u, r)))
    return out


def final_gap_equal_cost(
    uniform: Sequence[Mapping[str, Any]], method: Sequence[Mapping[str, Any]], level: float = 0.9
) -> dict[str, Any]:
    """{"gap", "ci" [low, high], "clipped"}: the mean of `equal_cost_gaps` over the paired seeds, its
    ``level`` jackknife-t interval (nan bounds with fewer than 3 seeds) and the share of the method's
    last-third steps read beyond Uniform's last step (see the module docstring).

    >>> u = [{"rollouts": [10, 20, 30], "accuracy": [0.2, 0.4, 0.6], "accuracy0": 0.0}] * 3
    >>> m = [{"rollouts": [5, 10, 15], "accuracy": [0.1, 0.3, x], "accuracy0": 0.0} for x in (0.4, 0.5, 0.6)]
    >>> out = final_gap_equal_cost(u, m)
    >>> round(out["gap"], 3), [round(x, 3) for x in out["ci"]], out["clipped"]
    (0.2, [0.031, 0.369], 0.0)
    """
    d = np.asarray(equal_cost_gaps(uniform, method), dtype=float)
    gap, n = float(d.mean()), d.size
    if n >= 3:
        lo, hi, _, _ = jackknife_t(gap, (d.sum() - d) / (n - 1), level)
    else:
        lo = hi = float("nan")
    beyond = [
        np.asarray(m["rollouts"], dtype=float)[final_steps(len(m["rollouts"]))] > float(u["rollouts"][-1])
        for u, m in zip(uniform, method)
    ]
    return {"gap": gap, "ci": [float(lo), float(hi)], "clipped": float(np.mean(np.concatenate(beyond)))}


def equal_cost_entry(uniform: Sequence[Mapping[str, Any]], method: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`final_gap_equal_cost` under the keys of a map's method entry: ``final_gap_equal_cost``,
    ``final_gap_equal_cost_ci90`` (90% interval) and ``equal_cost_clipped``."""
    x = final_gap_equal_cost(uniform, method, level=0.9)
    return {"final_gap_equal_cost": x["gap"], "final_gap_equal_cost_ci90": x["ci"], "equal_cost_clipped": x["clipped"]}

"""Tokens and modelled time of a method against Uniform, on paired runs of a length cell.

Each run is a map run of a length cell (`regime_map` records its ``tokens``, ``round_max_tokens``,
``truncated``, ``success_tokens`` and ``success_rollouts`` per step). The primary statistic
(`gain_speedup`: Uniform's cost to 50/75/90% of the gain over the method's) is read on three axes,
always with the same function: rollouts, generated tokens, and the modelled time of a synchronous
engine (`sim.step_time.synchronous_step_time` per step, cumulated). Per step it also compares the
modelled step time of the two engines (synchronous: rounds x longest rollout; continuous batching:
tokens / throughput, so its ratio is the ratio of tokens per step) and gives the overhead per round
at which the method's extra rounds cost what its shorter rounds save (`break_even_overhead`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval, gain_speedup
from adaptive_rollouts.experiments.intervals import INTERVAL
from adaptive_rollouts.sim.step_time import break_even_overhead, synchronous_step_time

__all__ = ["with_sync_time", "length_stats", "token_comparison"]


def with_sync_time(run: dict, per_token: float = 1.0, round_overhead: float = 0.0) -> dict:
    """The run with ``sync_time``: its cumulative modelled synchronous generation time per step."""
    steps = [
        synchronous_step_time([[m] for m in rounds], per_token, round_overhead) for rounds in run["round_max_tokens"]
    ]
    return {**run, "sync_time": np.cumsum(steps).tolist()}


def length_stats(runs: Sequence[dict]) -> dict[str, float]:
    """Measured lengths over every generated rollout of ``runs``: mean tokens per rollout, of a success
    and of a failure, their ratio, and the share cut at the cap."""
    rollouts = sum(r["rollouts"][-1] for r in runs)
    tokens = sum(r["tokens"][-1] for r in runs)
    ok_tokens = sum(sum(r["success_tokens"]) for r in runs)
    ok = sum(sum(r["success_rollouts"]) for r in runs)
    success = ok_tokens / ok if ok else float("nan")
    failure = (tokens - ok_tokens) / (rollouts - ok) if rollouts > ok else float("nan")
    return {
        "tokens_per_rollout": tokens / rollouts,
        "success_tokens": success,
        "failure_tokens": failure,
        "failure_over_success": failure / success,
        "truncated_share": sum(sum(r["truncated"]) for r in runs) / rollouts,
    }


def _per_step_mean(runs: Sequence[dict], values: Any) -> float:
    return float(np.mean([v for r in runs for v in values(r)]))


def token_comparison(
    uniform: Sequence[dict],
    method: Sequence[dict],
    fractions: Sequence[float] = FRACTIONS,
    resamples: int = 1000,
    cap: int | None = None,
    interval: str = INTERVAL,
) -> dict[str, Any]:
    """The method against Uniform (paired seed lists) on the rollout, token and synchronous-time axes
    (`gain_speedup`, 90% paired intervals by ``interval``, `gain_interval`), per-step modelled times, rounds and rollouts
    per round; with the generation ``cap``, also the share of each arm's rounds whose longest rollout
    ran to it (such a round lasts the full cap on a synchronous engine)."""
    u = [with_sync_time(r) for r in uniform]
    m = [with_sync_time(r) for r in method]
    out: dict[str, Any] = {}
    for axis in ("rollouts", "tokens", "sync_time"):
        ci = gain_interval(u, m, fractions, interval, resamples, cost=axis)
        out[axis] = {"speedup": gain_speedup(u, m, fractions, cost=axis), "ci90": [ci["low"], ci["high"]]}
    out["tokens_over_rollouts"] = out["tokens"]["speedup"] / out["rollouts"]["speedup"]

    def step_times(r: dict) -> list[float]:
        return np.diff(r["sync_time"], prepend=0.0).tolist()

    def step_tokens(r: dict) -> list[float]:
        return np.diff(r["tokens"], prepend=0.0).tolist()

    def step_rounds(r: dict) -> list[int]:
        return [len(x) for x in r["round_max_tokens"]]

    out["sync_step_time"] = {"method": _per_step_mean(m, step_times), "uniform": _per_step_mean(u, step_times)}
    out["sync_step_time"]["ratio"] = out["sync_step_time"]["method"] / out["sync_step_time"]["uniform"]
    out["step_tokens"] = {"method": _per_step_mean(m, step_tokens), "uniform": _per_step_mean(u, step_tokens)}
    # continuous batching: step time = tokens / throughput, so its ratio is the ratio of tokens per step
    out["continuous_step_time_ratio"] = out["step_tokens"]["method"] / out["step_tokens"]["uniform"]
    out["rounds_per_step"] = {"method": _per_step_mean(m, step_rounds), "uniform": _per_step_mean(u, step_rounds)}
    out["break_even_overhead"] = break_even_overhead(
        [s for r in m for s in r["round_max_tokens"]], [s for r in u for s in r["round_max_tokens"]]
    )
    # how long one of the method's rounds lasts against one of Uniform's (longest rollout per round)
    out["round_time_ratio"] = (out["sync_step_time"]["method"] / out["rounds_per_step"]["method"]) / (
        out["sync_step_time"]["uniform"] / out["rounds_per_step"]["uniform"]
    )
    out["rollouts_per_round"] = float(sum(r["rollouts"][-1] for r in m) / sum(sum(step_rounds(r)) for r in m))
    if cap is not None:
        out["rounds_at_cap"] = {
            name: float(np.mean([x >= cap for r in runs for step in r["round_max_tokens"] for x in step]))
            for name, runs in (("method", m), ("uniform", u))
        }
    out["lengths"] = length_stats(method)
    return out

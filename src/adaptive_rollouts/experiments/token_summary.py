"""Tokens and modelled time of a method against Uniform, on paired runs of a length cell.

Each run is a map run of a length cell (`regime_map` records its ``tokens``, ``round_max_tokens``,
``round_tokens``, ``truncated``, ``success_tokens``, ``success_rollouts`` and the rollouts and
tokens per class of prompt, per step). The primary statistic (`gain_speedup`: Uniform's cost to
50/75/90% of the gain over the method's) is read on several axes, always with the same function:
rollouts, generated tokens, and the modelled time of each engine of `sim.step_time.ENGINES`
(`Engine.steps_time` per step, cumulated). Per step it also compares the modelled step time of each
engine against Uniform's (over all steps, and from the second step on: the first step's rounds are
planned before any round was timed), gives the overhead per round at which a synchronous engine's
extra rounds cost what its shorter rounds save (`break_even_overhead`), and where the rollouts the
method does not generate would have fallen (`saving_composition`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval, gain_speedup
from adaptive_rollouts.experiments.intervals import INTERVAL
from adaptive_rollouts.sim.step_time import ENGINES, Engine, break_even_overhead
from adaptive_rollouts.sim.train import PROMPT_CLASSES

__all__ = [
    "time_axis",
    "SYNCHRONOUS_TIME",
    "with_engine_time",
    "length_stats",
    "saving_composition",
    "token_comparison",
]


def time_axis(engine: str) -> str:
    """The cost axis of ``engine``'s modelled time in runs and summaries.

    >>> time_axis("synchronous")
    'time:synchronous'
    """
    return f"time:{engine}"


SYNCHRONOUS_TIME = time_axis("synchronous")
"""The axis of a synchronous engine's modelled time: TRL's transformers path, one call a round."""


def with_engine_time(run: dict, engines: Mapping[str, Engine] = ENGINES) -> dict:
    """The run with ``time:<engine>``: its cumulative modelled generation time per step on each engine;
    and ``steps``, the steps it has taken (the time axis of an engine on which every step lasts the same:
    a synchronous one whose every round runs to the cap, one round a step)."""
    out = dict(run)
    out["steps"] = list(range(1, len(run["round_max_tokens"]) + 1))
    for name, engine in engines.items():
        out[time_axis(name)] = np.cumsum(engine.steps_time(run["round_max_tokens"], run["round_tokens"])).tolist()
    return out


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


def saving_composition(uniform: Sequence[dict], method: Sequence[dict]) -> dict[str, Any]:
    """Where the rollouts the method does not generate would have fallen, per step over the runs:
    Uniform's and the method's rollouts and tokens per class of prompt (hopeless, mixed, solved by
    the true p, `sim.train.prompt_class`), the method's saving per class (Uniform's minus its own),
    the saved share of Uniform's rollouts f, the mean length of a saved rollout over Uniform's mean x,
    and the per-step token-over-rollout ratio they give, (1 - f) / (1 - f x); with the x a ratio of
    ``1.2`` would need at that f, and the x were every saved rollout a hopeless prompt's.

    ``flat_rule_ratio``: the per-step ratio of a rule that saves exactly the flat prompts' rollouts
    (every hopeless and solved one) and keeps the mixed: f = 1 - N_mixed / N and f x = 1 - T_mixed / T
    (N, T: Uniform's rollouts and tokens), so (1 - f) / (1 - f x) = (T / N) / (T_mixed / N_mixed),
    Uniform's mean length over the mixed prompts'. It is 1.2 or more only where a mixed prompt's
    rollout is at least a sixth shorter than the average rollout."""

    def mean(runs: Sequence[dict], key: str) -> np.ndarray:
        return np.mean([row for r in runs for row in r[key]], axis=0)

    u_n, u_t = mean(uniform, "class_rollouts"), mean(uniform, "class_tokens")
    m_n, m_t = mean(method, "class_rollouts"), mean(method, "class_tokens")
    mu = float(u_t.sum() / u_n.sum())
    saved_n, saved_t = u_n - m_n, u_t - m_t
    f = float(saved_n.sum() / u_n.sum())
    x = float(saved_t.sum() / saved_n.sum() / mu) if saved_n.sum() > 0 else float("nan")
    hopeless = float(u_t[0] / u_n[0] / mu) if u_n[0] > 0 else float("nan")
    return {
        "classes": list(PROMPT_CLASSES),
        "uniform_rollouts": u_n.tolist(),
        "uniform_tokens": u_t.tolist(),
        "method_rollouts": m_n.tolist(),
        "method_tokens": m_t.tolist(),
        "saved_share_by_class": (saved_n / saved_n.sum()).tolist() if saved_n.sum() > 0 else [float("nan")] * 3,
        "uniform_length_by_class": (u_t / np.maximum(u_n, 1e-300) / mu).tolist(),
        "saved_share": f,
        "saved_length": x,
        "step_ratio": (1.0 - f) / (1.0 - f * x) if f * x < 1 else float("nan"),
        "length_needed": (1.0 - (1.0 - f) / 1.2) / f if f > 0 else float("nan"),
        "hopeless_length": hopeless,
        "flat_rule_ratio": float(mu / (u_t[1] / u_n[1])) if u_n[1] > 0 and u_t[1] > 0 else float("nan"),
    }


def token_comparison(
    uniform: Sequence[dict],
    method: Sequence[dict],
    fractions: Sequence[float] = FRACTIONS,
    resamples: int = 1000,
    cap: int | None = None,
    interval: str = INTERVAL,
    engines: Mapping[str, Engine] = ENGINES,
) -> dict[str, Any]:
    """The method against Uniform (paired seed lists) on the rollout, token, step and engine-time axes
    (`gain_speedup`, 90% paired intervals by ``interval``, `gain_interval`), per-step modelled times
    on each engine, rounds and rollouts per round; with the generation ``cap``, also the share of each
    arm's rounds whose longest rollout ran to it (such a round lasts the full cap on a synchronous
    engine)."""
    u = [with_engine_time(r, engines) for r in uniform]
    m = [with_engine_time(r, engines) for r in method]
    out: dict[str, Any] = {}
    for axis in ("rollouts", "tokens", "steps"):
        ci = gain_interval(u, m, fractions, interval, resamples, cost=axis)
        out[axis] = {"speedup": gain_speedup(u, m, fractions, cost=axis), "ci90": [ci["low"], ci["high"]]}
    out["tokens_over_rollouts"] = out["tokens"]["speedup"] / out["rollouts"]["speedup"]
    out["engines"] = {}
    for name in engines:
        axis = time_axis(name)
        ci = gain_interval(u, m, fractions, interval, resamples, cost=axis)

        def step_times(r: dict, axis: str = axis) -> list[float]:
            return np.diff(r[axis], prepend=0.0).tolist()

        um, mm = _per_step_mean(u, step_times), _per_step_mean(m, step_times)
        later_u = _per_step_mean(u, lambda r, f=step_times: f(r)[1:])
        later_m = _per_step_mean(m, lambda r, f=step_times: f(r)[1:])
        out["engines"][name] = {
            "speedup": gain_speedup(u, m, fractions, cost=axis),
            "ci90": [ci["low"], ci["high"]],
            "step_time": {"method": mm, "uniform": um, "ratio": mm / um},
            "later_step_ratio": later_m / later_u,  # from the second step on
        }

    def step_tokens(r: dict) -> list[float]:
        return np.diff(r["tokens"], prepend=0.0).tolist()

    def step_rounds(r: dict) -> list[int]:
        return [len(x) for x in r["round_max_tokens"]]

    out["step_tokens"] = {"method": _per_step_mean(m, step_tokens), "uniform": _per_step_mean(u, step_tokens)}
    out["rounds_per_step"] = {"method": _per_step_mean(m, step_rounds), "uniform": _per_step_mean(u, step_rounds)}
    out["break_even_overhead"] = break_even_overhead(
        [s for r in m for s in r["round_max_tokens"]], [s for r in u for s in r["round_max_tokens"]]
    )
    out["rollouts_per_round"] = float(sum(r["rollouts"][-1] for r in m) / sum(sum(step_rounds(r)) for r in m))
    if cap is not None:
        out["rounds_at_cap"] = {
            name: float(np.mean([x >= cap for r in runs for step in r["round_max_tokens"] for x in step]))
            for name, runs in (("method", m), ("uniform", u))
        }
    out["composition"] = saving_composition(uniform, method)
    out["lengths"] = length_stats(method)
    return out

"""Modelled generation time of a training step, from its rollouts' lengths: two engines.

A synchronous engine (one ``generate`` call per round, as TRL's transformers path and a batched vLLM
call without refill run) generates all rollouts of a round in lock step, so a round lasts as long as
its longest rollout, plus a fixed cost per call (prefill, scheduling, weight sync):

    T_sync = sum over rounds r of ( tau x max_i L_{r,i} + c ),

with tau the seconds per decoded token of the batch and c the overhead per round. A continuous-
batching engine (vLLM, SGLang serving a stream of requests) refills finished slots, so a step costs
its total tokens over the engine's throughput:

    T_cont = sum_{r, i} L_{r,i} / throughput.

Rounds that generated nothing are not engine calls and cost nothing. With tau = 1 and throughput = 1
both are in token-times (the time to decode one token of the batch), the unit the benchmark reports.

>>> synchronous_step_time([[3, 7, 5], [2, 4]], per_token=1.0, round_overhead=10.0)
31.0
>>> continuous_step_time([[3, 7, 5], [2, 4]], throughput=7.0)
3.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptive_rollouts.checks.validation import check_range, check_real_array

__all__ = ["synchronous_step_time", "continuous_step_time", "break_even_overhead"]


def _rounds(rounds: Sequence[Sequence[float]]) -> list[np.ndarray]:
    out = []
    for r, lengths in enumerate(rounds):
        arr = check_real_array(lengths, f"round {r} lengths")
        if arr.size and (np.any(~np.isfinite(arr)) or arr.min() < 0):
            raise ValueError(f"round {r} lengths must be finite and >= 0, got {arr[~(arr >= 0)][:5].tolist()}")
        out.append(arr)
    return out


def synchronous_step_time(
    rounds: Sequence[Sequence[float]], per_token: float = 1.0, round_overhead: float = 0.0
) -> float:
    """T_sync = sum_r (per_token x max_i L_{r,i} + round_overhead) over the rounds with rollouts."""
    tau = check_range(per_token, "per_token", 0.0)
    c = check_range(round_overhead, "round_overhead", 0.0, low_closed=True)
    return float(sum(tau * r.max() + c for r in _rounds(rounds) if r.size))


def continuous_step_time(rounds: Sequence[Sequence[float]], throughput: float = 1.0) -> float:
    """T_cont = (total tokens of every round) / throughput (tokens per second)."""
    rate = check_range(throughput, "throughput", 0.0)
    return float(sum(r.sum() for r in _rounds(rounds)) / rate)


def break_even_overhead(
    method_round_max: Sequence[Sequence[float]], uniform_round_max: Sequence[Sequence[float]], per_token: float = 1.0
) -> float:
    """The overhead per round c at which the method's mean synchronous step time equals Uniform's,
    from the longest rollout of each round of each step (both lists of steps): solves
    mean_s [tau sum_r M_sr + c R_s] = mean_s [tau sum_r U_sr + c R'_s] for c. inf when the method runs
    no more rounds than Uniform and is not slower at c = 0 (any overhead is fine), -inf when it runs no
    more rounds and is slower at c = 0 (no overhead helps it), negative when it is slower even at c = 0."""

    def mean_time_and_rounds(steps: Sequence[Sequence[float]]) -> tuple[float, float]:
        times = [synchronous_step_time([[m] for m in step], per_token) for step in steps]
        return float(np.mean(times)), float(np.mean([sum(1 for m in step if m > 0) for step in steps]))

    dm, rm = mean_time_and_rounds(method_round_max)
    du, ru = mean_time_and_rounds(uniform_round_max)
    if rm <= ru:
        return float("inf") if dm <= du else float("-inf")
    return (du - dm) / (rm - ru)

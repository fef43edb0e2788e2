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

Both are limits of one engine (`Engine`): a round of a real engine lasts at least as long as its
longest rollout (the rollout decodes one token at a time, whatever else runs) and at least its tokens
over the engine's throughput (every slot busy), so

    T_round = c + max( tau x max_i L_{r,i}, sum_i L_{r,i} / throughput ).

The synchronous engine is throughput = inf (the batch fits: TRL's transformers path, a vLLM call
whose rollouts all fit its slots, verl's one rollout call per round); continuous batching is
tau = 0, the limit where the engine is always saturated (rounds overlapping other work), since within
one step a later round waits for the rewards of the round before it. With throughput = B / tau
(B slots decoding at full speed) a round of more than B x (longest / mean length) rollouts is
throughput-bound and a smaller one latency-bound (`ENGINES`: the three the benchmark models).

>>> synchronous_step_time([[3, 7, 5], [2, 4]], per_token=1.0, round_overhead=10.0)
31.0
>>> continuous_step_time([[3, 7, 5], [2, 4]], throughput=7.0)
3.0
>>> ENGINES["slots-64"].step_time([[100] * 32, [100] * 128])  # 100, then max(100, 12800 / 64)
300.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adaptive_rollouts.checks.validation import check_range, check_real_array

__all__ = ["Engine", "ENGINES", "synchronous_step_time", "continuous_step_time", "break_even_overhead"]


def _rounds(rounds: Sequence[Sequence[float] | np.ndarray]) -> list[np.ndarray]:
    out = []
    for r, lengths in enumerate(rounds):
        arr = check_real_array(lengths, f"round {r} lengths")
        if arr.size and (np.any(~np.isfinite(arr)) or arr.min() < 0):
            raise ValueError(f"round {r} lengths must be finite and >= 0, got {arr[~(arr >= 0)][:5].tolist()}")
        out.append(arr)
    return out


@dataclass(frozen=True)
class Engine:
    """A generation engine: ``per_token`` tau (time to decode one token of one rollout; 0: no latency
    floor), ``throughput`` (tokens per unit time with every slot busy; inf: never the bound) and
    ``round_overhead`` c (per call). T_round = c + max(tau max L, sum L / throughput)."""

    per_token: float = 1.0
    throughput: float = math.inf
    round_overhead: float = 0.0

    def __post_init__(self) -> None:
        check_range(self.per_token, "per_token", 0.0, low_closed=True)
        if not self.throughput > 0:  # inf allowed: a synchronous engine
            raise ValueError(f"throughput must be > 0 (inf: no bound), got {self.throughput}")
        check_range(self.round_overhead, "round_overhead", 0.0, low_closed=True)
        if self.per_token == 0 and math.isinf(self.throughput):
            raise ValueError("an engine with per_token 0 needs a finite throughput (else a round takes no time)")

    def round_seconds(self, longest: float, tokens: float) -> float:
        """T_round = c + max(tau M, S / throughput) of a round with rollouts whose longest has M
        tokens and which has S tokens in all."""
        latency = self.per_token * float(longest) if self.per_token else 0.0
        return self.round_overhead + max(latency, float(tokens) / self.throughput)

    def round_time(self, lengths: Sequence[float] | np.ndarray) -> float:
        """T_round of one round's lengths (0 for a round that generated nothing)."""
        return self.step_time([lengths])

    def step_time(self, rounds: Sequence[Sequence[float] | np.ndarray]) -> float:
        """sum_r T_round over the rounds with rollouts."""
        return float(sum(self.round_seconds(r.max(), r.sum()) for r in _rounds(rounds) if r.size))

    def steps_time(self, longest: Sequence[Sequence[float]], tokens: Sequence[Sequence[float]]) -> list[float]:
        """T of each step from its rounds' longest rollouts and tokens (two lists of steps, each a
        list of rounds that generated rollouts, as a run records them: ``round_max_tokens``,
        ``round_tokens``)."""
        if len(longest) != len(tokens):
            raise ValueError(f"longest ({len(longest)} steps) and tokens ({len(tokens)}) differ in length")
        out = []
        for step, (m, t) in enumerate(zip(longest, tokens)):
            if len(m) != len(t):
                raise ValueError(f"step {step}: {len(m)} longest rollouts for {len(t)} rounds")
            out.append(float(sum(self.round_seconds(a, b) for a, b in zip(m, t))))
        return out


ENGINES: dict[str, Engine] = {
    "synchronous": Engine(per_token=1.0),
    "slots-64": Engine(per_token=1.0, throughput=64.0),
    "slots-16": Engine(per_token=1.0, throughput=16.0),
    "continuous": Engine(per_token=0.0, throughput=1.0),
}
"""The engines the benchmark models, in token-times: synchronous (a round lasts its longest rollout:
every rollout of the round decodes at once), 64 and 16 slots (a round lasts its longest rollout or
its tokens over 64 or 16, whichever is longer: an engine that decodes 64 or 16 long sequences at a
time at full speed, e.g. a large model whose KV cache holds few 8K-token sequences), continuous
batching (tokens / 1: no latency floor, the engine always saturated)."""


def synchronous_step_time(
    rounds: Sequence[Sequence[float]], per_token: float = 1.0, round_overhead: float = 0.0
) -> float:
    """T_sync = sum_r (per_token x max_i L_{r,i} + round_overhead) over the rounds with rollouts."""
    tau = check_range(per_token, "per_token", 0.0)
    return Engine(per_token=tau, round_overhead=round_overhead).step_time(rounds)


def continuous_step_time(rounds: Sequence[Sequence[float]], throughput: float = 1.0) -> float:
    """T_cont = (total tokens of every round) / throughput (tokens per second)."""
    rate = check_range(throughput, "throughput", 0.0)
    return Engine(per_token=0.0, throughput=rate).step_time(rounds)


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

"""The step-time model (`sim.step_time`) against hand computations, and the token comparison
(`experiments.token_summary`) on runs whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.experiments.token_summary import (
    length_stats,
    saving_composition,
    token_comparison,
    with_engine_time,
)
from adaptive_rollouts.sim.step_time import (
    ENGINES,
    Engine,
    break_even_overhead,
    continuous_step_time,
    synchronous_step_time,
)


def test_synchronous_step_time_by_hand():
    rounds = [[3, 7, 5], [2, 4]]
    assert synchronous_step_time(rounds) == 7 + 4
    assert synchronous_step_time(rounds, per_token=0.5, round_overhead=10.0) == 3.5 + 10 + 2 + 10
    assert synchronous_step_time([[3, 7, 5], [], [9]], round_overhead=1.0) == 8 + 10  # an empty round costs nothing
    assert synchronous_step_time([]) == 0.0


def test_continuous_step_time_by_hand():
    assert continuous_step_time([[3, 7, 5], [2, 4]], throughput=7.0) == 3.0
    assert continuous_step_time([[100]], throughput=50.0) == 2.0


def test_one_round_of_equal_lengths_costs_the_same_on_both_engines_at_matching_rates():
    # a batch of B rollouts of length L: sync L x tau; continuous B L / throughput, equal at throughput B / tau
    assert synchronous_step_time([[50] * 8], per_token=0.02) == pytest.approx(continuous_step_time([[50] * 8], 400.0))


def test_engine_round_time_by_hand():
    rounds = [[3, 7, 5], [2, 4]]
    # the two limits: the synchronous engine and continuous batching
    assert ENGINES["synchronous"].step_time(rounds) == synchronous_step_time(rounds) == 11.0
    assert ENGINES["continuous"].step_time(rounds) == continuous_step_time(rounds) == 21.0
    # 2 slots: max(7, 15 / 2) + max(4, 6 / 2) = 7.5 + 4, plus an overhead of 1 per round
    engine = Engine(per_token=1.0, throughput=2.0, round_overhead=1.0)
    assert engine.step_time(rounds) == 7.5 + 4 + 2
    assert engine.round_time([]) == 0.0  # a round that generated nothing is no call
    assert engine.steps_time([[7, 4], [9]], [[15, 6], [9]]) == [13.5, 10.0]
    assert ENGINES["slots-64"].round_time([8192] * 100) == pytest.approx(8192 * 100 / 64)
    with pytest.raises(ValueError, match="differ in length"):
        engine.steps_time([[7]], [[15], [6]])
    with pytest.raises(ValueError, match="step 0"):
        engine.steps_time([[7, 4]], [[15]])
    with pytest.raises(ValueError, match="throughput"):
        Engine(throughput=0.0)
    with pytest.raises(ValueError, match="finite throughput"):
        Engine(per_token=0.0)
    with pytest.raises(ValueError, match="round_overhead"):
        Engine(round_overhead=-1.0)


def test_bad_step_time_input_is_named():
    with pytest.raises(ValueError, match="round 1 lengths"):
        synchronous_step_time([[3], [-1]])
    with pytest.raises(ValueError, match="round 0 lengths"):
        continuous_step_time([[np.nan]])
    with pytest.raises(ValueError, match="per_token"):
        synchronous_step_time([[3]], per_token=0.0)
    with pytest.raises(ValueError, match="round_overhead"):
        synchronous_step_time([[3]], round_overhead=-1.0)
    with pytest.raises(ValueError, match="throughput"):
        continuous_step_time([[3]], throughput=0.0)


def test_break_even_overhead_by_hand():
    # method: two rounds of 2 (4 token-times), Uniform: one of 5; 4 + 2c = 5 + c at c = 1
    assert break_even_overhead([[2, 2]], [[5]]) == pytest.approx(1.0)
    c = break_even_overhead([[2, 2]], [[5]])
    assert synchronous_step_time([[2], [2]], round_overhead=c) == synchronous_step_time([[5]], round_overhead=c)
    assert break_even_overhead([[4, 4]], [[5]]) == pytest.approx(-3.0)  # slower even without overhead
    assert break_even_overhead([[4]], [[5]]) == np.inf  # no extra round and faster
    assert break_even_overhead([[6]], [[5]]) == -np.inf
    # means over steps: method steps (2+2, 1+1+1), Uniform (5, 4): (4+3)/2 + 2.5c = 4.5 + c -> c = 2/3
    assert break_even_overhead([[2, 2], [1, 1, 1]], [[5], [4]]) == pytest.approx(2 / 3)


def _run(acc, rollouts, tokens, rounds, ok_tokens, ok, round_tokens, classes=([4, 2, 4], [60, 20, 20])):
    return {
        "accuracy": acc,
        "accuracy0": 0.0,
        "rollouts": rollouts,
        "tokens": tokens,
        "round_max_tokens": rounds,
        "round_tokens": round_tokens,
        "success_tokens": ok_tokens,
        "success_rollouts": ok,
        "truncated": [0] * len(acc),
        "class_rollouts": [classes[0]] * len(acc),
        "class_tokens": [classes[1]] * len(acc),
    }


def test_token_comparison_on_known_runs():
    acc = [0.2, 0.4, 0.5, 0.6]
    u = _run(acc, [10, 20, 30, 40], [100, 200, 300, 400], [[10]] * 4, [20] * 4, [4] * 4, [[100]] * 4)
    # the same learning curve for half the rollouts (so 2x on rollouts), at 3x the tokens per rollout
    # (so 2/3 on tokens), in two rounds of 10 per step (so half as fast on a synchronous engine)
    m = _run(acc, [5, 10, 15, 20], [150, 300, 450, 600], [[10, 10]] * 4, [20] * 4, [2] * 4, [[75, 75]] * 4)
    out = token_comparison([u], [m], resamples=10, cap=10, interval="percentile")
    assert out["rollouts"]["speedup"] == pytest.approx(2.0)
    assert out["tokens"]["speedup"] == pytest.approx(2 / 3)
    assert out["tokens_over_rollouts"] == pytest.approx(1 / 3)
    assert out["steps"]["speedup"] == pytest.approx(1.0)  # the same curve over the steps
    engines = out["engines"]
    assert engines["synchronous"]["speedup"] == pytest.approx(0.5)
    assert engines["synchronous"]["step_time"] == pytest.approx({"method": 20.0, "uniform": 10.0, "ratio": 2.0})
    # continuous batching: tokens / 1, so the token axis again
    assert engines["continuous"]["speedup"] == pytest.approx(2 / 3)
    assert engines["continuous"]["step_time"]["ratio"] == pytest.approx(1.5)
    # 16 slots: Uniform max(10, 100 / 16) = 10; the method 2 x max(10, 75 / 16) = 20
    assert engines["slots-16"]["step_time"]["ratio"] == pytest.approx(2.0)
    assert all(e["later_step_ratio"] == pytest.approx(e["step_time"]["ratio"]) for e in engines.values())
    assert out["rounds_per_step"] == {"method": 2.0, "uniform": 1.0}
    assert out["break_even_overhead"] == pytest.approx(-10.0)
    assert out["rollouts_per_round"] == 2.5  # 20 rollouts in 8 rounds
    assert out["rounds_at_cap"] == {"method": 1.0, "uniform": 1.0}
    assert token_comparison([u], [m], resamples=10, cap=11, interval="percentile")["rounds_at_cap"]["method"] == 0.0
    timed = with_engine_time(m, {"overhead": Engine(per_token=1.0, round_overhead=1.0)})
    assert timed["time:overhead"] == [22.0, 44.0, 66.0, 88.0]
    stats = length_stats([m])
    # 20 rollouts, 600 tokens; successes 8 rollouts of 80 tokens: 10 per success, 520 / 12 per failure
    assert stats["tokens_per_rollout"] == 30.0 and stats["success_tokens"] == 10.0
    assert stats["failure_tokens"] == pytest.approx(520 / 12)


def test_saving_composition_by_hand():
    acc = [0.2, 0.4]
    # Uniform per step: 4 / 2 / 4 rollouts of 60 / 20 / 20 tokens (mean 10; hopeless 15, solved 5)
    u = _run(acc, [10, 20], [100, 200], [[10]] * 2, [0] * 2, [0] * 2, [[100]] * 2)
    m = _run(acc, [5, 10], [45, 90], [[10]] * 2, [0] * 2, [0] * 2, [[45]] * 2, ([1, 2, 2], [15, 20, 10]))
    c = saving_composition([u], [m])
    # saved 3 / 0 / 2 rollouts of 45 / 0 / 10 tokens: f = 5 / 10, x = (55 / 5) / 10
    assert c["saved_share"] == pytest.approx(0.5) and c["saved_length"] == pytest.approx(1.1)
    assert c["saved_share_by_class"] == pytest.approx([0.6, 0.0, 0.4])
    assert c["uniform_length_by_class"] == pytest.approx([1.5, 1.0, 0.5]) and c["hopeless_length"] == pytest.approx(1.5)
    # the ratio of tokens per rollout, Uniform's (10) over the method's (45 / 5 = 9)
    assert c["step_ratio"] == pytest.approx(10 / 9)
    # 1.2 needs (1 - f) / (1 - f x) = 1.2
    f, x = 0.5, c["length_needed"]
    assert (1 - f) / (1 - f * x) == pytest.approx(1.2)
    # saving exactly the flat prompts' rollouts (4 hopeless of 15, 4 solved of 5): f = 8 / 10,
    # x = (60 + 20) / 8 / 10 = 1, the ratio (1 - f) / (1 - f x) = 0.2 / 0.2: the mixed prompts' 10
    # tokens a rollout are the mean
    assert c["flat_rule_ratio"] == pytest.approx((1 - 0.8) / (1 - 0.8 * 1.0))
    u2 = _run(acc, [10, 20], [120, 240], [[10]] * 2, [0] * 2, [0] * 2, [[120]] * 2, ([4, 2, 4], [80, 20, 20]))
    # mixed 2 rollouts of 10 tokens each against a mean of 12: 12 / 10; by brute force over the step
    n, t = np.array([4, 2, 4]), np.array([80, 20, 20])
    f, fx = (n[0] + n[2]) / n.sum(), (t[0] + t[2]) / t.sum()
    assert saving_composition([u2], [u2])["flat_rule_ratio"] == pytest.approx((1 - f) / (1 - fx)) == pytest.approx(1.2)

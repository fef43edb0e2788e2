"""Completion lengths in the simulator (`sim.lengths`): the model's moments by Monte Carlo, its means
by hand, bad input, the trace's token accounting, and that lengths leave the old cells' runs exactly
as they were (against the committed saving map) and never change what a run learns."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from adaptive_rollouts.experiments.gain_speedup import gain_speedup
from adaptive_rollouts.experiments.map_run import one_run
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.sim.lengths import LengthModel, expected_length, mean_length, sample_lengths, truncated_share
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.sim.regimes import TOKEN_CELLS, Cell
from adaptive_rollouts.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "results" / "map" / "saving-flatness-a"


@pytest.mark.parametrize("mean", [300.0, 4000.0, 7000.0])
def test_sampled_lengths_match_the_exact_mean_and_truncated_share(mean):
    # hardness 1 and a failure: the mean is base x ratio, so pick base to land on ``mean``
    m = LengthModel(base=mean / LengthModel().ratio, max_tokens=8192, shape=4.0)
    n = 400_000
    x = sample_lengths(m, np.zeros(n, bool), np.ones(n), 0, np.random.default_rng(1))
    assert x.min() >= 1 and x.max() <= 8192
    exact = expected_length(m, mean)
    se = x.std() / np.sqrt(n)
    assert abs(x.mean() - exact) < 4 * se
    share = truncated_share(m, mean)
    assert abs((x == 8192).mean() - share) < 4 * np.sqrt(share * (1 - share) / n) + 1e-12
    # without a binding cap the mean is E[ceil X], within one token of the Gamma mean
    assert mean < expected_length(LengthModel(max_tokens=10**6), mean) < mean + 1


def test_mean_length_by_hand():
    model = LengthModel(base=1000.0, ratio=3.0, growth=0.5)
    success = np.array([True, False, False, False])
    hardness = np.array([1.0, 1.0, 0.0, 0.25])
    np.testing.assert_allclose(mean_length(model, success, hardness, 0), [1000, 3000, 1000, 1500])
    np.testing.assert_allclose(mean_length(model, success, hardness, 100), [1500, 4500, 1500, 2250])
    np.testing.assert_allclose(mean_length(model, success, hardness, 40), [1200, 3600, 1200, 1800])


def test_bad_length_input_is_named():
    with pytest.raises(ValueError, match="ratio"):
        LengthModel(ratio=0.5)
    with pytest.raises(ValueError, match="max_tokens"):
        LengthModel(max_tokens=0)
    with pytest.raises(ValueError, match="hardness"):
        mean_length(LengthModel(), np.array([False]), np.array([1.5]), 0)
    with pytest.raises(ValueError, match="differ in shape"):
        mean_length(LengthModel(), np.array([False, True]), np.array([0.5]), 0)
    with pytest.raises(ValueError, match="step"):
        mean_length(LengthModel(), np.array([False]), np.array([0.5]), -1)


def test_simulator_draws_one_length_per_rollout_per_round_and_keeps_rewards():
    pb = make_problem("hard-heavy", n_prompts=200, n_test=50, seed=3, length_model=LengthModel())
    plain = make_problem("hard-heavy", n_prompts=200, n_test=50, seed=3)
    sim, ref = Simulator(pb, seed=5), Simulator(plain, seed=5)
    prompts = list(range(10))
    for s in (sim, ref):
        sample = s.sampler(prompts)
        sample(np.arange(10), np.full(10, 2))
        sample(np.array([1, 4]), np.array([3, 0]))
        sample(np.array([2]), np.array([0]))  # generates nothing: no round
    rounds = sim.drain_rounds()
    assert [n.size for n, _ in rounds] == [20, 3]
    _, _, r, _ = sim.drain()
    _, _, r0, _ = ref.drain()
    np.testing.assert_array_equal(r, r0)  # the lengths' generator leaves the rewards as they are
    np.testing.assert_array_equal(np.concatenate([ok for _, ok in rounds]), r >= 1.0)
    assert ref.drain_rounds() == []
    assert np.all(np.concatenate([n for n, _ in rounds]) >= 1)


def test_old_cells_keep_their_settings_and_their_committed_runs():
    header = json.loads((ROOT / "results" / "map" / "saving-flatness-a.json").read_text())["header"]
    cell = Cell("hard-heavy", dim=16, batch_prompts=32)
    assert cell.as_dict() == header["settings"]["cells"][0]  # no length key: stored runs still resume
    committed = None
    with gzip.open(MAP.with_suffix(".runs.jsonl.gz"), "rt") as f:
        for line in f:
            r = json.loads(line)
            if (r["cell"], r["method"], r["seed"], r["lr"]) == (cell.key, "uniform", 0, 0.8):
                committed = r
                break
    assert committed is not None
    run = one_run(cell, "uniform", 0, 0.8, SAVING_MAP)
    assert run["accuracy"] == committed["accuracy"] and run["rollouts"] == committed["rollouts"]
    assert "tokens" not in run
    # the same cell with lengths: the same run to the last bit, now with its tokens
    long = one_run(Cell("hard-heavy", dim=16, batch_prompts=32, failure_ratio=4.0), "uniform", 0, 0.8, SAVING_MAP)
    assert long["accuracy"] == committed["accuracy"] and long["rollouts"] == committed["rollouts"]
    assert len(long["tokens"]) == len(long["rollouts"]) and long["tokens"][-1] > long["rollouts"][-1]


@pytest.mark.parametrize("method", ["uniform", "uniform-rounds"])
def test_lengths_never_change_what_a_run_that_does_not_weigh_them_learns(method):
    """Lengths have a generator of their own: Uniform and the null control (which never weigh
    tokens) learn exactly what they learn in the base cell. (The default weighs tokens, so its
    runs in a length cell differ from its runs in the base cell.)"""
    base = one_run(Cell("cold-start", dim=16, batch_prompts=32), method, 1, 1.6, SAVING_MAP)
    long = one_run(TOKEN_CELLS[1], method, 1, 1.6, SAVING_MAP)
    assert TOKEN_CELLS[1].key == "cold-start/d16-Q32-F2.5"
    assert long["accuracy"] == base["accuracy"] and long["rollouts"] == base["rollouts"]
    steps = len(long["rollouts"])
    assert len(long["round_max_tokens"]) == steps and all(1 <= len(r) <= 4 for r in long["round_max_tokens"])
    assert max(max(r) for r in long["round_max_tokens"]) <= LengthModel().max_tokens
    assert sum(long["success_rollouts"]) <= long["rollouts"][-1] and sum(long["success_tokens"]) < long["tokens"][-1]


def test_failures_are_longer_than_successes_in_the_length_cells():
    run = one_run(TOKEN_CELLS[3], "uniform", 2, 0.8, SAVING_MAP)  # hard-heavy, ratio 4
    ok, ok_tokens = sum(run["success_rollouts"]), sum(run["success_tokens"])
    fail = run["rollouts"][-1] - ok
    ratio = ((run["tokens"][-1] - ok_tokens) / fail) / (ok_tokens / ok)
    assert 2.0 <= ratio <= 4.0
    assert 0 < sum(run["truncated"]) < 0.2 * run["rollouts"][-1]


def test_token_axis_is_the_same_statistic():
    u = {"rollouts": [10, 20, 30, 40], "accuracy": [0.2, 0.4, 0.5, 0.6], "accuracy0": 0.0}
    m = {"rollouts": [10, 20, 30, 40], "accuracy": [0.4, 0.5, 0.6, 0.6], "accuracy0": 0.0}
    # tokens proportional to rollouts: the same speedup; the method's rollouts twice as long: half
    ut, mt = {**u, "tokens": [x * 7 for x in u["rollouts"]]}, {**m, "tokens": [x * 7 for x in m["rollouts"]]}
    assert gain_speedup([ut], [mt], cost="tokens") == pytest.approx(gain_speedup([u], [m]))
    m2 = {**m, "tokens": [x * 14 for x in m["rollouts"]]}
    assert gain_speedup([ut], [m2], cost="tokens") == pytest.approx(gain_speedup([u], [m]) / 2)
    with pytest.raises(ValueError, match="no 'tokens'"):
        gain_speedup([u], [m], cost="tokens")

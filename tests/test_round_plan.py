"""Round planning (`allocators/round_plan.py`): the time model's fit against a reference solver, the
expected tokens a pilot or a split saves against Monte Carlo, the planner's decisions and state, and
the default pricing its rounds from the times a trainer reports (`types.Draw.seconds`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import nnls

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.allocators.round_plan import (
    MIN_ROUNDS,
    WINDOW,
    RoundPlanner,
    cannot_cut,
    check_seconds,
    fit_round_time,
    pilot_saving,
    split_saving,
)
from adaptive_rollouts.sim.step_time import ENGINES
from adaptive_rollouts.state import load_state, save_state
from adaptive_rollouts.types import Draw


# ---------------------------------------------------------------- the time model
@pytest.mark.parametrize("seed", range(6))
def test_fit_round_time_is_the_non_negative_least_squares_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    m = rng.integers(500, 8193, n).astype(float)
    s = rng.integers(10_000, 900_000, n).astype(float)
    true = rng.uniform(-1, 1, 3) * np.array([5.0, 1e-3, 1e-5])  # some true terms negative: clipped at 0
    t = np.maximum(true[0] + true[1] * m + true[2] * s + rng.normal(0, 0.5, n), 0.0)
    coef = fit_round_time(t, m, s)
    x = np.column_stack([np.ones(n), m, s])
    scale = x.max(axis=0)
    ref, _ = nnls(x / scale, t)
    assert np.all(coef >= 0)
    loss = np.sum((t - x @ coef) ** 2)
    assert loss == pytest.approx(np.sum((t - (x / scale) @ ref) ** 2), rel=1e-9, abs=1e-12)


def test_fit_round_time_recovers_exact_engines():
    rng = np.random.default_rng(0)
    rounds = [rng.gamma(4.0, 800.0, int(rng.integers(20, 200))).round() + 1 for _ in range(12)]
    m = np.array([r.max() for r in rounds])
    s = np.array([r.sum() for r in rounds])
    sync = fit_round_time([ENGINES["synchronous"].round_time(r) for r in rounds], m, s)
    assert sync == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)
    cont = fit_round_time([ENGINES["continuous"].round_time(r) for r in rounds], m, s)
    assert cont == pytest.approx([0.0, 0.0, 1.0], abs=1e-9)
    with pytest.raises(ValueError, match="differ in length"):
        fit_round_time([1.0, 2.0], [1.0], [1.0, 2.0])


# ---------------------------------------------------------------- expected tokens saved
def test_pilot_and_split_savings_match_monte_carlo():
    rng = np.random.default_rng(1)
    alpha, beta = np.array([0.5, 2.0, 6.0]), np.array([3.0, 2.0, 0.7])
    fail, success = np.array([6000.0, 3000.0, 2500.0]), np.array([1500.0, 1200.0, 1000.0])
    n, m = np.array([8, 8, 12]), np.array([4, 2, 4])
    draws = 400_000
    p = rng.beta(alpha, beta, (draws, 3))
    k = rng.binomial(m, p)
    mc = np.mean(np.where(k == m, (n - m) * success, 0.0) + np.where(k == 0, (n - m) * fail, 0.0), axis=0)
    assert pilot_saving(n, m, alpha, beta, fail, success) == pytest.approx(mc, rel=0.01)
    assert pilot_saving(np.array([4]), np.array([4]), alpha[:1], beta[:1], fail[:1], success[:1]) == [0.0]
    lack, chunk = np.array([4, 6, 3]), np.array([2, 3, 2])
    succeeded = np.array([False, True, True])
    h = rng.binomial(chunk, p)
    same = np.where(succeeded, h == chunk, h == 0)
    mc = np.mean(same * (lack - chunk) * np.where(succeeded, success, fail), axis=0)
    assert split_saving(lack, chunk, alpha, beta, succeeded, fail, success) == pytest.approx(mc, rel=0.01)


# ---------------------------------------------------------------- the planner
def test_planner_prices_a_round_by_hand():
    planner = RoundPlanner()
    assert not planner.known
    # seconds = 2 + M / 1000 + S / 50000 exactly; mean M = 6500
    for t, m, s in [(12.0, 8000, 1e5), (12.0, 6000, 2e5), (16.0, 8000, 3e5), (8.0, 4000, 1e5)]:
        planner.observe_round(t, m, s)
    assert planner.known
    assert planner.round_cost() == pytest.approx(2 + 6500 / 1000)
    assert planner.cut_share == 1.0  # before any pilot: one pseudo-pilot, cut
    # pays iff b x share x tokens > c + a M_hat, i.e. tokens > 8.5 x 50000 = 425000
    assert planner.pays(425_001) and not planner.pays(424_999)
    planner.observe_pilots(9, 3)
    assert planner.cut_share == pytest.approx((3 + 1) / (9 + 1))
    planner.observe_pilots(0, 0)  # a step without pilots: the memory fades towards the prior
    assert planner.cut_share == pytest.approx((0.9 * 3 + 1) / (0.9 * 9 + 1))
    with pytest.raises(RuntimeError, match="internal error"):
        planner.observe_pilots(2, 3)


def test_planner_prices_nothing_from_too_few_rounds_zero_times_or_noise():
    planner = RoundPlanner()
    for _ in range(MIN_ROUNDS - 1):
        planner.observe_round(5.0, 8000, 1e5)
    assert not planner.known
    zero = RoundPlanner()
    for i in range(10):
        zero.observe_round(0.0, 1000 + i, 1e4 * (i + 1))
    assert not zero.known
    noise = RoundPlanner()
    rng = np.random.default_rng(0)
    for _ in range(WINDOW):  # times unrelated to the lengths: R^2 near 0
        noise.observe_round(float(rng.uniform(0.001, 0.002)), int(rng.integers(10, 20)), int(rng.integers(100, 300)))
    assert not noise.known
    assert len(noise.rounds) == WINDOW


def test_planner_state_is_exact_and_checked():
    planner = RoundPlanner()
    for t, m, s in [(12.0, 8000, 1e5), (12.0, 6000, 2e5), (16.0, 8000, 3e5)]:
        planner.observe_round(t, m, s)
    planner.observe_pilots(5, 2)
    fresh = RoundPlanner()
    fresh.load_state_dict(json.loads(json.dumps(planner.state_dict())))
    assert fresh.state_dict() == planner.state_dict()
    assert np.array_equal(fresh.coefficients, planner.coefficients) and fresh.known == planner.known
    state = planner.state_dict()
    for key, value, match in (
        ("rounds", [[1.0, -2.0, 3.0]], "rounds"),
        ("rounds", [[1.0, 2.0]], "rounds"),
        ("rounds", [[1.0, 2.0, 3.0]] * (WINDOW + 1), "at most"),
        ("cut", 6.0, "at most flat"),
        ("flat", float("nan"), "flat"),
    ):
        with pytest.raises(ValueError, match=match):
            fresh.load_state_dict({**state, key: value})
        assert fresh.state_dict() == planner.state_dict()
    with pytest.raises(ValueError, match="unknown entries"):
        fresh.load_state_dict({**state, "extra": 1})


def test_check_seconds_names_the_source():
    assert check_seconds(None) is None and check_seconds(2) == 2.0
    for bad in (-1.0, float("nan"), "x", True):
        with pytest.raises(ValueError, match="sample"):
            check_seconds(bad)


# ---------------------------------------------------------------- the default with round times
def _sampler(p, fail_len, seed, engine=None, success_len=1500):
    """Bernoulli(p) rewards; lengths Gamma around 1500 (success) and ``fail_len[i]`` (failure),
    capped at 8192; the round's time from ``engine`` (None: no time)."""
    rng = np.random.default_rng(seed)

    def sample(idx, counts):
        rewards = [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]
        lengths = [
            np.minimum(np.ceil(rng.gamma(4.0, np.where(r > 0, success_len, fail_len[i]) / 4.0)), 8192).astype(np.int64)
            for i, r in zip(idx, rewards)
        ]
        flat = np.concatenate(lengths)
        seconds = None if engine is None else ENGINES[engine].round_time(flat)
        return Draw(rewards, np.zeros(len(rewards), dtype=np.int64), lengths, seconds)

    return sample


def _steps(alloc, engine, steps=range(12), q=16, budget=128):
    """The default's rewards and rounds per step on 24 prompts (5 hopeless with long failures, 5
    solved, 14 mixed), 16 a step."""
    p = np.r_[np.full(5, 0.02), np.full(5, 0.97), np.random.default_rng(7).uniform(0.2, 0.8, 14)]
    fail = np.r_[np.full(5, 6000), np.full(19, 3000)]
    out = []
    for step in steps:
        prompts = [int(k) for k in np.random.default_rng(100 + step).choice(24, q, replace=False)]
        rewards = alloc.run(prompts, budget, _sampler(p, fail, 1000 + step, engine))
        out.append(([r.tolist() for r in rewards], alloc.last_metrics["rounds"]))
    return out


def test_the_default_timed_by_continuous_batching_decides_as_without_times():
    """Where rounds cost only their tokens, every round the default would add pays: its own rounds,
    rollout for rollout; without times it never prices a round."""
    untimed, timed = SavingProgressive(seed=0), SavingProgressive(seed=0)
    assert _steps(untimed, None) == _steps(timed, "continuous")
    assert not untimed.round_plan.known and timed.round_plan.known
    assert "round_cost" not in untimed.last_metrics and "round_cost" in timed.last_metrics


def test_the_default_timed_by_a_synchronous_engine_runs_one_round_once_rounds_are_timed():
    """A synchronous round lasts its longest rollout: a pilot's round never buys its latency back."""
    untimed, timed = _steps(SavingProgressive(seed=0), None), _steps(SavingProgressive(seed=0), "synchronous")
    assert min(r for _, r in untimed) > 1
    assert timed[0] == untimed[0]  # the first step: no round timed yet, its own rounds
    assert all(r == 1 for _, r in timed[1:])


def test_cannot_cut_needs_alike_groups_and_no_probe():
    base = dict(
        alpha=np.array([1.0, 1.0]),
        beta=np.array([5.0, 5.0]),
        target=np.array([8, 8]),
        scored=np.array([4, 4]),
        lack=np.array([4, 4]),
        cost=np.array([4.0, 4.0]),
        probed=np.array([False, False]),
    )
    assert cannot_cut(**base)
    assert cannot_cut(**{k: v[:1] for k, v in base.items()})  # one flat group is never below the average
    for key in ("alpha", "beta", "target", "scored", "lack", "cost"):
        other = {**base, key: base[key] * np.array([1, 2])}
        assert not cannot_cut(**other), key
    assert not cannot_cut(**{**base, "probed": np.array([False, True])})


def _first_steps(steps=4):
    """Counts and rounds of a fresh default without its bound per group (which would cut the flat
    pilots in round 2 whatever the rounds plan) over its first steps (12 prompts: the odd ones always
    fail, the even ones alternate), rollouts priced (no lengths)."""

    def sample(idx, counts):
        return [np.zeros(c) if i % 2 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]

    alloc = SavingProgressive(seed=0, flat_chance=None)
    out = []
    for _ in range(steps):
        rewards = alloc.run(list(range(12)), 96, sample)
        out.append(([len(r) for r in rewards], alloc.last_metrics["rounds"]))
    return out


def test_alike_flat_groups_get_all_they_lack_in_one_round(monkeypatch):
    """The first step's flat pilots (a prior that cannot tell prompts apart) are alike: none can be cut
    in any later round, so they are completed in one round; the counts are those of the halves."""
    merged = _first_steps()
    import adaptive_rollouts.allocators.saving_rounds as saving_rounds

    monkeypatch.setattr(saving_rounds, "cannot_cut", lambda *a: False)  # halves whatever they can cut
    halves = _first_steps()
    assert merged[0][0] == halves[0][0] == [8] * 12
    assert merged[0][1] == 2 and halves[0][1] == 3


def test_a_synchronous_timed_default_whose_first_step_is_alike_runs_one_round_from_the_second():
    """Two rounds in the first step (pilot, completion of the alike flat pilots) are enough to price
    a round: from the second step on, one round a step (a synchronous engine: no round pays)."""

    def sample(idx, counts):
        rewards = [np.zeros(c) if i % 2 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
        lengths = [np.full(c, 3000 if i % 2 else 1500, dtype=np.int64) for i, c in zip(idx, counts)]
        return Draw(
            rewards,
            np.zeros(len(idx), dtype=np.int64),
            lengths,
            ENGINES["synchronous"].round_time(np.concatenate(lengths)),
        )

    alloc = SavingProgressive(seed=0)
    rounds = []
    for _ in range(5):
        alloc.run(list(range(12)), 96, sample)
        rounds.append(alloc.last_metrics["rounds"])
    assert rounds == [2, 1, 1, 1, 1]
    assert alloc.round_plan.known and not alloc.round_plan.pays(1e9)


@pytest.mark.parametrize("engine", ["synchronous", "continuous"])
def test_a_default_told_that_rounds_are_timed_runs_one_round_until_two_are(engine):
    """Told before its first step (`expect_round_times`), the default generates its first steps in
    one round each until two rounds are timed; then it prices them: a synchronous engine keeps one
    round a step, continuous batching pays for the default's own rounds."""
    told = SavingProgressive(seed=0)
    told.expect_round_times()
    rounds = [r for _, r in _steps(told, engine)]
    assert rounds[:2] == [1, 1]
    if engine == "synchronous":
        assert all(r == 1 for r in rounds)
    else:
        assert max(rounds[2:]) > 1
    assert told.round_plan.known and not told.round_plan.awaiting_times
    # the announcement is not state: a default resumed from the state decides as one that was not told
    assert "announced" not in json.dumps(told.state_dict(), default=str)


def test_trainers_that_time_rounds_tell_the_default_so():
    from adaptive_rollouts.bridge.step import TrainerStep
    from adaptive_rollouts.sim.regimes import Cell
    from adaptive_rollouts.sim.train import TrainConfig, train

    for time_rounds in (False, True):
        alloc = SavingProgressive(seed=0)
        TrainerStep(alloc, time_rounds=time_rounds)
        assert alloc.round_plan.announced is time_rounds
    cell = Cell(scenario="hard-heavy", dim=8, batch_prompts=6, n_prompts=60, failure_ratio=4.0)
    for engine in (None, "synchronous"):
        alloc = SavingProgressive(seed=0)
        cfg = TrainConfig(steps=2, batch_prompts=6, budget=48, lr=0.5, grad_var_every=0, engine=engine)
        tr = train(cell.problem(0, 30), alloc, cfg)
        assert alloc.round_plan.announced is (engine is not None)
        assert (len(tr["round_max_tokens"][0]) == 1) is (engine is not None)


def test_a_resumed_timed_default_decides_exactly_as_an_uninterrupted_one(tmp_path):
    full = SavingProgressive(seed=3)
    whole = _steps(full, "slots-16", range(10))
    first = SavingProgressive(seed=3)
    assert _steps(first, "slots-16", range(5)) == whole[:5]
    save_state(tmp_path / "state", first.state_dict())
    resumed = SavingProgressive(seed=3)
    resumed.load_state_dict(load_state(tmp_path / "state"))
    assert resumed.round_plan.state_dict() == first.round_plan.state_dict()
    assert _steps(resumed, "slots-16", range(5, 10)) == whole[5:]
    assert full.round_plan.state_dict() == resumed.round_plan.state_dict()
    assert full.round_plan.known


def test_a_state_without_round_times_loads_and_a_damaged_one_is_refused_by_name():
    alloc = SavingProgressive(seed=0)
    _steps(alloc, "synchronous", range(3))
    state = alloc.state_dict()
    old = {k: v for k, v in state.items() if k != "round_plan"}
    fresh = SavingProgressive(seed=0)
    fresh.load_state_dict(old)
    assert not fresh.round_plan.known
    with pytest.raises(ValueError, match="round_plan"):
        fresh.load_state_dict({**state, "round_plan": {**state["round_plan"], "cut": -1.0}})


def test_a_bad_round_time_is_refused_naming_sample():
    def sample(idx, counts):
        return Draw([np.ones(c) for c in counts], np.zeros(len(counts), dtype=np.int64), None, -3.0)

    with pytest.raises(ValueError, match=r"sample\(\.\.\.\).*seconds"):
        SavingProgressive(seed=0).run(list(range(4)), 32, sample)


# ---------------------------------------------------------------- where the times come from
def test_the_simulator_hands_each_round_its_engines_time():
    from adaptive_rollouts.sim.lengths import LengthModel
    from adaptive_rollouts.sim.problem import make_problem
    from adaptive_rollouts.sim.simulator import Simulator, TrainConfig

    problem = make_problem(n_prompts=6, n_test=20, seed=0, length_model=LengthModel())
    timed = Simulator(problem, seed=1, engine="slots-16").sampler(list(range(6)))
    answer = timed(np.array([0, 2, 5]), np.array([3, 2, 4]))
    assert answer.seconds == ENGINES["slots-16"].round_time(np.concatenate(answer.lengths))
    plain = Simulator(problem, seed=1).sampler(list(range(6)))(np.array([0, 2, 5]), np.array([3, 2, 4]))
    assert plain.seconds is None and [r.tolist() for r in plain] == [r.tolist() for r in answer]
    with pytest.raises(ValueError, match="no length model"):
        Simulator(make_problem(n_prompts=6, n_test=20, seed=0), engine="synchronous")
    with pytest.raises(ValueError, match="engine"):
        TrainConfig(engine="warp")


def test_the_trace_counts_each_rounds_tokens_and_each_class_of_prompt():
    from adaptive_rollouts.sim.regimes import Cell
    from adaptive_rollouts.sim.train import TrainConfig, prompt_class, train

    cell = Cell(scenario="hard-heavy", dim=8, batch_prompts=6, n_prompts=60, failure_ratio=4.0)
    cfg = TrainConfig(steps=4, batch_prompts=6, budget=48, lr=0.5, grad_var_every=0, engine="synchronous")
    tr = train(cell.problem(0, 30), SavingProgressive(seed=0), cfg)
    per_step = np.diff(tr["rollouts"], prepend=0).tolist()
    assert [sum(x) for x in tr["class_rollouts"]] == per_step
    assert [sum(x) for x in tr["class_tokens"]] == [sum(x) for x in tr["round_tokens"]]
    assert [sum(x) for x in tr["round_tokens"]] == np.diff(tr["tokens"], prepend=0).tolist()
    assert [len(x) for x in tr["round_tokens"]] == [len(x) for x in tr["round_max_tokens"]]
    assert prompt_class(np.array([0.0, 0.049, 0.05, 0.95, 0.951])).tolist() == [0, 0, 1, 1, 2]


def test_the_trainer_step_times_each_round_for_the_allocator():
    import time

    from adaptive_rollouts.bridge import TrainerStep
    from adaptive_rollouts.bridge.book import Generated

    seen = []

    class Recorder:
        kind = "save"

        def run(self, prompts, budget, sample):
            for _ in range(2):
                seen.append(sample(np.arange(len(prompts)), np.ones(len(prompts), dtype=np.int64)))
            return [np.concatenate([d[i] for d in seen]) for i in range(len(prompts))]

    def generate(idx, counts):
        time.sleep(0.02)
        return Generated([[1.0] * int(c) for c in counts], [[5] * int(c) for c in counts])

    TrainerStep(Recorder(), time_rounds=True).run(["a", "b"], 4, generate)
    assert len(seen) == 2 and all(isinstance(d, Draw) and d.seconds >= 0.02 for d in seen)


def test_an_engine_model_prices_each_round_by_its_lengths_and_the_default_then_steps_in_one_round():
    """``time_rounds=seconds(longest, tokens)``: the round's seconds are the model's of its own
    completion lengths (deterministic); under a synchronous engine a round saves no time, so after two
    timed rounds every step of the default is one call; without lengths, an error naming the option."""
    from adaptive_rollouts.allocators import SavingProgressive
    from adaptive_rollouts.bridge import TrainerStep
    from adaptive_rollouts.bridge.book import Generated
    from adaptive_rollouts.sim.step_time import ENGINES

    priced = []

    def model(longest, tokens):
        priced.append((longest, tokens))
        return ENGINES["synchronous"].round_seconds(longest, tokens)

    p = np.where(np.arange(16) % 2 == 0, 0.5, 0.0)
    rng = np.random.default_rng(0)

    def generate(idx, counts):
        rewards = [(rng.random(int(c)) < p[i]).astype(float) for i, c in zip(idx, counts)]
        return Generated(rewards, [[40 + 7 * i + j for j in range(int(c))] for i, c in zip(idx, counts)])

    alloc = SavingProgressive(estimator="grpo")
    step = TrainerStep(alloc, time_rounds=model)
    calls = []
    for _ in range(8):
        before = len(priced)
        step.run(list(range(16)), 128, generate)
        calls.append(len(priced) - before)
    assert priced[0][0] == max(40 + 7 * i + j for i in range(16) for j in range(8))  # the first step: one round
    assert alloc.round_plan.known and alloc.round_plan.coefficients[2] == 0.0  # synchronous: tokens buy no time
    assert calls == [1] * 8  # announced: one round until timed; then priced: a round never pays
    with pytest.raises(ValueError, match="time_rounds: an engine model prices a round by its completion lengths"):
        TrainerStep(SavingProgressive(), time_rounds=model).run(["a", "b"], 4, lambda i, c: [[1.0] * int(n) for n in c])
    with pytest.raises(ValueError, match="time_rounds must be one of"):
        TrainerStep(SavingProgressive(), time_rounds="synchronus")
    with pytest.raises(ValueError, match="time_rounds must be true, false, an engine"):
        TrainerStep(SavingProgressive(), time_rounds=3)
    by_name = TrainerStep(SavingProgressive(), time_rounds="synchronous")  # the engine's model, by name
    assert by_name.time_rounds and by_name.round_seconds is not None and by_name.round_seconds(9.0, 99.0) == 9.0

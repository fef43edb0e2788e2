"""The saving default weighing a rollout by its expected tokens: the length belief
(`predictors/lengths.py`, `LengthBelief`), its use in `SavingProgressive`, the identical behaviour
without lengths, and the simulator's lengths reaching the allocator (`types.Draw`)."""

import json
import logging

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.predictors.lengths import LengthBelief
from adaptive_rollouts.sim.lengths import LengthModel
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.sim.simulator import Simulator
from adaptive_rollouts.state import load_state, save_state
from adaptive_rollouts.types import Draw


# ---------------------------------------------------------------- the length belief
def _brute_means(history, this_step, prompt, w, discount):
    """m_q(0), m_q(1) by replaying every observation with its discount (the definition)."""
    pooled = np.zeros(4)
    own = {}
    for step in history:
        pooled *= discount
        for key, r, n in step:
            row = np.array([np.sum(1 - r), np.sum((1 - r) * n), np.sum(r), np.sum(r * n)], dtype=float)
            pooled += row
            own[key] = discount * own[key] + row if key in own else row
    m0 = pooled[1] / pooled[0] if pooled[0] else pooled[3] / pooled[2]
    m1 = pooled[3] / pooled[2] if pooled[2] else m0
    mine = own.get(prompt, np.zeros(4)).copy()
    for key, r, n in this_step:
        if key == prompt:
            mine += [np.sum(1 - r), np.sum((1 - r) * n), np.sum(r), np.sum(r * n)]
    return (mine[1] + w * m0) / (mine[0] + w), (mine[3] + w * m1) / (mine[2] + w)


def test_length_belief_matches_replaying_the_definition():
    rng = np.random.default_rng(0)
    belief = LengthBelief(prior_weight=1.5, discount=0.8)
    history = []
    for _ in range(6):
        keys = [int(k) for k in rng.choice(10, 4, replace=False)]
        step = [(k, (rng.random(3) < 0.4).astype(float), rng.integers(1, 500, 3).astype(float)) for k in keys]
        history.append(step)
        belief.update(keys, [r for _, r, _ in step], [n for _, _, n in step])
    pilot = [(3, np.zeros(2), np.array([900.0, 800.0]))]
    for prompt in range(12):  # 10 and 11 never seen: the pooled means
        this = pilot if prompt == 3 else []
        got = belief.means([prompt], ([r for _, r, _ in this], [n for _, _, n in this]) if this else None)
        want = _brute_means(history, this, prompt, 1.5, 0.8)
        assert np.allclose([got[0][0], got[1][0]], want)
    p = np.array([0.25])
    fail, success = belief.means([3])
    assert belief.rollout_tokens([3], p)[0] == pytest.approx(0.25 * success[0] + 0.75 * fail[0])
    before = belief.means([3])
    belief.rollout_tokens([3], p, ([np.zeros(2)], [np.array([900, 800])]))
    assert np.array_equal(belief.means([3])[0], before[0])  # this step's pilot is not kept


def test_length_belief_state_is_exact_and_checked():
    empty = LengthBelief()
    fresh = LengthBelief(prior_weight=5.0)
    fresh.load_state_dict(json.loads(json.dumps(empty.state_dict())))  # nothing seen yet
    assert fresh.state_dict() == empty.state_dict() and not fresh.known
    belief = LengthBelief()
    belief.update(["a", 7], [np.array([1.0, 0.0]), np.array([0.0])], [np.array([10, 900]), np.array([4000])])
    state = json.loads(json.dumps(belief.state_dict()))
    fresh = LengthBelief()
    fresh.load_state_dict(state)
    assert fresh.state_dict() == belief.state_dict()
    for key, value, match in (
        ("stats", [[1.0, -2.0, 0.0, 0.0]] * 2, "stats"),
        ("stats", [[0.0, 5.0, 0.0, 0.0]] * 2, "tokens without rollouts"),
        ("pooled", [1.0, float("nan"), 1.0, 1.0], "pooled"),
        ("discount", 0.0, "discount"),
        ("keys", ["a", "a"], "duplicate"),
    ):
        with pytest.raises(ValueError, match=match):
            fresh.load_state_dict({**state, key: value})
        assert fresh.state_dict() == belief.state_dict()


# ---------------------------------------------------------------- the default with lengths
def _sampler(p, fail_len, success_len=100, seed=0, lengths="all"):
    """Bernoulli(p) rewards; failures of prompt i are ``fail_len[i]`` tokens long, successes
    ``success_len``. ``lengths``: "all" (a Draw with every length), "none" (a plain list),
    "partial" (a Draw whose first prompt's lengths are unknown)."""
    rng = np.random.default_rng(seed)

    def sample(idx, counts):
        rewards = [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]
        if lengths == "none":
            return rewards
        known = [np.where(r > 0, success_len, fail_len[i]).astype(np.int64) for i, r in zip(idx, rewards)]
        if lengths == "partial":
            known[0] = None
        return Draw(rewards, np.zeros(len(rewards), dtype=np.int64), known)

    return sample


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("budget", [64, 96, 200])
def test_without_lengths_the_default_decides_exactly_as_by_rollouts(seed, budget, caplog):
    """Plain lists, and steps whose lengths are known for only some rollouts, give the very same
    counts and rewards (the rollouts-only rule), and the partial lengths are said once."""
    p = np.random.default_rng(seed).beta(0.4, 0.6, 24)
    fail = np.full(24, 4000)
    plain, partial = SavingProgressive(seed=seed), SavingProgressive(seed=seed)
    with caplog.at_level(logging.WARNING):
        for step in range(12):
            prompts = [int(k) for k in np.random.default_rng(100 + step).choice(24, 16, replace=False)]
            a = plain.run(prompts, budget, _sampler(p, fail, seed=step, lengths="none"))
            b = partial.run(prompts, budget, _sampler(p, fail, seed=step, lengths="partial"))
            assert [r.tolist() for r in a] == [r.tolist() for r in b]
            assert "cost_unit" not in partial.last_metrics
    assert not partial.lengths.known
    assert sum("missing for some rollouts" in r.getMessage() for r in caplog.records) == 1


def _pair_rollouts(lengths: str) -> np.ndarray:
    """Prompts 0 and 1 both succeed with chance 0.1 (mostly flat groups), 0's failures running to
    the 8,192-token cap and 1's as short as a success; 2..15 succeed half the time. The rollouts 0
    and 1 got over steps 10-39 of four seeded runs."""
    p = np.r_[0.1, 0.1, np.full(14, 0.5)]
    fail = np.r_[8192, 100, np.full(14, 100)]
    total = np.zeros(2, dtype=np.int64)
    for seed in range(4):
        alloc = SavingProgressive(seed=seed)
        for step in range(40):
            rewards = alloc.run(list(range(16)), 128, _sampler(p, fail, seed=1000 * seed + step, lengths=lengths))
            if step >= 10:
                total += [rewards[0].size, rewards[1].size]
    return total


def test_a_prompt_whose_failures_run_to_the_cap_is_given_up_before_an_equally_flat_short_one():
    """Two prompts alike in everything but the length of their failures: by rollouts neither is
    worth less than the other, by tokens the one whose failures run to the cap costs far more for
    the same signal, so it is skipped and cut first and gets a small share of what the short one
    gets."""
    long, short = _pair_rollouts("all")
    assert long < 0.25 * short


def test_a_resumed_default_keeps_its_length_belief_exactly(tmp_path):
    """Saved to a file between steps (`state.save_state`), loaded into a fresh allocator: the same
    counts and the same length belief afterwards."""
    p = np.random.default_rng(3).beta(0.4, 0.6, 16)
    fail = np.random.default_rng(4).integers(100, 8192, 16)
    a = SavingProgressive(seed=2)
    for step in range(5):
        a.run(list(range(16)), 64, _sampler(p, fail, seed=step))
    assert a.last_metrics["cost_unit"] == "tokens"
    b = SavingProgressive(seed=2)
    save_state(tmp_path / "alloc.npz", a.state_dict(), format="npz")
    b.load_state_dict(load_state(tmp_path / "alloc.npz"))
    for step in range(5, 9):
        counts = [[r.size for r in x.run(list(range(16)), 64, _sampler(p, fail, seed=step))] for x in (a, b)]
        assert counts[0] == counts[1]
    assert a.lengths.state_dict() == b.lengths.state_dict()


def test_a_state_without_lengths_loads_and_a_damaged_one_is_refused_by_name():
    p = np.random.default_rng(3).beta(0.4, 0.6, 8)
    a = SavingProgressive(seed=0)
    a.run(list(range(8)), 32, _sampler(p, np.full(8, 900)))
    state = a.state_dict()
    old = {k: v for k, v in state.items() if k != "lengths"}  # saved before lengths were weighed
    b = SavingProgressive(seed=0)
    b.load_state_dict(old)
    assert not b.lengths.known
    before = repr(a.state_dict())
    bad = {**state, "lengths": {**state["lengths"], "pooled": [1.0, -1.0, 0.0, 0.0]}}
    with pytest.raises(ValueError, match="lengths"):
        a.load_state_dict(bad)
    assert repr(a.state_dict()) == before


# ---------------------------------------------------------------- the simulator's lengths
def test_the_simulator_hands_the_allocator_the_lengths_of_the_rollouts_it_drew():
    model = LengthModel(ratio=3.0)
    sim = Simulator(make_problem(n_prompts=6, n_test=20, seed=0, length_model=model), seed=1)
    answer = sim.sampler(list(range(6)))(np.array([0, 2, 5]), np.array([3, 0, 4]))
    assert isinstance(answer, Draw) and answer.unscored.tolist() == [0, 0, 0]
    ((lengths, success),) = sim.drain_rounds()
    assert np.array_equal(np.concatenate(answer.lengths), lengths)
    assert [len(x) for x in answer.lengths] == [len(r) for r in answer] == [3, 0, 4]
    assert np.array_equal(np.concatenate(list(answer)) >= 1.0, success)
    plain = Simulator(make_problem(n_prompts=6, n_test=20, seed=0), seed=1).sampler(list(range(6)))
    again = plain(np.array([0, 2, 5]), np.array([3, 0, 4]))
    assert type(again) is list  # no length model: the plain list, as before
    assert [r.tolist() for r in again] == [r.tolist() for r in answer]  # and the very same rewards

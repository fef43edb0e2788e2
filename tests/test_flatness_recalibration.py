"""The recalibration behind `FlatnessPredictor` (`predictors/recalibration.py`): the online beta
calibration of P(all-equal), the Beta matched to a chance (against brute force), the batched
`OnlineLogistic`, and the recalibrated belief on a pool no source can tell apart."""

import numpy as np
import pytest
from scipy.special import expit

from adaptive_rollouts.objectives.beta import all_equal_beta
from adaptive_rollouts.predictors.calibration import calibration_scores
from adaptive_rollouts.predictors.flatness import STRENGTHS, TEMPERS, FlatnessPredictor
from adaptive_rollouts.predictors.probe import OnlineLogistic
from adaptive_rollouts.predictors.recalibration import (
    MAX_STRENGTH,
    MIN_STRENGTH,
    AllEqualCalibration,
    match_all_equal,
)
from adaptive_rollouts.state import load_state, save_state


def test_all_equal_chance_falls_with_strength_and_rises_away_from_one_half():
    """The two monotonicities `match_all_equal` bisects on, on a dense grid."""
    s = np.exp(np.linspace(np.log(MIN_STRENGTH), np.log(MAX_STRENGTH), 400))
    for m in (0.01, 0.2, 0.5, 0.77, 0.999):
        for n in (2, 3, 8, 32):
            prob = all_equal_beta(m * s, (1 - m) * s, np.full(s.size, n))[0]
            assert np.all(np.diff(prob) <= 1e-12)
            assert prob[0] > 0.99 and prob[-1] == pytest.approx(m**n + (1 - m) ** n, abs=5e-3)
    far = np.linspace(0.0, 0.499, 300)
    for strength in (0.01, 1.0, 50.0, MAX_STRENGTH):
        prob = all_equal_beta((0.5 + far) * strength, (0.5 - far) * strength, np.full(far.size, 8))[0]
        assert np.all(np.diff(prob) >= -1e-12)


def test_match_all_equal_agrees_with_brute_force():
    rng = np.random.default_rng(0)
    mean, target, n = rng.uniform(0.02, 0.98, 300), rng.uniform(0.05, 0.99, 300), rng.choice([2, 4, 8, 16], 300)
    a, b = match_all_equal(mean, target, n)
    got = all_equal_beta(a, b, n)[0]
    grid = np.exp(np.linspace(np.log(MIN_STRENGTH), np.log(MAX_STRENGTH), 20001))
    for i in range(300):
        reach = all_equal_beta(mean[i] * grid, (1 - mean[i]) * grid, np.full(grid.size, n[i]))[0]
        if reach[-1] <= target[i]:  # reachable at this mean: the mean is kept, the strength found
            assert a[i] / (a[i] + b[i]) == pytest.approx(mean[i], rel=1e-9)
            assert got[i] == pytest.approx(target[i], abs=1e-9)
            brute = grid[np.argmin(np.abs(reach - target[i]))]
            assert a[i] + b[i] == pytest.approx(brute, rel=2e-3)
        else:  # not reachable: the strongest belief, its mean moved toward 1/2 until it is
            assert a[i] + b[i] == pytest.approx(MAX_STRENGTH)
            moved = a[i] / (a[i] + b[i])
            assert abs(moved - 0.5) < abs(mean[i] - 0.5) and (moved - 0.5) * (mean[i] - 0.5) >= 0
            floor = all_equal_beta([0.5 * MAX_STRENGTH], [0.5 * MAX_STRENGTH], [n[i]])[0][0]
            assert got[i] == pytest.approx(max(target[i], floor), abs=1e-9)
    a, b = match_all_equal([0.3, 0.3], [1.0, 0.0], [8, 8])  # beyond either end: the bounds
    assert a[0] + b[0] == pytest.approx(MIN_STRENGTH) and a[1] / (a[1] + b[1]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="prob must lie"):
        match_all_equal([0.5], [1.5], [8])
    with pytest.raises(ValueError, match="n must be whole numbers >= 2"):
        match_all_equal([0.5], [0.5], [1])


def test_batched_online_logistic_is_independent_models_side_by_side():
    rng = np.random.default_rng(1)
    batch = OnlineLogistic(2, forget=0.9, batch=3, initial_mean=np.array([0.5, -1.0]))
    single = [OnlineLogistic(2, forget=0.9, initial_mean=np.array([0.5, -1.0])) for _ in range(3)]
    for _ in range(5):
        z = np.concatenate([np.ones((3, 20, 1)), rng.normal(size=(3, 20, 1))], axis=-1)
        s, n = rng.integers(0, 5, (3, 20)).astype(float), np.full((3, 20), 4.0)
        batch.update(z, s, n)
        for k, model in enumerate(single):
            model.update(z[k], s[k], n[k])
    m, v = batch.predict(z)
    for k, model in enumerate(single):
        assert batch.mean[k] == pytest.approx(model.mean, rel=1e-10)
        assert m[k] == pytest.approx(model.predict(z[k])[0], rel=1e-10)
        assert v[k] == pytest.approx(model.predict(z[k])[1], rel=1e-10)
    with pytest.raises(ValueError, match=r"inputs must be \[3, rows, 2\]"):
        batch.predict(z[0])
    with pytest.raises(ValueError, match="initial_mean"):
        OnlineLogistic(2, initial_mean=np.zeros(3))


def test_beta_calibration_starts_as_the_identity_and_recovers_a_distortion():
    cal = AllEqualCalibration(2, forget=1.0)
    raw = np.array([[0.1, 0.5, 0.9], [0.2, 0.7, 0.99]])
    assert cal.predict(raw) == pytest.approx(raw)
    rng = np.random.default_rng(2)
    truth = np.array([0.8, 0.4, 1.5])  # an overconfident chance at one end, underconfident at the other
    for _ in range(300):
        p = rng.uniform(0.01, 0.99, (2, 200))
        c = expit(truth[0] + truth[1] * np.log(p) - truth[2] * np.log1p(-p))
        y = (rng.random(200) < c[0]).astype(float)  # one set of events, both maps see it
        cal.update(np.stack([p[0], p[0]]), y)
    assert cal.model.mean[0] == pytest.approx(truth, abs=0.1)
    p = rng.uniform(0.01, 0.99, 20000)
    c = expit(truth[0] + truth[1] * np.log(p) - truth[2] * np.log1p(-p))
    got = cal.predict(np.stack([p, p]))[0]
    assert calibration_scores(got, (rng.random(p.size) < c).astype(float))["ece"] < 0.02  # Monte Carlo
    with pytest.raises(ValueError, match=r"prob must be \[2 maps"):
        cal.predict(np.ones(3))


def _step(model, p, rng, view):
    prompts = list(range(p.size))
    model.observe_policy(prompts, view[:, None])
    rewards = [rng.binomial(1, x, 8).astype(float) for x in p]
    model.update(prompts, rewards)
    return rewards


def test_a_pool_no_source_tells_apart_is_recalibrated_and_the_mean_kept():
    """p at 0 or 1 with chance 0.45 each, in between otherwise, and a policy view that is noise: no
    candidate's mean says which prompts are all-equal, so the recalibrated chance must say how often
    groups are; the belief keeps the candidate's mean."""
    rng = np.random.default_rng(3)
    q = 200
    model = FlatnessPredictor(history=None)
    for _ in range(40):
        kind = rng.random(q)
        p = np.where(kind < 0.45, 1e-3, np.where(kind < 0.9, 1 - 1e-3, rng.uniform(0.3, 0.7, q)))
        _step(model, p, rng, rng.normal(size=q))
    view = rng.normal(size=q)
    model.observe_policy(range(q), view[:, None])
    prob, sd = model.all_equal(range(q), 8)
    kind = rng.random((400, q))
    p = np.where(kind < 0.45, 1e-3, np.where(kind < 0.9, 1 - 1e-3, rng.uniform(0.3, 0.7, (400, q))))
    share = np.mean([(k == 0) | (k == 8) for k in rng.binomial(8, p)])
    assert prob.mean() == pytest.approx(share, abs=0.05) and np.all(sd >= 0)
    a, b = model.belief(range(q))
    cand_a, cand_b = model._candidates(list(range(q)))
    i, j = model._best()
    assert a / (a + b) == pytest.approx(cand_a[i, j] / (cand_a[i, j] + cand_b[i, j]), rel=1e-9)
    assert all_equal_beta(a, b, np.full(q, 8))[0] == pytest.approx(prob)
    a1, b1 = model.belief(range(q), n=1)  # a group of one: the candidate itself
    assert np.array_equal(a1, cand_a[i, j]) and np.array_equal(b1, cand_b[i, j])
    with pytest.raises(ValueError, match="n must be whole"):
        model.belief(range(q), n=2.5)


def test_a_resumed_predictor_continues_bit_for_bit_through_a_state_file(tmp_path):
    rng = np.random.default_rng(4)
    p = rng.beta(0.3, 0.3, 32)
    views = [np.log(p / (1 - p)) + rng.normal(0, 1.0, 32) for _ in range(10)]
    draws = [np.random.default_rng(10 + t) for t in range(10)]
    first = FlatnessPredictor()
    for t in range(10):
        _step(first, p, draws[t], views[t])
        if t == 5:
            save_state(tmp_path / "belief.safetensors", first.state_dict())
    second = FlatnessPredictor()
    second.load_state_dict(load_state(tmp_path / "belief.safetensors"))
    draws = [np.random.default_rng(10 + t) for t in range(10)]
    for t in range(6, 10):
        _step(second, p, draws[t], views[t])
    for model in (first, second):
        model.observe_policy(range(32), views[0][:, None])
    assert np.array_equal(first.belief(range(32))[0], second.belief(range(32))[0])
    assert np.array_equal(first.calibration.model.mean, second.calibration.model.mean)
    assert first.group_size == second.group_size == 8
    state = first.state_dict()
    bad = {**state, "calibration": {**state["calibration"], "maps": 3}}
    before = repr(second.state_dict())
    with pytest.raises(ValueError, match="maps"):
        second.load_state_dict(bad)
    assert repr(second.state_dict()) == before
    old = {k: v for k, v in state.items() if k not in ("calibration", "group_size")}
    second.load_state_dict(old)  # a state from before the recalibration: an untrained one
    assert second.group_size is None and second.calibration.maps == len(STRENGTHS) * len(TEMPERS)

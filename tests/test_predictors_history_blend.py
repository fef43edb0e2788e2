"""GaussianProcess's last-visit blend: next-visit error once a prompt has history, on a simulator
trace where p is extreme per prompt (partly invisible to the features) and prompts recur."""

import numpy as np
import pytest

from adaptive_rollouts.predictors import GaussianProcess, WindowedMean
from adaptive_rollouts.predictors.history_blend import LastVisitBlend
from adaptive_rollouts.predictors.synthetic import evaluate
from adaptive_rollouts.sim.regimes import Cell
from adaptive_rollouts.sim.traces import training_trace


@pytest.fixture(scope="module")
def trace():
    return training_trace(Cell("pareto", dim=16, batch_prompts=16, n_prompts=96), seed=0, steps=60)


def test_blend_beats_the_plain_gp_and_the_last_visit(trace):
    plain = evaluate(GaussianProcess(trace.table, history_blend=False), trace, revisits_only=True)
    blended_gp = GaussianProcess(trace.table)
    blended = evaluate(blended_gp, trace, revisits_only=True)
    last = evaluate(WindowedMean(1), trace, revisits_only=True)
    # the default (absolute-error blend, split by unanimous last visits): the point error of the
    # best history-only predictor or lower, and a lower log-loss than it
    assert blended["mae"] <= last["mae"] and blended["mae"] < 0.85 * plain["mae"]
    assert blended["log_loss"] < last["log_loss"]
    assert np.isfinite(blended_gp.blend.strength(unanimous=True))  # history was worth weighting here
    # the log-loss criterion keeps the mean calibrated: lower log-loss, higher point error here
    by_log_loss = evaluate(GaussianProcess(trace.table, blend_criterion="log-loss"), trace, revisits_only=True)
    assert by_log_loss["log_loss"] <= blended["log_loss"] and by_log_loss["mae"] >= blended["mae"]
    assert by_log_loss["log_loss"] <= plain["log_loss"]


def test_split_by_unanimous_last_visit_beats_one_strength(trace):
    split = evaluate(GaussianProcess(trace.table), trace, revisits_only=True)
    one = GaussianProcess(trace.table)
    one.blend = LastVisitBlend(split_unanimous=False)
    single = evaluate(one, trace, revisits_only=True)
    assert split["mae"] < single["mae"]


def test_blend_keeps_the_model_where_it_is_right():
    rng = np.random.default_rng(0)
    blend = LastVisitBlend(criterion="log-loss")
    p = rng.uniform(0.2, 0.8, 50)
    keys = list(range(50))
    for _ in range(20):  # the model knows p exactly; a visit's mean is noisy (4 rollouts)
        s = rng.binomial(4, p).astype(float)
        blend.observe(keys, s, np.full(50, 4.0), p)
    assert blend.strength() >= 16.0
    mean, var = blend.adjust(keys, p, np.full(50, 0.01))
    mixed = (blend._last(keys)[0] % 4) != 0  # last visit neither all-fail nor all-pass
    if np.isinf(blend.strength()):
        np.testing.assert_array_equal(mean[mixed], p[mixed])
    assert np.all((var > 0) & (var < 0.25))


def test_blend_formula_by_hand_and_state_round_trip():
    blend = LastVisitBlend(strengths=(2.0,))
    blend.observe(["a", "b"], np.array([3.0, 0.0]), np.array([4.0, 0.0]), np.array([0.5, 0.5]))
    mean, var = blend.adjust(["a", "b"], np.array([0.2, 0.2]), np.array([0.05, 0.05]))
    assert mean[0] == pytest.approx((2 * 0.2 + 3) / (2 + 4))
    assert var[0] == pytest.approx(mean[0] * (1 - mean[0]) / 7)
    assert (mean[1], var[1]) == (0.2, 0.05)  # "b" had zero rollouts: not a visit
    clone = LastVisitBlend(strengths=(2.0,))
    clone.load_state_dict(blend.state_dict())
    np.testing.assert_array_equal(clone.adjust(["a"], np.array([0.2]), np.array([0.05]))[0], mean[:1])
    # a state saved before the split (one score per strength, no flag) still loads, unsplit
    legacy = {k: v for k, v in blend.state_dict().items() if k != "split_unanimous"}
    legacy["scores"] = np.zeros(1)
    old = LastVisitBlend(strengths=(2.0,))
    old.load_state_dict(legacy)
    assert not old.split_unanimous and old.scores.shape == (1, 1)
    with pytest.raises(ValueError, match="strengths"):
        LastVisitBlend(strengths=(0.0,))
    with pytest.raises(ValueError, match="criterion"):
        LastVisitBlend(criterion="mse")
    with pytest.raises(ValueError, match="shape"):
        clone.load_state_dict({**blend.state_dict(), "scores": np.zeros(3)})


def test_gp_state_round_trip_keeps_the_blend(trace):
    gp = GaussianProcess(trace.table)
    for step in trace.steps[:20]:
        gp.update(list(step.indices), step.rewards)
    clone = GaussianProcess(trace.table)
    clone.load_state_dict(gp.state_dict())
    keys = list(trace.steps[20].indices)
    np.testing.assert_allclose(clone.predict(keys).mean, gp.predict(keys).mean)
    assert clone.blend.strength(True) == gp.blend.strength(True)
    assert clone.blend.strength(False) == gp.blend.strength(False)
    np.testing.assert_array_equal(clone.blend.scores, gp.blend.scores)


def test_each_group_gets_its_own_strength():
    """Prompts whose last visit was unanimous and persist get the history; mixed ones, where the
    model knows p, keep the model."""
    rng = np.random.default_rng(1)
    blend = LastVisitBlend()
    dead, live = [f"d{i}" for i in range(20)], [f"l{i}" for i in range(20)]
    p_live = rng.uniform(0.3, 0.7, 20)
    for _ in range(30):
        s_live = rng.binomial(8, p_live).astype(float)
        blend.observe(
            dead + live,
            np.concatenate([np.zeros(20), s_live]),
            np.full(40, 8.0),
            np.concatenate([np.full(20, 0.3), p_live]),  # the model is wrong on dead, right on live
        )
    assert blend.strength(unanimous=True) <= 1.0
    assert blend.strength(unanimous=False) >= 8.0
    mean, _ = blend.adjust(dead, np.full(20, 0.3), np.full(20, 0.01))
    assert np.all(mean < 0.05)

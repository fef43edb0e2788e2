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


def test_blend_beats_the_plain_gp_and_keeps_the_best_log_loss(trace):
    plain = evaluate(GaussianProcess(trace.table, history_blend=False), trace, revisits_only=True)
    blended_gp = GaussianProcess(trace.table)
    blended = evaluate(blended_gp, trace, revisits_only=True)
    last = evaluate(WindowedMean(1), trace, revisits_only=True)
    assert blended["mae"] < 0.85 * plain["mae"]
    assert blended["log_loss"] <= plain["log_loss"] and blended["log_loss"] < last["log_loss"]
    assert np.isfinite(blended_gp.blend.strength)  # history was worth weighting here
    # the absolute-error criterion trades log-loss for point accuracy on these extreme p
    by_abs = evaluate(GaussianProcess(trace.table, blend_criterion="abs"), trace, revisits_only=True)
    assert by_abs["mae"] <= blended["mae"] and by_abs["log_loss"] < last["log_loss"]


def test_blend_keeps_the_model_where_it_is_right():
    rng = np.random.default_rng(0)
    blend = LastVisitBlend()
    p = rng.uniform(0.2, 0.8, 50)
    keys = list(range(50))
    for _ in range(20):  # the model knows p exactly; a visit's mean is noisy (4 rollouts)
        s = rng.binomial(4, p).astype(float)
        blend.observe(keys, s, np.full(50, 4.0), p)
    assert blend.strength >= 16.0
    mean, var = blend.adjust(keys, p, np.full(50, 0.01))
    if np.isinf(blend.strength):
        np.testing.assert_array_equal(mean, p)
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
    assert clone.blend.strength == gp.blend.strength

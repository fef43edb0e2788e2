"""metrics.step_metrics against hand computations."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.metrics import group_has_signal, step_metrics
from adaptive_rollouts.types import Prediction


def test_binary_batch_by_hand():
    prompts = ["a", "b", "c", "d", "e"]
    counts = [4, 0, 3, 1, 2]
    rewards = [np.array([1.0, 0.0, 1.0, 1.0]), np.zeros(0), np.ones(3), np.zeros(1), np.zeros(2)]
    m = step_metrics(prompts, counts, rewards)
    assert m["num_prompts"] == 5 and m["rollouts_spent"] == 10
    assert m["skipped"] == 1 and m["singletons"] == 1
    assert m["zero_variance_groups"] == 3  # c all-correct, d singleton, e all-wrong
    assert m["signal_groups"] == 1 and m["effective_rollouts"] == 4
    assert m["effective_fraction"] == pytest.approx(0.4)
    assert m["solve_all"] == 1 and m["solve_none"] == 2
    assert m["mean_reward"] == pytest.approx(6 / 10)
    assert m["count_min"] == 1 and m["count_max"] == 4 and m["count_mean"] == pytest.approx(2.5)
    assert m["allocation_histogram"] == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}
    assert m["brier"] is None and m["allocator_wall_time_s"] is None


def test_graded_rewards_and_tolerance():
    rewards = [np.array([0.5, 0.5 + 1e-10]), np.array([0.2, 0.6, 1.0]), np.array([0.0, 0.0])]
    m = step_metrics(["a", "b", "c"], [2, 3, 2], rewards)
    assert m["zero_variance_groups"] == 2  # a is flat within tol
    assert m["signal_groups"] == 1 and m["effective_rollouts"] == 3
    assert m["solve_all"] == 0 and m["solve_none"] == 1
    m_strict = step_metrics(["a", "b", "c"], [2, 3, 2], rewards, tol=0.0)
    assert m_strict["signal_groups"] == 2
    assert group_has_signal(np.array([0.0, 1.0])) and not group_has_signal(np.array([1.0]))


def test_brier_by_hand():
    pred = Prediction(np.array([0.8, 0.1, 0.5]), np.zeros(3))
    rewards = [np.array([1.0, 0.0]), np.zeros(0), np.array([1.0, 1.0, 0.0])]
    m = step_metrics(["a", "b", "c"], [2, 0, 3], rewards, prediction=pred, wall_time_s=0.25)
    per_rollout = [(0.8 - 1) ** 2, 0.8**2, 0.25, 0.25, 0.25]
    assert m["brier"] == pytest.approx(np.mean(per_rollout))
    assert m["brier_group"] == pytest.approx(np.mean([(0.8 - 0.5) ** 2, (0.5 - 2 / 3) ** 2]))
    assert m["predicted_success"] == pytest.approx((0.8 * 2 + 0.5 * 3) / 5)
    assert m["observed_success"] == pytest.approx(3 / 5)
    assert m["allocator_wall_time_s"] == 0.25


def test_nothing_spent():
    m = step_metrics(["a"], [0], [np.zeros(0)], prediction=Prediction(np.array([0.5]), np.zeros(1)))
    assert m["rollouts_spent"] == 0 and m["skipped"] == 1 and m["effective_fraction"] == 0.0
    assert np.isnan(m["mean_reward"]) and m["brier"] is None


def test_metrics_are_json_able():
    import json

    m = step_metrics(
        ["a", "b"],
        [2, 3],
        [np.array([0.0, 1.0]), np.ones(3)],
        prediction=Prediction(np.array([0.5, 0.9]), np.zeros(2)),
        wall_time_s=0.1,
    )
    back = json.loads(json.dumps(m))
    assert back["allocation_histogram"] == {"2": 1, "3": 1}


@pytest.mark.parametrize(
    "counts, rewards, match",
    [
        ([2, 1], [np.zeros(2), np.zeros(2)], "has 2 rewards, expected 1"),
        ([2], [np.zeros(2), np.zeros(2)], "counts must be 1-D"),
        ([2, 2], [np.zeros(2)], "2 prompts"),
        ([2, 2], [np.zeros(2), np.array([np.nan, 0.0])], "NaN"),
        ([2, -1], [np.zeros(2), np.zeros(0)], ">= 0"),
        ([2.5, 2], [np.zeros(2), np.zeros(2)], "integers"),
    ],
)
def test_bad_input(counts, rewards, match):
    with pytest.raises(ValueError, match=match):
        step_metrics(["a", "b"], counts, rewards)


def test_prediction_shape_checked():
    with pytest.raises(ValueError, match="prediction.mean"):
        step_metrics(["a"], [1], [np.ones(1)], prediction=Prediction(np.ones(2), np.zeros(2)))

"""The calibration benchmark's chance after a flat pilot (`benchmarks/flatness_predictors.py`):
which groups it scores and that each chance is the belief's, checked by Monte Carlo."""

from pathlib import Path

import numpy as np
import pytest

from adaptive_rollouts.embeddings import FeatureTable

ROOT = Path(__file__).resolve().parents[1]


def test_after_a_flat_pilot_each_chance_is_the_beliefs_by_monte_carlo(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from flatness_predictors import PILOT, PREDICTORS, PredictorSet

    rng = np.random.default_rng(0)
    prompts = list(range(5))
    table = FeatureTable(prompts, rng.normal(size=(5, 4)))
    predictors = PredictorSet(table, seed=0)
    warm = [rng.binomial(1, 0.2, 8).astype(float) for _ in prompts]
    predictors.observe_policy(prompts, rng.normal(size=(5, 3)))
    predictors.all_equal(prompts, np.full(5, 8))
    predictors.update(prompts, warm)
    predictors.observe_policy(prompts, rng.normal(size=(5, 3)))
    predictors.all_equal(prompts, np.full(5, 8))
    groups = [
        np.zeros(6),  # a flat pilot of failures, repeated: scored, outcome 1
        np.array([1.0, 1.0, 0.0, 1.0]),  # a flat pilot of successes, not repeated: scored, outcome 0
        np.array([0.0, 1.0, 0.0, 0.0]),  # the pilot varies: not scored
        np.ones(PILOT),  # nothing past the pilot: not scored
        np.array([0.5, 0.5, 0.5]),  # a graded pilot: the bound never cuts it, not scored
    ]
    got = predictors.after_pilot(groups)
    assert got["outcome"].tolist() == [1.0, 0.0]
    for name in PREDICTORS:
        a, b = predictors._betas[name]
        for row, (i, up, rest) in enumerate([(0, False, 4), (1, True, 2)]):
            s = PILOT if up else 0
            p = rng.beta(a[i] + s, b[i] + PILOT - s, 400_000)
            mc = np.mean(p**rest if up else (1 - p) ** rest)
            assert got[name][row] == pytest.approx(mc, abs=0.01), name


def test_successes_pair_each_rollout_with_its_prompts_mean(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from flatness_predictors import PREDICTORS, PredictorSet

    rng = np.random.default_rng(1)
    table = FeatureTable(list(range(3)), rng.normal(size=(3, 4)))
    predictors = PredictorSet(table, seed=0)
    predictors.observe_policy([0, 1, 2], rng.normal(size=(3, 2)))
    predictors.all_equal([0, 1, 2], np.full(3, 4))
    got = predictors.successes([np.array([1.0, 0.0]), np.array([0.5, 1.0]), np.ones(3)])  # the graded one left out
    assert got["outcome"].tolist() == [1.0, 0.0, 1.0, 1.0, 1.0]
    for name in PREDICTORS:
        a, b = predictors._betas[name]
        mean = a / (a + b)
        assert got[name].tolist() == pytest.approx([mean[0]] * 2 + [mean[2]] * 3)

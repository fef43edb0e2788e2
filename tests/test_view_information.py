"""The measuring instrument of `benchmarks/view_information.py`: its batch ridge logistic regression
against brute force, and its predictors on a synthetic run where the view knows p."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import expit, log_expit

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def vi():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("view_information")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _objective(w, x, k, n, ridge):
    m = w[0] + x @ w[1:]
    return -(k @ log_expit(m) + (n - k) @ log_expit(-m)) + 0.5 * ridge * (w[1:] @ w[1:])


def test_fit_logistic_is_the_penalised_maximum(vi):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    n = np.full(40, 8.0)
    k = rng.binomial(8, expit(0.5 + x @ np.array([1.0, -0.5, 0.0]))).astype(float)
    for ridge in (0.1, 10.0):
        w = vi.fit_logistic(x, k, n, ridge)
        grad = approx_fprime(w, _objective, 1e-6, x, k, n, ridge)
        assert np.abs(grad).max() < 1e-3  # stationary, and the objective is convex: the minimum
        # no point nearby is lower
        for _ in range(20):
            assert _objective(w, x, k, n, ridge) <= _objective(w + rng.normal(0, 1e-2, 4), x, k, n, ridge)
    # a stronger ridge shrinks the weights (not the intercept)
    assert np.linalg.norm(vi.fit_logistic(x, k, n, 100.0)[1:]) < np.linalg.norm(vi.fit_logistic(x, k, n, 0.1)[1:])


def test_all_equal_at_is_the_binomial_chance(vi):
    w = np.array([0.0, 1.0])
    x = np.array([[-2.0], [0.0], [3.0]])
    p = expit(x[:, 0])
    got = vi.all_equal_at(w, x, np.array([4.0, 4.0, 8.0]))
    assert got == pytest.approx(np.array([p[0] ** 4 + (1 - p[0]) ** 4, 0.125, p[2] ** 8 + (1 - p[2]) ** 8]))


def test_the_refit_and_the_other_runs_rank_a_view_that_knows_p(vi):
    rng = np.random.default_rng(1)

    def run():
        steps, q = 8, 16
        logit = rng.choice([-4.0, 0.0, 4.0], size=(steps, q))  # never, half, always solved
        view = np.stack([logit + rng.normal(0, 0.3, logit.shape), rng.normal(size=logit.shape)], axis=-1)
        k = rng.binomial(8, expit(logit)).astype(float)
        return {
            "view": view.reshape(-1, 2),
            "successes": k.ravel(),
            "trials": np.full(k.size, 8.0),
            "step": np.repeat(np.arange(steps), q),
            "outcome": ((k == 0) | (k == 8)).astype(float).ravel(),
        }

    from adaptive_rollouts.predictors.calibration import auroc

    train, test = [run() for _ in range(3)], run()
    late = test["step"] >= 2
    refit = vi.refit_within(test, 0.1)
    assert np.all(refit[test["step"] == 0] == 0.5)  # nothing seen before the first step
    assert auroc(refit[late], test["outcome"][late]) > 0.8
    assert auroc(vi.fitted_on(train, test, 0.1), test["outcome"]) > 0.8

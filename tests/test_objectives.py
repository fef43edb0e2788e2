"""Variance formulas against Monte Carlo of the actual estimators.

The estimator: g_hat = (1/n) sum_i A_i z_i with the advantages A_i computed from simulated rewards
and score vectors z_i ~ N(0, s^2 I_d) drawn independently of the rewards. Var = E|g_hat|^2 / d.
"""

import zlib

import numpy as np
import pytest

from adaptive_rollouts.objectives import (
    bernoulli_variance,
    drgrpo_variance,
    grpo_variance,
    grpo_variance_graded,
    rloo_variance,
    variance,
    variance_table,
)

GROUPS, DIMS, SCORE_SD = 200_000, 2, 0.7


def advantages(r: np.ndarray, estimator: str, eps: float = 0.0) -> np.ndarray:
    """Reference advantages on [M, n] reward groups (plain numpy, independent of the library)."""
    n = r.shape[1]
    centred = r - r.mean(axis=1, keepdims=True)
    if estimator == "drgrpo":
        return centred
    if estimator == "rloo":
        return r - (r.sum(axis=1, keepdims=True) - r) / (n - 1)
    if estimator == "grpo":
        sd = r.std(axis=1, ddof=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = centred / (sd + eps)
        return np.where(sd > 1e-12, out, 0.0) if eps == 0.0 else out
    raise AssertionError(estimator)


def monte_carlo_variance(rewards: np.ndarray, estimator: str, rng, eps: float = 0.0):
    """(variance estimate, its standard error)."""
    a = advantages(rewards, estimator, eps)
    n = rewards.shape[1]
    z = rng.normal(0.0, SCORE_SD, size=(rewards.shape[0], n, DIMS))
    g = np.einsum("mn,mnd->md", a, z) / n
    per_group = (g**2).mean(axis=1)
    return per_group.mean(), per_group.std() / np.sqrt(per_group.size)


def binary_rewards(rng, p, n, low=0.0, high=1.0):
    return np.where(rng.random((GROUPS, n)) < p, high, low)


CASES = [(0.3, 6), (0.1, 3), (0.5, 2), (0.8, 8), (0.05, 12)]


@pytest.mark.parametrize("p,n", CASES)
@pytest.mark.parametrize("estimator", ["drgrpo", "rloo", "grpo"])
def test_binary_formulas_match_monte_carlo(estimator, p, n):
    rng = np.random.default_rng(zlib.crc32(f"{estimator}-{p}-{n}".encode()))
    r = binary_rewards(rng, p, n)
    mc, se = monte_carlo_variance(r, estimator, rng)
    s2 = SCORE_SD**2
    exact = {
        "drgrpo": drgrpo_variance(n, bernoulli_variance(p), s2),
        "rloo": rloo_variance(n, bernoulli_variance(p), s2),
        "grpo": grpo_variance(p, n, s2),
    }[estimator]
    assert se < 0.006 * mc  # the sample is large enough for a 2% check to be meaningful
    assert mc == pytest.approx(float(exact), rel=0.02)


@pytest.mark.parametrize("estimator", ["drgrpo", "rloo"])
def test_methods_scale_plus_minus_one(estimator):
    """The VIP paper (Props 4.2, 4.3) uses rewards in {-1, +1}: 4 s^2 p(1-p) (n-1)/n^2 and 4 s^2 p(1-p)/(n-1)."""
    p, n = 0.3, 6
    rng = np.random.default_rng(7)
    mc, _ = monte_carlo_variance(binary_rewards(rng, p, n, -1.0, 1.0), estimator, rng)
    s2 = SCORE_SD**2
    methods = 4 * s2 * p * (1 - p) * ((n - 1) / n**2 if estimator == "drgrpo" else 1 / (n - 1))
    assert mc == pytest.approx(methods, rel=0.02)
    assert float(variance(estimator, n, reward_var=bernoulli_variance(p, -1, 1), score_var=s2)) == pytest.approx(
        methods, rel=1e-12
    )


@pytest.mark.parametrize("p,n,eps", [(0.3, 4, 0.3), (0.5, 3, 1.0), (0.1, 6, 0.05)])
def test_grpo_with_epsilon_matches_monte_carlo(p, n, eps):
    rng = np.random.default_rng(11)
    mc, _ = monte_carlo_variance(binary_rewards(rng, p, n), "grpo", rng, eps=eps)
    exact = float(grpo_variance(p, n, SCORE_SD**2, eps=eps))
    assert mc == pytest.approx(exact, rel=0.02)
    # and eps visibly matters at this size, so the test can tell the formulas apart
    assert abs(exact - float(grpo_variance(p, n, SCORE_SD**2))) > 0.05 * exact


LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize("n", [2, 5])
@pytest.mark.parametrize("estimator", ["drgrpo", "rloo", "grpo"])
def test_graded_rewards_match_monte_carlo(estimator, n):
    pi = np.array([0.3, 0.1, 0.2, 0.1, 0.3])
    rng = np.random.default_rng(23 + n)
    r = rng.choice(LEVELS, p=pi, size=(GROUPS, n))
    mc, _ = monte_carlo_variance(r, estimator, rng)
    reward_var = float((pi * LEVELS**2).sum() - (pi * LEVELS).sum() ** 2)
    s2 = SCORE_SD**2
    exact = {
        "drgrpo": drgrpo_variance(n, reward_var, s2),
        "rloo": rloo_variance(n, reward_var, s2),
        "grpo": grpo_variance_graded(n, pi, s2),
    }[estimator]
    assert mc == pytest.approx(float(exact), rel=0.02)


def test_closed_forms_and_edges():
    assert float(drgrpo_variance(1, 0.25)) == 0.0  # one rollout: advantage identically 0
    assert float(grpo_variance(0.0, 5)) == 0.0 and float(grpo_variance(1.0, 5)) == 0.0
    assert float(grpo_variance(0.3, 1)) == 0.0
    # binary graded == binary
    assert float(grpo_variance_graded(4, [0.7, 0.3])) == pytest.approx(float(grpo_variance(0.3, 4)))
    with pytest.raises(ValueError, match="n >= 2"):
        rloo_variance(1, 0.25)
    with pytest.raises(ValueError, match="eps"):
        grpo_variance(0.3, 4, eps=-1.0)


def test_variance_table_shapes_and_infeasible_entries():
    p = np.array([0.2, 0.5])
    t = variance_table("drgrpo", p, upper=6, lower=3)
    assert t.shape == (2, 7)
    assert np.isinf(t[:, :3]).all()
    assert t[1, 4] == pytest.approx(0.25 * 3 / 16)
    t = variance_table("rloo", p, upper=4, lower=1)
    # a 1-rollout group (no baseline, no gradient) is a last resort: its no-signal price plus a
    # penalty above any difference between allocations without one
    assert (t[:, 1] >= 1.0 + 2 * t[:, 2:].max(axis=1).sum()).all()
    t = variance_table("grpo", p, upper=4, lower=2)
    # GRPO: the variance, plus an all-equal group (no gradient) priced as a skipped prompt (1/4)
    from adaptive_rollouts.objectives import mixed_probability

    assert t[0, 3] == pytest.approx(float(grpo_variance(0.2, 3) + 0.25 * (1 - mixed_probability(0.2, 3))))
    t = variance_table("rloo", p, weights=[1.0, 2.0], upper=4, allow_skip=True, skip_cost=0.5)
    assert t[:, 0].tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="skip_cost"):
        variance_table("rloo", p, upper=4, allow_skip=True)
    with pytest.raises(ValueError, match="success_prob"):
        variance_table("grpo", weights=[1.0], upper=4)
    with pytest.raises(ValueError, match="objective"):
        variance_table("ppo", p, upper=4)


def test_docstring_examples():
    import doctest
    import importlib

    names = ["objectives." + m for m in ("variance", "aggregation", "beta", "improvement")]
    names += ["solvers." + m for m in ("table", "allocate", "kkt")]
    for name in names:
        module = importlib.import_module("adaptive_rollouts." + name)
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__

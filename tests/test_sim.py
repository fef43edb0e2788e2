"""Simulator: determinism, exact policy gradient, advantages, aggregation, oracles, theory."""

import numpy as np
import pytest

from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.sim import (
    OracleAllocator,
    TrainConfig,
    aggregation_weights,
    group_advantages_np,
    make_problem,
    policy_gradient,
    train,
)
from adaptive_rollouts.sim.estimators import expected_gradient
from adaptive_rollouts.sim.oracle import fill_allocate
from adaptive_rollouts.sim.problem import SCENARIOS
from adaptive_rollouts.sim.theory import monte_carlo_variance, variance_formula, vigor_speedup
from adaptive_rollouts.solvers import allocate


def _truth(pb):
    return lambda ps: (pb.success(np.array(ps)), pb.reward_variance(np.array(ps)))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_problem_deterministic_and_valid(scenario):
    a = make_problem(scenario, n_prompts=300, n_test=50, seed=3)
    b = make_problem(scenario, n_prompts=300, n_test=50, seed=3)
    c = make_problem(scenario, n_prompts=300, n_test=50, seed=4)
    for name in ("features", "offsets", "rewards", "lengths", "test_features"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.offsets, c.offsets)
    assert a.rewards.min() >= 0 and a.rewards.max() == 1.0
    assert np.all((a.rewards == 1.0).sum(axis=1) == 1)  # one fully correct answer
    p = a.success()
    assert np.all((p > 0) & (p < 1))


def test_training_deterministic_under_seed():
    cfg = TrainConfig(steps=15, batch_prompts=16, budget=128, optimizer="sgd", lr=300.0, grad_var_every=5, seed=2)
    pb = make_problem("bimodal", n_prompts=200, n_test=50, seed=0)
    t1 = train(pb, OracleAllocator(_truth(pb)), cfg)
    t2 = train(pb, OracleAllocator(_truth(pb)), cfg)
    assert t1["accuracy"] == t2["accuracy"] and t1["probe_var"] == t2["probe_var"]
    t3 = train(pb, OracleAllocator(_truth(pb)), TrainConfig(**{**cfg.__dict__, "seed": 3}))
    assert t1["accuracy"] != t3["accuracy"]


def test_training_learns_and_spends_budget():
    pb = make_problem("hard-heavy", n_prompts=400, n_test=200, seed=0)
    tr = train(
        pb,
        Uniform(),
        TrainConfig(steps=40, batch_prompts=32, budget=256, optimizer="sgd", lr=1000.0, grad_var_every=0),
    )
    assert tr["rollouts"] == [256 * (i + 1) for i in range(40)]
    assert tr["accuracy"][-1] > tr["accuracy0"] + 0.15


def test_exact_gradient_matches_finite_differences():
    pb = make_problem("graded", n_prompts=50, n_test=5, seed=1)
    rng = np.random.default_rng(0)
    W = rng.normal(size=pb.W.shape)
    g = expected_gradient(pb.features, pb.probs(W=W), pb.rewards)
    h = 1e-6
    for i, k in [(0, 0), (3, 2), (15, 5)]:
        E = np.zeros_like(W)
        E[i, k] = h
        fd = (pb.success(W=W + E).mean() - pb.success(W=W - E).mean()) / (2 * h)
        assert abs(fd - g[i, k]) < 1e-7


def test_policy_gradient_of_log_softmax_matches_finite_differences():
    pb = make_problem("bimodal", n_prompts=20, n_test=5, seed=0)
    W = np.random.default_rng(1).normal(size=pb.W.shape)
    q, a = np.array([0, 3, 3, 7]), np.array([1, 0, 5, 2])
    coef = np.array([0.5, -1.0, 2.0, 0.3])
    g = policy_gradient(pb.features[q], pb.probs(q, W), a, coef)

    def f(W):
        return float(np.sum(coef * np.log(pb.probs(q, W)[np.arange(q.size), a])))

    h = 1e-6
    for i, k in [(0, 1), (5, 0), (15, 5)]:
        E = np.zeros_like(W)
        E[i, k] = h
        assert abs((f(W + E) - f(W - E)) / (2 * h) - g[i, k]) < 1e-6


def test_rloo_sample_gradient_is_unbiased_under_prompt_mean():
    pb = make_problem("graded", n_prompts=6, n_test=5, seed=0)
    pb.W = np.random.default_rng(2).normal(size=pb.W.shape)
    rng = np.random.default_rng(0)
    n, reps = 4, 10000
    q = np.repeat(np.tile(np.arange(6), reps), n)
    group = np.repeat(np.arange(6 * reps), n)
    a, r = pb.sample(q, rng)
    adv = group_advantages_np(r, group, "rloo")
    w = aggregation_weights(group, pb.lengths[q, a], "prompt-mean", q.size, pb.max_length)
    g = policy_gradient(pb.features[q], pb.probs(q), a, w * adv)
    exact = expected_gradient(pb.features, pb.probs(), pb.rewards)
    assert np.abs(g - exact).max() < 0.1 * np.abs(exact).max()


def test_advantages_hand_computed():
    r = np.array([1.0, 0.0, 1.0, 5.0, 0.0, 0.0, 1.0, 0.0])
    g = np.array([0, 0, 0, 1, 2, 2, 3, 3])
    np.testing.assert_allclose(group_advantages_np(r, g, "rloo"), [0.5, -1, 0.5, 0, 0, 0, 1, -1])
    np.testing.assert_allclose(group_advantages_np(r, g, "drgrpo"), [1 / 3, -2 / 3, 1 / 3, 0, 0, 0, 0.5, -0.5])
    s = np.sqrt(1 / 3)  # unbiased std of (1, 0, 1)
    np.testing.assert_allclose(group_advantages_np(r, g, "grpo")[:3], np.array([1 / 3, -2 / 3, 1 / 3]) / (s + 1e-6))
    with pytest.raises(ValueError, match="estimator"):
        group_advantages_np(r, g, "ppo")
    with pytest.raises(ValueError, match="NaN"):
        group_advantages_np(np.array([np.nan, 1.0]), np.array([0, 0]))


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_advantages_match_torch_implementation(estimator):
    torch = pytest.importorskip("torch")
    from adaptive_rollouts.advantages import group_advantages

    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 9, size=40)
    group = np.repeat(np.arange(40), sizes)
    perm = rng.permutation(group.size)
    group = group[perm]
    r = np.where(rng.random(group.size) < 0.5, rng.random(group.size), 0.0)
    r[group < 5] = 1.0  # some zero-variance groups
    ours = group_advantages_np(r, group, estimator)
    theirs = group_advantages(torch.tensor(r), torch.tensor(group), estimator).numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-9)


def test_aggregation_weights():
    g = np.array([0, 0, 0, 1, 2, 2])
    L = np.array([1, 2, 3, 4, 5, 6])
    np.testing.assert_allclose(aggregation_weights(g, L, "prompt-mean", 6, 10), [1 / 9] * 3 + [1 / 3] + [1 / 6] * 2)
    np.testing.assert_allclose(aggregation_weights(g, L, "seq-mean", 6, 10), 1 / (6 * L))
    np.testing.assert_allclose(aggregation_weights(g, L, "token-mean", 6, 10), np.full(6, 1 / 21))
    np.testing.assert_allclose(aggregation_weights(g, L, "constant", 8, 10), np.full(6, 1 / 80))
    with pytest.raises(ValueError, match="aggregation"):
        aggregation_weights(g, L, "sum", 6, 10)


def test_oracle_allocations():
    p = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
    prompts = list(range(p.size))
    for objective, expected in (("rloo", [4, 7, 10, 11, 12, 10, 6, 4]), ("drgrpo", [4, 7, 10, 12, 12, 10, 5, 4])):
        oracle = OracleAllocator(lambda ps: (p[ps], p[ps] * (1 - p[ps])), objective=objective, lower=4, upper=12)
        assert oracle.plan(prompts, 64).counts.tolist() == expected
        assert allocate(p * (1 - p), 64, 4, 12, objective).tolist() == expected  # the library's solver
    n = fill_allocate(p * (1 - p), 40, 16)
    assert n.tolist() == [0, 0, 8, 16, 16, 0, 0, 0]  # tie p=.2 vs .8: stable order
    assert fill_allocate(p * (1 - p), 33, 16).sum() == 33
    with pytest.raises(ValueError, match="budget"):
        OracleAllocator(lambda ps: (p[ps], p[ps]), lower=2, upper=4).plan(prompts, 8)


def test_oracle_allocator_spends_budget_and_skips_in_fill_mode():
    pb = make_problem("bimodal", n_prompts=200, n_test=5, seed=0)
    idx = list(range(64))
    for mode in ("vip", "fill"):
        n = OracleAllocator(_truth(pb), mode=mode).plan(idx, 512).counts
        assert n.sum() == 512
    n = OracleAllocator(_truth(pb), mode="fill").plan(idx, 512).counts
    assert (n == 0).sum() == 64 - 16
    var = pb.reward_variance(np.array(idx))
    assert var[n > 0].min() >= var[n == 0].max()


def test_unknown_prompt_raises_keyerror():
    from adaptive_rollouts.sim import Simulator

    sim = Simulator(make_problem("graded", n_prompts=10, n_test=5))
    with pytest.raises(KeyError, match="unknown prompts"):
        sim.truth([3, 12])


@pytest.mark.parametrize("estimator,p,n", [("drgrpo", 0.3, 6), ("rloo", 0.3, 6), ("rloo", 0.1, 2), ("grpo", 0.3, 4)])
def test_variance_formulas_by_monte_carlo(estimator, p, n):
    mc, se = monte_carlo_variance(p, n, estimator, draws=200_000, seed=1)
    assert abs(mc - variance_formula(p, n, estimator)) < 4 * se


def test_variance_formula_hand_values():
    assert variance_formula(0.3, 6, "drgrpo") == pytest.approx(4 * 0.21 * 5 / 36)
    assert variance_formula(0.3, 6, "rloo") == pytest.approx(4 * 0.21 / 5)
    assert variance_formula(0.5, 2, "grpo") == pytest.approx(0.25 * 0.5, rel=1e-5)


def test_vigor_speedup_formula():
    # k -> infinity: gamma alpha^(1-1/k) -> alpha gamma: no speedup; k = 2 by hand.
    assert abs(vigor_speedup(1e9) - 1.0) < 1e-6
    eta = (1 + 2**0.5 + 2 + 2**1.5) / 4
    assert abs(vigor_speedup(2.0) - eta ** (1 / 3)) < 1e-12

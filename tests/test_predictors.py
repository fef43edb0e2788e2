"""Predictors against hand computations and brute-force references; learning, state, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import expit as sigmoid

from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.predictors import CumulativeMean, DiscountedBeta, GaussianProcess, PaperGP, Ridge, WindowedMean
from adaptive_rollouts.predictors._common import logistic_normal_moments
from adaptive_rollouts.predictors.gaussian_process import laplace_site
from adaptive_rollouts.predictors.synthetic import evaluate, synthetic_trace
from adaptive_rollouts.state import load_state, save_state
from adaptive_rollouts.types import Prediction, Predictor


def _table(n=20, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    return FeatureTable([f"q{i}" for i in range(n)], rng.standard_normal((n, dim)))


def _all(table):
    return {
        "PaperGP": PaperGP(table),
        "GaussianProcess": GaussianProcess(table, n_features=32),
        "DiscountedBeta": DiscountedBeta(),
        "WindowedMean": WindowedMean(window=2),
        "Ridge": Ridge(table),
        "CumulativeMean": CumulativeMean(),
    }


def _random_steps(keys, n_steps=6, batch=5, seed=1):
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(n_steps):
        chosen = [keys[i] for i in rng.choice(len(keys), batch, replace=False)]
        steps.append((chosen, [rng.integers(0, 2, rng.integers(0, 9)).astype(float) for _ in chosen]))
    return steps


# ---- id-based baselines vs hand computation -------------------------------------------------------
def test_cumulative_mean_by_hand():
    pred = CumulativeMean(prior_mean=0.3)
    pred.update(["a", "b"], [np.array([1.0, 0.0, 1.0]), np.array([])])
    pred.update(["a"], [np.array([0.5, 0.5])])  # graded
    out = pred.predict(["a", "b", "c"])
    np.testing.assert_allclose(out.mean, [3.0 / 5.0, 0.3, 0.3])
    np.testing.assert_allclose(out.var, [0.6 * 0.4 / 5, 1 / 12, 1 / 12])


def test_windowed_mean_by_hand():
    pred = WindowedMean(window=2)
    history = [[1, 1, 1], [0], [0, 1], [1, 1, 1, 1]]
    for r in history:
        pred.update(["a"], [np.array(r, dtype=float)])
    # last two visits: [0, 1] and [1, 1, 1, 1]
    np.testing.assert_allclose(pred.predict(["a"]).mean, [5 / 6])
    pred.update(["a"], [np.array([])])  # no rollouts: not a visit
    np.testing.assert_allclose(pred.predict(["a"]).mean, [5 / 6])


def test_discounted_beta_by_hand():
    lam, a0, b0 = 0.7, 2.0, 3.0
    pred = DiscountedBeta(discount=lam, prior_alpha=a0, prior_beta=b0)
    a, b = a0, b0
    for r in ([1, 0, 1], [1, 1], [0, 0, 0, 0]):
        pred.update(["q"], [np.array(r, dtype=float)])
        a = lam * a + (1 - lam) * a0 + sum(r)
        b = lam * b + (1 - lam) * b0 + len(r) - sum(r)
    out = pred.predict(["q", "unseen"])
    np.testing.assert_allclose(out.mean, [a / (a + b), a0 / (a0 + b0)])
    np.testing.assert_allclose(out.var[0], a * b / ((a + b) ** 2 * (a + b + 1)))


# ---- PaperGP vs dense GP ----------------------------------------------------------------------------
def test_paper_gp_matches_dense_recursive_gp():
    table = _table(20, 4, seed=3)
    gp = PaperGP(table, prior_mean=-1.0, chunk_size=7)  # small chunks exercise the chunked update
    x = table.vectors
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    h = np.median(d[np.triu_indices(20, 1)])
    assert gp.bandwidth == pytest.approx(h)
    k = np.exp(-(d**2) / (2 * h * h))
    m = np.full(20, -1.0)
    for prompts, rewards in _random_steps(table.keys, n_steps=5, batch=6, seed=4):
        gp.update(prompts, rewards)
        b = np.array([int(p[1:]) for p, r in zip(prompts, rewards) if len(r)])
        rate = np.array([r.mean() for r in rewards if len(r)])
        g_hat = np.log(np.clip(rate, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(rate, 1e-6, 1 - 1e-6))
        kbb = k[np.ix_(b, b)] + 1e-4 * np.eye(len(b))
        m = m + k[:, b] @ np.linalg.solve(kbb, g_hat - m[b])
        out = gp.predict(table.keys)
        np.testing.assert_allclose(out.mean, sigmoid(m), rtol=1e-7, atol=1e-9)
        s = 1 - np.einsum("ij,ji->i", k[:, b], np.linalg.solve(kbb, k[b, :]))
        p = sigmoid(m)
        np.testing.assert_allclose(out.var, np.minimum((p * (1 - p)) ** 2 * np.maximum(s, 0), p * (1 - p)), atol=1e-9)


def test_paper_gp_pool_from_encoder_and_unknown_prompt():
    table = _table(6)
    with pytest.raises(ValueError, match="pool"):
        PaperGP(_EncoderOnly(table))
    gp = PaperGP(_EncoderOnly(table), pool=table.keys[:4])
    with pytest.raises(KeyError, match="q5"):
        gp.predict(["q0", "q5"])


class _EncoderOnly:
    """An Encoder that is not a FeatureTable (and may lie about its dimension)."""

    def __init__(self, table, dim=None, extra=0):
        self.table, self.dim, self.extra = table, dim or table.dim, extra

    def encode(self, prompts):
        v = self.table.encode(prompts)
        return np.hstack([v, np.zeros((len(v), self.extra))]) if self.extra else v


# ---- Ridge vs closed form -----------------------------------------------------------------------------
def test_ridge_matches_closed_form():
    table = _table(20, 3, seed=5)
    model = Ridge(table, alpha=0.5, prior_mean=-1.0, clip=1e-3)
    rows, ys = [], []
    for prompts, rewards in _random_steps(table.keys, n_steps=4, batch=8, seed=6):
        model.update(prompts, rewards)
        for p, r in zip(prompts, rewards):
            if len(r):
                rows.append(np.append(table.encode([p])[0], 1.0))
                rate = np.clip(r.mean(), 1e-3, 1 - 1e-3)
                ys.append(np.log(rate / (1 - rate)) + 1.0)
    z, y = np.array(rows), np.array(ys)
    penalty = np.diag([0.5, 0.5, 0.5, 0.0])
    w = np.linalg.solve(z.T @ z + penalty + 1e-9 * np.eye(4) * (np.arange(4) == 3), z.T @ y)
    zq = np.hstack([table.vectors, np.ones((20, 1))])
    np.testing.assert_allclose(model.predict(table.keys).mean, sigmoid(zq @ w - 1.0), rtol=1e-6)


# ---- GaussianProcess vs direct computation -------------------------------------------------------------
def test_logistic_normal_moments_match_quadrature():
    for m, v in [(0.0, 1.0), (2.0, 0.3), (-3.0, 4.0), (0.5, 9.0), (1.0, 0.0)]:
        mean, var = logistic_normal_moments(np.array([m]), np.array([v]))
        if v == 0:
            assert mean[0] == pytest.approx(sigmoid(m)) and var[0] == pytest.approx(0, abs=1e-15)
            continue
        dens = lambda g: np.exp(-((g - m) ** 2) / (2 * v)) / np.sqrt(2 * np.pi * v)  # noqa: E731
        e1 = integrate.quad(lambda g: sigmoid(g) * dens(g), -np.inf, np.inf)[0]
        e2 = integrate.quad(lambda g: sigmoid(g) ** 2 * dens(g), -np.inf, np.inf)[0]
        assert mean[0] == pytest.approx(e1, abs=1e-4)
        assert var[0] == pytest.approx(e2 - e1**2, abs=1e-4)


@pytest.mark.parametrize(
    "k, n, m, v", [(0.0, 1, 0.0, 1.0), (32.0, 32, -1.0, 2.0), (3.5, 8, 0.5, 0.2), (0.0, 32, 3.0, 9.0)]
)
def test_laplace_site_is_the_posterior_mode_and_curvature(k, n, m, v):
    y, r = laplace_site(np.array([k]), np.array([float(n)]), np.array([m]), np.array([v]))
    neg_log_post = lambda g: -(k * np.log(sigmoid(g)) + (n - k) * np.log(sigmoid(-g))) + (g - m) ** 2 / (2 * v)  # noqa: E731
    mode = optimize.minimize_scalar(neg_log_post, bounds=(-30, 30), method="bounded", options={"xatol": 1e-10}).x
    post_var = 1 / (1 / v + 1 / r[0])
    assert post_var * (m / v + y[0] / r[0]) == pytest.approx(mode, abs=1e-5)
    p = sigmoid(mode)
    assert 1 / r[0] == pytest.approx(n * p * (1 - p), rel=1e-4)


def test_gaussian_process_update_matches_dense_joint_posterior():
    table = _table(8, 2, seed=7)
    gp = GaussianProcess(table, n_features=6, bandwidth=1.3, residual_var=0.5, seed=2)
    # step 1, then step 2 revisiting some prompts: check step 2 against a dense joint Gaussian
    gp.update(["q0", "q1", "q2"], [np.array([1.0, 1, 0]), np.array([0.0]), np.ones(8)])
    prompts = ["q1", "q2", "q5"]
    rewards = [np.array([1.0, 1.0]), np.array([0.0, 1, 1, 1]), np.array([0.0, 0, 1])]
    w_mean, w_cov = gp._shared_prior()
    u_mean, u_var = gp._residual_prior(gp._index.lookup(prompts), gp.step + 1)
    phi = gp._phi(table.encode(prompts), gp.bandwidth)
    k = np.array([r.sum() for r in rewards])
    n = np.array([len(r) for r in rewards], dtype=float)
    y, r = laplace_site(k, n, gp.prior_mean + phi @ w_mean + u_mean, np.einsum("ij,jk,ik->i", phi, w_cov, phi) + u_var)
    # dense joint over z = (w, u_1..u_3): prior N(mu, S), observation y - m0 = A z + noise(r)
    dw = len(w_mean)
    mu = np.concatenate([w_mean, u_mean])
    s = np.zeros((dw + 3, dw + 3))
    s[:dw, :dw] = w_cov
    s[dw:, dw:] = np.diag(u_var)
    a = np.hstack([phi, np.eye(3)])
    gain = s @ a.T @ np.linalg.inv(a @ s @ a.T + np.diag(r))
    post_mu = mu + gain @ (y - gp.prior_mean - a @ mu)
    post_s = s - gain @ a @ s
    gp.update(prompts, rewards)
    np.testing.assert_allclose(gp._w_mean, post_mu[:dw], atol=1e-8)
    np.testing.assert_allclose(gp._w_cov, post_s[:dw, :dw], atol=1e-8)
    rows = gp._index.lookup(prompts)
    np.testing.assert_allclose(gp._u_mean[rows], post_mu[dw:], atol=1e-8)
    np.testing.assert_allclose(gp._u_var[rows], np.diag(post_s)[dw:], atol=1e-8)
    # prediction = Gaussian-Hermite moments of the one-step-propagated belief
    g_mean, g_var = gp.latent(["q2", "q7"])
    out = gp.predict(["q2", "q7"])
    np.testing.assert_allclose(out, logistic_normal_moments(g_mean, g_var))


def test_gaussian_process_counts_matter_and_drift_returns_to_prior():
    table = _table(4, 2)
    one, many = GaussianProcess(table, n_features=16, seed=0), GaussianProcess(table, n_features=16, seed=0)
    one.update(["q0"], [np.ones(1)])
    many.update(["q0"], [np.ones(32)])
    p1, p32 = one.predict(["q0"]), many.predict(["q0"])
    assert p32.mean[0] > p1.mean[0] + 0.2 and p32.var[0] < p1.var[0]
    # many steps without data for q0: belief decays to the prior
    fresh = GaussianProcess(table, n_features=16, seed=0)
    prior = fresh.predict(["q0"])
    for _ in range(3000):
        many.update(["q3"], [np.array([])])  # steps pass, nothing observed
    np.testing.assert_allclose(many.predict(["q0"]).mean, prior.mean, atol=1e-3)
    np.testing.assert_allclose(many.predict(["q0"]).var, prior.var, atol=1e-3)


# ---- learning sanity on a seeded trace ------------------------------------------------------------------
def test_learning_on_synthetic_trace():
    trace = synthetic_trace(n_prompts=300, n_steps=60, batch_size=32, dim=8, seed=11)
    table = trace.table
    scores = {name: evaluate(pred, trace)["log_loss"] for name, pred in _all(table).items()}
    prior_only = evaluate(_PriorOnly(), trace)["log_loss"]
    assert all(np.isfinite(v) for v in scores.values())
    assert scores["GaussianProcess"] < 0.9 * scores["PaperGP"]
    assert scores["GaussianProcess"] < scores["DiscountedBeta"]
    assert scores["GaussianProcess"] < prior_only and scores["DiscountedBeta"] < prior_only


class _PriorOnly:
    def predict(self, prompts):
        return Prediction(np.full(len(prompts), 0.5), np.zeros(len(prompts)))

    def update(self, prompts, rewards):
        pass


# ---- protocol, state round trip -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["PaperGP", "GaussianProcess", "DiscountedBeta", "WindowedMean", "Ridge", "CumulativeMean"]
)
def test_state_round_trip_gives_identical_predictions(tmp_path, name):
    table = _table(12, 3)
    pred = _all(table)[name]
    assert isinstance(pred, Predictor)
    steps = _random_steps(table.keys, n_steps=6, batch=5, seed=9)
    for prompts, rewards in steps[:3]:
        pred.update(prompts, rewards)
    save_state(tmp_path / "s", pred.state_dict())
    clone = _all(table)[name]
    clone.load_state_dict(load_state(tmp_path / "s"))
    for prompts, rewards in steps[3:]:
        a, b = pred.predict(table.keys), clone.predict(table.keys)
        np.testing.assert_array_equal(a.mean, b.mean)
        np.testing.assert_array_equal(a.var, b.var)
        pred.update(prompts, rewards)
        clone.update(prompts, rewards)
    np.testing.assert_array_equal(pred.predict(table.keys).mean, clone.predict(table.keys).mean)


@pytest.mark.parametrize(
    "name", ["PaperGP", "GaussianProcess", "DiscountedBeta", "WindowedMean", "Ridge", "CumulativeMean"]
)
def test_predictions_are_probabilities(name):
    table = _table(12, 3)
    pred = _all(table)[name]
    for prompts, rewards in _random_steps(table.keys, n_steps=4, batch=6, seed=3):
        pred.update(prompts, rewards)
    out = pred.predict(table.keys)
    assert out.mean.shape == out.var.shape == (12,)
    assert np.all((out.mean >= 0) & (out.mean <= 1)) and np.all(out.var >= 0)
    assert np.all(out.var <= out.mean * (1 - out.mean) + 1e-12)
    assert pred.predict([]).mean.shape == (0,)


def test_id_based_unknown_prompts_get_the_prior():
    for pred, mean in [
        (CumulativeMean(prior_mean=0.4), 0.4),
        (WindowedMean(prior_mean=0.4), 0.4),
        (DiscountedBeta(prior_alpha=2, prior_beta=3), 0.4),
    ]:
        pred.update(["seen"], [np.ones(4)])
        assert pred.predict(["never"]).mean[0] == pytest.approx(mean)


# ---- bad input: exception naming the input, state unchanged --------------------------------------------
BAD_UPDATES = [
    ("nan reward", ["q0", "q1"], [np.array([1.0, np.nan]), np.ones(2)], ValueError, "'q0'"),
    ("inf reward", ["q0", "q1"], [np.ones(2), np.array([np.inf])], ValueError, "'q1'"),
    ("negative reward", ["q0"], [np.array([-0.1])], ValueError, "in \\[0, 1\\].*'q0'"),
    ("reward above 1", ["q2"], [np.array([1.5, 0.0])], ValueError, "'q2'"),
    ("None rewards", ["q0"], [None], ValueError, "'q0'"),
    ("2-D rewards", ["q0"], [np.ones((2, 2))], ValueError, "1-D.*'q0'"),
    ("mismatched lengths", ["q0", "q1"], [np.ones(2)], ValueError, "rewards has 1 entries but prompts has 2"),
    ("empty prompt list", [], [], ValueError, "prompts is empty"),
    ("duplicate prompts", ["q0", "q0"], [np.ones(1), np.ones(1)], ValueError, "duplicates 'q0'"),
    ("single string as prompts", "q0", [np.ones(1)], ValueError, "single string"),
]


def _states_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("case", BAD_UPDATES, ids=[c[0] for c in BAD_UPDATES])
@pytest.mark.parametrize(
    "name", ["PaperGP", "GaussianProcess", "DiscountedBeta", "WindowedMean", "Ridge", "CumulativeMean"]
)
def test_bad_updates_raise_and_leave_state_unchanged(name, case):
    _, prompts, rewards, exc, match = case
    table = _table(6, 3)
    pred = _all(table)[name]
    pred.update(["q3", "q4"], [np.ones(3), np.zeros(2)])
    before = pred.state_dict()
    with pytest.raises(exc, match=match):
        pred.update(prompts, rewards)
    _states_equal(before, pred.state_dict())


@pytest.mark.parametrize("name", ["PaperGP", "GaussianProcess", "Ridge"])
def test_feature_errors_raise_and_leave_state_unchanged(name):
    table = _table(6, 3)
    pred = _all(table)[name]
    pred.update(["q3", "q4"], [np.ones(3), np.zeros(2)])
    before = pred.state_dict()
    with pytest.raises(KeyError, match="'nope'"):
        pred.update(["q0", "nope"], [np.ones(1), np.ones(1)])
    with pytest.raises(KeyError, match="'nope'"):
        pred.predict(["nope"])
    _states_equal(before, pred.state_dict())


@pytest.mark.parametrize("cls", [GaussianProcess, Ridge])
def test_wrong_feature_dimension_is_named(cls):
    table = _table(6, 3)
    liar = _EncoderOnly(table, dim=3, extra=2)  # claims 3, returns 5
    pred = cls(liar)
    with pytest.raises(ValueError, match="feature dimension"):
        pred.update(["q0"], [np.ones(2)])
    with pytest.raises(ValueError, match="feature dimension"):
        pred.predict(["q0"])
    nan_table = _EncoderOnly(FeatureTable(["a"], np.ones((1, 3))))
    nan_table.encode = lambda prompts: np.full((len(prompts), 3), np.nan)
    with pytest.raises(ValueError, match="'a'.*NaN"):
        cls(nan_table).predict(["a"])


def test_load_state_dict_rejects_mismatches():
    table = _table(6, 3)
    gp = GaussianProcess(table, n_features=8)
    with pytest.raises(ValueError, match="not 'GaussianProcess'"):
        gp.load_state_dict(DiscountedBeta().state_dict() | {k: 0 for k in gp.state_dict() if k != "class"})
    state = gp.state_dict()
    state["w_cov"] = np.eye(3)
    with pytest.raises(ValueError, match="w_cov.*shape"):
        gp.load_state_dict(state)
    with pytest.raises(ValueError, match="pool"):
        PaperGP(table).load_state_dict(PaperGP(_table(5, 3)).state_dict())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_features": 0}, "n_features"),
        ({"residual_var": -1.0}, "residual_var"),
        ({"shared_half_life": 0}, "shared_half_life"),
        ({"bandwidth": 0.0}, "bandwidth"),
    ],
)
def test_gaussian_process_rejects_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GaussianProcess(_table(4, 2), **kwargs)

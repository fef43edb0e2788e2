"""How n_q enters the batch gradient under each loss aggregation: formulas vs Monte Carlo.

Simulated batch: prompt q has true gradient g_q = gamma_q e_q (orthogonal directions); a rollout
with reward r has score vector z = mu_q(r) e_q + xi, mu_q(1) = g/p, mu_q(0) = -g/(1-p) (so that
E z = 0 and E r z = g), xi ~ N(0, s^2 I_D) independent of r. For token-level aggregations each
sequence has a random length l (independent of rewards) and its score is the sum of l per-token
scores with signal mu/lbar and noise variance s^2/lbar. The batch gradient is the aggregation of
A_i z_i exactly as the trainers' losses do it.
"""

import zlib

import numpy as np
import pytest

from adaptive_rollouts.objectives import AGGREGATIONS, batch_gradient_moments, group_moments, improvement_table
from adaptive_rollouts.types import Prediction

COUNTS = np.array([2, 3, 6])
P = np.array([0.3, 0.6, 0.15])
GAMMA = np.array([0.8, 1.3, 0.5])
NOISE_DIMS, S = 3, 0.6
LBAR, LSPREAD = 100, 30  # lengths uniform on [70, 130]: cv ~ 0.173
RUNS = 60_000


def advantages(r, estimator, eps=0.0):
    n = r.shape[-1]
    centred = r - r.mean(axis=-1, keepdims=True)
    if estimator == "drgrpo":
        return centred
    if estimator == "rloo":
        return centred * n / (n - 1)
    sd = r.std(axis=-1, ddof=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sd > 1e-12, centred / (sd + eps), 0.0)


def simulate(estimator, aggregation, rng):
    """RUNS draws of the batch gradient G, shape [RUNS, Q + NOISE_DIMS]."""
    q = COUNTS.size
    total_tokens = np.zeros(RUNS)
    parts = []
    for i, n in enumerate(COUNTS):
        r = (rng.random((RUNS, n)) < P[i]).astype(float)
        a = advantages(r, estimator)
        mu = np.where(r == 1, GAMMA[i] / P[i], -GAMMA[i] / (1 - P[i]))
        if aggregation == "token-mean" or aggregation == "constant":
            length = rng.integers(LBAR - LSPREAD, LBAR + LSPREAD + 1, size=(RUNS, n)).astype(float)
            signal = mu * length / LBAR
            noise = rng.normal(size=(RUNS, n, NOISE_DIMS)) * S * np.sqrt(length / LBAR)[..., None]
            total_tokens += length.sum(axis=1)
        else:
            signal = mu
            noise = rng.normal(size=(RUNS, n, NOISE_DIMS)) * S
        s_sig = (a * signal).sum(axis=1)
        s_noise = np.einsum("rn,rnd->rd", a, noise)
        parts.append((i, n, s_sig, s_noise))
    g = np.zeros((RUNS, q + NOISE_DIMS))
    budget = COUNTS.sum()
    for i, n, s_sig, s_noise in parts:
        if aggregation == "prompt-mean":
            c = 1.0 / (q * n)
        elif aggregation == "seq-mean":
            c = 1.0 / budget
        elif aggregation == "token-mean":
            c = 1.0 / total_tokens
        else:
            c = 1.0 / (budget * LBAR)  # constant normaliser K
        c = np.broadcast_to(c, (RUNS,))
        g[:, i] += c * s_sig
        g[:, q:] += c[:, None] * s_noise
    return g


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("estimator", ["rloo", "drgrpo", "grpo"])
def test_batch_gradient_mean_and_second_moment(estimator, aggregation):
    rng = np.random.default_rng(zlib.crc32(f"{estimator}/{aggregation}".encode()))
    g = simulate(estimator, aggregation, rng)
    token = aggregation in ("token-mean", "constant")
    cv = np.sqrt(((2 * LSPREAD + 1) ** 2 - 1) / 12) / LBAR
    mean_coef, sq_coef, noise_coef = batch_gradient_moments(
        COUNTS,
        P,
        estimator=estimator,
        aggregation=aggregation,
        constant=COUNTS.sum() * LBAR if aggregation == "constant" else None,  # K = C lbar
        mean_length=LBAR if aggregation == "token-mean" else 1.0,
        length_cv=cv if token else 0.0,
    )
    # E G along each prompt's direction
    for i in range(COUNTS.size):
        mc = g[:, i].mean()
        se = g[:, i].std() / np.sqrt(RUNS)
        assert abs(mc - mean_coef[i] * GAMMA[i]) < max(4 * se, 0.02 * abs(mean_coef[i] * GAMMA[i])), (i, mc)
    # E |G|^2 split into signal and noise parts
    sig_sq = (g[:, : COUNTS.size] ** 2).sum(axis=1).mean()
    noise_sq = (g[:, COUNTS.size :] ** 2).sum(axis=1).mean()
    assert sig_sq == pytest.approx((sq_coef * GAMMA**2).sum(), rel=0.02)
    assert noise_sq == pytest.approx(NOISE_DIMS * S**2 * noise_coef.sum(), rel=0.02)


def test_how_counts_enter_the_expected_update():
    """Per-prompt mean + RLOO: E G does not depend on n (VIP's premise); per-sample aggregations:
    E G grows linearly with n (allocation changes the expected update; docs/objectives.md, section 3)."""
    p = np.full(3, 0.4)
    counts = np.array([2, 4, 8])
    pm, _, _ = batch_gradient_moments(counts, p, estimator="rloo", aggregation="prompt-mean")
    assert np.allclose(pm, pm[0])
    sm, _, _ = batch_gradient_moments(counts, p, estimator="rloo", aggregation="seq-mean")
    assert np.allclose(sm / counts, sm[0] / counts[0])
    dm, _, _ = batch_gradient_moments(counts, p, estimator="drgrpo", aggregation="seq-mean")
    assert np.allclose(dm * counts.sum(), counts - 1)


def test_group_moments_posterior_matches_sampling_p():
    """Posterior (Beta) moments = average of plug-in moments over p drawn from that Beta."""
    rng = np.random.default_rng(5)
    mean, var = 0.3, 0.02
    total = mean * (1 - mean) / var - 1
    ps = rng.beta(mean * total, (1 - mean) * total, 100_000)
    for estimator in ("drgrpo", "rloo", "grpo"):
        for n in (2, 5, 9):
            post = group_moments(estimator, n, mean, var)
            plug = group_moments(estimator, np.full(ps.size, n), ps, 0.0)
            for a, b in zip(post, plug):
                assert float(a) == pytest.approx(b.mean(), rel=0.015)


def test_grpo_large_n_approximation_is_close():
    exact = group_moments("grpo", 200, 0.3, 0.01, exact_up_to=1000)
    approx = group_moments("grpo", 200, 0.3, 0.01, exact_up_to=128)
    for a, b in zip(exact, approx):
        assert float(b) == pytest.approx(float(a), rel=0.01)


def test_improvement_table_properties():
    pred = Prediction(np.array([0.5, 0.02, 0.5]), np.array([0.0, 0.0, 0.05]))
    t = improvement_table(pred, 16, estimator="drgrpo", aggregation="seq-mean", lr_noise=0.0)
    assert t.shape == (3, 17) and (t[:, 0] == 0).all()
    assert np.allclose(np.diff(t[0, 1:]), t[0, 2] - t[0, 1])  # Dr. GRPO signal is linear in n
    assert t[2, 8] < t[0, 8]  # posterior uncertainty lowers E[p^2 q^2]: not the plug-in value
    pm = improvement_table(pred, 16, estimator="rloo", aggregation="prompt-mean", lr_noise=0.0)
    assert np.allclose(pm[0, 2:], pm[0, 2])  # prompt-mean + RLOO: gain flat in n
    noisy = improvement_table(pred, 16, estimator="rloo", aggregation="prompt-mean", lr_noise=0.05)
    assert np.all(np.diff(noisy[0, 2:]) > 0)  # the noise penalty falls with n
    with pytest.raises(ValueError, match="aggregation"):
        improvement_table(pred, 4, aggregation="sum")
    with pytest.raises(ValueError, match="empty"):
        improvement_table(np.array([]), 4)
    with pytest.raises(ValueError, match="probabilities"):
        improvement_table(np.array([1.2]), 4)


def test_improvement_allocation_with_skipping_is_exact():
    import itertools

    from adaptive_rollouts.solvers import solve_table, total_cost

    pred = Prediction(np.array([0.5, 0.02, 0.3, 0.97]), np.array([0.01, 0.0, 0.02, 0.001]))
    gain = improvement_table(pred, 8, estimator="grpo", aggregation="seq-mean", lr_noise=0.02)
    counts = solve_table(-gain, 16, 2, 8, allow_skip=True)
    best = max(
        sum(gain[i, n] for i, n in enumerate(c))
        for c in itertools.product([0, 2, 3, 4, 5, 6, 7, 8], repeat=4)
        if sum(c) == 16
    )
    assert -total_cost(-gain, counts) == pytest.approx(best, rel=1e-12)


def test_planning_and_training_use_the_same_aggregation_weights():
    """The planners (batch_gradient_moments, improvement_table) and the simulator's training step
    weigh a group with one function, and prompt-mean averages over the prompts that got rollouts
    (Q'), so an allocation that skips prompts is planned under the model it is trained under."""
    from adaptive_rollouts.objectives import aggregation, improvement
    from adaptive_rollouts.sim import estimators

    assert estimators.aggregation_weight is aggregation.aggregation_weight
    assert improvement.aggregation_weight is aggregation.aggregation_weight
    counts = np.array([3, 0, 2, 4, 0])  # two prompts skipped: Q = 5, Q' = 3
    live = np.flatnonzero(counts)
    group = np.repeat(np.arange(live.size), counts[live])  # the trainer's dense group ids
    lengths = np.full(group.size, 7.0)
    for agg in AGGREGATIONS:
        trained = estimators.aggregation_weights(group, lengths, agg, budget=9, max_length=7)
        planned = aggregation.aggregation_weight(
            agg, counts, num_prompts=3, budget=9, constant=9 * 7.0, mean_length=7.0
        )[live][group]
        scale = 7.0 if agg == "seq-mean" else 1.0  # seq-mean: token mean within each sequence
        np.testing.assert_allclose(trained * scale, planned, rtol=1e-12)
    # RLOO under prompt-mean: E G = (1/Q') sum over the prompts with rollouts of g_q
    mean_coef, _, _ = batch_gradient_moments(counts, np.full(5, 0.4), estimator="rloo", aggregation="prompt-mean")
    np.testing.assert_allclose(mean_coef, np.where(counts > 0, 1 / 3, 0.0), rtol=1e-12)

"""Regime fingerprints, against hand computations and Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.fingerprints import RegimeTracker, noise_to_signal, p_persistence, zero_variance_fraction


def test_noise_to_signal_matches_population_ratio_by_monte_carlo():
    rng = np.random.default_rng(0)
    mean = np.array([1.0, -2.0, 0.5])
    cov_diag = np.array([4.0, 1.0, 9.0])
    truth = cov_diag.sum() / (mean @ mean)
    assert noise_to_signal(rng.normal(mean, np.sqrt(cov_diag), size=(40000, 3))) == pytest.approx(truth, rel=0.03)
    for n in (16, 256):  # the debiased signal keeps the median near the truth at any N
        est = np.median([noise_to_signal(rng.normal(mean, np.sqrt(cov_diag), size=(n, 3))) for _ in range(2000)])
        assert est == pytest.approx(truth, rel=0.15)


def test_noise_to_signal_rejects_bad_input_and_flags_zero_signal():
    with pytest.raises(ValueError, match="grads"):
        noise_to_signal(np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        noise_to_signal(np.array([[np.nan], [1.0]]))
    assert noise_to_signal(np.array([[1.0], [-1.0]])) == float("inf")


def test_zero_variance_fraction_ignores_singletons_and_skipped():
    groups = [np.array([0.3, 0.3, 0.3]), np.array([1.0]), np.array([]), np.array([-1.0, 1.0])]
    assert zero_variance_fraction(groups) == 0.5
    assert np.isnan(zero_variance_fraction([np.array([1.0])]))


def test_p_persistence_is_pearson_and_nan_when_undefined():
    a, b = np.array([0.0, 0.5, 1.0, 0.25]), np.array([0.1, 0.4, 0.9, 0.5])
    assert p_persistence(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert np.isnan(p_persistence(a[:2], b[:2]))
    assert np.isnan(p_persistence(np.ones(4), b))


def test_p_persistence_disattenuation_recovers_fixed_p_by_monte_carlo():
    rng = np.random.default_rng(2)
    p, n = rng.uniform(size=5000), 4
    a, b = rng.binomial(n, p) / n, rng.binomial(n, p) / n
    noise = lambda x: x * (1 - x) / (n - 1)  # noqa: E731  s^2/n with the unbiased s^2 of a 0/1 group
    assert p_persistence(a, b) == pytest.approx(2 / 3, abs=0.04)  # raw: Var p / (Var p + E p(1-p)/n)
    assert p_persistence(a, b, noise(a), noise(b)) == pytest.approx(1.0, abs=0.06)


def test_tracker_any_reward_range_state_roundtrip_and_window():
    rng = np.random.default_rng(1)
    keys = [f"k{i}" for i in range(200)]
    p = rng.uniform(size=200)
    t, twin = RegimeTracker(window=300), RegimeTracker(window=300)
    for step in range(6):
        rewards = [np.where(rng.uniform(size=4) < pi, 1.0, -1.0) for pi in p]  # +-1 rewards
        t.update(keys, rewards)
        if step == 2:
            twin.load_state_dict(t.state_dict())
        elif step > 2:
            twin.update(keys, rewards)
    assert t.metrics() == pytest.approx(twin.metrics(), nan_ok=True)
    m = t.metrics()
    assert m["regime/revisits"] == 300.0  # 1000 revisits, the window keeps 300
    assert m["regime/p_persistence"] > 0.85  # p is fixed: consecutive visits agree
    manual = np.mean([np.ptp(r) == 0 for r in rewards])
    assert m["regime/zero_variance_fraction"] == pytest.approx(manual)
    low = sum(np.all(r == -1.0) for r in rewards) / 200
    assert m["regime/all_fail_fraction"] == pytest.approx(low)


def test_tracker_rejects_bad_rewards():
    with pytest.raises(ValueError, match="prompt 'a'"):
        RegimeTracker().update(["a"], [np.array([np.nan, 1.0])])
    with pytest.raises(ValueError, match="keys has 2"):
        RegimeTracker().update(["a", "b"], [np.array([1.0])])


def _reference_update(tracker_state: dict, keys, rewards, tol=1e-8):
    """RegimeTracker.update one prompt at a time (the definition the vectorised update must equal)."""
    s = tracker_state
    seen = [r for r in rewards if r.size]
    if seen:
        s["low"] = min(s["low"], min(float(r.min()) for r in seen))
        s["high"] = max(s["high"], max(float(r.max()) for r in seen))
    flat = [r for r in rewards if r.size >= 2 and r.max() <= r.min() + tol]
    groups = sum(r.size >= 2 for r in rewards)
    s["zv"] = len(flat) / groups if groups else float("nan")
    s["fail"] = sum(r[0] <= s["low"] + tol for r in flat) / groups if groups else 0.0
    s["pass"] = sum(r[0] >= s["high"] - tol for r in flat) / groups if groups else 0.0
    for key, r in zip(keys, rewards):
        if r.size:
            visit = (float(r.mean()), float(r.var(ddof=1)) / r.size if r.size >= 2 else 0.0)
            if key in s["last"]:
                s["pairs"].append((s["last"][key][0], visit[0], s["last"][key][1], visit[1]))
            s["last"][key] = visit


@pytest.mark.parametrize("seed", range(5))
def test_tracker_update_equals_the_per_prompt_definition(seed):
    rng = np.random.default_rng(seed)
    tracker = RegimeTracker(window=10_000)
    ref = {"low": np.inf, "high": -np.inf, "last": {}, "pairs": []}
    keys = [f"k{i}" for i in range(40)]
    for _ in range(6):
        batch = [keys[i] for i in rng.choice(40, size=25, replace=False)]
        sizes = rng.choice([0, 1, 2, 3, 8], size=25)
        rewards = [np.round(rng.uniform(-3, 5) * (rng.random(n) < rng.random()), 1) for n in sizes]
        tracker.update(batch, rewards)
        _reference_update(ref, batch, rewards)
        m = tracker.metrics()
        assert m["regime/zero_variance_fraction"] == pytest.approx(ref["zv"], nan_ok=True)
        assert m["regime/all_fail_fraction"] == pytest.approx(ref["fail"])
        assert m["regime/all_pass_fraction"] == pytest.approx(ref["pass"])
        state = tracker.state_dict()
        assert state["keys"] == list(ref["last"])
        np.testing.assert_allclose(
            state["last"], np.array(list(ref["last"].values())).reshape(-1, 2), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(state["pairs"], np.array(ref["pairs"]).reshape(-1, 4), rtol=1e-12, atol=1e-12)


def test_tracker_update_of_100000_prompts_is_vectorised():
    """Before: a per-prompt Python loop, about 55% of a 100,000-prompt step of the default."""
    import time

    rng = np.random.default_rng(0)
    keys = [f"prompt-{i}" for i in range(100_000)]
    rewards = np.split((rng.random(800_000) < 0.3).astype(float), np.arange(8, 800_000, 8))
    tracker = RegimeTracker()
    tracker.update(keys, rewards)
    start = time.process_time()
    tracker.update(keys, rewards)
    assert time.process_time() - start < 1.5

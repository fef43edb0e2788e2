"""Regime fingerprints and prompt keys, against hand computations and Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts
from adaptive_rollouts.fingerprints import RegimeTracker, noise_to_signal, p_persistence, zero_variance_fraction
from adaptive_rollouts.keys import row_key


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


def test_row_key_rule():
    assert row_key({"prompt": "x"}, source="a.parquet", index=3) != row_key(
        {"prompt": "x"}, source="b.parquet", index=3
    )
    same_text = row_key({"prompt": "x", "answer": 1}) != row_key({"prompt": "x", "answer": 2})
    assert same_text
    assert row_key({"prompt": "x", "v": np.arange(3)}) == row_key({"v": [0, 1, 2], "prompt": "x"})
    with pytest.raises(ValueError, match="source"):
        row_key(index=1)
    with pytest.raises(ValueError, match="index"):
        row_key(source="a", index=-1)


def test_keyed_texts_pools_by_key_and_names_missing():
    texts = KeyedTexts(FeatureTable(["t1", "t2"], [[1.0], [2.0]]))
    texts.register(["k1", "k2", "k3"], ["t1", "t2", "t1"])
    assert texts.dim == 1
    assert texts.encode(["k3", "k2"]).ravel().tolist() == [1.0, 2.0]
    with pytest.raises(KeyError, match="k9"):
        texts.encode(["k9"])


def test_success_signal_modes():
    from adaptive_rollouts.success import SuccessSignal

    auto = SuccessSignal()
    assert auto.to_success([0.0, 0.5, 1.0]).tolist() == [0.0, 0.5, 1.0]  # [0, 1] rewards unchanged
    assert auto.to_success([-1.0, 1.0]).tolist() == [0.0, 1.0]
    assert auto.to_success([3.0, -1.0]).tolist() == [1.0, 0.0]  # range only widens: now [-1, 3]
    twin = SuccessSignal()
    twin.load_state_dict(auto.state_dict())
    assert twin.to_success([1.0]).tolist() == auto.to_success([1.0]).tolist() == [0.5]
    ten = np.float32(0.1) * np.ones(10, dtype=np.float32)
    summed = float(ten.sum(dtype=np.float32))  # 1.0000001 in float32
    assert SuccessSignal(reward_range=(0, 1)).to_success([summed]).tolist() == [1.0]
    with pytest.raises(ValueError, match="prompt 'q'.*reward_range"):
        SuccessSignal(reward_range=(0, 1)).to_success([1.67], prompt="q")
    got = SuccessSignal(success_fn=lambda r: r > 0).to_success([None, -2.0, 5.0])
    assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 1.0] and SuccessSignal.unscored(got) == 1
    with pytest.raises(ValueError, match="at most one"):
        SuccessSignal(reward_range=(0, 1), threshold=0.5)
    with pytest.raises(ValueError, match="outside"):
        SuccessSignal(success_fn=lambda r: 2.0).to_success([1.0])

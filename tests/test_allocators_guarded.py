"""The budget-filling default of earlier versions, `GuardedProgressive` ("guarded-progressive"):
exact budget, integer keys without text or embeddings, and a fall-back to Uniform when its belief
holds little evidence."""

import numpy as np
import pytest

from adaptive_rollouts.allocators import (
    ALLOCATORS,
    GuardedProgressive,
    PosteriorProgressive,
    Uniform,
    make_allocator,
    takes_keyword,
)
from adaptive_rollouts.allocators.guarded import equal_split, shrink_toward


def _sampler(p: np.ndarray, seed: int = 0):
    rng = np.random.default_rng(seed)

    def sample(idx, counts):
        return [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]

    return sample


def test_guarded_is_registered_and_takes_trainer_kwargs():
    alloc = make_allocator(
        "guarded-progressive", predictor="windowed", estimator="rloo", aggregation="token-mean", seed=3
    )
    assert isinstance(alloc, GuardedProgressive)
    assert ALLOCATORS["guarded-progressive"] is GuardedProgressive
    assert alloc.estimator == "rloo" and alloc.aggregation == "token-mean" and alloc.seed == 3
    assert takes_keyword(ALLOCATORS["guarded-progressive"], "aggregation")
    # GuardedProgressive forwards **options to PosteriorProgressive: takes what that takes, no more
    assert takes_keyword(GuardedProgressive, "features") and not takes_keyword(GuardedProgressive, "colour")
    with pytest.raises(TypeError, match="allow_skip"):
        GuardedProgressive(allow_skip=True)
    assert takes_keyword(lambda **kw: None, "anything")  # a function with **kw may pass it on


@pytest.mark.parametrize("budget", [64, 77, 200])
def test_exact_budget_with_integer_keys_and_no_embeddings(monkeypatch, budget):
    import adaptive_rollouts.embeddings as emb

    def no_encoder(*a, **k):
        raise AssertionError("the default must not need embeddings")

    monkeypatch.setattr(emb, "default_encoder", no_encoder)
    p = np.random.default_rng(1).beta(0.5, 0.5, size=24)
    alloc = make_allocator("guarded-progressive", seed=0)
    keys = list(range(100, 124))
    for step in range(4):
        rewards = alloc.run(keys, budget, _sampler(p, step))
        counts = np.array([r.size for r in rewards])
        assert counts.sum() == budget and counts.min() >= 2
        assert alloc.last_metrics["trust"][0] == 0.0  # round one is the equal split


def test_no_evidence_is_uniform_and_little_evidence_is_near_uniform():
    p = np.r_[np.zeros(8), np.full(8, 0.5)]
    keys = list(range(16))
    # kappa -> inf: exactly Uniform's counts (16 prompts, 128 rollouts: 8 each)
    counts = [r.size for r in GuardedProgressive(trust_scale=1e12).run(keys, 128, _sampler(p))]
    assert counts == Uniform().plan(keys, 128).counts.tolist()
    # no history: closer to Uniform than the untempered optimum, but still moved toward it
    fresh = np.array([r.size for r in GuardedProgressive().run(keys, 128, _sampler(p))])
    full = np.array([r.size for r in PosteriorProgressive("beta").run(keys, 128, _sampler(p))])
    assert np.abs(fresh - 8).sum() < np.abs(full - 8).sum()
    assert fresh[8:].sum() > fresh[:8].sum()


def test_trust_grows_with_history():
    p = np.r_[np.zeros(8), np.full(8, 0.5)]
    keys = list(range(16))
    alloc = GuardedProgressive(estimator="rloo", objective="variance")
    first = np.array([r.size for r in alloc.run(keys, 128, _sampler(p, 0))])
    t_first = alloc.last_metrics["trust"]
    for s in range(1, 4):
        later = np.array([r.size for r in alloc.run(keys, 128, _sampler(p, s))])
    assert alloc.last_metrics["trust"][1] > t_first[1] > 0
    # all-fail prompts lose rollouts as evidence accumulates
    assert later[:8].sum() < first[:8].sum() <= 64


def test_trust_formula_by_hand():
    alloc = GuardedProgressive(trust_scale=4.0)
    assert alloc.trust(np.array([4.0, 12.0])) == pytest.approx((0.5 + 0.75) / 2)
    with pytest.raises(ValueError, match="trust_scale"):
        GuardedProgressive(trust_scale=0.0)


def test_shrink_toward_keeps_sum_and_bounds():
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = int(rng.integers(1, 12))
        total = int(rng.integers(2 * q, 12 * q))
        ref = equal_split(total, q)
        tgt = ref.copy()
        for _ in range(30):  # random feasible target in [2, 16]
            i, j = rng.integers(0, q, 2)
            if tgt[i] > 2 and tgt[j] < 16:
                tgt[i] -= 1
                tgt[j] += 1
        lam = float(rng.random())
        out = shrink_toward(ref, tgt, lam)
        assert out.sum() == total
        lo, hi = np.minimum(ref, tgt), np.maximum(ref, tgt)
        assert np.all(out >= lo) and np.all(out <= hi)
        assert np.all(np.abs(out - (ref + lam * (tgt - ref))) < 1.0 + 1e-9)
    assert shrink_toward(ref, tgt, 0.0).tolist() == ref.tolist()
    assert shrink_toward(ref, tgt, 1.0).tolist() == tgt.tolist()


@pytest.mark.parametrize("name", [None, "guarded-progressive"])
def test_state_round_trip_resumes_identically(name):
    p = np.random.default_rng(2).random(12)
    keys = list(range(12))
    a = make_allocator(name, seed=0)
    for s in range(2):
        a.run(keys, 96, _sampler(p, s))
    b = make_allocator(name, seed=0)
    b.load_state_dict(a.state_dict())
    ra = [r.size for r in a.run(keys, 96, _sampler(p, 9))]
    rb = [r.size for r in b.run(keys, 96, _sampler(p, 9))]
    assert ra == rb


def test_history_counts_only_as_far_as_p_persists():
    """Where p is redrawn between visits (no persistence) the trust rests on this step's rollouts
    alone; where p persists the same history raises it."""
    keys = list(range(16))
    rng = np.random.default_rng(5)
    persistent, shuffled = GuardedProgressive(), GuardedProgressive()
    fixed_p = np.r_[np.zeros(8), np.full(8, 0.5)]
    for s in range(12):
        persistent.run(keys, 128, _sampler(fixed_p, s))
        shuffled.run(keys, 128, _sampler(rng.permutation(fixed_p), s))
    assert persistent.last_metrics["persistence"] > 0.8
    assert shuffled.last_metrics["persistence"] < 0.3
    counts_only = GuardedProgressive()
    counts_only.run(keys, 128, _sampler(fixed_p, 99))  # no history at all: e_q = k_q
    t_none = counts_only.last_metrics["trust"][1]
    assert persistent.last_metrics["trust"][1] > t_none + 0.1
    assert shuffled.last_metrics["trust"][1] < t_none + 0.05


def test_zero_variance_gate_falls_back_to_uniform_where_few_groups_are_dead():
    keys = list(range(16))
    informative = np.full(16, 0.5)  # almost no zero-variance groups: gate closes
    gated = GuardedProgressive(zero_variance_gate=(0.8, 0.9))
    for s in range(3):
        counts = [r.size for r in gated.run(keys, 128, _sampler(informative, s))]
    assert gated.gate() == 0.0 and counts == Uniform().plan(keys, 128).counts.tolist()
    mostly_dead = np.r_[np.zeros(15), 0.5]  # 15 of 16 groups all-fail: gate open
    open_gate = GuardedProgressive(zero_variance_gate=(0.8, 0.9))
    for s in range(3):
        open_gate.run(keys, 128, _sampler(mostly_dead, s))
    assert open_gate.gate() > 0.5 and max(open_gate.last_metrics["trust"]) > 0
    assert GuardedProgressive().gate() == 1.0
    with pytest.raises(ValueError, match="zero_variance_gate"):
        GuardedProgressive(zero_variance_gate=(0.9, 0.8))

"""What the default gives up must be what it says it gives up: the belief scored only on events its
own cuts cannot select (`FlatnessPredictor.update(judge=...)`), and the loss audit
(`allocators/saving_audit.py`): a random share of the options given up, completed, against what
they were priced at."""

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.allocators.saving_audit import LossAudit
from adaptive_rollouts.objectives.signal import known_p_group_signal
from adaptive_rollouts.predictors.flatness import FlatnessPredictor


def _sampler(p: np.ndarray, seed: int = 0):
    rng = np.random.default_rng(seed)

    def sample(idx, counts):
        return [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]

    return sample


def test_judged_events_are_the_first_rollouts_and_the_regression_learns_from_all():
    """With judge = 4 the candidates' scores and the recalibration are exactly those learned from
    the groups' first 4 rollouts, while the regression (and the history) learn from every rollout."""
    rng = np.random.default_rng(0)
    p = rng.beta(0.4, 0.4, 32)
    groups = [(rng.random(8) < x).astype(float) for x in p]
    judged, heads, whole = (FlatnessPredictor(policy=False) for _ in range(3))
    judged.update(range(32), groups, judge=4)
    heads.update(range(32), [g[:4] for g in groups])
    whole.update(range(32), groups)
    assert np.array_equal(judged.scores, heads.scores)
    assert judged.group_size == heads.group_size == 4
    assert repr(judged.calibration.state_dict()) == repr(heads.calibration.state_dict())
    assert repr(judged.model.state_dict()) == repr(whole.model.state_dict())
    assert repr(judged.history.state_dict()) == repr(whole.history.state_dict())
    with pytest.raises(ValueError, match="judge"):
        judged.update(range(32), groups, judge=0)


def test_the_default_judges_the_belief_on_its_pilot_only():
    """A cut group is all-equal at the pilot by construction; judged at its own size, every cut
    would teach the recalibration 'all-equal' (the events selected by the rule's own stops). The
    default judges every group on its first min(pilot, n_q) rollouts, which no stop can select."""
    p = np.r_[np.zeros(12), np.full(12, 0.5)]
    alloc = SavingProgressive(seed=0)
    seen = []
    update = alloc.belief.update

    def spy(prompts, rewards, judge=None):
        seen.append((np.array([len(r) for r in rewards]), judge))
        update(prompts, rewards, judge=judge)

    alloc.belief.update = spy
    for step in range(8):
        alloc.run(list(range(24)), 192, _sampler(p, step))
    assert any(np.any((n > 0) & (n < 8)) for n, _ in seen)  # some groups were cut
    for _, judge in seen:
        assert judge is not None and np.all(np.asarray(judge) == 4)
    null = SavingProgressive(saving=False, seed=0)  # complete groups: nothing selected, judged whole
    null.run(list(range(24)), 192, _sampler(p, 0))
    assert null.belief.group_size == 8


def test_the_audit_ratio_is_unbiased_on_a_random_sample_of_what_is_given_up():
    """Options priced at V but carrying c V in truth (c = 1.6): completing a random share of them,
    R = (realised + w) / (priced + w) tends to c, by Monte Carlo over many audited groups."""
    rng = np.random.default_rng(1)
    audit = LossAudit()
    p = rng.uniform(0.02, 0.2, 20000)
    truth = known_p_group_signal(8, p, estimator="grpo")
    k = rng.binomial(8, p)
    realised = np.sqrt(7 * k * (8 - k) / 8)  # a(k; 8) under GRPO
    audit.observe(realised, truth / 1.6)
    assert audit.ratio(1.0) == pytest.approx(1.6, rel=0.03)
    assert LossAudit().ratio(0.0) == 1.0 and LossAudit().ratio(2.0) == 1.0


def test_audit_state_round_trips_and_bad_states_are_refused():
    audit = LossAudit()
    audit.observe([0.5, 0.0], [0.1, 0.2])
    other = LossAudit()
    other.load_state_dict(audit.state_dict())
    assert other.ratio(0.3) == audit.ratio(0.3) and other.count == 2
    for bad in ({"realised": -1.0, "priced": 0.0, "count": 0}, {"realised": 1.0, "priced": float("nan"), "count": 1}):
        with pytest.raises(ValueError, match="LossAudit"):
            other.load_state_dict({"class": "LossAudit", **bad})
        assert other.count == 2
    with pytest.raises(ValueError, match="realised and priced"):
        audit.observe([-1.0], [0.1])

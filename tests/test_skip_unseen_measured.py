"""Skipping unseen where the run has measured that it pays (``bound_skips="measured"``): the test
of `saving_rule.skipping_pays` against Monte Carlo, the evidence it reads, and the allocator acting
only where the prompts the bound would skip yield fewer varied groups than the rest."""

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.allocators.saving_rule import SKIP_MEMORY, skipping_pays, unseen_evidence
from adaptive_rollouts.predictors.reference import KnownBelief
from adaptive_rollouts.state import load_state, save_state

HOPELESS, FRONTIER = 24, 8  # prompts the belief calls hopeless at 8 rollouts, and frontier prompts
CLAIMED = np.r_[np.full(HOPELESS, 0.012), np.full(FRONTIER, 0.5)]  # P(all-equal at 8) = 0.908 and 0.008


@pytest.mark.parametrize("evidence", [[0.0, 30.0, 4.0, 50.0], [2.0, 40.0, 5.0, 60.0], [1.0, 10.0, 9.0, 30.0]])
def test_skipping_pays_reads_the_chance_that_the_skipped_rate_is_lower_as_monte_carlo_does(evidence):
    v_s, r_s, v_k, r_k = evidence
    rng = np.random.default_rng(0)
    low = rng.gamma(v_s + 0.5, 1.0 / r_s, 400_000) < rng.gamma(v_k + 0.5, 1.0 / r_k, 400_000)
    chance = float(low.mean())  # Monte Carlo P(lambda_s < lambda_k), standard error below 0.001
    assert skipping_pays(np.array(evidence), confidence=chance - 0.005)
    assert not skipping_pays(np.array(evidence), confidence=chance + 0.005)
    # once skipping, it stops only where the chance that they yield more reaches the confidence
    assert skipping_pays(np.array(evidence), skipping=True, confidence=1.0 - chance + 0.005)
    assert not skipping_pays(np.array(evidence), skipping=True, confidence=1.0 - chance - 0.005)


def test_without_evidence_on_both_sides_the_decision_stays_as_it_is():
    for evidence in ([0.0, 0.0, 5.0, 40.0], [0.0, 40.0, 0.0, 0.0]):
        assert not skipping_pays(np.array(evidence)) and skipping_pays(np.array(evidence), skipping=True)


def test_unseen_evidence_ages_the_old_and_counts_only_generated_prompts():
    old = np.array([2.0, 20.0, 4.0, 40.0])
    would_skip = np.array([True, True, False, False, True])
    counts = np.array([2, 8, 8, 3, 0])  # the last prompt was not generated: it adds nothing
    varied = np.array([False, True, True, False, False])
    new = unseen_evidence(old, would_skip, counts, varied)
    np.testing.assert_allclose(new, SKIP_MEMORY * old + np.array([1.0, 10.0, 1.0, 11.0]))


def _run(truth: np.ndarray, bound_skips, steps: int = 30) -> tuple[list[int], list]:
    rng = np.random.default_rng(3)
    alloc = SavingProgressive(estimator="grpo", bound_skips=bound_skips, share=0.1, seed=1)
    alloc.belief = KnownBelief(lambda prompts: CLAIMED[np.asarray(prompts)])
    spent, acting = [], []
    for _ in range(steps):
        rewards = alloc.run(
            list(range(truth.size)),
            8 * truth.size,
            lambda idx, c: [(rng.random(n) < truth[i]).astype(float) for i, n in zip(idx, c)],
        )
        spent.append(sum(r.size for r in rewards))
        acting.append(alloc.last_metrics.get("skips_unseen"))
    return spent, acting


def test_measured_skipping_acts_where_the_prompts_it_would_skip_never_vary():
    truth = np.r_[np.zeros(HOPELESS), np.full(FRONTIER, 0.5)]  # the belief is right about them
    spent, acting = _run(truth, "measured")
    plain, none_logged = _run(truth, None)
    assert acting[0] is False and all(acting[-10:])  # no evidence at first; later it has measured
    assert set(none_logged) == {None}  # the shipped rule logs nothing of it
    assert sum(spent[-10:]) < sum(plain[-10:])


def test_measured_skipping_stays_off_where_the_prompts_it_would_skip_vary_as_often():
    truth = np.r_[np.full(HOPELESS, 0.5), np.full(FRONTIER, 0.5)]  # the belief is wrong about them
    spent, acting = _run(truth, "measured")
    plain, _ = _run(truth, None)
    assert not any(acting) and spent == plain  # never acts: the rule as shipped, step for step


def test_measured_evidence_is_saved_and_a_resumed_run_continues_identically(tmp_path):
    truth = np.r_[np.zeros(HOPELESS), np.full(FRONTIER, 0.5)]
    sampler = np.random.default_rng(5)
    draws = [sampler.random((truth.size, 8)) for _ in range(12)]

    def sample_at(step):
        return lambda idx, c: [(draws[step][i, :n] < truth[i]).astype(float) for i, n in zip(idx, c)]

    a = SavingProgressive(estimator="grpo", bound_skips="measured", share=0.1, seed=2)
    for step in range(6):
        a.run(list(range(truth.size)), 8 * truth.size, sample_at(step))
    save_state(tmp_path / "alloc.safetensors", a.state_dict())  # through a file, as a checkpoint goes
    state = load_state(tmp_path / "alloc.safetensors")
    assert state["skip_unseen"]["skipping"] is True and state["skip_unseen"]["evidence"][1] > 0
    b = SavingProgressive(estimator="grpo", bound_skips="measured", share=0.1, seed=2)
    b.load_state_dict(state)
    np.testing.assert_array_equal(a.skip_evidence, b.skip_evidence)
    assert b.skipping_unseen
    for step in range(6, 12):
        counts = [[r.size for r in x.run(list(range(truth.size)), 8 * truth.size, sample_at(step))] for x in (a, b)]
        assert counts[0] == counts[1]


def test_bad_skip_settings_and_evidence_are_refused_by_name():
    with pytest.raises(ValueError, match="bound_skips must be None, True, False or 'measured'"):
        SavingProgressive(bound_skips="sometimes")
    alloc = SavingProgressive(bound_skips="measured")
    state = alloc.state_dict()
    for bad in ([1.0, -2.0, 0.0, 0.0], [1.0, 2.0], [float("nan")] * 4):
        with pytest.raises(ValueError, match="skip_unseen"):
            alloc.load_state_dict({**state, "skip_unseen": {"evidence": bad, "skipping": False}})
    for bad in ({"evidence": [0.0] * 4, "skipping": "yes"}, {"evidence": [0.0] * 4}, [0.0] * 4):
        with pytest.raises(ValueError, match="skip_unseen"):
            alloc.load_state_dict({**state, "skip_unseen": bad})
    np.testing.assert_array_equal(alloc.skip_evidence, np.zeros(4))
    alloc.skip_evidence, alloc.skipping_unseen = np.ones(4), True
    older = {k: v for k, v in state.items() if k != "skip_unseen"}  # a state from before: none gathered
    alloc.load_state_dict(older)
    np.testing.assert_array_equal(alloc.skip_evidence, np.zeros(4))
    assert not alloc.skipping_unseen

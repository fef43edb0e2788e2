"""`SavingProgressive(belief_from=...)`: a run starts from what an earlier run's belief learned about
the prompts' features, never from its prompt history; bad sources are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.allocators.saving_state import carried_belief
from adaptive_rollouts.state import load_state, save_state


def _trained(rng: np.random.Generator) -> tuple[SavingProgressive, np.ndarray]:
    view = rng.normal(size=(16, 6))
    p = 1.0 / (1.0 + np.exp(-3.0 * view[:, 0]))

    def sample(idx, counts):
        return [rng.binomial(1, p[i], c).astype(float) for i, c in zip(idx, counts)]

    alloc = SavingProgressive(estimator="grpo")
    for _ in range(6):
        alloc.observe_policy(list(range(16)), view)
        alloc.run(list(range(16)), 128, sample)
    return alloc, view


def test_a_carried_belief_predicts_new_prompts_as_the_earlier_one_without_its_history(tmp_path):
    earlier, view = _trained(np.random.default_rng(0))
    save_state(tmp_path / "run1.npz", earlier.state_dict())
    later = SavingProgressive(estimator="grpo", belief_from=tmp_path / "run1.npz")
    fresh = SavingProgressive(estimator="grpo")
    new = [f"new-{i}" for i in range(16)]  # prompts the earlier run never saw: the features carry over
    for alloc in (earlier, later, fresh):
        alloc.observe_policy(new, view)
    a_earlier, b_earlier = earlier.belief.belief(new)
    a_later, b_later = later.belief.belief(new)
    assert np.allclose(a_earlier / (a_earlier + b_earlier), a_later / (a_later + b_later))
    assert np.array_equal(later.belief.model.mean, earlier.belief.model.mean)
    a_fresh, b_fresh = fresh.belief.belief(new)
    assert np.ptp(a_fresh / (a_fresh + b_fresh)) < np.ptp(a_later / (a_later + b_later))  # it tells them apart
    # no prompt history comes along: a prompt the earlier run saw is new to the later one
    assert later.belief.history.predict([0]).mean == pytest.approx(fresh.belief.history.predict([0]).mean)
    # the belief's own state and a dict do the same
    state = load_state(tmp_path / "run1.npz")
    assert carried_belief(state) == carried_belief(state["belief"])
    assert carried_belief({"format": 1, "allocator": state}) == carried_belief(state)  # a trainer checkpoint's


def test_bad_carried_beliefs_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="belief_from"):
        SavingProgressive(belief_from={"allocator": "Uniform"})
    with pytest.raises(ValueError, match="belief_from"):
        SavingProgressive(belief_from=3)
    earlier, view = _trained(np.random.default_rng(1))
    blind = SavingProgressive(policy=False, belief_from=earlier.state_dict())  # saved with the view's columns
    with pytest.raises(ValueError, match="policy"):
        _ = blind.belief
    with pytest.raises(ValueError, match="policy"):  # refused again, never a fresh belief in its place
        _ = blind.belief

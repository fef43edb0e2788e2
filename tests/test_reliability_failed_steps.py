"""A step whose `sample` fails in any round - the pilot, a later round, the last one - leaves the
allocator exactly as it was: its state_dict, its metrics, and the next good step equal those of a
twin that never saw the failure. Progressive allocators change beliefs between rounds (the
default refits its population prior after the pilot), so a failure in round 2 or later is the case
a check of the first call alone misses. Also: a step whose rewards are all None (unscored) spends
only what it can learn from."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import POOL, REGISTRY, build_allocator, states_equal

from adaptive_rollouts.types import Draw

P = dict(zip(POOL, np.linspace(0.0, 1.0, len(POOL))))
BUDGET = 8 * len(POOL)
# how many times each registry allocator calls `sample` in the failing step (checked below); the
# default cuts its flat pilots by its bound per group and ends in two rounds here, so its rule
# without the bound (the same rounds, one round more on this pool) is checked too
NO_BOUND = "saving-progressive, flat_chance=None"
SAVING_CALLS = {"saving-progressive": 2, NO_BOUND: 3, "pilot": 2, "pilot-commit": 2, "sgpo": 2, "greso": 1}


def _build(name: str, seed: int):
    if name == NO_BOUND:
        alloc = build_allocator("saving-progressive", seed=seed)
        alloc.flat_chance = None
        return alloc
    return build_allocator(name, seed=seed)


def _sampler(seed: int, fail_at: int | None = None, kind: str = "nan", calls: list | None = None):
    """Bernoulli rewards from a generator of its own (the twin's sampler draws the same), failing
    in call number ``fail_at`` as ``kind`` says."""
    rng = np.random.default_rng(seed)
    calls = [] if calls is None else calls

    def sample(indices, counts):
        call = len(calls)
        calls.append(list(counts))
        out = [(rng.random(int(c)) < P[POOL[i]]).astype(float) for i, c in zip(indices, counts)]
        if call == fail_at:
            if kind == "nan":
                out[0] = np.full(int(counts[0]), np.nan)
            elif kind == "wrong-length":
                out[0] = np.zeros(int(counts[0]) + 1)
            else:
                raise MemoryError("out of memory while generating")
        return out

    return sample


def _trained(name: str):
    """The allocator after steps that give it history (a persistent p, so the default cuts and
    continues in several rounds)."""
    alloc = _build(name, seed=3)
    for step in range(4):
        alloc.run(POOL, BUDGET, _sampler(100 + step))
    return alloc


def _calls_of_next_step(name: str) -> int:
    calls: list = []
    _trained(name).run(POOL, BUDGET, _sampler(8, calls=calls))
    return len(calls)


CASES = [
    pytest.param(name, call, kind, id=f"{name}-call{call}-{kind}")
    for name, calls in SAVING_CALLS.items()
    for call in range(calls)
    for kind in ("nan", "wrong-length", "exception")
]


@pytest.mark.parametrize("name, call, kind", CASES)
def test_a_step_failing_in_any_round_leaves_the_allocator_as_it_was(name, call, kind):
    alloc, twin = _trained(name), _trained(name)
    before, metrics = copy.deepcopy(alloc.state_dict()), copy.deepcopy(alloc.last_metrics)
    with pytest.raises((ValueError, MemoryError)):
        alloc.run(POOL, BUDGET, _sampler(8, fail_at=call, kind=kind))
    assert states_equal(alloc.state_dict(), before), f"{name}: a failed step changed the state"
    assert alloc.last_metrics == metrics, f"{name}: a failed step changed last_metrics"
    for step in range(3):  # the next good steps equal the twin's
        out = [a.run(POOL, BUDGET, _sampler(200 + step)) for a in (alloc, twin)]
        assert [r.tolist() for r in out[0]] == [r.tolist() for r in out[1]], f"{name}: step {step} differs"
        assert states_equal(alloc.state_dict(), twin.state_dict())


@pytest.mark.parametrize("name", sorted(SAVING_CALLS))
def test_the_failing_step_reaches_every_round_the_cases_fail_in(name):
    """The cases above fail in every round the step has (the default: the pilot and round 2; without
    the bound also round 3)."""
    assert _calls_of_next_step(name) >= SAVING_CALLS[name]


@pytest.mark.parametrize("name", [n for n in REGISTRY if n not in SAVING_CALLS and n != "default"])
def test_every_other_allocator_failing_in_its_last_round_is_unchanged(name):
    """The same for the rest of the registry, failing (NaN rewards) in the step's last `sample`."""
    last = _calls_of_next_step(name) - 1
    alloc, twin = _trained(name), _trained(name)
    before = copy.deepcopy(alloc.state_dict())
    with pytest.raises(ValueError, match="NaN"):
        alloc.run(POOL, BUDGET, _sampler(8, fail_at=last))
    assert states_equal(alloc.state_dict(), before), f"{name}: a failed step changed the state"
    out = [a.run(POOL, BUDGET, _sampler(200)) for a in (alloc, twin)]
    assert [r.tolist() for r in out[0]] == [r.tolist() for r in out[1]]


def _unscored_except(scored: set):
    """Every rollout unscored (a reward function that returned None) except for prompts in ``scored``."""
    rng = np.random.default_rng(0)

    def sample(indices, counts):
        rewards = [
            (rng.random(int(c)) < 0.5).astype(float) if POOL[i] in scored else np.zeros(0)
            for i, c in zip(indices, counts)
        ]
        return Draw(rewards, [int(c) - r.size for c, r in zip(counts, rewards)])

    return sample


@pytest.mark.parametrize("steps", [1, 3])
def test_the_default_spends_only_its_pilots_when_every_reward_is_none(steps):
    """Before: every pilot looked flat (R = 0), so every group was completed and the whole budget
    spent on rollouts nothing could be learned from; Pilot and sGPO spend their pilots."""
    alloc = build_allocator("saving-progressive", seed=0)
    for _ in range(steps):
        rewards = alloc.run(POOL, BUDGET, _unscored_except(set()))
        m = alloc.last_metrics
        assert m["rollouts_spent"] <= alloc.pilot * len(POOL) < BUDGET
        assert all(r.size == 0 for r in rewards)


def test_unscored_prompts_do_not_stop_the_scored_ones():
    alloc = build_allocator("saving-progressive", seed=0)
    rewards = alloc.run(POOL, BUDGET, _unscored_except({POOL[0], POOL[1]}))
    # cold start: a scored prompt is completed, unless its pilot came back flat (the bound per group
    # may then cut it); the unscored ones stop at their pilots
    for r in rewards[:2]:
        assert r.size == BUDGET // len(POOL) or (r.size == alloc.pilot and np.ptp(r) == 0)
    assert any(r.size == BUDGET // len(POOL) for r in rewards[:2])
    spent = sum(r.size for r in rewards[:2]) + alloc.pilot * (len(POOL) - 2)
    assert alloc.last_metrics["rollouts_spent"] == spent

"""Budgets at the edges: absurd ones are refused by name before any rollout, or work; a saving
allocator keeps to any budget it can (it spends at most the budget); pilots of one rollout are
refused."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from adaptive_rollouts.allocators import SGPO, make_allocator
from adaptive_rollouts.objectives.signal import MAX_GROUP
from adaptive_rollouts.types import Draw

SAVING = ("saving-progressive", "pilot", "pilot-commit", "sgpo", "greso")
PROMPTS = ["a", "b", "c", "d"]


def _never(indices, counts):
    raise AssertionError("sample called for a budget that should have been refused")


@pytest.mark.parametrize("name", SAVING)
@pytest.mark.parametrize("budget", [10**30, 2**63])
def test_budgets_an_int64_cannot_hold_are_refused_by_name(name, budget):
    """Before: OverflowError (default, greso, pilot), a 4 EiB MemoryError (pilot-commit)."""
    with pytest.raises(ValueError, match=f"budget must be <= {2**63 - 1}, got {budget}"):
        make_allocator(name).run(PROMPTS, budget, _never)


def _partly_scored(limit=64):
    """Answers any request with at most ``limit`` scored rewards per prompt, the rest unscored (so a
    test can ask for groups far larger than memory)."""
    rng = np.random.default_rng(0)

    def sample(indices, counts):
        rewards = [(rng.random(min(int(c), limit)) < 0.3).astype(float) for c in counts]
        return Draw(rewards, [int(c) - r.size for c, r in zip(counts, rewards)])

    return sample


@pytest.mark.parametrize("name", SAVING)
@pytest.mark.parametrize("budget", [2**62, 2**63 - 1])
def test_huge_int64_budgets_work_or_are_refused_by_name(name, budget):
    """Before: "array is too big" (default) or a MemoryError; now the allocation is made (the
    groups asked of `sample` are at most the equal split) or the budget is refused naming it."""
    alloc = make_allocator(name)
    try:
        rewards = alloc.run(PROMPTS, budget, _partly_scored())
    except ValueError as err:
        assert name == "saving-progressive" and f"budget {budget} is too large" in str(err)
        assert str(MAX_GROUP) in str(err)
        return
    assert len(rewards) == len(PROMPTS)
    assert 0 <= alloc.last_metrics["rollouts_spent"] <= budget


def test_the_default_prices_groups_of_a_quarter_billion_in_little_memory():
    """Q = 4, n_q = 2.5e8 (before: MemoryError) and Q = 64, n_q = 131,072 (before: 713 MiB)."""
    for q, n in ((4, 250_000_000), (64, 131_072)):
        alloc = make_allocator("saving-progressive")
        tracemalloc.start()
        try:
            for _ in range(2):
                alloc.run([f"p{i}" for i in range(q)], q * n, _partly_scored())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 32 * 2**20, f"Q={q}, n={n}: {peak / 2**20:.1f} MiB"
        assert alloc.last_metrics["rollouts_spent"] <= q * n


@pytest.mark.parametrize("budget", [0, 1, 3, 7])
def test_a_saving_allocator_keeps_to_any_budget_it_can(budget):
    """Before: a budget of 1 "cannot be met exactly by SavingProgressive" (0 was accepted); a
    saving allocator spends at most the budget, so a budget below a group of 2 spends nothing."""
    alloc = make_allocator("saving-progressive")
    rewards = alloc.run(PROMPTS, budget, lambda i, c: [np.resize([0.0, 1.0], int(x)) for x in c])
    spent = sum(r.size for r in rewards)
    assert spent <= budget and alloc.last_metrics["rollouts_spent"] == spent
    assert alloc.last_metrics["skipped"] == sum(r.size == 0 for r in rewards)
    if budget < 2:
        assert spent == 0


@pytest.mark.parametrize("name", ["greso", "pilot", "pilot-commit", "sgpo"])
def test_saving_allocators_below_their_least_budget_say_what_they_need(name):
    with pytest.raises(ValueError, match=r"needs budget >= \d+"):
        make_allocator(name).run(PROMPTS, 1, _never)


@pytest.mark.parametrize("build", [lambda: SGPO(m=1), lambda: make_allocator("pilot", m=1)])
def test_pilots_of_one_rollout_are_refused(build):
    """Before: SGPO(m=1) made singleton groups (6 of 8 prompts), where Pilot required m >= 2."""
    with pytest.raises(ValueError, match=r"m must be >= 2 \(a group of one rollout carries no signal\), got 1"):
        build()

"""Forced 1-rollout groups (a budget below 2 rollouts per prompt): they go to the prompts with the
least signal. Checked against exhaustive search over every allocation on small cases."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_rollouts.objectives import mixed_probability, variance_table
from adaptive_rollouts.solvers import allocate, total_cost


def _weights(objective, p):
    # as the command line weighs them: GRPO's variance already contains the reward-variance factor
    return np.ones_like(p) if objective == "grpo" else p * (1 - p)


def _signal(objective, p, w):
    """The signal a group of 2 rollouts carries: the reward variance (RLOO, Dr. GRPO), the chance
    of a group that is not all equal times the importance weight (GRPO)."""
    return w * mixed_probability(p, 2.0) if objective == "grpo" else w


def _optimal_allocations(costs, budget, lower, upper):
    """Every allocation of least total cost (the table includes the singleton penalty, so these have
    the fewest 1-rollout groups first), by exhaustive search."""
    q = costs.shape[0]
    found = [
        np.array(c)
        for c in itertools.product(range(lower, upper + 1), repeat=q)
        if sum(c) == budget and np.isfinite(total_cost(costs, np.array(c)))
    ]
    totals = np.array([total_cost(costs, c) for c in found])
    best = totals.min()
    tol = 1e-9 * max(1.0, abs(best))
    return [c for c, t in zip(found, totals) if t <= best + tol], best


def _signal_starved(counts, signal):
    """Pairs where a prompt with more signal has 1 rollout while one with less has 2 or more."""
    return [
        (i, j)
        for i in range(len(counts))
        for j in range(len(counts))
        if counts[i] == 1 and counts[j] >= 2 and signal[i] > signal[j]
    ]


@pytest.mark.parametrize("objective", ["rloo", "drgrpo", "grpo"])
def test_the_prompt_with_signal_is_not_the_singleton(objective):
    p = np.array([0.0, 0.5, 1.0])
    counts = allocate(_weights(objective, p), budget=4, lower=1, objective=objective, success_prob=p)
    assert counts.tolist() == [1, 2, 1]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    q=st.integers(2, 5),
    objective=st.sampled_from(["rloo", "drgrpo", "grpo"]),
    upper=st.integers(2, 4),
    data=st.data(),
)
def test_forced_singletons_match_exhaustive_search_and_go_to_the_least_signal(q, objective, upper, data):
    # probabilities with exact zeros and ones (no signal) and repeats (ties)
    p = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.8, 1.0]), min_size=q, max_size=q)))
    budget = data.draw(st.integers(q, 2 * q - 1))  # below 2 per prompt: 1-rollout groups are forced
    w = _weights(objective, p)
    costs = variance_table(objective, p, weights=w, upper=upper, lower=1)
    optimal, best = _optimal_allocations(costs, budget, 1, upper)
    counts = allocate(w, budget, lower=1, upper=upper, objective=objective, success_prob=p)
    assert total_cost(costs, counts) == pytest.approx(best, rel=1e-9, abs=1e-12)
    signal = _signal(objective, p, w)
    # the property is attainable at the optimum (exhaustive search), and the solver attains it
    assert any(not _signal_starved(c, signal) for c in optimal)
    assert _signal_starved(counts, signal) == [], (p.tolist(), budget, counts.tolist())

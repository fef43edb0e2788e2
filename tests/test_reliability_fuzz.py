"""Property-based fuzzing (hypothesis) of the solvers and of every registry allocator.

Invariants: the solver spends the budget exactly, respects the bounds and reaches the optimum of
a brute-force dynamic programme (or raises ValueError exactly when no allocation exists); every
allocator spends exactly its budget within its bounds, returns one full-or-empty group per prompt
with finite rewards in [0, 1], reports the skipped prompts in its metrics, and keeps finite
probability beliefs. CI runs a modest number of examples; `benchmarks/fuzz.py` runs the same
properties for 100,000 cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    POOL,
    REGISTRY,
    VARIANTS,
    BernoulliEnv,
    budget_for,
    build_variant,
    check_solution_invariants,
    check_step_invariants,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_rollouts.objectives import variance_table
from adaptive_rollouts.solvers import allocate, solve_table
from adaptive_rollouts.types import allocator_kind

CI = settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------------------------------------
# brute force
# ------------------------------------------------------------------------------------------------
def dp_optimum(costs: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool) -> float:
    """Minimum of sum_q costs[q, n_q] over allowed counts summing to budget (inf if none)."""
    allowed = np.zeros(upper + 1, dtype=bool)
    allowed[lower:] = True
    allowed[0] |= allow_skip
    best = np.full(budget + 1, np.inf)
    best[0] = 0.0
    for row in costs:
        new = np.full(budget + 1, np.inf)
        for n in np.flatnonzero(allowed & np.isfinite(row)):
            if n <= budget:
                new[n:] = np.minimum(new[n:], best[: budget + 1 - n] + row[n])
        best = new
    return float(best[budget])


# ------------------------------------------------------------------------------------------------
# solver properties
# ------------------------------------------------------------------------------------------------
_COST = st.one_of(st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False), st.just(np.inf))


@st.composite
def table_problems(draw):
    q = draw(st.integers(1, 5))
    lower = draw(st.integers(0, 3))
    upper = draw(st.integers(max(lower, 1), lower + 7))
    allow_skip = draw(st.booleans())
    convex = draw(st.booleans())
    if convex:  # sorted increments: convex rows, the greedy path
        steps = np.sort(
            np.array(draw(st.lists(st.floats(-10, 10), min_size=q * upper, max_size=q * upper))).reshape(q, upper),
            axis=1,
        )
        costs = np.hstack([np.zeros((q, 1)), np.cumsum(steps, axis=1)])
    else:
        costs = np.array(draw(st.lists(_COST, min_size=q * (upper + 1), max_size=q * (upper + 1)))).reshape(
            q, upper + 1
        )
    least = 0 if allow_skip else q * lower
    budget = draw(st.integers(least, q * upper))
    return costs, budget, lower, upper, allow_skip


def check_table_problem(problem) -> None:
    costs, budget, lower, upper, allow_skip = problem
    given_costs = costs.copy()
    best = dp_optimum(costs, budget, lower, upper, allow_skip)
    try:
        counts = solve_table(costs, budget, lower, upper, allow_skip=allow_skip)
    except ValueError as err:
        assert not np.isfinite(best), f"solver refused a feasible problem (optimum {best}): {err}"
        return
    assert np.array_equal(costs, given_costs), "solver modified its input"
    problems = check_solution_invariants(costs, counts, budget, lower, upper, allow_skip)
    assert not problems, problems
    got = float(costs[np.arange(costs.shape[0]), counts].sum())
    assert got <= best + 1e-9 * max(1.0, np.abs(costs[np.isfinite(costs)]).sum()), (got, best)


@st.composite
def allocate_problems(draw):
    q = draw(st.integers(1, 6))
    objective = draw(st.sampled_from(["rloo", "drgrpo", "grpo"]))
    lower = draw(st.integers(1, 3))  # lower = 1: 1-rollout groups only when the budget forces them
    upper = draw(st.integers(max(lower, 2), lower + 8))
    skip = draw(st.booleans())
    weights = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 0.25)), min_size=q, max_size=q)))
    success = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=q, max_size=q)))
    budget = draw(st.integers(0 if skip else q * lower, q * upper))
    return weights, budget, lower, upper, objective, success, skip


def check_allocate_problem(problem) -> None:
    weights, budget, lower, upper, objective, success, skip = problem
    w = weights.copy()
    skip_kwargs = {"allow_skip": True, "skip_cost": 0.3} if skip else {}
    # the reference: the cost table of what allocate minimises (objectives.pricing)
    table = variance_table(objective, success, weights=weights, upper=upper, lower=lower, **skip_kwargs)
    best = dp_optimum(table, budget, lower, upper, skip)
    try:
        counts = allocate(
            weights,
            budget,
            lower=lower,
            upper=upper,
            objective=objective,
            success_prob=success if objective == "grpo" else None,
            **skip_kwargs,
        )
    except ValueError as err:
        assert not np.isfinite(best), f"allocate refused a feasible problem (optimum {best}): {err}"
        return
    assert np.array_equal(weights, w), "allocate modified its weights"
    problems = check_solution_invariants(table, counts, budget, lower, upper, skip)
    assert not problems, problems
    got = float(table[np.arange(weights.size), counts].sum())
    assert got <= best + 1e-9 * max(1.0, best), (got, best)


@CI
@given(table_problems())
def test_fuzz_solve_table(problem):
    check_table_problem(problem)


@CI
@given(allocate_problems())
def test_fuzz_allocate(problem):
    check_allocate_problem(problem)


# ------------------------------------------------------------------------------------------------
# allocator properties
# ------------------------------------------------------------------------------------------------
@st.composite
def allocator_cases(draw, names=tuple(REGISTRY)):
    name = draw(st.sampled_from(names))
    q = draw(st.integers(1, 8))
    p = draw(st.lists(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)), min_size=q, max_size=q))
    return {
        "name": name,
        "q": q,
        "p": p,
        "extra": draw(st.integers(0, 40)),
        "seed": draw(st.integers(0, 2**16)),
        "graded": draw(st.booleans()),
        "steps": draw(st.integers(1, 3)),
    }


def check_allocator_case(case: dict) -> None:
    alloc = build_variant(case["name"], seed=case["seed"])
    env = BernoulliEnv(seed=case["seed"], graded=case["graded"])
    prompts = POOL[: case["q"]]
    env.p.update(zip(prompts, case["p"]))
    budget = budget_for(alloc, case["q"], case["extra"])
    for _ in range(case["steps"]):
        env.log.clear()
        rewards = alloc.run(prompts, budget, env.sampler(prompts))
        problems = check_step_invariants(alloc, prompts, budget, env.log, rewards)
        assert not problems, (case, problems)
        if hasattr(alloc, "plan"):
            counts = alloc.plan(prompts, budget).counts
            spent_ok = counts.sum() == budget if allocator_kind(alloc) == "fill" else counts.sum() <= budget
            assert spent_ok and np.all(counts >= 0), (case, counts.tolist())


@pytest.mark.parametrize("name", REGISTRY + sorted(VARIANTS))
@settings(CI, max_examples=40)
@given(data=st.data())
def test_fuzz_allocator(name, data):
    check_allocator_case(data.draw(allocator_cases(names=(name,))))


def test_solver_terminates_on_subnormal_costs():
    """Found by this fuzzing: an infeasible budget with every slack below the tolerance (subnormal
    costs) made the exactness loop of `solve_table` spin forever; it now raises ValueError."""
    costs = np.array([[0.0, 0.0, 2.225073858507e-311]])
    with pytest.raises(ValueError, match="cannot be met exactly"):
        solve_table(costs, 1, 2, 2, allow_skip=True)
    assert solve_table(costs, 2, 2, 2, allow_skip=True).tolist() == [2]

"""Exact solvers: equality with exhaustive search, the VIP paper's worked example, bad input."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_rollouts.objectives import variance_table
from adaptive_rollouts.solvers import allocate, objective_function, solve_kkt, solve_table, total_cost

P_EXAMPLE = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
EXPECTED = {"drgrpo": [4, 7, 10, 12, 12, 10, 5, 4], "rloo": [4, 7, 10, 11, 12, 10, 6, 4]}


def brute_force(costs, budget, lower, upper, allow_skip=False):
    """Smallest total over every allowed count vector (inf if none)."""
    allowed = list(range(lower, upper + 1))
    if allow_skip and lower > 0:
        allowed = [0] + allowed
    best = np.inf
    q = costs.shape[0]
    for counts in itertools.product(allowed, repeat=q):
        if sum(counts) == budget:
            best = min(best, float(sum(costs[i, n] for i, n in enumerate(counts))))
    return best


def check_solution(counts, costs, budget, lower, upper, allow_skip):
    assert counts.dtype == np.int64
    assert counts.sum() == budget
    ok = ((counts >= lower) & (counts <= upper)) | (allow_skip & (counts == 0))
    assert ok.all(), counts


# ---- the VIP paper's worked example (arXiv 2602.01601) ------------------------------------------------------


@pytest.mark.parametrize("objective", ["drgrpo", "rloo"])
def test_worked_example(objective):
    a = P_EXAMPLE * (1 - P_EXAMPLE)
    assert allocate(a, 64, 4, 12, objective).tolist() == EXPECTED[objective]
    assert solve_kkt(a, 64, 4, 12, objective).tolist() == EXPECTED[objective]
    table = variance_table(objective, P_EXAMPLE, upper=12, lower=4)
    assert solve_table(table, 64, 4, 12).tolist() == EXPECTED[objective]


# ---- exhaustive search ---------------------------------------------------------------------------


@st.composite
def table_case(draw, convex: bool):
    q = draw(st.integers(1, 4))
    upper = draw(st.integers(1, 6))
    lower = draw(st.integers(0, upper))
    allow_skip = draw(st.booleans())
    vals = st.floats(-5, 5, allow_nan=False, width=32)
    if convex:  # cumulative sums of sorted increments: convex rows
        rows = []
        for _ in range(q):
            inc = sorted(draw(st.lists(vals, min_size=upper, max_size=upper)))
            rows.append(np.concatenate([[draw(vals)], np.cumsum(inc)]))
        costs = np.array(rows, dtype=float)
    else:
        costs = np.array(
            draw(st.lists(st.lists(vals, min_size=upper + 1, max_size=upper + 1), min_size=q, max_size=q)), dtype=float
        )
        # forbid a few counts
        for i, j in draw(st.lists(st.tuples(st.integers(0, q - 1), st.integers(0, upper)), max_size=3)):
            costs[i, j] = np.inf
    least = 0 if allow_skip else q * lower
    budget = draw(st.integers(least, q * upper))
    return costs, budget, lower, upper, allow_skip


@pytest.mark.parametrize("convex", [True, False])
def test_solve_table_matches_exhaustive_search(convex):
    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(table_case(convex))
    def run(case):
        costs, budget, lower, upper, allow_skip = case
        best = brute_force(costs, budget, lower, upper, allow_skip)
        if not np.isfinite(best):
            with pytest.raises(ValueError):
                solve_table(costs, budget, lower, upper, allow_skip)
            return
        counts = solve_table(costs, budget, lower, upper, allow_skip)
        check_solution(counts, costs, budget, lower, upper, allow_skip)
        assert total_cost(costs, counts) == pytest.approx(best, rel=1e-9, abs=1e-9)

    run()


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    q=st.integers(1, 4),
    lower=st.integers(1, 4),
    width=st.integers(0, 4),
    objective=st.sampled_from(["rloo", "drgrpo", "grpo", "callable"]),
    skip=st.booleans(),
    data=st.data(),
)
def test_allocate_matches_exhaustive_search(q, lower, width, objective, skip, data):
    upper = lower + width
    if objective == "rloo":
        lower, upper = max(lower, 2), max(upper, 2)
    w = np.array(data.draw(st.lists(st.floats(0, 1, width=32), min_size=q, max_size=q)))
    p = np.array(data.draw(st.lists(st.floats(0, 1, width=32), min_size=q, max_size=q)))
    budget = data.draw(st.integers(0 if skip else q * lower, q * upper))
    n = np.arange(upper + 1)
    kwargs = {}
    if objective == "callable":
        bumps = np.array(data.draw(st.lists(st.floats(-1, 1, width=32), min_size=upper + 1, max_size=upper + 1)))
        f = lambda m: bumps[np.asarray(m)]  # noqa: E731  arbitrary non-convex f
        obj = f
        fn = f(n)
        costs = w[:, None] * fn[None, :]
    else:  # the built-in objectives: the cost table of what allocate minimises (objectives.pricing)
        obj = objective
        if objective == "grpo":
            kwargs["success_prob"] = p
        if skip:
            kwargs["skip_cost"] = 0.3
        costs = variance_table(objective, p, weights=w, upper=upper, lower=lower, allow_skip=skip, skip_cost=0.3)
    best = brute_force(costs, budget, lower, upper, skip)
    if not np.isfinite(best):
        with pytest.raises(ValueError):
            allocate(w, budget, lower, upper, obj, allow_skip=skip, **kwargs)
        return
    counts = allocate(w, budget, lower, upper, obj, allow_skip=skip, **kwargs)
    check_solution(counts, costs, budget, lower, upper, skip)
    assert total_cost(costs, counts) == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_allocate_large_nonconvex_matches_table_solver():
    """Dr. GRPO with lower = 2 (non-convex) and the default upper (truncated internally)."""
    rng = np.random.default_rng(3)
    w = rng.uniform(0, 0.25, 300)
    counts = allocate(w, 2400, 2, None, "drgrpo")
    upper = 2400 - 299 * 2
    assert counts.sum() == 2400 and counts.min() >= 2
    n = np.arange(upper + 1)
    table = w[:, None] * objective_function("drgrpo")(n)[None, :]
    ref = solve_table(table, 2400, 2, upper)
    assert total_cost(table, counts) == pytest.approx(total_cost(table, ref), rel=1e-12)
    kkt = solve_kkt(w, 2400, 2, upper, "drgrpo")
    assert total_cost(table, counts) <= total_cost(table, kkt) + 1e-12


def test_allocate_large_convex_fast_path_is_greedy_optimum():
    rng = np.random.default_rng(4)
    w = rng.uniform(0, 0.25, 2000)
    w[:5] = 0.0
    w[5:9] = w[9]  # ties
    counts = allocate(w, 16000, 2, None, "rloo")
    upper = 16000 - 1999 * 2
    # exact optimality certificate for a convex separable problem: every marginal taken is <=
    # every marginal not taken
    f = objective_function("rloo")
    with np.errstate(invalid="ignore"):
        taken = w * (f(counts) - f(counts - 1))
    taken = taken[counts > 2].max()
    nxt = w * (f(counts + 1) - f(counts))
    assert taken <= nxt[counts < upper].min() + 1e-18
    assert counts.sum() == 16000
    assert (counts[:5] == 2).all()


def test_ties_are_deterministic_lower_index_first():
    counts = allocate(np.ones(4) * 0.2, budget=9, lower=2, upper=5, objective="rloo")
    assert counts.tolist() == [3, 2, 2, 2]
    table = np.tile(np.array([9.0, 9.0, 1.0, 0.5, 0.0]), (3, 1))  # all marginals equal
    assert solve_table(table, 8, 2, 4).tolist() == [4, 2, 2]


def reference_dp(costs, budget, lower, upper, allow_skip):
    """Plain dynamic programme over prompts and budget: the exact optimum value."""
    allowed = [n for n in range(costs.shape[1]) if lower <= n <= upper or (allow_skip and n == 0)]
    best = np.full(budget + 1, np.inf)
    best[0] = 0.0
    for row in costs:
        new = np.full(budget + 1, np.inf)
        for n in allowed:
            if n <= budget:
                new[n:] = np.minimum(new[n:], best[: budget + 1 - n] + row[n])
        best = new
    return best[budget]


@pytest.mark.parametrize("seed", range(12))
def test_solve_table_matches_dp_on_larger_nonconvex_tables(seed):
    rng = np.random.default_rng(seed)
    q, upper, lower = int(rng.integers(5, 40)), int(rng.integers(4, 14)), int(rng.integers(1, 4))
    allow_skip = bool(seed % 2)
    kind = seed % 3
    n = np.arange(upper + 1)
    if kind == 0:  # random noise
        costs = rng.normal(size=(q, upper + 1))
    elif kind == 1:  # improvement-like: concave gain with a fixed cost, many equal rows
        a = rng.choice([0.05, 0.1, 0.2], size=q)
        costs = -(a[:, None] * np.sqrt(n)[None, :] - 0.01 * n[None, :])
    else:  # Dr. GRPO-like, non-convex at the start
        a = rng.uniform(0, 0.25, q)
        costs = a[:, None] * (n - 1) / np.maximum(n, 1) ** 2 + 0.02 * (n == 2)
    costs[:, 0] = 0.0 if allow_skip else costs[:, 0]
    budget = int(rng.integers(0 if allow_skip else q * lower, q * upper + 1))
    best = reference_dp(costs, budget, lower, upper, allow_skip)
    counts = solve_table(costs, budget, lower, upper, allow_skip)
    check_solution(counts, costs, budget, lower, upper, allow_skip)
    assert total_cost(costs, counts) == pytest.approx(best, rel=1e-9, abs=1e-9)


def test_infinite_costs_forbid_counts():
    table = np.array([[np.inf, np.inf, 1.0, np.inf, 0.0], [np.inf, np.inf, 1.0, 0.5, 0.4]])
    counts = solve_table(table, 7, 2, 4)
    assert counts.tolist() == [4, 3]
    with pytest.raises(ValueError, match="budget=5"):
        solve_table(np.array([[np.inf, np.inf, 1.0, np.inf, 0.0]] * 2), 5, 2, 4)


# ---- bad input -------------------------------------------------------------------------------------


def test_bad_input_raises_value_error_naming_values():
    w = np.array([0.1, 0.2])
    with pytest.raises(ValueError, match="budget=3"):
        allocate(w, 3, 2, 4)
    with pytest.raises(ValueError, match="budget=9"):
        allocate(w, 9, 2, 4)
    with pytest.raises(ValueError, match="lower=5 > upper=4"):
        allocate(w, 8, 5, 4)
    with pytest.raises(ValueError, match="weights"):
        allocate(np.array([0.1, np.nan]), 6, 2, 4)
    with pytest.raises(ValueError, match="weights"):
        allocate(np.array([0.1, -0.2]), 6, 2, 4)
    with pytest.raises(ValueError, match="empty batch"):
        allocate(np.array([]), 0, 2, 4)
    with pytest.raises(ValueError, match="columns"):
        solve_table(np.zeros((2, 4)), 6, 2, 4)
    with pytest.raises(ValueError, match="NaN"):
        solve_table(np.full((2, 5), np.nan), 6, 2, 4)
    with pytest.raises(ValueError, match="empty batch"):
        solve_table(np.zeros((0, 5)), 0, 2, 4)
    with pytest.raises(ValueError, match="success_prob"):
        allocate(w, 6, 2, 4, "grpo")
    with pytest.raises(ValueError, match="skip_cost"):
        allocate(w, 4, 2, 4, "rloo", allow_skip=True)
    with pytest.raises(ValueError, match="objective"):
        allocate(w, 6, 2, 4, "nope")
    with pytest.raises(ValueError, match="budget=2"):
        solve_kkt(w, 2, 2, 4)
    # with skipping the lower end of the feasible range is 0
    assert allocate(w, 2, 2, 4, lambda n: -np.asarray(n, float), allow_skip=True).sum() == 2

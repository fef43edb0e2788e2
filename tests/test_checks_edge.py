"""Validate once, at the edge: one integer rule, one feasibility rule, kernels on checked values."""

import argparse

import numpy as np
import pytest

from adaptive_rollouts.allocators import VIP, Uniform, base
from adaptive_rollouts.allocators._pilot import count_parameter
from adaptive_rollouts.checks import arguments, validation
from adaptive_rollouts.checks.validation import (
    InfeasibleBudgetError,
    budget_span,
    check_bounds,
    check_budget,
    check_feasible,
    check_integer,
)
from adaptive_rollouts.predictors import CumulativeMean
from adaptive_rollouts.solvers import allocate, solve_allocation, solve_bounded, solve_table


@pytest.mark.parametrize("value", [True, "3", 2.5, None, np.float64(2.5), 1 + 0j])
def test_one_integer_rule_refuses_the_same_values_everywhere(value):
    """check_integer, check_budget, check_bounds and the pilots' counts give the same answer."""
    for call in (
        lambda: check_integer(value, "budget"),
        lambda: check_budget(value),
        lambda: check_bounds(4, value, 1, 8, False),
        lambda: count_parameter("budget", value, 0),
    ):
        with pytest.raises(ValueError, match="budget must be an integer"):
            call()


def test_one_integer_rule_takes_integral_floats_and_bounds_them():
    assert check_integer(np.float32(6.0), "x", least=2, most=6) == 6
    assert type(check_integer(np.int64(3), "x")) is int
    with pytest.raises(ValueError, match="x must be <= 6, got 7"):
        check_integer(7, "x", most=6)
    with pytest.raises(ValueError, match="^must be >= 1, got 0$"):  # unnamed: argparse names the option
        check_integer(0, "", least=1)


def test_the_command_line_integer_goes_through_the_one_rule(monkeypatch):
    seen = []

    def spy(value, name, least=None, most=None):
        seen.append((value, least, most))
        return validation.check_integer(value, name, least, most)

    monkeypatch.setattr(arguments, "check_integer", spy)
    assert arguments.positive_int("12") == 12 and arguments.nonnegative_int("0") == 0
    assert seen == [(12, 1, 2**63 - 1), (0, 0, 2**63 - 1)]
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be <= 9223372036854775807"):
        arguments.nonnegative_int(str(2**63))


def test_one_feasibility_rule_for_solvers_and_allocators():
    """The solver's entry and an allocator's entry refuse exactly the same budgets."""
    for q, lower, upper, skip in [(3, 2, 4, False), (2, 3, 4, True), (4, 1, None, False), (2, 2, None, True)]:
        for budget in range(0, 20):
            try:
                check_feasible(budget, q, lower, upper, skip)
                ok = True
            except InfeasibleBudgetError:
                ok = False
            if upper is not None:
                try:
                    check_bounds(q, budget, lower, upper, skip)
                    assert ok, (q, lower, upper, skip, budget)
                except InfeasibleBudgetError:
                    assert not ok, (q, lower, upper, skip, budget)
            # with skipping, 2 prompts of 3..4 rollouts hold 0, 3, 4, 6, 7, 8 and nothing else
            if (q, lower, upper, skip) == (2, 3, 4, True):
                assert ok == (budget in (0, 3, 4, 6, 7, 8)), budget


def test_feasibility_messages_name_the_budget_and_who_refuses_it():
    with pytest.raises(InfeasibleBudgetError, match=r"budget=9 is infeasible for Q=2 prompts .*need 4 <= budget <= 8"):
        check_feasible(9, 2, 2, 4)
    with pytest.raises(InfeasibleBudgetError, match=r"budget 9 is infeasible for Uniform on 2 prompts .*budget in"):
        Uniform(lower=2, upper=4).plan(["a", "b"], 9)
    with pytest.raises(InfeasibleBudgetError, match=r"budget 5 cannot be met exactly by Me: no number of prompts"):
        check_feasible(5, 2, 3, 4, True, owner="Me")
    assert budget_span(3, 2, None, False) == (6, None)


def test_allocator_kernels_do_not_recheck_the_budget(monkeypatch):
    """A VIP plan checks its budget once (its entry), not again in the solver."""
    calls = []
    real = validation.check_feasible

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(base, "check_feasible", counting)
    monkeypatch.setattr(validation, "check_feasible", counting)  # reached by check_limits / check_bounds
    alloc = VIP(CumulativeMean(), estimator="rloo", lower=2, upper=8)
    alloc.plan(["a", "b", "c"], 12)
    assert calls == [12]
    allocate(np.ones(3), 12, 2, 8)  # the public solver checks once as well
    assert calls == [12, 12]


def test_kernels_agree_with_the_public_solvers():
    w = np.array([0.05, 0.2, 0.25])
    assert solve_allocation(w, 12, 2, 8, "rloo").tolist() == allocate(w, 12, 2, 8).tolist()
    table = np.arange(27.0).reshape(3, 9) % 5
    assert solve_bounded(table, 12, 2, 8).tolist() == solve_table(table, 12, 2, 8).tolist()


def test_the_kernel_keeps_the_check_the_edge_cannot_make():
    """+inf entries inside a row can make a budget infeasible that the bounds allow: only the table
    solver can see that."""
    table = np.array([[0.0, np.inf, 2.225073858507e-311]])
    check_bounds(1, 1, 0, 2, False)  # the bounds allow n = 1
    with pytest.raises(InfeasibleBudgetError, match="cannot be met exactly"):
        solve_table(table, 1, 0, 2)

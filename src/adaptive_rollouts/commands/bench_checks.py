"""Checks of a benchmark's settings before any set-up: every method name builds, and every
method can spend the budget on the prompts of a step. The command line reports a failure as a
usage error (exit status 2) instead of a traceback minutes later or a note inside report.md.

>>> check_methods(["uniform", "vip@true-p"], batch_prompts=4, budget=16)
>>> check_methods(["nosuch"], batch_prompts=4, budget=16)
Traceback (most recent call last):
...
ValueError: --methods: 'nosuch': unknown method 'nosuch'; known: ...
"""

from __future__ import annotations

from collections.abc import Sequence

from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.sim.problem import make_problem

__all__ = ["check_methods"]


def check_methods(methods: Sequence[str], batch_prompts: int, budget: int) -> None:
    """ValueError naming the first method of ``methods`` that does not build, or whose feasible
    budget range on ``batch_prompts`` prompts does not hold ``budget``."""
    if not methods:
        raise ValueError("--methods: give at least one method")
    problem = make_problem("hard-heavy", n_prompts=max(batch_prompts, 8), n_test=8, dim=4, seed=0)
    for method in methods:
        try:
            alloc, _ = build_allocator(method, problem, seed=0)
        except (ValueError, TypeError) as err:
            raise ValueError(f"--methods: {method!r}: {err}") from None
        budget_range = getattr(alloc, "budget_range", None)
        if budget_range is None:
            continue
        low, high = budget_range(batch_prompts)
        if budget < low or (high is not None and budget > high):
            span = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise ValueError(
                f"--budget {budget} is infeasible for method {method!r} on {batch_prompts} prompts per step "
                f"(it needs a budget {span})"
            )

"""Checks of a benchmark's settings before any set-up: every method name builds, and every
method can spend the budget on the prompts of a step. The command line reports a failure as a
usage error (exit status 2) instead of a traceback minutes later or a note inside report.md.

>>> check_methods(["uniform", "vip@true-p"], batch_prompts=4, budget=16)
>>> check_methods(["nosuch"], batch_prompts=4, budget=16)
Traceback (most recent call last):
...
ValueError: --methods: 'nosuch': unknown method 'nosuch'; known: ...

A regime map's method names may carry marks (`map_config.map_method`), checked with ``map_marks``:

>>> check_methods(["default^view0.9", "uniform"], batch_prompts=4, budget=16, map_marks=True)
>>> check_methods(["uniform^noview"], batch_prompts=4, budget=16, map_marks=True)
Traceback (most recent call last):
...
ValueError: --methods: 'uniform^noview': 'uniform' takes no view of the policy (no observe_policy); drop its view mark '^'
"""

from __future__ import annotations

from collections.abc import Sequence

from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.experiments.map_config import VIEW_MARK, map_method
from adaptive_rollouts.sim.problem import make_problem

__all__ = ["check_methods"]


def check_methods(methods: Sequence[str], batch_prompts: int, budget: int, *, map_marks: bool = False) -> None:
    """ValueError naming the first method of ``methods`` that does not build, or whose feasible
    budget range on ``batch_prompts`` prompts does not hold ``budget``; with ``map_marks`` (a regime
    map's names) also one whose marks do not parse or that marks a view for an allocator without
    ``observe_policy``."""
    if not methods:
        raise ValueError("--methods: give at least one method")
    problem = make_problem("hard-heavy", n_prompts=max(batch_prompts, 8), n_test=8, dim=4, seed=0)
    for method in methods:
        try:
            name, options = map_method(method) if map_marks else (method, {})
            alloc, _ = build_allocator(name, problem, seed=0)
        except (ValueError, TypeError) as err:
            raise ValueError(f"--methods: {method!r}: {err}") from None
        if "policy_view_auroc" in options and not callable(getattr(alloc, "observe_policy", None)):
            raise ValueError(
                f"--methods: {method!r}: {name!r} takes no view of the policy (no observe_policy); drop its "
                f"view mark {VIEW_MARK!r}"
            )
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

"""Exact integer budget allocation: how many rollouts each prompt gets.

Problem (separable resource allocation)::

    minimise   sum_q  c_q(n_q)
    subject to sum_q n_q = C,   lower <= n_q <= upper   (or n_q = 0 when skipping is allowed)

* `solve_table` (`table`, `lagrangian`): the costs as a table ``costs[q, n]``; exact for any table.
* `allocate` (`allocate`, `shared`): the costs ``c_q(n) = w_q f(n)`` for a named objective (RLOO,
  Dr. GRPO, GRPO) or a callable; exact.
* `solve_kkt` (`kkt`): the VIP paper's continuous-KKT-plus-greedy-rounding method, for comparison.
* `equal_split` (`split`): a total spread as evenly as possible (Uniform's allocation).

Each public solver checks its input once (`checks.validation.check_bounds` / `check_limits`); the
allocators, which check the budget at their own entry, call the kernels `solve_allocation` and
`solve_bounded` on checked values. A budget that cannot be met raises `InfeasibleBudgetError` (a ValueError). Methods, ties, numerics
and why the variance objectives need an explicit skip cost: docs/objectives.md, section 5.
"""

from __future__ import annotations

from ..checks.validation import InfeasibleBudgetError
from .allocate import Objective, allocate, objective_function, reachable_upper, solve_allocation
from .kkt import solve_kkt
from .split import equal_split
from .table import solve_bounded, solve_table, total_cost

__all__ = [
    "InfeasibleBudgetError",
    "Objective",
    "allocate",
    "equal_split",
    "objective_function",
    "reachable_upper",
    "solve_allocation",
    "solve_bounded",
    "solve_kkt",
    "solve_table",
    "total_cost",
]

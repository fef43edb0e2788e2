"""adaptive-rollouts: how many rollouts each prompt gets in RLVR, under a fixed budget.

The data path of one step is predict -> allocate -> sample -> observe:

>>> from adaptive_rollouts import allocate
>>> allocate([0.0099, 0.09, 0.16, 0.24, 0.25, 0.16, 0.0475, 0.0099],
...          budget=64, lower=4, upper=12, objective="rloo").tolist()
[4, 7, 10, 11, 12, 10, 6, 4]

Framework-free at import: torch, TRL and verl load only in `advantages` and `integrations`.
"""

from adaptive_rollouts.checks.validation import InfeasibleBudgetError
from adaptive_rollouts.solvers import allocate, solve_kkt, solve_table
from adaptive_rollouts.types import Allocator, Encoder, PlanningAllocator, Prediction, Predictor

__version__ = "0.1.0"

__all__ = [
    "Allocator",
    "Encoder",
    "InfeasibleBudgetError",
    "PlanningAllocator",
    "Prediction",
    "Predictor",
    "__version__",
    "allocate",
    "solve_kkt",
    "solve_table",
]

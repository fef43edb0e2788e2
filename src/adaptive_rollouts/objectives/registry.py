"""The estimator registry: every group advantage estimator the library knows, by name.

`checks.validation.ESTIMATORS` is the one name list; its entries are registered here, one line per
estimator, in the order the name list shows them. An entry point that takes ``estimator="rloo"``
resolves the name once with `get_estimator`; past that point code asks the object, never the name.
Adding an estimator: write its class (an `Estimator` subclass), register an instance below.
"""

from __future__ import annotations

from ..checks.validation import ESTIMATORS
from .centred import RLOO, DrGRPO
from .estimator import Estimator
from .grpo import GRPO

__all__ = ["ESTIMATORS", "get_estimator"]

ESTIMATORS.register(GRPO.name, GRPO())
ESTIMATORS.register(DrGRPO.name, DrGRPO())
ESTIMATORS.register(RLOO.name, RLOO())


def get_estimator(estimator: str | Estimator, argname: str = "estimator") -> Estimator:
    """The estimator object for a registered name (an `Estimator` passes through).

    >>> get_estimator("rloo")
    RLOO()
    >>> get_estimator("ppo")
    Traceback (most recent call last):
    ...
    ValueError: estimator must be one of ('grpo', 'drgrpo', 'rloo'), got 'ppo'
    """
    if isinstance(estimator, Estimator):
        return estimator
    return ESTIMATORS.resolve(estimator, argname)

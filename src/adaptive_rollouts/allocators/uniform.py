"""Uniform allocation: GRPO / RLOO / Dr. GRPO as usually run."""

from __future__ import annotations

import numpy as np

from ..checks.validation import check_lower_upper
from ..solvers import equal_split
from ..types import Prediction
from .base import SingleShotAllocator

__all__ = ["Uniform"]


class Uniform(SingleShotAllocator):
    """Every prompt gets the same number of rollouts: n_q = floor(C / Q), and the first C mod Q
    prompts of the batch (batch order, deterministic) get one more.

    Paper: GRPO (Shao et al. 2024, DeepSeekMath), RLOO (Ahmadian et al. 2024), Dr. GRPO
    (Liu et al. 2025) - all sample a fixed group size per prompt.
    Budget: lower * Q <= C <= upper * Q (lower = 1 by default; with C < 2Q some groups are singletons,
    which carry no signal - the metrics count them).

    >>> import numpy as np
    >>> Uniform().plan(["a", "b", "c"], 8).counts.tolist()
    [3, 3, 2]
    """

    name = "uniform"

    def __init__(self, lower: int = 1, upper: int | None = None, seed: int | None = 0):
        super().__init__(seed)
        self.lower, self.upper = check_lower_upper(lower, upper)

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        return equal_split(budget, len(prompts))

"""Whether a group of binary rollouts carries any learning signal: the chance it is not all equal,
and the reward variance of a binary reward.
Every variance and improvement objective weighs a group by it (GRPO, Dr. GRPO and RLOO give an
all-equal group zero advantage)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bernoulli_variance", "mixed_probability"]


def bernoulli_variance(p: Any, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Variance of a reward that is `high` with probability p and `low` otherwise:
    (high - low)^2 p (1 - p). {0, 1}: p(1-p); {-1, +1}: 4 p(1-p).

    >>> float(bernoulli_variance(0.5, -1.0, 1.0))
    1.0
    """
    p = np.asarray(p, dtype=float)
    return (high - low) ** 2 * p * (1.0 - p)


def mixed_probability(p: Any, n: Any) -> np.ndarray:
    """1 - p^n - (1-p)^n: the chance that n binary rollouts are not all equal (a group with any
    learning signal). p and n broadcast; n = 0 gives -1, clipped to 0.

    >>> mixed_probability(0.5, [1, 2, 3]).tolist()
    [0.0, 0.5, 0.75]
    """
    p, n = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(n, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):  # p^n as exp(n log p): much faster than pow
        mixed = 1.0 - np.exp(n * np.log(p)) - np.exp(n * np.log1p(-p))
    return np.maximum(np.where(n > 0, mixed, 0.0), 0.0)

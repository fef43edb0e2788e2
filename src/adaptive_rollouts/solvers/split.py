"""`equal_split`: a total spread as evenly as possible, the one definition of an even allocation.

Uniform's group sizes, the even fill of GRESO and dynamic sampling, the simulator's oracles, the
per-process shares of a trainer's batch and the reference of the guarded allocator all call it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["equal_split"]


def equal_split(total: int, q: int, order: Any = None) -> np.ndarray:
    """``total`` spread as evenly as possible over ``q`` parts: each gets ``total // q``, and the
    first ``total mod q`` in ``order`` (default 0, 1, ..., q - 1) one more. int64; ``q = 0`` gives an
    empty split of a zero total.

    >>> equal_split(10, 4).tolist(), equal_split(10, 4, order=[3, 2, 1, 0]).tolist()
    ([3, 3, 2, 2], [2, 2, 3, 3])
    """
    total, q = int(total), int(q)
    if q < 0 or total < 0 or (q == 0 and total > 0):
        raise ValueError(f"cannot split total={total} over q={q} parts")
    out = np.full(q, total // q if q else 0, dtype=np.int64)
    extra = np.arange(q) if order is None else np.asarray(order, dtype=np.int64)
    out[extra[: total % q if q else 0]] += 1
    return out

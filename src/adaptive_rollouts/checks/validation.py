"""Input checks and name lists shared by the whole library: one function per check.

Every public entry point validates its arguments here, so a bad input gets the same clear error
(naming the input and the offending prompts or values) wherever it enters: allocators, predictors,
solvers, objectives and the trainer integrations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from .rewards import check_rewards, check_rewards_flat, group_sums

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "InfeasibleBudgetError",
    "check_bounds",
    "check_budget",
    "check_choice",
    "check_probabilities",
    "check_prompts",
    "check_range",
    "check_real",
    "check_real_array",
    "check_rewards",
    "check_rewards_flat",
    "group_sums",
    "check_weights",
    "names",
]

ESTIMATORS: tuple[str, ...] = ("grpo", "drgrpo", "rloo")
"""Group advantage estimators: GRPO (std-normalised), Dr. GRPO (mean-centred), RLOO (leave-one-out)."""

AGGREGATIONS: tuple[str, ...] = ("prompt-mean", "seq-mean", "token-mean", "constant")
"""How a trainer's loss averages the rollouts of a batch (see docs/objectives.md, section 3, "Loss aggregation")."""


class InfeasibleBudgetError(ValueError):
    """The budget cannot be spent exactly within the bounds (or the allowed counts of a table)."""


def names(items: Iterable[Any], limit: int = 5) -> str:
    """The first `limit` items as reprs, and how many more there are.

    >>> names(["a", "b", "c"], limit=2)
    "'a', 'b' and 1 more"
    """
    items = list(items)
    shown = ", ".join(repr(p) for p in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> Any:
    """`value` if it is one of `allowed`, else a ValueError naming `name` and the choices.

    >>> check_choice("estimator", "ppo", ESTIMATORS)
    Traceback (most recent call last):
    ...
    ValueError: estimator must be one of ('grpo', 'drgrpo', 'rloo'), got 'ppo'
    """
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


def check_prompts(
    prompts: Iterable[Hashable], argname: str = "prompts", *, nonempty: bool = True, distinct: bool = True
) -> list:
    """`prompts` as a list of hashable keys: not a single string, non-empty and without
    duplicates unless told otherwise (a prediction may ask about the same prompt twice; one
    step's batch may not hold it twice). Linear time: one set of the keys (duplicates are then
    named in a second linear pass, only when there are some)."""
    if isinstance(prompts, (str, bytes)):
        raise ValueError(f"{argname} must be a sequence of prompts, got a single string {prompts!r}")
    if type(prompts) is not list:
        try:
            prompts = list(prompts)
        except TypeError:
            raise ValueError(f"{argname} must be a sequence of prompts, got {type(prompts).__name__}") from None
    try:
        distinct_count = len(set(prompts))
    except TypeError:
        unhashable = [p for p in prompts if not isinstance(p, Hashable)]
        raise ValueError(f"{argname} must be hashable keys, got {names(unhashable)}") from None
    if nonempty and not prompts:
        raise ValueError(f"{argname} is empty: need at least one prompt")
    if distinct and distinct_count != len(prompts):
        seen: set = set()
        dupes: dict = {}  # insertion-ordered, O(1) membership: linear overall
        for p in prompts:
            if p in seen:
                dupes[p] = None
            seen.add(p)
        raise ValueError(f"{argname} has duplicates {names(dupes)}: a prompt may appear once per batch")
    return prompts


def check_real(value: Any, name: str) -> float:
    """`value` as a float if it is a real number (int or float, numpy ones included; not bool, str
    or complex), else a ValueError naming `name`.

    >>> check_real(True, "discount")
    Traceback (most recent call last):
    ...
    ValueError: discount must be a real number, got bool True
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def check_range(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_closed: bool = False,
    high_closed: bool = False,
) -> float:
    """`value` as a finite float (`check_real`) strictly between ``low`` and ``high`` (either end
    included when told; None: unbounded), else a ValueError naming `name`.

    >>> check_range(0.7, "clip", 0.0, 0.5)
    Traceback (most recent call last):
    ...
    ValueError: clip must be in (0, 0.5), got 0.7
    """
    v = check_real(value, name)
    above = low is None or v > low or (low_closed and v == low)
    below = high is None or v < high or (high_closed and v == high)
    if np.isfinite(v) and above and below:
        return v
    if low is not None and high is not None:
        interval = f"{'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"{name} must be in {interval}, got {v}")
    bound = "" if low is None else f" and {'>=' if low_closed else '>'} {low:g}"
    bound += "" if high is None else f" and {'<=' if high_closed else '<'} {high:g}"
    raise ValueError(f"{name} must be finite{bound}, got {v}")


def check_real_array(values: Any, name: str) -> np.ndarray:
    """`values` as a float array if every entry is a real number: an int or float array, or a
    sequence of ints and floats - never bool, str, None or complex (numpy would silently turn
    ``True`` into 1.0, ``"0.2"`` into 0.2 and drop an imaginary part)."""
    if isinstance(values, np.ndarray):
        arr = values
    else:
        if values is None or isinstance(values, (str, bytes)):
            raise ValueError(f"{name} must be an array of real numbers, got {type(values).__name__} {values!r}")
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of real numbers, got {values!r}") from None
        if arr.dtype.kind in "fiu" and isinstance(values, (list, tuple)):
            if any(isinstance(x, (bool, np.bool_)) for x in values):  # [0.2, True] became [0.2, 1.0]
                arr = np.asarray(values, dtype=object)
    if arr.dtype.kind == "O":
        bad = [
            (i, x)
            for i, x in enumerate(arr.ravel().tolist())
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating))
        ]
        if bad:
            i, x = bad[0]
            raise ValueError(f"{name} must be real numbers; entry {i} is {type(x).__name__} {x!r}")
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype} ({values!r:.80})")
    return arr.astype(np.float64, copy=False)


def check_budget(budget: Any, name: str = "budget") -> int:
    """A non-negative integer (an integral float is accepted)."""
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer)):
        if isinstance(budget, (float, np.floating)) and float(budget).is_integer():
            budget = int(budget)
        else:
            raise ValueError(f"{name} must be an integer, got {type(budget).__name__} {budget!r}")
    if budget < 0:
        raise ValueError(f"{name} must be >= 0, got {budget}")
    return int(budget)


def _integer(name: str, value: Any) -> int:
    """An int, or an integral float; not bool, str or anything else."""
    integral = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integral and isinstance(value, (float, np.floating)):
        integral = float(value).is_integer()
    if not integral:
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def check_integer(value: Any, name: str, least: int | None = None) -> int:
    """`value` as an int (an integral float is taken; bool, str, 2.5 are not), at least ``least``.

    >>> check_integer(4.0, "pilot", least=2)
    4
    """
    v = _integer(name, value)
    if least is not None and v < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return v


def check_lower_upper(lower: Any, upper: Any, least: int = 1) -> tuple[int, int | None]:
    """An allocator's rollout bounds: integers (an integral float is taken, 2.5 or "9" is not)
    with ``least <= lower <= upper``; ``upper`` may be None (no cap).

    >>> check_lower_upper(2, None), check_lower_upper(2.0, 8)
    ((2, None), (2, 8))
    >>> check_lower_upper(2.5, None)
    Traceback (most recent call last):
    ...
    ValueError: lower must be an integer, got float 2.5
    """
    low = _integer("lower", lower)
    high = None if upper is None else _integer("upper", upper)
    if low < least or (high is not None and high < low):
        raise ValueError(f"need {least} <= lower <= upper, got lower={lower}, upper={upper}")
    return low, high


def check_bounds(q: int, budget: Any, lower: Any, upper: Any, allow_skip: bool) -> tuple[int, int, int]:
    """(budget, lower, upper) as ints for Q prompts; raises `InfeasibleBudgetError` unless
    ``Q lower <= budget <= Q upper`` (``0 <= budget`` with ``allow_skip``)."""
    if q == 0:
        raise ValueError("empty batch: need at least one prompt (got 0 weights / table rows)")
    budget, lower, upper = _integer("budget", budget), _integer("lower", lower), _integer("upper", upper)
    if lower < 0:
        raise ValueError(f"lower must be >= 0, got lower={lower}")
    if lower > upper:
        raise ValueError(f"lower must be <= upper, got lower={lower} > upper={upper}")
    least = 0 if allow_skip else q * lower
    if not least <= budget <= q * upper:
        raise InfeasibleBudgetError(
            f"budget={budget} is infeasible for Q={q} prompts with lower={lower}, upper={upper}"
            f"{', allow_skip=True' if allow_skip else ''}: need {least} <= budget <= {q * upper}"
        )
    return budget, lower, upper


def check_weights(weights: Any, name: str = "weights") -> np.ndarray:
    """A non-empty 1-D array of finite real values >= 0 (`check_real_array`)."""
    w = check_real_array(weights, name)
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {w.shape}")
    if w.size == 0:
        raise ValueError(f"empty batch: {name} has no entries")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        idx = np.flatnonzero(bad)[:5]
        raise ValueError(f"{name} must be finite and >= 0; bad at indices {idx.tolist()}: {w[idx].tolist()}")
    return w


def check_probabilities(values: Any, name: str = "success_prob") -> np.ndarray:
    """A float array of probabilities in [0, 1] (any shape; real numbers only, `check_real_array`)."""
    p = check_real_array(values, name)
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise ValueError(f"{name} must lie in [0, 1], got {p[bad][:5].tolist()}")
    return p

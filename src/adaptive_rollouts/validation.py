"""Input checks and name lists shared by the whole library: one function per check.

Every public entry point validates its arguments here, so a bad input gets the same clear error
(naming the input and the offending prompts or values) wherever it enters: allocators, predictors,
solvers, objectives and the trainer integrations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "InfeasibleBudgetError",
    "check_bounds",
    "check_budget",
    "check_choice",
    "check_probabilities",
    "check_prompts",
    "check_rewards",
    "check_weights",
    "names",
]

ESTIMATORS: tuple[str, ...] = ("grpo", "drgrpo", "rloo")
"""Group advantage estimators: GRPO (std-normalised), Dr. GRPO (mean-centred), RLOO (leave-one-out)."""

AGGREGATIONS: tuple[str, ...] = ("prompt-mean", "seq-mean", "token-mean", "constant")
"""How a trainer's loss averages the rollouts of a batch (see docs/theory.md, "Loss aggregation")."""


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
    step's batch may not hold it twice)."""
    if isinstance(prompts, (str, bytes)):
        raise ValueError(f"{argname} must be a sequence of prompts, got a single string {prompts!r}")
    try:
        prompts = list(prompts)
    except TypeError:
        raise ValueError(f"{argname} must be a sequence of prompts, got {type(prompts).__name__}") from None
    unhashable = [p for p in prompts if not isinstance(p, Hashable)]
    if unhashable:
        raise ValueError(f"{argname} must be hashable keys, got {names(unhashable)}")
    if nonempty and not prompts:
        raise ValueError(f"{argname} is empty: need at least one prompt")
    if distinct and len(set(prompts)) != len(prompts):
        seen: set = set()
        dupes: list = []
        for p in prompts:
            if p in seen and p not in dupes:
                dupes.append(p)
            seen.add(p)
        raise ValueError(f"{argname} has duplicates {names(dupes)}: a prompt may appear once per batch")
    return prompts


def check_rewards(
    prompts: Sequence[Hashable],
    rewards: Any,
    expected: Sequence[int] | np.ndarray | None = None,
    source: str = "rewards",
    unit_range: bool = True,
) -> list[np.ndarray]:
    """One finite 1-D float array per prompt with values in [0, 1] (binary or graded; any finite
    value when not ``unit_range``: a trainer's raw rewards), of length ``expected[i]`` when given.
    ``source`` names where the rewards came from in the errors."""
    if isinstance(rewards, np.ndarray) and rewards.ndim == 2:
        rewards = list(rewards)
    try:
        count = len(rewards)
    except TypeError:
        raise ValueError(f"{source} must be a sequence of 1-D arrays, got {type(rewards).__name__}") from None
    if count != len(prompts):
        raise ValueError(
            f"{source} has {count} entries but prompts has {len(prompts)}: need one reward array for each "
            f"of the {len(prompts)} prompts, got {count} reward arrays"
        )
    out = []
    for i, r in enumerate(rewards):
        where = f"for prompt {prompts[i]!r}"
        if r is None:
            raise ValueError(f"{source}: got None {where}, expected a 1-D array of rewards")
        try:
            arr = np.asarray(r, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{source} are not numeric {where}: {r!r}") from None
        if arr.ndim != 1:
            raise ValueError(f"{source} must be 1-D arrays; got shape {arr.shape} {where}")
        if expected is not None and arr.size != expected[i]:
            raise ValueError(f"{source} {where} has {arr.size} rewards, expected {expected[i]}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{source} contain NaN/inf {where}: {arr.tolist()}")
        if unit_range and np.any((arr < 0.0) | (arr > 1.0)):
            raise ValueError(
                f"{source} lie outside [0, 1] (rewards are binary or graded in [0, 1]) {where}: {arr.tolist()}"
            )
        out.append(arr)
    return out


def check_budget(budget: Any, name: str = "budget") -> int:
    """A non-negative integer (an integral float is accepted)."""
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer)):
        if isinstance(budget, (float, np.floating)) and float(budget).is_integer():
            budget = int(budget)
        else:
            raise ValueError(f"{name} must be an integer, got {budget!r}")
    if budget < 0:
        raise ValueError(f"{name} must be >= 0, got {budget}")
    return int(budget)


def _integer(name: str, value: Any) -> int:
    try:
        integral = not isinstance(value, (bool, np.bool_)) and float(value).is_integer()
    except (TypeError, ValueError):
        integral = False
    if not integral:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


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
    """A non-empty 1-D array of finite values >= 0."""
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {weights!r}") from None
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
    """A float array of probabilities in [0, 1] (any shape)."""
    try:
        p = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be probabilities in [0, 1], got {values!r}") from None
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise ValueError(f"{name} must lie in [0, 1], got {p[bad][:5].tolist()}")
    return p

"""Input checks and name lists shared by the whole library: one function per check.

Every public entry point validates its arguments here, so a bad input gets the same clear error
(naming the input and the offending prompts or values) wherever it enters: allocators, predictors,
solvers, objectives and the trainer integrations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

from .registry import Registry, check_choice
from .rewards import check_rewards, check_rewards_flat, group_sums

__all__ = [
    "AGGREGATIONS",
    "ESTIMATORS",
    "LOSS_ROWS",
    "InfeasibleBudgetError",
    "Registry",
    "check_bounds",
    "budget_span",
    "check_budget",
    "check_choice",
    "check_feasible",
    "check_integer",
    "check_limits",
    "check_lower_upper",
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

ESTIMATORS: Registry[Any] = Registry("estimator")
"""Group advantage estimators by name, in registration order: ('grpo', 'drgrpo', 'rloo') (GRPO,
std-normalised; Dr. GRPO, mean-centred; RLOO, leave-one-out). The one name list: each estimator
class of `objectives.estimators` registers itself here, and a name resolves to its object with
`objectives.estimators.get_estimator`.

>>> check_choice("estimator", "ppo", ESTIMATORS)
Traceback (most recent call last):
...
ValueError: estimator must be one of ('grpo', 'drgrpo', 'rloo'), got 'ppo'
"""

AGGREGATIONS: tuple[str, ...] = ("prompt-mean", "seq-mean", "token-mean", "constant")
"""How a trainer's loss averages the rollouts of a batch (see docs/objectives.md, section 3, "Loss aggregation")."""

LOSS_ROWS: tuple[str, ...] = ("kept", "uniform")
"""What a step's loss is normalised by when an allocator trains on fewer rows than Uniform's batch
(a saving allocator cuts or skips groups): "kept", the rows trained on (the trainer's own mean);
"uniform", Uniform's rows, a cut or skipped group counting as rows of zero advantage (docs/saving.md,
"Loss normalisation")."""


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


def check_integer(value: Any, name: str, least: int | None = None, most: int | None = None) -> int:
    """`value` as an int if it is an integer (an int, a numpy integer or an integral float; not a bool,
    str or 2.5) with ``least <= value <= most`` (None: unbounded), else a ValueError naming `name`
    (empty when the caller names the value itself, as argparse does with the option). The one integer
    rule: budgets, bounds, counts of constructors and command-line integers all go through it.

    >>> check_integer(4.0, "pilot", least=2)
    4
    >>> check_integer(1, "pilot", least=2)
    Traceback (most recent call last):
    ...
    ValueError: pilot must be >= 2, got 1
    """
    integral = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integral and isinstance(value, (float, np.floating)):
        integral = float(value).is_integer()
    if not integral:
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}".lstrip())
    v = int(value)
    if least is not None and v < least:
        raise ValueError(f"{name} must be >= {least}, got {v}".lstrip())
    if most is not None and v > most:
        raise ValueError(f"{name} must be <= {most}, got {v}".lstrip())
    return v


INT64_MAX = 2**63 - 1
"""The largest budget or count: counts and budgets are int64 arrays downstream."""


def check_budget(budget: Any, name: str = "budget") -> int:
    """A non-negative integer (`check_integer`; an integral float is accepted) that an int64 holds.

    >>> check_budget(8.0)
    8
    >>> check_budget(10**30)
    Traceback (most recent call last):
    ...
    ValueError: budget must be <= 9223372036854775807, got 1000000000000000000000000000000
    """
    return check_integer(budget, name, least=0, most=INT64_MAX)


def check_lower_upper(lower: Any, upper: Any, least: int = 1) -> tuple[int, int | None]:
    """An allocator's rollout bounds: integers (`check_integer`: an integral float is taken, 2.5 or
    "9" is not) with ``least <= lower <= upper``; ``upper`` may be None (no cap).

    >>> check_lower_upper(2, None), check_lower_upper(2.0, 8)
    ((2, None), (2, 8))
    >>> check_lower_upper(2.5, None)
    Traceback (most recent call last):
    ...
    ValueError: lower must be an integer, got float 2.5
    """
    low = check_integer(lower, "lower")
    high = None if upper is None else check_integer(upper, "upper")
    if low < least or (high is not None and high < low):
        raise ValueError(f"need {least} <= lower <= upper, got lower={lower}, upper={upper}")
    return low, high


def budget_span(q: int, lower: int, upper: int | None, allow_skip: bool) -> tuple[int, int | None]:
    """Smallest and largest budget Q prompts can spend with ``lower <= n_q <= upper`` (or n_q = 0
    with ``allow_skip``); None: no largest.

    >>> budget_span(4, 2, 8, False), budget_span(4, 2, None, True)
    ((8, 32), (0, None))
    """
    return (0 if allow_skip else q * lower), (None if upper is None else q * upper)


def check_feasible(
    budget: int,
    q: int,
    lower: int,
    upper: int | None,
    allow_skip: bool = False,
    *,
    span: tuple[int, int | None] | None = None,
    owner: str | None = None,
    detail: str | None = None,
) -> int:
    """``budget`` (an int already checked by `check_budget`) if Q prompts can spend it exactly with
    ``lower <= n_q <= upper`` (or n_q = 0 with ``allow_skip``), else `InfeasibleBudgetError`. The one
    feasibility rule, called where a budget enters (`solvers.allocate`, `solve_table`, `solve_kkt`,
    `BaseAllocator.run` / `plan`).

    The budget must lie in ``span`` (default `budget_span`; an allocator may narrow it, e.g. to pay
    for a pilot); with skipping, some number k of non-skipped prompts must hold it
    (``k lower <= budget <= k upper``). The message names the solver's arguments, or ``owner`` (the
    allocator) and ``detail`` (what sets the range, default the bounds).

    >>> check_feasible(9, 2, 2, 4)
    Traceback (most recent call last):
    ...
    adaptive_rollouts.checks.validation.InfeasibleBudgetError: budget=9 is infeasible for Q=2 prompts with lower=2, upper=4: need 4 <= budget <= 8
    """
    low, high = budget_span(q, lower, upper, allow_skip) if span is None else span
    if budget < low or (high is not None and budget > high):
        if owner is None:
            raise InfeasibleBudgetError(
                f"budget={budget} is infeasible for Q={q} prompts with lower={lower}, upper={upper}"
                f"{', allow_skip=True' if allow_skip else ''}: need {low} <= budget <= {high}"
            )
        needs = f"budget in [{low}, {high}]" if high is not None else f"budget >= {low}"
        detail = f" (lower={lower}, upper={upper}, allow_skip={allow_skip}):" if detail is None else detail
        raise InfeasibleBudgetError(f"budget {budget} is infeasible for {owner} on {q} prompts{detail} needs {needs}")
    if allow_skip and budget > 0:
        ks = np.arange(1, q + 1)  # k prompts with lower <= n <= upper hold exactly [k lower, k upper]
        fits = (ks * lower <= budget) & (True if upper is None else budget <= ks * upper)
        if not np.any(fits):
            subject = f"budget={budget}" if owner is None else f"budget {budget}"
            raise InfeasibleBudgetError(
                f"{subject} cannot be met exactly{'' if owner is None else f' by {owner}'}: no number of "
                f"prompts with {lower} <= n <= {upper} rollouts each sums to it"
            )
    return budget


def check_limits(q: int, budget: int, lower: int, upper: int, allow_skip: bool) -> None:
    """Bounds already converted to ints: a non-empty batch, ``0 <= lower <= upper``, and the budget
    feasible (`check_feasible`, else `InfeasibleBudgetError`)."""
    if q == 0:
        raise ValueError("empty batch: need at least one prompt (got 0 weights / table rows)")
    if lower < 0:
        raise ValueError(f"lower must be >= 0, got lower={lower}")
    if lower > upper:
        raise ValueError(f"lower must be <= upper, got lower={lower} > upper={upper}")
    check_feasible(budget, q, lower, upper, allow_skip)


def check_bounds(q: int, budget: Any, lower: Any, upper: Any, allow_skip: bool) -> tuple[int, int, int]:
    """(budget, lower, upper) as ints for Q prompts (`check_budget`, `check_integer`), checked by
    `check_limits`: the entry check of `solve_table` and `solve_kkt`."""
    budget, lower, upper = check_budget(budget), check_integer(lower, "lower"), check_integer(upper, "upper")
    check_limits(q, budget, lower, upper, allow_skip)
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

"""One training step between a trainer and its allocator: which halves the allocator offers, what
the trainer checks of the counts it spent, and what the allocator sees of the rewards.

- `allocator_kind` (`types.allocator_kind`): ``"fill"`` (spends exactly the budget; the default)
  or ``"save"`` (at most);
- `is_single_shot`: the allocator offers ``plan`` / ``observe`` (one generation per step);
  `plan_or_prompts`: what its ``observe`` takes back;
- `check_spent` / `check_counts`: the one count rule for a step, honouring the kind;
  `check_request`: one ``sample(indices, counts)`` call of an allocator;
- `scored_draw`: a sampling round's raw rewards -> the `Draw` the allocator gets (scored successes
  in [0, 1] through `success.SuccessSignal`, and how many rollouts had no reward), the one mapping
  every trainer calls (through `step.StepBook`); `scored_successes` the same for one prompt.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeGuard

import numpy as np

from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import AllocatorKind, Draw, Plan, PlanningAllocator, Prompt, allocator_kind

__all__ = [
    "allocator_kind",
    "check_counts",
    "check_request",
    "check_spent",
    "is_single_shot",
    "plan_or_prompts",
    "scored_draw",
    "scored_successes",
]


def is_single_shot(allocator: Any) -> TypeGuard[PlanningAllocator]:
    """Whether the allocator offers ``plan(prompts, budget)`` and ``observe(plan, rewards)``."""
    return callable(getattr(allocator, "plan", None)) and callable(getattr(allocator, "observe", None))


def plan_or_prompts(plan: Any, prompts: Sequence[Prompt]) -> Plan | list:
    """What a single-shot allocator's ``observe`` takes back: the `Plan` its ``plan`` returned, or, from
    an allocator whose ``plan`` returns bare counts, the prompts.

    >>> plan_or_prompts(np.array([2, 1]), ["a", "b"])
    ['a', 'b']
    """
    return plan if isinstance(plan, Plan) else list(prompts)


def check_spent(counts: np.ndarray, budget: int, kind: AllocatorKind = "fill", who: str = "allocator") -> int:
    """The rollouts a step spent, ``counts.sum()``, if the kind allows it: ``"fill"`` spends exactly
    ``budget``, ``"save"`` at most ``budget`` (0 included). Raises naming ``who`` otherwise.

    >>> check_spent(np.array([3, 0, 5]), 8), check_spent(np.array([3, 0, 2]), 8, "save")
    (8, 5)
    """
    spent = int(np.sum(counts))
    if kind == "save" and 0 <= spent <= budget:
        return spent
    if kind == "fill" and spent == budget:
        return spent
    rule = "exactly" if kind == "fill" else "at most"
    raise ValueError(f"{who} counts sum to {spent}, budget is {budget}: a {kind!r} allocator spends {rule} the budget")


def check_counts(
    counts: Any, n_prompts: int, budget: int, kind: AllocatorKind = "fill", who: str = "allocator"
) -> np.ndarray:
    """``counts`` as int64: one integer >= 0 per prompt, spending the budget as `check_spent` says.

    >>> check_counts([3.0, 5.0], 2, 8).tolist()
    [3, 5]
    """
    arr = np.asarray(counts)
    if arr.shape != (n_prompts,):
        raise ValueError(f"{who} returned counts of shape {arr.shape}, expected ({n_prompts},)")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{who} returned non-integer counts {arr[:10].tolist()}")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise ValueError(f"{who} returned negative counts {arr[arr < 0][:10].tolist()}")
    check_spent(arr, budget, kind, who)
    return arr


def check_request(indices: Any, counts: Any, n_prompts: int) -> tuple[np.ndarray, np.ndarray]:
    """A ``sample(indices, counts)`` call as int64 arrays: distinct prompt indices in
    ``[0, n_prompts)``, one count >= 0 each; raises naming the call. The trainer's edge against an
    allocator object it did not build.

    >>> [a.tolist() for a in check_request([2, 0], [3, 1], 3)]
    [[2, 0], [3, 1]]
    """
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    cnt = np.asarray(counts, dtype=np.int64).reshape(-1)
    if idx.shape != cnt.shape or (cnt < 0).any():
        raise ValueError(f"sample(indices, counts): bad counts {cnt.tolist()} for indices {idx.tolist()}")
    if ((idx < 0) | (idx >= n_prompts)).any() or np.unique(idx).size < idx.size:
        raise ValueError(f"sample(indices, counts): bad or repeated index in {idx.tolist()} ({n_prompts} prompts)")
    return idx, cnt


def scored_draw(signal: SuccessSignal, groups: Sequence[Any], prompts: Sequence[Hashable]) -> Draw:
    """The raw rewards of a sampling round, one group per prompt of ``prompts`` (None / NaN:
    unscored) -> the `Draw` a ``sample`` call answers: each prompt's scored successes in [0, 1] and
    its number of unscored rollouts. The round is mapped at once (`SuccessSignal.to_success_groups`):
    equal rewards give equal successes whatever the order of the groups. Unscored rollouts are not observations: the allocator never sees
    them as rewards, only as ``unscored``.

    >>> draw = scored_draw(SuccessSignal(), [[-1.0, None, 1.0], [1.0]], ["a", "b"])
    >>> [s.tolist() for s in draw], draw.unscored.tolist()
    ([[0.0, 1.0], [1.0]], [1, 0])
    """
    if len(groups) != len(prompts):
        raise ValueError(f"{len(groups)} reward groups for {len(prompts)} prompts")
    values = signal.to_success_groups(groups, prompts)  # one auto range for the whole round
    scored = [v[~np.isnan(v)] for v in values]
    return Draw(scored, np.array([v.size - s.size for v, s in zip(values, scored)], dtype=np.int64))


def scored_successes(signal: SuccessSignal, raw: Any, prompt: Hashable = None) -> tuple[np.ndarray, int]:
    """`scored_draw` of one prompt: (its scored successes, its number of unscored rollouts).

    >>> scored, unscored = scored_successes(SuccessSignal(), [-1.0, None, 1.0])
    >>> scored.tolist(), unscored
    ([0.0, 1.0], 1)
    """
    draw = scored_draw(signal, [raw], [prompt])
    return draw[0], int(draw.unscored[0])

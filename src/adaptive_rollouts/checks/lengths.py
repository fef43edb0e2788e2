"""Completion lengths of generated rollouts (tokens): the one check, `check_lengths`, and the one
notice, `LengthsNotice`, for a step whose lengths are known for some rollouts and not for others.

A ``sample`` call may answer with each rollout's completion length (`types.Draw`); trainers read
them from their batch (TRL's completion ids, verl's response mask). Lengths are counted in tokens:
integers >= 0, at most the trainer's configured maximum where it has one (TRL's
``max_completion_length``, verl's ``response_length``). A prompt whose lengths are unknown is
``None``: the step then counts rollouts only, and says so once per run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .validation import check_integer

__all__ = ["LengthsNotice", "check_lengths", "lengths_state"]

logger = logging.getLogger(__name__)


def _problem(arr: np.ndarray, size: int, maximum: int | None) -> str | None:
    """What is wrong with one prompt's lengths (None: nothing)."""
    if arr.ndim != 1:
        return f"must be a 1-D array, got shape {arr.shape}"
    if arr.size != size:
        return f"has {arr.size} entries for {size} rollouts (one length per generated rollout)"
    if arr.size == 0:
        return None
    if arr.dtype.kind not in "iuf":
        return f"must be integers (token counts), got dtype {arr.dtype}"
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            return f"must be finite, got {arr[bad][0].item()!r} at rollout {int(np.flatnonzero(bad)[0])}"
        bad = arr != np.round(arr)
        if bad.any():
            return f"must be whole token counts, got {float(arr[bad][0])!r} at rollout {int(np.flatnonzero(bad)[0])}"
    if (arr < 0).any():
        j = int(np.flatnonzero(arr < 0)[0])
        return f"must be >= 0, got {arr[j].item()!r} at rollout {j}"
    if maximum is not None and (arr > maximum).any():
        j = int(np.flatnonzero(arr > maximum)[0])
        return f"must be <= the configured maximum {maximum}, got {arr[j].item()!r} at rollout {j}"
    return None


def check_lengths(
    prompts: Sequence[Any],
    lengths: Any,
    sizes: Sequence[int] | np.ndarray,
    maximum: int | None = None,
    source: str = "sample(...)",
) -> list[np.ndarray | None]:
    """Each prompt's completion lengths as int64, checked: ``lengths`` holds one entry per prompt of
    ``prompts``, a 1-D array of ``sizes[i]`` whole numbers >= 0 (and <= ``maximum`` when given), or
    None for a prompt whose lengths are not known (kept as None). ``lengths`` None: nothing known
    (every entry None). Raises ValueError naming ``source``, the prompt (index and key) and the value.

    >>> [a.tolist() for a in check_lengths(["a", "b"], [[3, 5], [7.0]], [2, 1])]
    [[3, 5], [7]]
    >>> check_lengths(["a", "b"], [[3, 5], [-1]], [2, 1])
    Traceback (most recent call last):
    ...
    ValueError: sample(...): lengths of prompt 1 ('b') must be >= 0, got -1 at rollout 0
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if maximum is not None:
        maximum = check_integer(maximum, "maximum length", least=1)
    if lengths is None:
        return [None] * len(prompts)
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__"):
        raise ValueError(f"{source}: lengths must be one array per prompt, got {type(lengths).__name__}")
    if len(lengths) != len(prompts):
        raise ValueError(f"{source}: lengths has {len(lengths)} entries for {len(prompts)} prompts (one per prompt)")
    out: list[np.ndarray | None] = []
    for i, (prompt, group, size) in enumerate(zip(prompts, lengths, sizes.tolist())):
        if group is None:
            out.append(None)
            continue
        try:
            arr = np.asarray(group)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{source}: lengths of prompt {i} ({prompt!r}) are not an array ({err})") from None
        if arr.dtype == bool or arr.dtype.kind == "O":
            raise ValueError(f"{source}: lengths of prompt {i} ({prompt!r}) must be integers, got {arr.tolist()!r}")
        problem = _problem(arr, size, maximum)
        if problem is not None:
            raise ValueError(f"{source}: lengths of prompt {i} ({prompt!r}) {problem}")
        out.append(arr.astype(np.int64))
    return out


def lengths_state(groups: Sequence[np.ndarray | None]) -> str:
    """``"complete"`` (every group known; also for no group), ``"absent"`` (none known) or
    ``"partial"`` (some known, some not: the step counts rollouts, `LengthsNotice`).

    >>> lengths_state([np.ones(2), None]), lengths_state([None]), lengths_state([np.ones(1)])
    ('partial', 'absent', 'complete')
    """
    known = sum(g is not None for g in groups)
    if known == len(groups):
        return "complete"
    return "absent" if known == 0 else "partial"


class LengthsNotice:
    """Says once (one notice per object; allocators and the trainer's step share one, so a run says
    it once) that a step had completion lengths for some rollouts and not for others, so its tokens
    were not counted: the step counts rollouts, as without lengths.

    >>> notice = LengthsNotice(); notice.say("step 3"); notice.said
    True
    """

    def __init__(self) -> None:
        self.said = False

    def say(self, where: str) -> None:
        if self.said:
            return
        self.said = True
        logger.warning(
            "%s: completion lengths are missing for some rollouts and present for others; such steps "
            "count rollouts only (no tokens_spent / tokens_saved). Said once per run.",
            where,
        )

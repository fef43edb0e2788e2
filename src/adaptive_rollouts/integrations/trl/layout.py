"""Pure helpers of the TRL integration: prompt keys, loss settings, and how rows go to ranks.

No TRL or torch import here, so these rules are tested on their own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

# TRL loss_type -> how the loss aggregates samples, named as in adaptive_rollouts.validation.AGGREGATIONS
# ("prompt-mean", "seq-mean", "token-mean", "constant"; see docs/trl.md).
#   per-sequence mean over the batch: every completion weighs alike ("grpo", "sapo", "luspo")
#   token mean over the batch: every token weighs alike ("bnpo", "dapo", "cispo", "vespo")
#   constant normaliser (Dr. GRPO): sum over tokens / (batch size * max_completion_length)
LOSS_TYPE_AGGREGATION = {
    "grpo": "seq-mean",
    "sapo": "seq-mean",
    "luspo": "seq-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "cispo": "token-mean",
    "vespo": "token-mean",
    "dr_grpo": "constant",
}

# TRL scale_rewards -> advantage estimator of adaptive_rollouts.advantages.group_advantages.
SCALE_REWARDS_ESTIMATOR = {"group": "grpo", "none": "drgrpo", "batch": "drgrpo"}


def aggregation_for_loss_type(loss_type: str) -> str:
    """The aggregation implied by TRL's ``loss_type``.

    >>> aggregation_for_loss_type("dr_grpo")
    'constant'
    """
    try:
        return LOSS_TYPE_AGGREGATION[loss_type]
    except KeyError:
        raise ValueError(
            f"loss_type {loss_type!r} is not known to adaptive_rollouts; known: {sorted(LOSS_TYPE_AGGREGATION)}"
        ) from None


def estimator_for_scale_rewards(scale_rewards: str | bool) -> str:
    """The group advantage estimator that reproduces TRL's ``scale_rewards`` setting.

    ``"batch"`` centres by the group mean like ``"none"`` and then divides by the batch std
    (done by the trainer).

    >>> estimator_for_scale_rewards("group")
    'grpo'
    """
    # older TRL used bools
    key = ("group" if scale_rewards else "none") if isinstance(scale_rewards, bool) else scale_rewards
    try:
        return SCALE_REWARDS_ESTIMATOR[key]
    except (KeyError, TypeError):
        raise ValueError(
            f"scale_rewards must be one of {sorted(SCALE_REWARDS_ESTIMATOR)}, got {scale_rewards!r}"
        ) from None


def prompt_key(prompt: Any) -> str:
    """Hashable key of a dataset prompt: the text itself, or the JSON of a conversation.

    >>> prompt_key("1+1=")
    '1+1='
    >>> prompt_key([{"role": "user", "content": "hi"}])
    '[{"role": "user", "content": "hi"}]'
    """
    if isinstance(prompt, str):
        return prompt
    try:
        return json.dumps(prompt, sort_keys=False, ensure_ascii=False)
    except TypeError as err:
        raise ValueError(f"prompt must be text or a JSON-able conversation, got {type(prompt).__name__}") from err


def dedupe(keys: Sequence[str]) -> tuple[list[str], list[int]]:
    """Unique keys in order of first appearance and the row index of each first appearance.

    >>> dedupe(["a", "a", "b", "a"])
    (['a', 'b'], [0, 2])
    """
    seen: dict[str, int] = {}
    for row, key in enumerate(keys):
        seen.setdefault(key, row)
    return list(seen), list(seen.values())


def split_round(n_rows: int, num_processes: int, rank: int) -> tuple[slice, int]:
    """Rows of one generation round handled by ``rank``, after padding to a multiple of the
    process count (every rank must generate the same number of rows for TRL's collectives).
    Returns the slice into the padded row list and the number of padding rows.

    >>> split_round(5, 2, 1)
    (slice(3, 6, None), 1)
    """
    pad = (-n_rows) % num_processes
    per_rank = (n_rows + pad) // num_processes
    return slice(rank * per_rank, (rank + 1) * per_rank), pad


def _pack_whole_groups(sizes: np.ndarray, num_processes: int, capacity: int, max_nodes: int = 20_000):
    """Each group on one rank, every rank filled to exactly ``capacity`` rows: depth-first search,
    largest group first, trying each distinct free-row count once (ranks with equal free rows are
    interchangeable). Returns the rank of each group, or None when none exists or the search gives up."""
    order = sorted(range(len(sizes)), key=lambda g: -int(sizes[g]))
    order = [g for g in order if sizes[g] > 0]
    free = [capacity] * num_processes
    owner = [-1] * len(sizes)
    nodes = 0

    def place(k: int) -> bool:
        nonlocal nodes
        if k == len(order):
            return True
        nodes += 1
        if nodes > max_nodes:
            return False
        g, tried = order[k], set()
        for rank in range(num_processes):
            if free[rank] >= sizes[g] and free[rank] not in tried:
                tried.add(free[rank])
                free[rank] -= int(sizes[g])
                owner[g] = rank
                if place(k + 1):
                    return True
                free[rank] += int(sizes[g])
        return False

    return owner if place(0) else None


def assign_groups_to_ranks(group_sizes: Sequence[int] | np.ndarray, num_processes: int) -> list[list[tuple[int, int]]]:
    """Lay out variable-size groups on ranks holding equal numbers of rows, whole groups when possible.

    First an exact search for a layout with every group on one rank (`_pack_whole_groups`, bounded);
    when none exists (e.g. sizes [5, 3] on 2 ranks of 4) the largest group goes first to the rank
    with the most free rows and a group larger than that is split over ranks. A split group stays
    correct: the trainer computes advantages on the gathered batch, so whole groups only save
    communication. One process keeps the input order.
    Returns, per rank, a list of ``(group, n_rows)`` pieces in group order.

    >>> assign_groups_to_ranks([5, 3, 3, 3, 2], 2)  # [5, 3] and [3, 3, 2]: nothing split
    [[(0, 5), (1, 3)], [(2, 3), (3, 3), (4, 2)]]
    >>> assign_groups_to_ranks([5, 3], 2)
    [[(0, 4)], [(0, 1), (1, 3)]]
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError(f"group_sizes must be non-negative integers, got {list(group_sizes)}")
    total = int(sizes.sum())
    if num_processes < 1 or total % num_processes:
        raise ValueError(f"total rows {total} is not divisible by num_processes={num_processes}")
    if num_processes == 1:
        return [[(g, int(n)) for g, n in enumerate(sizes) if n > 0]]
    capacity = total // num_processes
    pieces: list[list[tuple[int, int]]] = [[] for _ in range(num_processes)]
    owner = _pack_whole_groups(sizes, num_processes, capacity)
    if owner is not None:
        for g, rank in enumerate(owner):
            if sizes[g] > 0:
                pieces[rank].append((g, int(sizes[g])))
        return pieces
    free = [capacity] * num_processes
    for g in sorted(range(len(sizes)), key=lambda g: -int(sizes[g])):  # stable: ties keep order
        left = int(sizes[g])
        while left > 0:
            rank = max(range(num_processes), key=lambda r: free[r])
            take = min(left, free[rank])
            pieces[rank].append((g, take))
            free[rank] -= take
            left -= take
    return [sorted(p) for p in pieces]

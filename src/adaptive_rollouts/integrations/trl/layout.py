"""Pure helpers of the TRL integration: prompt keys, generation calls of a round, rows on ranks.

No TRL or torch import here, so these rules are tested on their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from adaptive_rollouts.keys import row_key

ROW_COLUMN = "adaptive_rollouts_row"
"""Column the trainer adds to a map-style ``train_dataset``: the row's position, for its key."""
SOURCE = "train"


def index_dataset(dataset: Any) -> Any:
    """``dataset`` with `ROW_COLUMN` holding each row's position (map-style datasets with ``add_column``);
    other datasets (iterable) are returned as they are and their rows are keyed by content."""
    if dataset is None or not (hasattr(dataset, "add_column") and hasattr(dataset, "__len__")):
        return dataset
    if ROW_COLUMN in (getattr(dataset, "column_names", None) or []):
        return dataset
    return dataset.add_column(ROW_COLUMN, list(range(len(dataset))))


def key_of_row(row: Mapping[str, Any]) -> str:
    """The prompt key of a dataset row: ``"train#<position>"``, or a content hash without a position.

    >>> key_of_row({"prompt": "2+2=", ROW_COLUMN: 7})
    'train#7'
    """
    if ROW_COLUMN in row:
        return row_key(source=SOURCE, index=int(row[ROW_COLUMN]))
    return row_key(row)


def group_batch(keys: Sequence[str], num_generations: int) -> tuple[list[str], list[int]]:
    """Unique keys of a generation batch (first-appearance order) and the position of each first row.

    TRL's sampler repeats every row ``num_generations`` times; a key seen any other number of times
    is the same dataset row twice in one batch, an error (two rows with the same text have two keys).

    >>> group_batch(["a", "a", "b", "b"], 2)
    (['a', 'b'], [0, 2])
    """
    seen: dict[str, int] = {}
    times: dict[str, int] = {}
    for position, key in enumerate(keys):
        seen.setdefault(key, position)
        times[key] = times.get(key, 0) + 1
    wrong = {k: n for k, n in times.items() if n != num_generations}
    if wrong:
        shown = ", ".join(f"{k!r} x{n}" for k, n in list(wrong.items())[:5])
        raise ValueError(
            f"prompt keys appear the wrong number of times in one generation batch ({shown}; expected "
            f"num_generations={num_generations} each): the same dataset row twice in one batch is an error"
        )
    return list(seen), list(seen.values())


class Call(NamedTuple):
    """One generation call of a round: ``n`` completions for each prompt in ``prompts`` (rows laid out
    prompt after prompt, ``n`` rows each), then ``pad`` extra single rows (prompt indices) that make the
    row count a multiple of the process count."""

    n: int
    prompts: list[int]
    pad: list[int]

    @property
    def rows(self) -> list[int]:
        return [p for p in self.prompts for _ in range(self.n)] + list(self.pad)


def plan_calls(need: Mapping[int, int], world: int, grouped: bool) -> list[Call]:
    """Generation calls for a round that needs ``need[prompt]`` new rollouts per prompt.

    ``grouped`` (vLLM server mode): prompts needing the same count ``c > 1`` share one call asking
    ``n = c`` completions per prompt, when their rows split evenly over the processes; everything else
    goes into one call of single rows, padded with rows of the prompts needing the most (the trainer
    keeps padding rollouts and serves them to later requests for the same prompt).

    >>> plan_calls({0: 3, 1: 3, 2: 1}, 1, grouped=True)
    [Call(n=3, prompts=[0, 1], pad=[]), Call(n=1, prompts=[2], pad=[])]
    >>> plan_calls({0: 2, 1: 1}, 2, grouped=False)
    [Call(n=1, prompts=[0, 0, 1], pad=[0])]
    """
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    if any(c < 0 for c in need.values()):
        raise ValueError(f"need must be non-negative, got {dict(need)}")
    calls: list[Call] = []
    by_count: dict[int, list[int]] = {}
    for prompt, c in need.items():
        if c > 0:
            by_count.setdefault(int(c), []).append(int(prompt))
    in_call: set[int] = set()
    for c, prompts in by_count.items():
        if grouped and c > 1 and (c * len(prompts)) % world == 0:
            calls.append(Call(c, prompts, []))
            in_call.update(prompts)
    rest = [(int(p), int(c)) for p, c in need.items() if c > 0 and int(p) not in in_call]
    if rest:
        rows = [p for p, c in rest for _ in range(c)]
        order = [p for p, _ in sorted(rest, key=lambda pc: -pc[1])]  # stable: ties keep the round's order
        pad = [order[i % len(order)] for i in range((-len(rows)) % world)]
        calls.append(Call(1, rows, pad))
    return calls


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

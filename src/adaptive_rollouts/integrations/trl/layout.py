"""Pure helpers of the TRL integration: prompt keys, generation calls of a round, rows on ranks.

No TRL or torch import here (accelerate only when a row is moved), so these rules are tested on
their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from adaptive_rollouts.keys import row_key
from adaptive_rollouts.solvers import equal_split

SOURCE = "train"


class KeyedRow(dict):
    """A dataset row as the training dataloader hands it over: exactly the row's columns, plus its
    position in ``train_dataset`` as an attribute (``row_index``), outside the columns, so reward
    functions, environments and callbacks see the dataset's row unchanged (it compares equal to it).
    ``to`` keeps the position when accelerate moves a batch to the device."""

    row_index: int

    def __init__(self, row: Mapping[str, Any], row_index: int):
        super().__init__(row)
        self.row_index = int(row_index)

    def to(self, device: Any, non_blocking: bool = False) -> KeyedRow:
        from accelerate.utils import send_to_device

        return KeyedRow(send_to_device(dict(self), device, non_blocking=non_blocking), self.row_index)


class KeyedRows:
    """A map-style dataset whose rows come back as `KeyedRow` (the dataset itself is not changed).

    >>> KeyedRows([{"prompt": "2+2="}, {"prompt": "2+2="}])[1].row_index
    1
    """

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> KeyedRow:
        return KeyedRow(self.dataset[index], index)

    def __getitems__(self, indices: list[int]) -> list[KeyedRow]:
        fetch = getattr(self.dataset, "__getitems__", None)
        rows = fetch(indices) if fetch is not None else [self.dataset[i] for i in indices]
        return [KeyedRow(row, i) for row, i in zip(rows, indices, strict=True)]


def key_of_row(row: Mapping[str, Any]) -> str:
    """The prompt key of a dataset row: ``"train#<position>"``, or a content hash without a position
    (rows of an iterable dataset).

    >>> key_of_row(KeyedRow({"prompt": "2+2="}, 7)), key_of_row({"prompt": "2+2="}) == key_of_row({"prompt": "2+2="})
    ('train#7', True)
    """
    if isinstance(row, KeyedRow):
        return row_key(source=SOURCE, index=row.row_index)
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


def _pack_whole_groups(sizes: np.ndarray, capacities: Sequence[int], max_nodes: int = 20_000):
    """Each group on one rank, every rank filled to exactly its capacity: depth-first search, largest
    group first, trying each distinct free-row count once (ranks with equal free rows are
    interchangeable). Returns the rank of each group, or None when none exists or the search gives up."""
    order = sorted(range(len(sizes)), key=lambda g: -int(sizes[g]))
    order = [g for g in order if sizes[g] > 0]
    free = [int(c) for c in capacities]
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
        for rank in range(len(free)):
            if free[rank] >= sizes[g] and free[rank] not in tried:
                tried.add(free[rank])
                free[rank] -= int(sizes[g])
                owner[g] = rank
                if place(k + 1):
                    return True
                free[rank] += int(sizes[g])
        return False

    return owner if place(0) else None


def rank_shares(total: int, num_processes: int) -> list[int]:
    """Rows of a step's training batch per rank: as equal as possible, the first ``total % num_processes``
    ranks one more (a saving allocator's total need not divide by the process count).

    >>> rank_shares(16, 2), rank_shares(7, 3), rank_shares(1, 2)
    ([8, 8], [3, 2, 2], [1, 0])
    """
    if num_processes < 1 or total < 0:
        raise ValueError(f"need total >= 0 and num_processes >= 1, got {total}, {num_processes}")
    return equal_split(int(total), int(num_processes)).tolist()


def padded_rows(shares: Sequence[int], steps_per_generation: int) -> int:
    """Rows every rank holds after padding: the largest share rounded up to a multiple of
    ``steps_per_generation`` (TRL splits each rank's rows into that many equal micro-batches, and every
    rank must run each micro-batch, so none is empty). Equal to the share when the batch is stock's.

    >>> padded_rows([8, 8], 2), padded_rows([3, 2, 2], 2), padded_rows([0, 0], 4)
    (8, 4, 4)
    """
    if steps_per_generation < 1:
        raise ValueError(f"steps_per_generation must be >= 1, got {steps_per_generation}")
    most = max(max(shares, default=0), 1)
    return -(-most // steps_per_generation) * steps_per_generation


def assign_groups_to_ranks(
    group_sizes: Sequence[int] | np.ndarray, num_processes: int, capacities: Sequence[int] | None = None
) -> list[list[tuple[int, int]]]:
    """Lay out variable-size groups on ranks holding ``capacities[r]`` rows each (default: equal rows,
    the total must divide by ``num_processes``), whole groups when possible.

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
    >>> assign_groups_to_ranks([3, 2, 0], 2, capacities=rank_shares(5, 2))
    [[(0, 3)], [(1, 2)]]
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError(f"group_sizes must be non-negative integers, got {list(group_sizes)}")
    total = int(sizes.sum())
    if capacities is None:
        if num_processes < 1 or total % num_processes:
            raise ValueError(f"total rows {total} is not divisible by num_processes={num_processes}")
        capacities = [total // num_processes] * num_processes
    if len(capacities) != num_processes or sum(capacities) != total or min(capacities, default=0) < 0:
        raise ValueError(f"capacities {list(capacities)} must be {num_processes} counts summing to {total}")
    if num_processes == 1:
        return [[(g, int(n)) for g, n in enumerate(sizes) if n > 0]]
    pieces: list[list[tuple[int, int]]] = [[] for _ in range(num_processes)]
    owner = _pack_whole_groups(sizes, capacities)
    if owner is not None:
        for g, rank in enumerate(owner):
            if sizes[g] > 0:
                pieces[rank].append((g, int(sizes[g])))
        return pieces
    free = [int(c) for c in capacities]
    for g in sorted(range(len(sizes)), key=lambda g: -int(sizes[g])):  # stable: ties keep order
        left = int(sizes[g])
        while left > 0:
            rank = max(range(num_processes), key=lambda r: free[r])
            take = min(left, free[rank])
            pieces[rank].append((g, take))
            free[rank] -= take
            left -= take
    return [sorted(p) for p in pieces]

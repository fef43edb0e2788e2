"""The policy-features pass of `AdaptiveGRPOTrainer` with several processes, without launching any:
each process is a thread with its own accelerator view (``num_processes``, ``process_index``,
``is_main_process``), and accelerate's ``gather_object`` / ``broadcast_object_list`` are replaced by
thread versions with the same semantics (gather: every process gets the concatenation of all
processes' lists in process order; broadcast: the list is overwritten in place with the main
process's). The trainer's real ``_collect`` and ``_policy_pass`` run on each thread; generation is a
stub. The real two-process run is in test_trl_multiprocess.py (slow)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from adaptive_rollouts.allocators import Uniform  # noqa: E402
from adaptive_rollouts.bridge import TrainerStep  # noqa: E402
from adaptive_rollouts.integrations.trl import trainer as trainer_module  # noqa: E402
from adaptive_rollouts.integrations.trl.layout import KeyedRow, group_batch, key_of_row  # noqa: E402
from adaptive_rollouts.integrations.trl.rounds import Rollout  # noqa: E402


class Reader(Uniform):
    """Uniform that records the policy features it is given."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[list, np.ndarray]] = []

    def observe_policy(self, prompts, features):
        self.seen.append((list(prompts), features))


class Processes:
    """``world`` fake processes (threads) and accelerate's two collectives the trainer uses."""

    def __init__(self, world: int):
        self.world = world
        self.barrier = threading.Barrier(world, timeout=20)
        self.slots: list = [None] * world
        self.rank = threading.local()
        self.gathers = 0

    def gather_object(self, obj):
        r = self.rank.value
        self.slots[r] = list(obj)
        self.barrier.wait()
        out = [x for slot in self.slots for x in slot]
        if r == 0:
            self.gathers += 1
        self.barrier.wait()
        return out

    def broadcast_object_list(self, objects, from_process: int = 0):
        r = self.rank.value
        if r == from_process:
            self.slots[from_process] = list(objects)
        self.barrier.wait()
        if r != from_process:
            objects[:] = self.slots[from_process]
        self.barrier.wait()
        return objects

    def run(self, fn):
        """``fn(rank)`` on every process at once; returns the results in rank order."""
        results: list = [None] * self.world
        errors: list = []

        def body(r: int) -> None:
            self.rank.value = r
            try:
                results[r] = fn(r)
            except BaseException as err:  # reported below
                errors.append(err)
                self.barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


def features_of(rank: int, calls: list):
    """A user's ``policy_features`` callable: row -> [dataset position, process that computed it]."""

    def features(rows):
        calls[rank].append([key_of_row(row) for row in rows])
        return np.array([[row.row_index, rank] for row in rows], dtype=np.float32)

    return features


def stub_round(rows, need, bank):
    return {
        i: [Rollout([], [1, 2], "ok", None, None, torch.tensor([1.0]), reward=1.0) for _ in range(c)]
        for i, c in need.items()
    }


def collect(world: int, per_process: int, num_generations: int, order: list[int], monkeypatch):
    """The TRL sampler's generation batch (each dataset row ``num_generations`` times, in ``order``),
    split in equal consecutive slices over ``world`` processes; each runs ``_collect``."""
    procs = Processes(world)
    monkeypatch.setattr(trainer_module, "gather_object", procs.gather_object)
    monkeypatch.setattr(trainer_module, "broadcast_object_list", procs.broadcast_object_list)
    global_rows = [KeyedRow({"prompt": f"p{i}"}, i) for i in order for _ in range(num_generations)]
    assert len(global_rows) == world * per_process
    keys, first = group_batch([key_of_row(r) for r in global_rows], num_generations)
    rows = [global_rows[i] for i in first]
    allocator, calls = Reader(), [[] for _ in range(world)]

    def one(rank: int):
        t = object.__new__(trainer_module.AdaptiveGRPOTrainer)
        t.accelerator = SimpleNamespace(
            num_processes=world, process_index=rank, is_main_process=rank == 0, device=torch.device("cpu")
        )
        t._policy_features = features_of(rank, calls)
        t.adaptive_step = TrainerStep(allocator)
        t.run_round = stub_round
        local = global_rows[rank * per_process : (rank + 1) * per_process]
        per_prompt, result, _ = t._collect(rows, keys, len(global_rows), local)
        return result

    results = procs.run(one)
    return keys, allocator, calls, results, procs


@pytest.mark.parametrize(
    "world, per_process, num_generations, order",
    [
        (2, 8, 4, [3, 0, 2, 1]),  # whole groups on each process
        (2, 6, 4, [5, 2, 7]),  # the middle prompt's rows are split 2 + 2 over the processes
        (3, 4, 3, [6, 1, 4, 0]),  # uneven: process 1 holds one row of one prompt and two of the next
        (2, 4, 8, [9]),  # one prompt spans both processes; process 1 holds no prompt of its own
    ],
)
def test_every_prompts_features_reach_the_allocator_once_in_prompt_order(
    world, per_process, num_generations, order, monkeypatch
):
    keys, allocator, calls, results, procs = collect(world, per_process, num_generations, order, monkeypatch)
    assert procs.gathers == 1  # one collective pass per step
    ((seen_keys, features),) = allocator.seen  # once per step, on the main process only
    assert seen_keys == keys == [f"train#{i}" for i in order]
    assert features.shape == (len(order), 2)
    # row i is prompt i's (its dataset position), computed by the process that holds its first row
    per_rank = per_process
    owner = [(k * num_generations) // per_rank for k in range(len(order))]
    np.testing.assert_array_equal(features, np.array([[i, o] for i, o in zip(order, owner)], dtype=np.float32))
    # every process ran the pass once, over each of its own prompts once (so a sharded model's forward
    # runs on every process); a prompt split over two processes is read by both, kept from the first
    for rank in range(world):
        local = [f"train#{order[(rank * per_rank + j) // num_generations]}" for j in range(per_rank)]
        assert calls[rank] == [list(dict.fromkeys(local))]
    assert results[0] is not None and all(r is None for r in results[1:])
    assert results[0].counts.sum() == world * per_process


def test_a_prompt_missing_from_every_process_is_an_error(monkeypatch):
    """If the processes' rows do not cover the step's prompts, the main process stops with an error
    naming them instead of giving the allocator a made-up row."""
    procs = Processes(2)
    monkeypatch.setattr(trainer_module, "gather_object", procs.gather_object)
    rows = [KeyedRow({"prompt": "a"}, 0), KeyedRow({"prompt": "b"}, 1)]

    def one(rank: int):
        t = object.__new__(trainer_module.AdaptiveGRPOTrainer)
        t.accelerator = SimpleNamespace(num_processes=2, process_index=rank, is_main_process=rank == 0)
        t._policy_features = features_of(rank, [[], []])
        return t._policy_pass([rows[0]], ["train#0", "train#1"])

    with pytest.raises(RuntimeError, match=r"no policy features for prompts \['train#1'\]"):
        procs.run(one)

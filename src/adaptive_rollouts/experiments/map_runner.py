"""The regime map's runs, in this process or in ``jobs`` worker processes.

Every run is a pure function of (cell, method, seed, rate, settings), and the allocators keep
one object per seed, so seeds are independent work: with ``jobs > 1`` the map hands the runs it
knows it will need (`RunPool.prefetch`: a method's column over every cell, a tuning grid) to a
process pool and takes their results back *in the order it asks for them* (`RunPool.get`), so the
store (``runs.jsonl``) holds the same runs in the same order as with ``jobs=1``, with the same
numbers (only the seconds each run took differ). A run that fails raises where the map asks for it,
as in one process. Where the time goes (a
profile of one saving-map cell): the allocators' per-step work and the policy view's
calibration, not the simulator's array math, so processes (not batching the simulator over seeds)
are what makes seeds cheap.

>>> pool = RunPool(lambda key: {"key": key}, jobs=1)
>>> pool.get(("cell", "uniform", 0, 0.1))["key"][1:3]
('uniform', 0)
>>> pool.close()
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

__all__ = ["RunPool", "check_jobs"]


def check_jobs(jobs: int) -> int:
    """``jobs`` as a count of processes (>= 1); ValueError naming it otherwise."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    return jobs


def _context() -> Any:
    # fork: workers start at once with the parent's modules (the package's `python -m` entry runs
    # its command on import, which a spawned worker would re-run); spawn where there is no fork
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class RunPool:
    """Runs ``run(task)`` for hashable tasks, at most once each: inline with ``jobs=1``, else in a
    pool of ``jobs`` processes (``run`` must then be a module-level function and the tasks picklable).
    ``get`` returns a task's result (waiting for it when prefetched); ``prefetch`` queues tasks."""

    def __init__(self, run: Callable[[Any], dict], jobs: int = 1):
        self.run = run
        self.jobs = check_jobs(jobs)
        self._pending: dict[Hashable, Future] = {}
        self._executor = ProcessPoolExecutor(max_workers=jobs, mp_context=_context()) if jobs > 1 else None

    def prefetch(self, tasks: Iterable[Any]) -> None:
        """Start the tasks not started yet (nothing with ``jobs=1``: `get` runs them in order)."""
        if self._executor is None:
            return
        for task in tasks:
            if task not in self._pending:
                self._pending[task] = self._executor.submit(self.run, task)

    def get(self, task: Any) -> dict:
        """The task's result; the task's exception when it failed."""
        future = self._pending.pop(task, None)
        if future is None and self._executor is not None:
            future = self._executor.submit(self.run, task)
        return self.run(task) if future is None else future.result()

    def close(self) -> None:
        """Stop the workers; queued runs not asked for yet are dropped (a resumed map redoes them)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        self._pending.clear()

    def __enter__(self) -> RunPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

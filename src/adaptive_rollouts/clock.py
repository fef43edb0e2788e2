"""The allocator clock: the seconds an allocator itself spends in a step, the trainer's generation
and scoring taken out. One clock for the allocators' own metrics (`allocators.base`), every trainer
(`bridge.TrainerStep`) and the simulator (`sim.train`); logged as ``allocator_seconds``.

>>> import time
>>> clock = AllocatorClock()
>>> with clock.running():
...     with clock.paused():  # the trainer generates: not the allocator's time
...         time.sleep(0.01)
>>> clock.seconds < 0.01
True
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["AllocatorClock"]


class AllocatorClock:
    """Seconds between `start` and `stop` (or inside `running` blocks) minus the seconds inside the
    `paused` blocks nested in them."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.paused_seconds = 0.0
        self._started: tuple[float, float] | None = None

    def start(self) -> None:
        self._started = (time.perf_counter(), self.paused_seconds)

    def stop(self) -> float:
        """Add the time since `start` (pauses out) to `seconds`; returns `seconds`."""
        if self._started is not None:
            began, paused = self._started
            self.seconds += time.perf_counter() - began - (self.paused_seconds - paused)
            self._started = None
        return self.seconds

    @contextmanager
    def running(self) -> Iterator[AllocatorClock]:
        self.start()
        try:
            yield self
        finally:
            self.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_seconds += time.perf_counter() - start

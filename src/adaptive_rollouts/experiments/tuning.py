"""Choosing a learning rate on a grid that extends itself until the best rate is interior."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LearningRateAtEdge", "tune_grid"]


class LearningRateAtEdge(RuntimeError):
    """The best learning rate stayed at the grid's edge after every allowed extension."""


def tune_grid(score, grid: Sequence[float], step: float, max_extensions: int) -> tuple[float, list[float]]:
    """The rate of best ``score(lr)`` (higher is better), extending ``grid`` geometrically by
    ``step`` on the side where the best lies until it is interior; raises `LearningRateAtEdge`
    after ``max_extensions`` extensions. Returns (best rate, every rate tried).

    >>> import numpy as np
    >>> best, tried = tune_grid(lambda lr: -abs(np.log(lr / 0.5)), [0.01, 0.03, 0.1], 3.0, 3)
    >>> round(best, 6), [round(x, 6) for x in tried]
    (0.3, [0.01, 0.03, 0.1, 0.3, 0.9])
    """
    if len(grid) < 3:
        raise ValueError(f"the learning-rate grid needs >= 3 rates to have an interior, got {list(grid)}")
    scores = {float(lr): score(float(lr)) for lr in grid}
    extensions = 0
    while True:
        tried = sorted(scores)
        best = max(tried, key=lambda lr: scores[lr])
        if tried[0] < best < tried[-1]:
            return best, tried
        if extensions == max_extensions:
            raise LearningRateAtEdge(
                f"best learning rate {best:g} is at the edge of {tried} after {max_extensions} extensions"
            )
        new = best * step if best == tried[-1] else best / step
        scores[new] = score(new)
        extensions += 1

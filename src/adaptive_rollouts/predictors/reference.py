"""Reference beliefs for the saving default's rule: what it does when its belief knows more than a
run can (benchmarks/pool_beliefs.py puts them in place of the learned belief, `SavingProgressive.belief`).

- `KnownBelief`: every prompt's true p, as a point mass: the rule's limit when nothing is unknown;
- `PopulationPosterior`: the exact posterior of a prompt's fixed p given its whole history and the
  population its p was drawn from (known): the most a history can say about a pool whose p does
  not move.

Both offer what the rule reads of its belief (`belief`, `update`, `choice`, `history`, the state);
the rule reads a Beta, so each gives the Beta of its mean and variance (moment matching).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ..checks.validation import check_prompts, check_real_array
from ..objectives.beta import beta_from_moments
from ..state.checks import StateReader
from ..types import StateDict
from ._common import check_batch
from .discounted_beta import DiscountedBeta

__all__ = ["KnownBelief", "PopulationPosterior", "POINT_STRENGTH"]

POINT_STRENGTH = 1e6
"""alpha + beta of a known p: a point mass for the rule's sums (a group of up to 2^10 rollouts)."""
_EDGE = 1e-6  # a known p is kept inside (0, 1): both Beta parameters positive


class KnownBelief:
    """Each prompt's p read from ``success(prompts) -> [Q]`` (e.g. the simulator's truth), as
    Beta(p S, (1 - p) S) with S = `POINT_STRENGTH`; it learns nothing from the groups.

    >>> a, b = KnownBelief(lambda prompts: np.array([0.25 for _ in prompts])).belief(["x"])
    >>> round(float(a[0] / (a[0] + b[0])), 6), float(a[0] + b[0])
    (0.25, 1000000.0)
    """

    history = None  # no history of its own (`allocators.saving_state`)

    def __init__(self, success: Any):
        if not callable(success):
            raise ValueError(f"success must be a callable prompts -> p, got {type(success).__name__}")
        self.success = success

    def belief(
        self, prompts: Sequence[Hashable], n: Any = None, recalibrate: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        p = check_real_array(self.success(prompts), "success(prompts)")
        if p.shape != (len(prompts),) or not np.all((p >= 0) & (p <= 1)):  # NaN fails too
            raise ValueError(f"success(prompts) must give {len(prompts)} values in [0, 1], got shape {p.shape}")
        p = np.clip(p, _EDGE, 1.0 - _EDGE)
        return p * POINT_STRENGTH, (1.0 - p) * POINT_STRENGTH

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        check_batch(prompts, rewards)  # nothing to learn; the input is still checked

    def choice(self) -> tuple[float, float]:
        """(spread, history weight) as `FlatnessPredictor.choice` logs them: a point, no history."""
        return POINT_STRENGTH, 0.0

    def observe_policy(self, prompts: Sequence[Hashable], features: Any) -> None:
        """The policy's view adds nothing to a known p."""

    def state_dict(self, sources: bool = True) -> StateDict:
        return {"class": "KnownBelief"}

    def load_state_dict(self, state: StateDict) -> None:
        StateReader(state, "KnownBelief", [])


class PopulationPosterior:
    """The exact posterior of each prompt's fixed p after s successes in s + f rollouts (every
    visit, undiscounted), under the population density pi of p across prompts:

        P(p | s, f) proportional to pi(p) p^s (1 - p)^f,

    on the ``grid`` of p with ``density`` pi at its points (a Riemann sum; the grid's spacing
    is taken as even). A prompt never seen has the population itself.

    >>> grid = np.linspace(0.0005, 0.9995, 1000)
    >>> post = PopulationPosterior(grid, np.ones(grid.size))   # a uniform population: Beta(1 + s, 1 + f)
    >>> post.update(["q"], [np.array([1.0, 0.0, 0.0])])
    >>> a, b = post.belief(["q"])
    >>> round(float(a[0]), 3), round(float(b[0]), 3)
    (2.0, 3.0)
    """

    def __init__(self, grid: Any, density: Any):
        g, d = check_real_array(grid, "grid"), check_real_array(density, "density")
        if g.ndim != 1 or g.size < 2 or d.shape != g.shape:
            raise ValueError(f"grid and density must be 1-d of one length >= 2, got {g.shape} and {d.shape}")
        if np.any((g <= 0) | (g >= 1)) or np.any(np.diff(g) <= 0):
            raise ValueError("grid must rise strictly inside (0, 1)")
        if np.any(d < 0) or not d.sum() > 0:
            raise ValueError("density must be >= 0 and not all 0")
        self.grid, self.log_prior = g, np.log(np.maximum(d / d.sum(), 1e-300))
        self.counts = DiscountedBeta(discount=1.0)  # Beta(1 + s, 1 + f): the counts, kept exactly

    history = None  # its counts are not a history source of the learned belief's kind

    def belief(
        self, prompts: Sequence[Hashable], n: Any = None, recalibrate: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        pred = self.counts.predict(prompts)
        a, b = beta_from_moments(pred.mean, pred.var)
        s, f = a - self.counts.prior_alpha, b - self.counts.prior_beta
        log_w = self.log_prior + np.log(self.grid) * s[:, None] + np.log1p(-self.grid) * f[:, None]
        w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        mean = w @ self.grid
        var = np.maximum(w @ self.grid**2 - mean**2, 1e-15)
        return beta_from_moments(mean, var, min_strength=1e-3)

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        self.counts.update(prompts, rewards)

    def choice(self) -> tuple[float, float]:
        """(spread, history weight) as `FlatnessPredictor.choice` logs them: no fitted spread, the
        whole history at weight 1."""
        return float("nan"), 1.0

    def observe_policy(self, prompts: Sequence[Hashable], features: Any) -> None:
        """The population and the history are all it reads."""

    def state_dict(self, sources: bool = True) -> StateDict:
        return {"class": "PopulationPosterior", "counts": self.counts.state_dict()}

    def load_state_dict(self, state: StateDict) -> None:
        StateReader(state, "PopulationPosterior", ["counts"])
        counts = DiscountedBeta(discount=1.0)
        counts.load_state_dict(state["counts"])
        self.counts = counts

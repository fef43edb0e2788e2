"""Recalibrating P(a group of n rollouts is all-equal) online, and the Beta belief that gives the
recalibrated chance: the two steps `FlatnessPredictor` takes after its candidates (docs/flatness.md
argues them).

- `AllEqualCalibration`: beta calibration (Kull, Silva Filho and Flach, AISTATS 2017) of a raw
  chance P, fitted online on the run's own (P, all-equal?) pairs, one map per candidate belief;
- `match_all_equal`: the Beta of a given mean whose chance of an all-equal group of n is a given
  value (the strength solved for; the mean moved toward 1/2 only where no strength reaches it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit

from ..checks.validation import check_integer, check_range
from ..objectives.beta import all_equal_beta
from ..state.checks import StateReader
from ..types import StateDict
from .probe import OnlineLogistic

__all__ = ["AllEqualCalibration", "match_all_equal", "MIN_STRENGTH", "MAX_STRENGTH"]

MIN_STRENGTH, MAX_STRENGTH = 1e-3, 1e3
"""The Beta strengths (alpha + beta) `match_all_equal` searches: from nearly all mass at 0 and 1
to nearly a point."""
_PROB_CLIP = 1e-6  # the map reads log P and log(1 - P): finite at P = 0 and 1
_BISECTIONS = 50  # halvings of the bracket: 2^-50 of it, below float noise in P


class AllEqualCalibration:
    """``maps`` independent maps of a raw chance P (of an all-equal group) to a calibrated one,

        c(P) = sigmoid(w0 + w1 log P - w2 log(1 - P)),

    beta calibration: identity at w = (0, 1, 1); w1 != w2 bends the two ends apart, which a logistic
    map of logit P (Platt scaling, w1 = w2) cannot. Each map is an `OnlineLogistic` regression of
    the events on [1, log P, -log(1 - P)] (prior N((0, 1, 1), I): the raw chance is trusted until the
    run's groups say otherwise), forgetting ``forget`` per update; c uses the weights' posterior
    mean. P is clipped to [1e-6, 1 - 1e-6].

    >>> cal = AllEqualCalibration(1)
    >>> raw = np.full((1, 64), 0.5)                  # says one in two, while three in four happen
    >>> for _ in range(40):
    ...     cal.update(raw, (np.arange(64) % 4 != 0).astype(float)[None])
    >>> round(float(cal.predict(raw)[0, 0]), 2)
    0.75
    """

    def __init__(self, maps: int, forget: float = 0.95):
        self.maps = check_integer(maps, "maps", least=1)
        self.forget = check_range(forget, "forget", 0.0, 1.0, high_closed=True)
        self.model = OnlineLogistic(3, forget=self.forget, batch=self.maps, initial_mean=np.array([0.0, 1.0, 1.0]))

    def _inputs(self, prob: Any) -> np.ndarray:
        p = np.clip(np.asarray(prob, dtype=float), _PROB_CLIP, 1.0 - _PROB_CLIP)
        if p.ndim != 2 or p.shape[0] != self.maps:
            raise ValueError(f"prob must be [{self.maps} maps, groups], got shape {p.shape}")
        return np.stack([np.ones(p.shape), np.log(p), -np.log1p(-p)], axis=-1)

    def predict(self, prob: Any) -> np.ndarray:
        """c(P) for raw chances ``prob`` [maps, groups], each row through its own map."""
        return expit(self.model.predict(self._inputs(prob))[0])

    def update(self, prob: Any, outcome: Any) -> None:
        """Learn from groups whose raw chances were ``prob`` [maps, groups] and whose ``outcome``s
        [groups] (1: all-equal) every map shares."""
        z = self._inputs(prob)
        y = np.broadcast_to(np.asarray(outcome, dtype=float), z.shape[:-1])
        self.model.update(z, y, np.ones(y.shape))

    def state_dict(self) -> StateDict:
        return {"class": "AllEqualCalibration", "maps": self.maps, "model": self.model.state_dict()}

    def load_state_dict(self, state: StateDict) -> None:
        reader = StateReader(state, "AllEqualCalibration", ["maps", "model"])
        if reader.integer("maps") != self.maps:
            raise reader.error("maps", f"{state['maps']} maps, this calibration has {self.maps}")
        model = OnlineLogistic(3, forget=self.forget, batch=self.maps)
        model.load_state_dict(state["model"])
        self.model = model


def _bisect(lo: np.ndarray, hi: np.ndarray, too_high: Any) -> np.ndarray:
    """The point of [lo, hi] where the decreasing ``too_high(x)`` (a bool per entry) turns False."""
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        up = too_high(mid)
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def match_all_equal(mean: Any, prob: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    """Beta(alpha, beta) of mean ``mean`` under which a group of ``n`` is all-equal with chance
    ``prob`` (`objectives.beta.all_equal_beta`), entry by entry.

    For a mean m inside (0, 1) and n >= 2, P(s) = E[p^n + (1 - p)^n] under Beta(m s, (1 - m) s)
    falls as the strength s grows (the Betas of one mean are ordered in the convex order, and
    p^n + (1 - p)^n is convex), from 1 (s -> 0: the mass at 0 and 1) to m^n + (1 - m)^n (a point),
    so s is found by bisection on log s within [`MIN_STRENGTH`, `MAX_STRENGTH`]. Where even the
    strongest belief is all-equal more often than ``prob``, the mean moves toward 1/2 (P at a fixed
    strength falls as m nears 1/2) to where that strength gives ``prob`` (1/2 if none does). A
    ``prob`` above P(`MIN_STRENGTH`) gives the weakest belief. ``mean`` is clipped to [1e-6, 1 - 1e-6].

    >>> a, b = match_all_equal([0.5], [0.4], [4])    # Uniform: 2 / (n + 1) = 0.4 at n = 4
    >>> [round(float(x), 4) for x in (a[0], b[0])]
    [1.0, 1.0]
    """
    m = np.clip(np.asarray(mean, dtype=float), _PROB_CLIP, 1.0 - _PROB_CLIP)
    m, target, n = np.broadcast_arrays(m, np.asarray(prob, dtype=float), np.asarray(n, dtype=float))
    if np.any(~np.isfinite(target)) or np.any((target < 0) | (target > 1)):
        raise ValueError("prob must lie in [0, 1]")
    if np.any(n < 2) or np.any(n != np.round(n)):
        raise ValueError("n must be whole numbers >= 2 (a group of one is all-equal for certain)")

    def chance(mu: np.ndarray, log_strength: np.ndarray) -> np.ndarray:
        s = np.exp(log_strength)
        return all_equal_beta(mu * s, (1.0 - mu) * s, n)[0]

    low, high = np.full(m.shape, np.log(MIN_STRENGTH)), np.full(m.shape, np.log(MAX_STRENGTH))
    strength = np.exp(_bisect(low, high, lambda x: chance(m, x) > target))
    short = chance(m, high) > target
    if short.any():
        side = np.where(m >= 0.5, 1.0, -1.0)
        far = _bisect(np.zeros(m.shape), np.abs(m - 0.5), lambda d: chance(0.5 + side * d, high) <= target)
        m = np.where(short, 0.5 + side * far, m)
        strength = np.where(short, MAX_STRENGTH, strength)
    return m * strength, (1.0 - m) * strength

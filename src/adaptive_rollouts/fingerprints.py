"""Regime fingerprints: which regime a run is in, measured from its own rollouts.

Whether spending rollouts unevenly pays depends on the run (docs/benchmark.md). Three quantities
tell, and all are measured, never configured:

- `noise_to_signal(grads)`: trace of the covariance of the per-rollout policy gradients over the
  squared norm of their mean. Large values (>> rollouts per step) mean the batch gradient is
  noise-dominated: there allocation raises the signal-to-noise ratio of the update and pays.
  Needs per-rollout gradients, so the simulator and the demo compute it; trainers at scale do not.
- `zero_variance_fraction(rewards)`: share of groups (>= 2 rollouts) whose rewards are all equal;
  these groups get zero advantage and teach nothing, the waste an allocator can recover.
- `p_persistence`: correlation of a prompt's mean reward between two consecutive visits (epochs).
  High persistence means history predicts the next visit, so history-based predictors can act.

`RegimeTracker` keeps the reward-only two over a run (keys are prompt keys, rewards in any range)
and is what the TRL and verl integrations log.

>>> import numpy as np
>>> zero_variance_fraction([np.array([1.0, 1.0]), np.array([0.0, 1.0]), np.array([0.0, 0.0])])
0.6666666666666666
>>> g = np.array([[1.0, 0.0], [3.0, 0.0]])   # tr Cov = 2 (unbiased), |mean|^2 = 4, debiased 4 - 2/2
>>> round(float(noise_to_signal(g)), 4)
0.6667
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .checks.rewards import ZERO_VARIANCE_TOL, all_equal
from .checks.validation import check_range, check_rewards
from .state.checks import StateReader
from .types import StateDict

__all__ = ["noise_to_signal", "batch_variance_stats", "zero_variance_fraction", "p_persistence", "RegimeTracker"]


def noise_to_signal(grads: np.ndarray) -> float:
    """tr Cov(g) / ||E g||^2 over per-rollout gradients ``grads`` [N, D] (N >= 2).

    The covariance uses the unbiased (N - 1) normaliser and the squared mean norm is debiased by
    tr Cov / N, so the ratio does not grow with N merely from sampling noise in the mean; it is
    ``inf`` when the debiased signal is <= 0 (the mean is indistinguishable from zero).
    """
    g = np.asarray(grads, dtype=float)
    if g.ndim != 2 or g.shape[0] < 2:
        raise ValueError(f"grads must be [N >= 2, D] per-rollout gradients, got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise ValueError("grads contain NaN/inf")
    n = g.shape[0]
    mean = g.mean(axis=0)
    trace_cov = float(((g - mean) ** 2).sum() / (n - 1))
    signal = float(mean @ mean) - trace_cov / n
    return trace_cov / signal if signal > 0 else float("inf")


def batch_variance_stats(grads: np.ndarray) -> tuple[float, float]:
    """(trace of the unbiased covariance, squared norm of the mean debiased by tr Cov / M) of batch
    gradients [M, D] from M resamples of one step, as in `noise_to_signal` (the ratio is their
    quotient). The regime map's batch noise/signal is the sum of the traces over the sum of the
    squared means of a run's probes.

    >>> batch_variance_stats(np.array([[1.0, 0.0], [3.0, 0.0]]))
    (2.0, 3.0)
    """
    g = np.asarray(grads, dtype=float)
    if g.ndim != 2 or g.shape[0] < 1:
        raise ValueError(f"grads must be [M >= 1, D] batch gradients, got shape {g.shape}")
    mean = g.mean(axis=0)
    trace = float(((g - mean) ** 2).sum() / max(g.shape[0] - 1, 1))
    return trace, float(mean @ mean) - trace / g.shape[0]


def zero_variance_fraction(rewards: Sequence[np.ndarray], tol: float = ZERO_VARIANCE_TOL) -> float:
    """Share of groups with >= 2 rollouts whose rewards are all equal (`checks.rewards.all_equal`:
    span <= ``tol``; nan if there are none)."""
    sizes = [np.asarray(r).size for r in rewards]
    groups = [np.asarray(r, dtype=float) for r, s in zip(rewards, sizes) if s >= 2]
    if not groups:
        return float("nan")
    return float(np.mean([all_equal(r.min(), r.max(), tol) for r in groups]))


def p_persistence(
    previous: np.ndarray,
    current: np.ndarray,
    previous_noise: np.ndarray | None = None,
    current_noise: np.ndarray | None = None,
) -> float:
    """Correlation of per-prompt mean reward at one visit and the next (nan if < 3 pairs or no spread).

    A visit's mean is estimated from a few rollouts, and that sampling noise pulls the raw Pearson
    correlation toward 0. Given each mean's sampling variance (``*_noise``: s^2 / n of its group),
    the correlation is disattenuated (Spearman's correction): cov(a, b) / sqrt((var a - E noise_a)
    (var b - E noise_b)), clipped to [-1, 1]; without them it is the raw Pearson correlation.
    """
    a = np.asarray(previous, dtype=float)
    b = np.asarray(current, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"previous and current must be 1-D of equal length, got {a.shape} and {b.shape}")
    if a.size < 3:
        return float("nan")
    var_a, var_b = float(a.var()), float(b.var())
    if previous_noise is not None and current_noise is not None:
        var_a -= float(np.mean(previous_noise))
        var_b -= float(np.mean(current_noise))
    if var_a <= 0 or var_b <= 0:
        return float("nan")
    cov = float(np.mean((a - a.mean()) * (b - b.mean())))
    return float(np.clip(cov / np.sqrt(var_a * var_b), -1.0, 1.0))


class RegimeTracker:
    """Reward-only fingerprints over a run: zero-variance fraction and persistence of p.

    ``update(keys, rewards)`` once per step with each prompt's rewards (any range); ``metrics()``
    returns ``regime/zero_variance_fraction`` (this step), ``regime/zero_variance_fraction_mean``
    (every step so far), ``regime/all_fail_fraction`` / ``regime/all_pass_fraction`` (this step's
    zero-variance groups at the lowest / highest reward seen in the run) and ``regime/p_persistence``
    (correlation between consecutive visits of a prompt over the last ``window`` revisits, corrected
    for the sampling noise of each visit's mean, see `p_persistence`).

    >>> import numpy as np
    >>> t = RegimeTracker()
    >>> for step in range(2):
    ...     t.update(list("abcd"), [np.array(r, float) for r in ([0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0])])
    >>> m = t.metrics()
    >>> m["regime/zero_variance_fraction"], round(m["regime/p_persistence"], 3)
    (0.5, 1.0)
    """

    def __init__(self, window: int = 4096, tol: float = ZERO_VARIANCE_TOL):
        self.window, self.tol = _check_tracker_settings(window, tol)
        self._last: dict[Hashable, tuple[float, float]] = {}  # key -> (mean, sampling variance of the mean)
        self._pairs: list[tuple[float, float, float, float]] = []  # (prev, cur, prev noise, cur noise)
        self._zv_sum = 0.0
        self._zv_steps = 0
        self._step: dict[str, float] = {}
        self._low = float("inf")
        self._high = float("-inf")

    def update(self, keys: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        if len(keys) != len(rewards):
            raise ValueError(f"keys has {len(keys)} entries but rewards has {len(rewards)}")
        arrays = check_rewards(keys, rewards, unit_range=False)  # raw rewards: any finite range
        seen = [r for r in arrays if r.size]
        if seen:
            self._low = min(self._low, min(float(r.min()) for r in seen))
            self._high = max(self._high, max(float(r.max()) for r in seen))
        zv = zero_variance_fraction(arrays, self.tol)
        flat = [r for r in arrays if r.size >= 2 and all_equal(r.min(), r.max(), self.tol)]
        groups = sum(r.size >= 2 for r in arrays)
        self._step = {
            "regime/zero_variance_fraction": zv,
            "regime/all_fail_fraction": sum(r[0] <= self._low + self.tol for r in flat) / groups if groups else 0.0,
            "regime/all_pass_fraction": sum(r[0] >= self._high - self.tol for r in flat) / groups if groups else 0.0,
        }
        if not np.isnan(zv):
            self._zv_sum += zv
            self._zv_steps += 1
        for key, r in zip(keys, arrays):
            if r.size == 0:
                continue
            visit = _visit(r)
            if key in self._last:
                prev = self._last[key]
                self._pairs.append((prev[0], visit[0], prev[1], visit[1]))
            self._last[key] = visit
        del self._pairs[: max(0, len(self._pairs) - self.window)]

    def metrics(self) -> dict[str, float]:
        out = dict(self._step)
        out["regime/zero_variance_fraction_mean"] = self._zv_sum / self._zv_steps if self._zv_steps else float("nan")
        pairs = np.asarray(self._pairs, dtype=float).reshape(-1, 4)
        with np.errstate(over="ignore", invalid="ignore"):  # rewards near the float limits: nan, not a warning
            rho = p_persistence(pairs[:, 0], pairs[:, 1], pairs[:, 2], pairs[:, 3])
        out["regime/p_persistence"] = rho if np.isfinite(rho) else float("nan")
        out["regime/revisits"] = float(len(self._pairs))
        return out

    def state_dict(self) -> StateDict:
        return {
            "window": self.window,
            "tol": self.tol,
            "keys": list(self._last),
            "last": np.asarray(list(self._last.values()), dtype=float).reshape(-1, 2),
            "pairs": np.asarray(self._pairs, dtype=float).reshape(-1, 4),
            "zv_sum": self._zv_sum,
            "zv_steps": self._zv_steps,
            "low": self._low,
            "high": self._high,
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the tracker's state; every value is checked first (see `_read_tracker_state`),
        so a refused state raises ValueError naming the entry and leaves the tracker unchanged."""
        self.__dict__.update(_read_tracker_state(state))

    @classmethod
    def from_state(cls, state: StateDict) -> RegimeTracker:
        """A tracker holding ``state`` (validated as by `load_state_dict`)."""
        tracker = cls()
        tracker.load_state_dict(state)
        return tracker


def _check_tracker_settings(window: Any, tol: Any) -> tuple[int, float]:
    """RegimeTracker's window (an integer >= 3) and tol (a finite real >= 0), or ValueError."""
    if isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer)) or window < 3:
        raise ValueError(f"window must be an integer >= 3, got {window!r}")
    return int(window), check_range(tol, "tol", 0.0, None, low_closed=True)


def _visit(r: np.ndarray) -> tuple[float, float]:
    """(mean, sampling variance of the mean) of one visit's rewards, finite for any finite rewards:
    computed on rewards scaled by a power of two, the variance capped at the largest float."""
    top = float(np.abs(r).max())
    scale = float(np.ldexp(1.0, np.frexp(top)[1] - 1)) if top > 0 else 1.0  # |r| / scale < 2
    x = r / scale
    mean = float(x.mean()) * scale
    with np.errstate(over="ignore"):
        noise = float(x.var(ddof=1)) * scale * scale / r.size if r.size >= 2 else 0.0
    return mean, min(noise, _FLOAT_MAX)


_FLOAT_MAX = float(np.finfo(float).max)


def _read_tracker_state(state: Any) -> dict[str, Any]:
    """The attributes of a RegimeTracker holding ``state``, after checking every value: settings as
    the constructor checks them, distinct saveable keys, one finite (mean, noise >= 0) per key, at
    most ``window`` finite pairs, 0 <= zv_sum <= zv_steps, and every mean within [low, high] (the
    reward range seen; (inf, -inf) before any reward)."""
    reader = StateReader(
        state, "RegimeTracker", ["window", "tol", "keys", "last", "pairs", "zv_sum", "zv_steps", "low", "high"]
    )
    window, tol = reader.hyperparameters(_check_tracker_settings, ["window", "tol"])
    keys = reader.keys()
    last = reader.array("last", (len(keys), 2))
    pairs = reader.array("pairs", (_rows(reader["pairs"]), 4))
    if len(pairs) > window:
        raise reader.error("pairs", f"holds {len(pairs)} pairs, more than the window {window}")
    if np.any(last[:, 1] < 0) or np.any(pairs[:, 2:] < 0):
        raise reader.error("last" if np.any(last[:, 1] < 0) else "pairs", "a sampling variance is negative")
    zv_steps = reader.integer("zv_steps", low=0)
    zv_sum = reader.real("zv_sum", low=0.0, high=float(zv_steps))
    low, high = (_extended_real(reader, k) for k in ("low", "high"))
    if not (low == np.inf and high == -np.inf) and not (np.isfinite(low) and np.isfinite(high) and low <= high):
        raise reader.error("low", f"low and high must be finite with low <= high (or inf, -inf), got {low}, {high}")
    means = np.concatenate([last[:, 0], pairs[:, 0], pairs[:, 1]])
    if means.size and (means.min() < low or means.max() > high):
        raise reader.error("last", f"a mean reward outside the range of the rewards seen [{low}, {high}]")
    return {
        "window": window,
        "tol": tol,
        "_last": {k: (float(m), float(v)) for k, (m, v) in zip(keys, last.tolist())},
        "_pairs": [(float(a), float(b), float(c), float(d)) for a, b, c, d in pairs.tolist()],
        "_zv_sum": zv_sum,
        "_zv_steps": zv_steps,
        "_low": low,
        "_high": high,
    }


def _rows(value: Any) -> int:
    """The number of rows of a 2-D array-like (-1 if it is not one: the shape check then names it)."""
    try:
        shape = np.shape(value)
    except ValueError:  # ragged
        return -1
    return shape[0] if len(shape) == 2 else -1


def _extended_real(reader: StateReader, key: str) -> float:
    value = reader[key]
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        if abs(float(value)) == np.inf:
            return float(value)
    return reader.real(key)

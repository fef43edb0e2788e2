"""What an allocator sees of a trainer's rewards: a success signal in [0, 1].

Allocators model p, a prompt's chance of success, and take rewards in [0, 1]. Trainers' rewards
can be anything: +-1 scores, sums of several weighted reward functions, unbounded length penalties.
`SuccessSignal` maps them, in one of three ways the user picks:

- ``success_fn``: any callable reward -> value in [0, 1] (e.g. ``lambda r: float(r >= 0.9)``);
- ``threshold``: success is ``reward >= threshold`` (binary);
- ``reward_range=(low, high)``: the affine map onto [0, 1]; a reward outside the range (beyond a
  float tolerance) raises, naming the prompt;
- none of them (the default): rewards in [0, 1] pass unchanged; otherwise the affine map of the
  range seen so far in the run, never narrower than [0, 1] (so +-1 rewards become {0, 1}). The range
  only widens, and is part of the state. Variance-based allocators are unaffected by the scale.

A reward of ``None`` / NaN (a rollout nobody could score) is not a success signal: `to_success`
returns it as NaN and `unscored` counts it, so the trainer can tell the allocator what is missing
instead of feeding it a fake 0.

>>> import numpy as np
>>> SuccessSignal().to_success(np.array([-1.0, 1.0, 1.0])).tolist()
[0.0, 1.0, 1.0]
>>> SuccessSignal(threshold=0.5).to_success(np.array([0.2, 0.7])).tolist()
[0.0, 1.0]
>>> SuccessSignal(reward_range=(0, 2)).to_success(np.array([1.0, 2.0000001])).tolist()
[0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .checks.validation import check_real
from .state.checks import StateReader
from .types import StateDict

__all__ = ["SuccessSignal"]

_REL_TOL = 1e-6  # float32 sums of weighted rewards overshoot their bound by ~1e-7


class SuccessSignal:
    """Maps raw rewards to [0, 1] for the allocator (see the module docstring)."""

    def __init__(
        self,
        reward_range: tuple[float, float] | None = None,
        threshold: float | None = None,
        success_fn: Callable[[float], Any] | None = None,
    ):
        given = [
            name
            for name, v in (("reward_range", reward_range), ("threshold", threshold), ("success_fn", success_fn))
            if v is not None
        ]
        if len(given) > 1:
            raise ValueError(f"give at most one of reward_range, threshold, success_fn; got {', '.join(given)}")
        if reward_range is not None:
            if isinstance(reward_range, (str, bytes)) or not hasattr(reward_range, "__len__") or len(reward_range) != 2:
                raise ValueError(f"reward_range must be a pair (low, high), got {reward_range!r}")
            low, high = (check_real(x, "reward_range") for x in reward_range)
            if not (np.isfinite(low) and np.isfinite(high) and low < high):
                raise ValueError(f"reward_range must be finite (low, high) with low < high, got {reward_range!r}")
            reward_range = (low, high)
        if threshold is not None and not np.isfinite(check_real(threshold, "threshold")):
            raise ValueError(f"threshold must be finite, got {threshold!r}")
        if success_fn is not None and not callable(success_fn):
            raise ValueError(f"success_fn must be callable, got {type(success_fn).__name__}")
        self.reward_range = reward_range
        self.threshold = None if threshold is None else float(threshold)
        self.success_fn = success_fn
        self._seen = (0.0, 1.0)  # the auto mode's range: [0, 1] widened by every reward seen

    @property
    def mode(self) -> str:
        if self.success_fn is not None:
            return "success_fn"
        if self.threshold is not None:
            return "threshold"
        return "reward_range" if self.reward_range is not None else "auto"

    def to_success(self, rewards: Any, prompt: Any = None) -> np.ndarray:
        """Rewards of one group (1-D, None/NaN for an unscored rollout) -> values in [0, 1], NaN kept."""
        return self.to_success_groups([rewards], [prompt])[0]

    def to_success_groups(self, groups: Sequence[Any], prompts: Sequence[Any] | None = None) -> list[np.ndarray]:
        """`to_success` of several groups at once (e.g. every group of a sampling round). In the
        auto mode the range is first widened by every group's rewards and then one map is applied
        to all of them, so equal rewards map to equal values whatever the groups' order."""
        names = list(prompts) if prompts is not None else [None] * len(groups)
        raws = [_raw_rewards(g, p) for g, p in zip(groups, names)]
        if self.mode == "auto":
            for raw in raws:
                scored = raw[~np.isnan(raw)]
                if scored.size:
                    self._seen = (min(self._seen[0], float(scored.min())), max(self._seen[1], float(scored.max())))
        return [self._map(raw, p) for raw, p in zip(raws, names)]

    def _map(self, raw: np.ndarray, prompt: Any) -> np.ndarray:
        where = f" of prompt {prompt!r}" if prompt is not None else ""
        scored = ~np.isnan(raw)
        out = np.full(raw.shape, np.nan)
        if self.success_fn is not None:
            out[scored] = [_success_value(self.success_fn, float(r), where) for r in raw[scored]]
        elif self.threshold is not None:
            out[scored] = (raw[scored] >= self.threshold).astype(float)
        else:
            low, high = self._seen if self.reward_range is None else self.reward_range
            if self.reward_range is not None:
                tol = _REL_TOL * max(1.0, abs(low), abs(high))
                bad = scored & ((raw < low - tol) | (raw > high + tol))
                if np.any(bad):
                    raise ValueError(
                        f"rewards{where} {raw[bad].tolist()} lie outside reward_range={self.reward_range}; "
                        "widen reward_range, or pass threshold= or success_fn="
                    )
            # halves: finite for every finite range (high - low overflows for ranges near +-1e308)
            out[scored] = np.clip((raw[scored] / 2 - low / 2) / (high / 2 - low / 2), 0.0, 1.0)
        return out

    @staticmethod
    def unscored(values: np.ndarray) -> int:
        """How many rollouts of a group have no reward (NaN after `to_success`)."""
        return int(np.isnan(np.asarray(values, dtype=float)).sum())

    def state_dict(self) -> StateDict:
        return {"seen_low": self._seen[0], "seen_high": self._seen[1]}

    def load_state_dict(self, state: StateDict) -> None:
        """The auto mode's range: finite and containing [0, 1] (ValueError naming the entry otherwise)."""
        reader = StateReader(state, "SuccessSignal", ["seen_low", "seen_high"])
        low, high = reader.real("seen_low", high=0.0), reader.real("seen_high", low=1.0)
        self._seen = (low, high)


def _raw_rewards(rewards: Any, prompt: Any) -> np.ndarray:
    """One group's raw rewards as floats (None -> NaN); ValueError naming the prompt for inf or a non-number."""
    where = f" of prompt {prompt!r}" if prompt is not None else ""
    values = np.atleast_1d(np.asarray(rewards, dtype=object)).ravel().tolist()
    bad = [r for r in values if r is not None and (isinstance(r, (bool, np.bool_, str, bytes)) or not _is_real(r))]
    if bad:
        raise ValueError(f"rewards{where} must be real numbers or None, got {type(bad[0]).__name__} {bad[0]!r}")
    raw = np.array([np.nan if r is None else float(r) for r in values], dtype=float)
    if np.any(np.isinf(raw)):
        raise ValueError(f"rewards{where} contain inf: {raw.tolist()}")
    return raw


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating))


def _success_value(success_fn: Callable[[float], Any], reward: float, where: str) -> float:
    """success_fn(reward), which must be a bool or a real number in [0, 1]; else a ValueError
    naming success_fn, the reward and the prompt."""
    value = success_fn(reward)
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if not _is_real(value) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(
            f"success_fn returned {type(value).__name__} {value!r} for reward {reward!r}{where}: "
            f"{'outside [0, 1]' if _is_real(value) else 'not a number'}; it must return a bool or a number in [0, 1]"
        )
    return float(value)

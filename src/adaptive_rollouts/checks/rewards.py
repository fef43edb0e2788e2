"""Reward checks (re-exported by `validation`): one finite 1-D array of rewards per prompt, checked
on one concatenation, with a per-prompt pass only to name a problem."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

__all__ = ["ZERO_VARIANCE_TOL", "all_equal", "check_rewards", "check_rewards_flat", "group_sums"]

_REWARD_KINDS = "fiub"  # float, int, unsigned, bool (a success indicator): numbers, never str or complex


def _check_one_reward(prompt: Hashable, r: Any, expected: int | None, source: str, unit_range: bool) -> np.ndarray:
    """One prompt's rewards, checked on their own (the slow path, which also names the problem)."""
    where = f"for prompt {prompt!r}"
    if r is None:
        raise ValueError(f"{source}: got None {where}, expected a 1-D array of rewards")
    arr = np.asarray(r) if not isinstance(r, np.ndarray) else r
    if arr.dtype.kind == "O":  # a list holding None or other objects: numbers only
        if not all(isinstance(x, (int, float, np.integer, np.floating)) for x in arr.ravel()):
            raise ValueError(f"{source} are not numeric {where}: {r!r}")
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in _REWARD_KINDS:
        raise ValueError(f"{source} must be real numbers {where}, got dtype {arr.dtype}: {r!r}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 1:
        raise ValueError(f"{source} must be 1-D arrays; got shape {arr.shape} {where}")
    if expected is not None and arr.size != expected:
        raise ValueError(f"{source} {where} has {arr.size} rewards, expected {expected}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{source} contain NaN/inf {where}: {arr.tolist()}")
    if unit_range and np.any((arr < 0.0) | (arr > 1.0)):
        raise ValueError(
            f"{source} lie outside [0, 1] (rewards are binary or graded in [0, 1]) {where}: {arr.tolist()}"
        )
    return arr


def check_rewards_flat(
    prompts: Sequence[Hashable],
    rewards: Any,
    expected: Sequence[int] | np.ndarray | None = None,
    source: str = "rewards",
    arrays: bool = True,
    unit_range: bool = True,
) -> tuple[list[np.ndarray] | None, np.ndarray, np.ndarray]:
    """`check_rewards`, also returning all rewards concatenated and the group sizes (the list of
    arrays is None with ``arrays=False``). Vectorised: one concatenation and whole-array tests (the
    per-prompt path runs only to name a problem)."""
    if isinstance(rewards, np.ndarray) and rewards.ndim == 2:
        rewards = list(rewards)
    try:
        count = len(rewards)
    except TypeError:
        raise ValueError(f"{source} must be a sequence of 1-D arrays, got {type(rewards).__name__}") from None
    if count != len(prompts):
        raise ValueError(
            f"{source} has {count} entries but prompts has {len(prompts)}: need one reward array for each "
            f"of the {len(prompts)} prompts, got {count} reward arrays"
        )
    items: list = rewards if type(rewards) is list else list(rewards)
    want = None if expected is None else np.asarray(expected, dtype=np.int64)
    try:
        flat = np.concatenate(items) if count else np.zeros(0)
        sizes = np.fromiter(map(len, items), dtype=np.int64, count=count)
        fast = flat.ndim == 1 and flat.dtype.kind in _REWARD_KINDS and int(sizes.sum()) == flat.size
    except (TypeError, ValueError):
        fast = False
    if fast:
        flat = flat.astype(np.float64, copy=False)
        if unit_range:  # (NaN fails the range test)
            in_range = bool(np.all((flat >= 0.0) & (flat <= 1.0)))
        else:
            in_range = bool(np.all(np.isfinite(flat)))
        ok = (want is None or np.array_equal(sizes, want)) and in_range
        if ok:
            if not arrays:
                return None, flat, sizes
            f64 = np.dtype(np.float64)
            out = [r if type(r) is np.ndarray and r.dtype is f64 else np.asarray(r, dtype=np.float64) for r in items]
            return out, flat, sizes
    # name the first problem
    out = [
        _check_one_reward(prompts[i], r, None if want is None else int(want[i]), source, unit_range)
        for i, r in enumerate(items)
    ]
    sizes = np.fromiter((a.size for a in out), dtype=np.int64, count=count)
    return out, (np.concatenate(out) if count else np.zeros(0)), sizes


def check_rewards(
    prompts: Sequence[Hashable],
    rewards: Any,
    expected: Sequence[int] | np.ndarray | None = None,
    source: str = "rewards",
    unit_range: bool = True,
) -> list[np.ndarray]:
    """One finite 1-D float array per prompt with values in [0, 1] (binary or graded; any finite
    value when not ``unit_range``: a trainer's raw rewards; bool and integer arrays are read as
    numbers, strings and complex numbers are refused), of length ``expected[i]`` when given.
    ``source`` names where the rewards came from in the errors."""
    out = check_rewards_flat(prompts, rewards, expected, source, unit_range=unit_range)[0]
    assert out is not None
    return out


def group_sums(flat: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Sum of each group of a concatenation (``sizes`` long each; empty groups sum to 0).

    >>> group_sums(np.array([1.0, 0.0, 1.0, 0.5]), np.array([2, 0, 2])).tolist()
    [1.0, 0.0, 1.5]
    """
    out = np.zeros(sizes.size)
    used = sizes > 0
    if used.any():
        out[used] = np.add.reduceat(flat, (np.cumsum(sizes) - sizes)[used])
    return out


ZERO_VARIANCE_TOL = 1e-6
"""The one tolerance of the all-equal test `all_equal`: rewards spanning at most this much count as
equal. Equal rewards span exactly 0 in floating point (unlike their mean, which can differ from
them in the last bit), so the tolerance is not there to absorb rounding of equal values: it
decides that rewards differing by at most 1e-6 (a reward function's float noise) carry no signal.
Binary and graded rewards in [0, 1] differ by far more than that."""


def all_equal(low: Any, high: Any, tol: float = ZERO_VARIANCE_TOL) -> Any:
    """The zero-variance (all-equal) test of a group: True where its rewards span at most ``tol``,
    ``high - low <= tol`` with ``low`` / ``high`` the group's smallest and largest reward.

    Elementwise on numpy arrays and torch tensors alike (only arithmetic and a comparison), so the
    advantages (a group that is all equal gets advantage 0), the step metrics (``zero_variance_groups``)
    and the regime fingerprints count the same groups. A group of one rollout spans 0: callers that
    need two rollouts for a signal say so separately.

    >>> all_equal(np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.5 + 1e-9, 1.0 + 0.5])).tolist()
    [True, True, False]
    """
    return high - low <= tol

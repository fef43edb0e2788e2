"""Calibration traces of the tiny LM: per step, each prompt's group of rewards and what an allocator
could have known before generating it (the policy's features that step, the prompt's text embedding).

`TraceRecorder` is Uniform allocation (every group complete, so the trace does not depend on any
predictor and can be replayed through all of them) that also reads the policy (`types.PolicyAware`)
and records each step. `save_trace` / `load_trace` keep a trace as ``<stem>.npz`` (arrays, no
pickle) and ``<stem>.json`` (a result file: command, commit, settings and the prompt texts):

- ``step`` [G], ``prompt`` [G]: each group's step and pool index (G groups in all);
- ``rewards`` [G, n_max]: the group's rewards in [0, 1], NaN past its ``counts`` [G];
- ``policy`` [G, width] float32: the features the step gave the allocator (width 0: none);
- ``text`` [P, dim] float32: each pool prompt's text embedding (dim 0: none).

>>> import numpy as np
>>> rec = TraceRecorder({"x": 0, "y": 1})
>>> rec.observe_policy(["x", "y"], np.ones((2, 3)))
>>> _ = rec.run(["x", "y"], 4, lambda idx, cnt: [np.ones(int(c)) for c in cnt])
>>> t = rec.trace(["a1=", "a2="])
>>> t.step.tolist(), t.prompt.tolist(), t.counts.tolist(), t.policy.shape
([0, 0], [0, 1], [2, 2], (2, 3))
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.experiments.results import load_result, write_result

__all__ = ["GroupTrace", "TraceRecorder", "load_trace", "save_trace"]

ARRAYS = ("step", "prompt", "counts", "rewards", "policy", "text")


@dataclass
class GroupTrace:
    """One recorded run (see the module docstring for the fields)."""

    prompts: list[str]
    step: np.ndarray
    prompt: np.ndarray
    counts: np.ndarray
    rewards: np.ndarray
    policy: np.ndarray
    text: np.ndarray

    def __post_init__(self) -> None:
        g = self.step.shape[0]
        for name in ("prompt", "counts", "rewards", "policy"):
            if getattr(self, name).shape[0] != g:
                raise ValueError(f"trace: {name} has {getattr(self, name).shape[0]} rows, step has {g}")
        if self.rewards.ndim != 2 or self.policy.ndim != 2 or self.text.ndim != 2:
            raise ValueError("trace: rewards, policy and text must be 2-d arrays")
        if g and (self.prompt.min() < 0 or self.prompt.max() >= len(self.prompts)):
            raise ValueError(f"trace: prompt indices must lie in [0, {len(self.prompts)})")
        if self.text.shape[1] and self.text.shape[0] != len(self.prompts):
            raise ValueError(f"trace: text has {self.text.shape[0]} rows for {len(self.prompts)} prompts")
        if np.any(self.counts > self.rewards.shape[1]) or np.any(self.counts < 0):
            raise ValueError("trace: counts must lie in [0, rewards' width]")
        if np.any(~np.isfinite(self.policy)) or np.any(~np.isfinite(self.text)):
            raise ValueError("trace: policy and text features must be finite")
        for row, n in zip(self.rewards, self.counts):
            kept = row[:n]
            if np.any(~np.isfinite(kept)) or np.any((kept < 0) | (kept > 1)) or not np.all(np.isnan(row[n:])):
                raise ValueError("trace: a group's rewards must lie in [0, 1], NaN past its count")

    def steps(self) -> Iterator[tuple[np.ndarray, list[np.ndarray], np.ndarray]]:
        """Per step, in order: the prompts' pool indices, their reward groups and policy features."""
        for t in np.unique(self.step):
            rows = np.flatnonzero(self.step == t)
            yield (
                self.prompt[rows],
                [self.rewards[r, : self.counts[r]] for r in rows],
                self.policy[rows],
            )


class TraceRecorder(Uniform):
    """Uniform allocation that records each step's groups and the policy features it was given.

    ``index``: allocator key -> pool index (e.g. ``"train#3"`` -> 3). A step without features (the
    trainer gave none) records width-0 features; every step must then be the same."""

    def __init__(self, index: Mapping[Hashable, int]):
        super().__init__()
        self.index = dict(index)
        self._features: np.ndarray | None = None
        self._order: list = []
        self._rows: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        self._steps = 0

    def observe_policy(self, prompts: Sequence[Hashable], features: np.ndarray) -> None:
        self._features = np.asarray(features, dtype=np.float32)
        self._order = list(prompts)

    def _observe(self, prompts: list, rewards: list[np.ndarray]) -> None:
        super()._observe(prompts, rewards)
        features = self._features
        if features is not None and self._order != list(prompts):
            raise ValueError("TraceRecorder: the policy features were given for other prompts than the step's")
        for i, (key, group) in enumerate(zip(prompts, rewards)):
            row = np.zeros(0, np.float32) if features is None else features[i]
            self._rows.append((self._steps, self.index[key], np.asarray(group, dtype=float), row))
        self._features, self._steps = None, self._steps + 1

    def trace(self, prompts: Sequence[str], text: np.ndarray | None = None) -> GroupTrace:
        """The steps recorded so far; ``prompts``: the pool's texts; ``text``: their embeddings."""
        width = max((r[2].size for r in self._rows), default=0)
        rewards = np.full((len(self._rows), width), np.nan)
        for i, r in enumerate(self._rows):
            rewards[i, : r[2].size] = r[2]
        widths = {r[3].size for r in self._rows}
        if len(widths) > 1:
            raise ValueError(f"TraceRecorder: steps gave policy features of several widths {sorted(widths)}")
        policy = np.array([r[3] for r in self._rows], dtype=np.float32).reshape(len(self._rows), -1)
        return GroupTrace(
            prompts=list(prompts),
            step=np.array([r[0] for r in self._rows], dtype=np.int64),
            prompt=np.array([r[1] for r in self._rows], dtype=np.int64),
            counts=np.array([r[2].size for r in self._rows], dtype=np.int64),
            rewards=rewards,
            policy=policy,
            text=np.zeros((len(prompts), 0), np.float32) if text is None else np.asarray(text, dtype=np.float32),
        )


def save_trace(stem: str | os.PathLike, trace: GroupTrace, settings: Mapping[str, Any] | None = None) -> Path:
    """``<stem>.npz`` (the arrays) and ``<stem>.json`` (a result file with the prompt texts and
    ``settings``); returns the JSON's path."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(trace, name) for name in ARRAYS}
    np.savez_compressed(stem.with_suffix(".npz"), **arrays)
    return write_result(stem.with_suffix(".json"), {"prompts": trace.prompts}, settings=dict(settings or {}))


def load_trace(stem: str | os.PathLike) -> tuple[GroupTrace, dict[str, Any]]:
    """The trace saved by `save_trace` and its settings; ValueError naming the file when an array
    is missing or the trace does not hold together."""
    stem = Path(stem)
    result = load_result(stem.with_suffix(".json"))
    with np.load(stem.with_suffix(".npz"), allow_pickle=False) as saved:
        missing = [name for name in ARRAYS if name not in saved.files]
        if missing:
            raise ValueError(f"trace {stem}.npz: missing arrays {missing}")
        arrays = {name: saved[name] for name in ARRAYS}
    try:
        return GroupTrace(prompts=list(result.data["prompts"]), **arrays), dict(result.settings)
    except ValueError as err:
        raise ValueError(f"trace {stem}: {err}") from None

"""What a trainer logs of one allocation step: one name per quantity, numbers only.

- `step_values`: the standard set (`metrics.step_metrics`) of what the step spent and observed,
  the same for every allocator, plus the allocator's own ``last_metrics`` where the trainer has no
  value (predicted success, Brier score);
- `step_log`: those values (and the trainer's own) as ``prefix + name`` -> float, plus the regime
  fingerprints of the step (`fingerprints.RegimeTracker`, names ``regime/...``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.metrics import step_metrics

__all__ = ["scalar", "step_log", "step_values"]


def scalar(value: Any) -> float | None:
    """A loggable number (bools as 0 / 1), or None for what is not one (lists, dicts, None, text).

    >>> scalar(3), scalar(True), scalar([1]), scalar(None)
    (3.0, 1.0, None, None)
    """
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return None


def step_values(
    keys: Sequence[Hashable],
    counts: np.ndarray,
    successes: Sequence[np.ndarray],
    last_metrics: Mapping[str, Any] | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """The standard metrics (`metrics.step_metrics`) of a step whose prompts ``keys`` got ``counts``
    rollouts (``rollouts_spent``; ``budget``: the step's, for ``rollouts_saved``), of
    which the scored ones gave ``successes`` (reward statistics are over those, ``unscored`` the
    rest); then the allocator's own ``last_metrics`` where the trainer has none.

    >>> v = step_values(["a", "b"], np.array([3, 0]), [np.array([0.0, 1.0]), np.array([])], {"brier": 0.2})
    >>> v["rollouts_spent"], v["unscored"], v["skipped"], v["signal_groups"], v["brier"]
    (3, 1, 1, 1, 0.2)
    """
    scored = np.array([s.size for s in successes], dtype=np.int64)
    # successes come from `steps.scored_draw` (finite, in [0, 1], one 1-D array per prompt): checked
    flat = np.concatenate(successes) if len(successes) else np.zeros(0)
    values = dict(step_metrics(keys, scored, successes, flat=flat, budget=budget, generated=counts))
    for name, value in (last_metrics or {}).items():
        if values.get(name) is None:
            values[name] = value
    return values


def step_log(
    values: Mapping[str, Any],
    regime: RegimeTracker,
    keys: Sequence[Hashable],
    rewards: Sequence[np.ndarray],
    prefix: str = "adaptive/",
    drop: Sequence[str] = (),
) -> dict[str, float]:
    """``values`` as ``prefix + name`` -> float (non-numbers and ``drop`` left out), and the regime
    fingerprints after ``regime`` sees the step's ``rewards`` per prompt of ``keys``.

    >>> step_log({"rollouts_spent": 8, "histogram": {4: 2}}, RegimeTracker(), ["a"], [np.array([0.0, 1.0])])["adaptive/rollouts_spent"]
    8.0
    """
    out = {
        prefix + name: number
        for name, value in values.items()
        if name not in drop and (number := scalar(value)) is not None
    }
    regime.update(list(keys), list(rewards))
    out.update({name: float(value) for name, value in regime.metrics().items()})
    return out

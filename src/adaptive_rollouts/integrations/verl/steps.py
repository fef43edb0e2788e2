"""Per-step helpers of the trainer: counts into verl batches, and the step's rewards as the allocator
sees them (`bridge.scored_draw`, a round at a time, as every trainer maps them) with what is missing.
Pure except `assign_rollout_counts` (writes the batch); the count rule is `bridge.check_counts`.

What the step spent against the budget (``adaptive/rollouts_spent``, ``rollouts_saved``,
``skipped``) is logged once, by `bridge.step_values`; this module adds what verl generated and trained on:
``generated_rollouts`` (spent + re-dispatched) and `batch_metrics` (``adaptive/trained_rows``,
``response_tokens``, ``padding_rows``): padding rows are never counted as generated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.bridge import check_counts, is_single_shot, scored_draw
from adaptive_rollouts.success import SuccessSignal

__all__ = [
    "ROLLOUT_N_FIELD",
    "StepFeedback",
    "assign_rollout_counts",
    "batch_metrics",
    "check_counts",
    "is_single_shot",
]

# The per-prompt rollout count verl's agent loop pops (AgentLoopWorkerTQ._run_prompt).
ROLLOUT_N_FIELD = "__rollout_n__"


def assign_rollout_counts(batch: Any, counts: Sequence[int] | np.ndarray) -> Any:
    """Write ``__rollout_n__`` (int64 tensor, one entry per prompt) into a verl TensorDict batch."""
    import torch

    arr = np.asarray(counts, dtype=np.int64)
    if arr.shape != (len(batch),):
        raise ValueError(f"counts has shape {arr.shape} for a batch of {len(batch)} prompts")
    batch[ROLLOUT_N_FIELD] = torch.as_tensor(arr)
    return batch


def batch_metrics(tags: Sequence[dict], prefix: str = "adaptive/") -> dict[str, float]:
    """What verl trains on, from the batch's TransferQueue tags: trajectory rows, their response
    tokens, and the padding rows verl appended (``is_padding``; zero loss weight, not generated).

    >>> batch_metrics([{"response_len": 3}, {"response_len": 5}, {"is_padding": True, "response_len": 1}])
    {'adaptive/trained_rows': 2.0, 'adaptive/response_tokens': 8.0, 'adaptive/padding_rows': 1.0}
    """
    real = [t for t in tags if not t.get("is_padding", False)]
    return {
        prefix + "trained_rows": float(len(real)),
        prefix + "response_tokens": float(sum(int(t.get("response_len", 0)) for t in real)),
        prefix + "padding_rows": float(len(tags) - len(real)),
    }


class StepFeedback:
    """Rewards of one step, per prompt, as the allocator must see them.

    ``add(indices, raws, asked)`` records one round's session scores (NaN = unscored), mapped to
    [0, 1] by ``signal`` at once (`bridge.scored_draw`); `successes` gives the scored ones;
    ``requested[i] - delivered[i]`` rollouts are missing (a failed session left no trajectory, or its
    reward is NaN), reported by `metrics` (re-dispatches of failed sessions are generated on top of
    ``requested``; what the step spent of ``budget`` is `bridge.step_values`'s to log).
    """

    def __init__(
        self, prompts: Sequence[Any], requested: Sequence[int] | np.ndarray, signal: SuccessSignal, budget: int
    ):
        self.prompts = list(prompts)
        self.requested = np.asarray(requested, dtype=np.int64)
        self.signal = signal
        self.budget = int(budget)
        self._success: list[list[float]] = [[] for _ in self.prompts]
        self.failed_sessions = 0
        self.unscored = 0
        self.redispatched = 0
        self.incomplete = False

    def add(self, indices: Sequence[int] | np.ndarray, raws: Sequence[Any], asked: Sequence[int] | np.ndarray) -> list:
        """Record one round: prompt ``indices[j]``'s sessions ``raws[j]`` for ``asked[j]`` requested
        ones, the round's rewards mapped together; returns each one's scored successes."""
        draw = scored_draw(self.signal, raws, [self.prompts[int(i)] for i in indices])
        for i, scored, unscored, n in zip(indices, draw, draw.unscored, asked):
            self.failed_sessions += max(0, int(n) - scored.size - int(unscored))
            self.unscored += int(unscored)
            self._success[int(i)].extend(scored.tolist())
        return list(draw)

    def successes(self) -> list[np.ndarray]:
        return [np.asarray(s, dtype=float) for s in self._success]

    @property
    def delivered(self) -> np.ndarray:
        return np.array([len(s) for s in self._success], dtype=np.int64)

    def metrics(self, prefix: str = "adaptive/") -> dict[str, float]:
        """What verl generated, what is missing and why, as ``prefix + name`` (what the step spent,
        saved and skipped: `bridge.step_values`)."""
        missing = np.maximum(self.requested - self.delivered, 0)
        return {
            prefix + "generated_rollouts": float(self.requested.sum() + self.redispatched),
            prefix + "missing_rollouts": float(missing.sum()),
            prefix + "prompts_with_missing_rollouts": float(np.count_nonzero(missing)),
            prefix + "failed_sessions": float(self.failed_sessions),
            prefix + "unscored_rollouts": float(self.unscored),
            prefix + "redispatched_rollouts": float(self.redispatched),
            prefix + "incomplete_step": float(self.incomplete),
        }

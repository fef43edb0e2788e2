"""Per-step helpers of the trainer: counts into verl batches, and the step's book of rewards
(`bridge.StepBook`, filled by the step object `bridge.TrainerStep`) with what only verl knows of its
sessions. Pure except `assign_rollout_counts` (writes the batch); the count rule is `bridge.check_counts`.

What the step spent against the budget (``adaptive/rollouts_spent``, ``rollouts_saved``,
``skipped``, ``incomplete_step``) is logged once, by the step (`bridge.StepResult.log`); this module
adds what verl generated and trained on:
``generated_rollouts`` (spent + re-dispatched) and `batch_metrics` (``adaptive/trained_rows``,
``response_tokens``, ``padding_rows``): padding rows are never counted as generated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.bridge import StepBook, check_counts, is_single_shot
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw

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


class StepFeedback(StepBook):
    """The step's `bridge.StepBook` (rollouts asked, successes mapped a round at a time, unscored)
    plus what only verl knows of its sessions: failed ones (no trajectory), re-dispatches, whether
    the step was cut short (`rounds.RoundIncomplete`).

    ``add(indices, raws, asked)`` records one round's session scores (NaN = unscored; fewer than
    asked: the rest failed); ``requested[i] - delivered[i]`` rollouts are missing, reported by
    `metrics` (re-dispatches of failed sessions are generated on top of ``requested``; what the step
    spent of ``budget`` is the step's to log, `bridge.StepResult.log`).
    """

    def __init__(
        self,
        prompts: Sequence[Any],
        requested: Sequence[int] | np.ndarray | None = None,
        signal: SuccessSignal | None = None,
        budget: int = 0,
    ):
        super().__init__(prompts, requested, signal)
        self.budget = int(budget)
        self.failed_sessions = 0  # sessions that left no trajectory, retried ones included
        self.redispatched = 0
        self.incomplete = False

    def add(self, indices: Any, raws: Any, asked: Any, max_length: int | None = None) -> Draw:
        missing = self.missing
        draw = super().add(indices, raws, asked, max_length)
        self.failed_sessions += self.missing - missing
        return draw

    def metrics(self, prefix: str = "adaptive/") -> dict[str, float]:
        """What verl generated, what is missing and why, as ``prefix + name``."""
        missing = np.maximum(self.requested - self.delivered, 0)
        return {
            prefix + "generated_rollouts": float(self.requested.sum() + self.redispatched),
            prefix + "missing_rollouts": float(missing.sum()),
            prefix + "prompts_with_missing_rollouts": float(np.count_nonzero(missing)),
            prefix + "failed_sessions": float(self.failed_sessions),
            prefix + "unscored_rollouts": float(self.unscored),
            prefix + "redispatched_rollouts": float(self.redispatched),
        }

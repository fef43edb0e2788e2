"""The trainer's own state in each TRL checkpoint folder, restored by ``resume_from_checkpoint``.

``checkpoint-<step>/adaptive_rollouts.safetensors`` (`adaptive_rollouts.state.save_state`: arrays as
safetensors, the rest as JSON in its header; no pickle) holds the allocator's ``state_dict()`` (its
predictor, e.g. VIP's GP, its random generator and history), the `SuccessSignal` (the reward range
seen in auto mode), the `RegimeTracker`, the allocation history, the allocator time and the running
totals (`bridge.RunningTotals`, the completion tokens trained on). A checkpoint written before the
running totals existed loads: its rollout totals are rebuilt from the history and the budget (exact:
TRL's budget is the same every step) and the token total restarts at 0, with a warning.
``adaptive_rollouts.json`` next to it is a readable summary (what is inside, for which step).
`ResumableRepeatSampler` keeps the data order of a resumed run equal to an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import numpy as np
import torch
from trl.trainer.utils import RepeatSampler

from adaptive_rollouts.state import load_state, save_state

STATE_FILE = "adaptive_rollouts.safetensors"
SUMMARY_FILE = "adaptive_rollouts.json"
FORMAT_VERSION = 1

logger = logging.getLogger(__name__)


def trainer_state(trainer: Any) -> dict:
    """Everything the adaptive trainer adds to TRL's state, as a state dict."""
    allocator = trainer.allocator
    has_state = callable(getattr(allocator, "state_dict", None))
    return {
        "format": FORMAT_VERSION,
        "allocator_class": type(allocator).__name__,
        "allocator": allocator.state_dict() if has_state else None,
        "success": trainer.success.state_dict(),
        "regime": trainer.regime.state_dict(),
        "history": [np.asarray(c, dtype=np.int64) for c in trainer.allocation_history],
        "allocator_seconds": float(trainer.allocator_seconds),
        "totals": trainer.totals.state_dict(),
        "tokens_total": int(trainer.tokens_total),
    }


def save_trainer_state(trainer: Any, folder: str) -> str:
    """Write the state and its summary into ``folder`` (a checkpoint folder); returns the state path."""
    state = trainer_state(trainer)
    if state["allocator"] is None:
        logger.warning(
            "allocator %s has no state_dict(): its state is not saved with the checkpoint and a resumed run "
            "starts it fresh",
            state["allocator_class"],
        )
    path = os.path.join(folder, STATE_FILE)
    save_state(path, state)
    summary = {
        "format": FORMAT_VERSION,
        "state_file": STATE_FILE,
        "global_step": int(trainer.state.global_step),
        "allocator": state["allocator_class"],
        "allocator_state_saved": state["allocator"] is not None,
        "estimator": trainer.estimator,
        "aggregation": trainer.aggregation,
        "success_mode": trainer.success.mode,
        "steps_allocated": len(state["history"]),
    }
    with open(os.path.join(folder, SUMMARY_FILE), "w") as handle:
        json.dump(summary, handle, indent=2)
    return path


def load_trainer_state(trainer: Any, folder: str) -> bool:
    """Restore the state written by `save_trainer_state`; False (with a warning) when ``folder`` has none."""
    path = os.path.join(folder, STATE_FILE)
    if not os.path.exists(path):
        logger.warning(
            "checkpoint %s has no %s (written by a stock trainer?): the allocator, success signal and regime "
            "tracker start fresh",
            folder,
            STATE_FILE,
        )
        return False
    state = load_state(path)
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: state format {state.get('format')!r}, expected {FORMAT_VERSION}")
    name = type(trainer.allocator).__name__
    if state["allocator_class"] != name:
        raise ValueError(f"{path}: state is for allocator {state['allocator_class']}, the trainer has {name}")
    if state["allocator"] is not None:
        trainer.allocator.load_state_dict(state["allocator"])
    trainer.success.load_state_dict(state["success"])
    trainer.regime.load_state_dict(state["regime"])
    if trainer.accelerator.is_main_process:  # the allocator runs there; other processes keep no history
        trainer.allocation_history = [np.asarray(c, dtype=np.int64) for c in state["history"]]
    trainer.allocator_seconds = float(state["allocator_seconds"])
    if "totals" in state:
        trainer.totals.load_state_dict(state["totals"])
        tokens = state.get("tokens_total")
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or tokens < 0:
            raise ValueError(f"{path}: tokens_total must be an integer >= 0, got {tokens!r}")
        trainer.tokens_total = int(tokens)
    else:  # written before the running totals: rebuilt from the history (TRL's budget is fixed)
        history = [np.asarray(c, dtype=np.int64) for c in state["history"]]
        budget = int(trainer.args.generation_batch_size)
        spent = int(sum(int(c.sum()) for c in history))
        trainer.totals.load_state_dict(
            {"steps": len(history), "rollouts_spent": spent, "budget": budget * len(history)}
        )
        trainer.tokens_total = 0
        logger.warning("%s has no running totals (older format): rebuilt from its history; tokens restart at 0", path)
    return True


class ResumableRepeatSampler(RepeatSampler):
    """TRL's ``RepeatSampler`` with ``set_epoch``: epoch k uses the k-th permutation of the seeded
    generator, the order of an uninterrupted run, also in a run resumed from a checkpoint (the
    Trainer calls ``set_epoch``; without it a run resumed at an epoch boundary replays epoch 0's order)."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle and self.seed is not None:
            self.generator.manual_seed(self.seed)
            for _ in range(epoch):
                torch.randperm(self.num_samples, generator=self.generator)

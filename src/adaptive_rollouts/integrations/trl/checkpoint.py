"""The trainer's own state in each TRL checkpoint folder, restored by ``resume_from_checkpoint``.

``checkpoint-<step>/adaptive_rollouts.safetensors`` (`adaptive_rollouts.state.save_state`: arrays as
safetensors, the rest as JSON in its header; no pickle) holds the allocator's ``state_dict()`` (its
predictor, e.g. VIP's GP, its random generator and history), the `SuccessSignal` (the reward range
seen in auto mode), the `RegimeTracker`, the allocation history, the allocator time and the running
totals (`bridge.RunningTotals`: rollouts and tokens spent and saved; the completion tokens trained
on). A checkpoint written before the running totals existed loads: its rollout totals are rebuilt
from the history and the budget (exact: TRL's budget is the same every step) and the token totals
restart at 0, with a warning. One written before the token totals (``tokens_spent`` /
``tokens_saved``) loads with ``tokens_spent`` rebuilt from its completion tokens trained on (the
same rollouts in TRL) and ``tokens_saved`` restarting at 0, with a warning.
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

from adaptive_rollouts.checks.validation import check_range
from adaptive_rollouts.state import load_state, save_state
from adaptive_rollouts.state.checks import load_together

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


def _checked_history(path: str, history: Any) -> list[np.ndarray]:
    """The allocation history: a list of 1-D arrays of rollout counts (integers >= 0)."""
    if not isinstance(history, (list, tuple)):
        raise ValueError(f"{path}: entry 'history' must be a list of count arrays, got {type(history).__name__}")
    out = []
    for i, counts in enumerate(history):
        arr = np.asarray(counts)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(
                f"{path}: entry 'history/{i}' must be a 1-D array of integers, got {arr.dtype} {arr.shape}"
            )
        if arr.size and int(arr.min()) < 0:
            raise ValueError(f"{path}: entry 'history/{i}' holds a negative rollout count {int(arr.min())}")
        out.append(arr.astype(np.int64))
    return out


def load_trainer_state(trainer: Any, folder: str) -> bool:
    """Restore the state written by `save_trainer_state`; False (with a warning) when ``folder`` has none.

    The state is checked whole before anything is replaced: the format, every entry present, the
    allocator class, the history (counts >= 0) and the allocator time (finite, >= 0), then the
    allocator, success signal and regime tracker load all or none (`state.checks.load_together`).
    A refused state raises ValueError naming the file and the entry, and the trainer is unchanged."""
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
    missing = [
        k
        for k in ("allocator_class", "allocator", "success", "regime", "history", "allocator_seconds")
        if k not in state
    ]
    if missing:
        raise ValueError(f"{path}: missing entries {missing}")
    name = type(trainer.allocator).__name__
    if state["allocator_class"] != name:
        raise ValueError(f"{path}: state is for allocator {state['allocator_class']}, the trainer has {name}")
    history = _checked_history(path, state["history"])
    try:
        seconds = check_range(state["allocator_seconds"], "allocator_seconds", 0.0, None)
    except ValueError as err:
        raise ValueError(f"{path}: entry {err}") from None
    totals = state.get("totals")
    if totals is not None:
        tokens = state.get("tokens_total")
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or tokens < 0:
            raise ValueError(f"{path}: entry 'tokens_total' must be an integer >= 0, got {tokens!r}")
        if isinstance(totals, dict) and "token_steps" not in totals:  # written before the token totals
            stepped = sum(1 for counts in history if counts.sum() > 0)  # steps that generated (and counted) tokens
            totals = {**totals, "token_steps": stepped, "tokens_spent": int(tokens), "tokens_saved": 0.0}
            logger.warning(
                "%s has no token totals (older format): tokens_spent_total rebuilt from its completion tokens, "
                "tokens_saved_total restarts at 0",
                path,
            )
    else:  # written before the running totals: rebuilt from the history (TRL's budget is fixed)
        budget = int(trainer.args.generation_batch_size)
        spent = int(sum(int(c.sum()) for c in history))
        totals, tokens = {"steps": len(history), "rollouts_spent": spent, "budget": budget * len(history)}, 0
        logger.warning("%s has no running totals (older format): rebuilt from its history; tokens restart at 0", path)
    components = {"success": trainer.success, "regime": trainer.regime, "totals": trainer.totals}
    if state["allocator"] is not None:
        components = {"allocator": trainer.allocator, **components}
    load_together({**state, "totals": totals}, components, path)
    if trainer.accelerator.is_main_process:  # the allocator runs there; other processes keep no history
        trainer.allocation_history = history
    trainer.allocator_seconds = seconds
    trainer.tokens_total = int(tokens)
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

"""The allocator's part of a verl checkpoint: ``global_step_N/adaptive_allocator.safetensors``.

The trainer writes it before verl saves anything of step N (`trainer.AdaptiveRolloutTrainer`). On
resume, `resume_in_order` reads it BEFORE verl's own ``_load_checkpoint`` loads the model, optimizer
and dataloader, so a damaged or mismatched allocator state (another allocator's, a hand-edited or
truncated file) is refused - a ValueError naming the file and the entry - before the expensive
load, and nothing is half-loaded: the allocator, success signal, regime tracker and running totals
load all or none (`state.checks.load_together`), and if verl's load fails afterwards they get their
fresh state back. A checkpoint without the file (written before the plug-in, or removed) resumes
with a fresh allocator and a warning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from adaptive_rollouts.state import load_state
from adaptive_rollouts.state.checks import load_together

logger = logging.getLogger(__name__)

__all__ = ["ALLOCATOR_STATE_FILE", "load_parts", "resume_folder", "resume_in_order", "step_of"]

ALLOCATOR_STATE_FILE = "adaptive_allocator.safetensors"


def step_of(folder: str) -> int:
    """N of a ``global_step_N`` checkpoint folder (what verl parses), -1 if it names none.

    >>> step_of("/ckpt/global_step_12"), step_of("/ckpt/latest")
    (12, -1)
    """
    tail = folder.split("global_step_")[-1]
    return int(tail) if "global_step_" in folder and tail.isdigit() else -1


def resume_folder(trainer_config: Any) -> str | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` resumes from, by its rules
    (``resume_mode``: ``auto`` = the latest complete one under ``default_local_dir``, or
    ``resume_path`` = ``resume_from_path``; relative paths from the working directory), or None."""
    mode = trainer_config.resume_mode
    if mode == "auto":
        from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

        return find_latest_ckpt_path(os.path.abspath(trainer_config.default_local_dir))
    if mode == "resume_path" and isinstance(trainer_config.resume_from_path, str):
        return os.path.abspath(trainer_config.resume_from_path)
    return None


def load_parts(path: str, parts: dict[str, Any]) -> None:
    """``parts[name].load_state_dict(state[name])`` from the state file ``path``, all or none. A state
    written before the running totals (``totals``) existed loads without them (they restart at 0,
    with a warning)."""
    state = load_state(path)
    parts = dict(parts)
    if "totals" in parts and "totals" not in state:
        del parts["totals"]
        logger.warning("%s has no running totals (older format): they restart at 0", path)
    elif isinstance(state.get("totals"), dict) and "token_steps" not in state["totals"]:
        logger.warning("%s has no token totals (older format): they restart at 0", path)
    load_together(state, parts, path)
    logger.info("restored allocator state from %s", path)


def resume_in_order(trainer: Any, parts: dict[str, Any], load_verl: Callable[[], None]) -> None:
    """The allocator's state (``parts``, from the folder verl will resume from), then ``load_verl()``
    (verl's ``_load_checkpoint``, which sets ``trainer.global_steps``). See the module docstring."""
    folder = resume_folder(trainer.config.trainer)
    path = None if folder is None else os.path.join(folder, ALLOCATOR_STATE_FILE)
    fresh = None
    if path is not None and os.path.exists(path):
        fresh = {name: part.state_dict() for name, part in parts.items()}
        load_parts(path, parts)
    try:
        load_verl()
        if trainer.global_steps > 0 and (folder is None or step_of(folder) != trainer.global_steps):
            raise RuntimeError(
                f"adaptive: verl resumed step {trainer.global_steps}, but the allocator's state was looked "
                f"for in {folder}: the plug-in's reading of verl's resume rules is out of date"
            )
    except BaseException:
        if fresh is not None:
            load_together(fresh, parts, "the allocator's fresh state")
        raise
    if trainer.global_steps > 0 and fresh is None:
        logger.warning("no allocator state at %s: the allocator starts fresh", path)

"""Progressive allocation inside one verl step: each ``sample`` call of the allocator is a round.

A round dispatches the asked prompts as a sub-batch with fresh uids and ``__rollout_n__`` = the
round's counts, waits for TransferQueue to mark them terminal, and returns each prompt's rewards.
The rounds of a step never ask for more than the budget in all: a request beyond it raises before
anything is dispatched; a "fill" allocator whose rounds asked for less than the budget in all is an
error too (`steps.check_counts`, the same check as single-shot counts). An unscored trajectory is
removed from TransferQueue (its reward is unknown, so training on it would train on a made-up
reward). A session that failed (no trajectory) or has no score is handled by the allocator's kind:

- ``"fill"`` (spends exactly the budget): re-dispatched, up to ``adaptive.session_retries`` times, so
  the allocator gets the rewards it asked for. If rollouts are still missing after the retries, the
  allocator's run stops there (its state is left as before the step, it learns nothing from the
  step), the rollouts produced so far are trained on, and ``adaptive/incomplete_step`` is 1.
- ``"save"`` (spends at most the budget): not re-dispatched (that would spend past what the allocator
  decided); the answer is a `Draw` whose ``unscored`` counts them, so the allocator books them as
  spent and its later rounds cannot overspend.

After the rounds every trajectory gets its prompt's original uid: one advantage group per prompt.
If no round produced a trajectory (every prompt skipped, or every session failed), the step's
prompt entries are cleared from TransferQueue and the step has no group to train on.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import numpy as np

from adaptive_rollouts.types import Draw, allocator_kind

from . import rollouts as R
from .steps import StepFeedback, assign_rollout_counts, check_counts

logger = logging.getLogger(__name__)

__all__ = ["RoundIncomplete", "keep_if_trained", "run_rounds", "select_rows"]


class RoundIncomplete(RuntimeError):
    """Rollouts still missing after ``adaptive.session_retries`` re-dispatches."""


def select_rows(batch: Any, rows: np.ndarray, global_steps: int) -> Any:
    """The prompts ``rows`` of a verl TensorDict batch, ready to dispatch at step ``global_steps``."""
    import torch
    from verl.utils import tensordict_utils as tu

    sub = tu.index_select_tensor_dict(batch, torch.as_tensor(rows))
    tu.assign_non_tensor_data(sub, "global_steps", global_steps)
    return sub


def _dispatch(trainer: Any, batch: Any, rows: np.ndarray, counts: np.ndarray) -> list[str]:
    """Submit ``counts[j]`` rollouts of batch row ``rows[j]`` under fresh uids; returns the uids."""
    from verl.utils import tensordict_utils as tu

    sub = select_rows(batch, rows, trainer.global_steps)
    new = [uuid.uuid4().hex for _ in range(len(rows))]  # no "_": trajectory keys split on it
    tu.assign_non_tensor_stack(sub, "uid", new)
    assign_rollout_counts(sub, counts)
    trainer._submit_batch_to_rollout(sub)
    return new


def run_rounds(trainer: Any, batch: Any, keys: list, base_uids: list[str]) -> tuple[StepFeedback, int]:
    """Run ``trainer.allocator.run`` with rounds dispatched through verl; returns the step's feedback
    and the number of round groups (prompt uids) the replay buffer must sample (0: nothing to train)."""
    import transfer_queue as tq

    s = trainer.settings
    kind = allocator_kind(trainer.allocator)
    retries = s.session_retries if kind == "fill" else 0
    round_uids: dict[str, str] = {}  # round uid -> the prompt's original uid
    feedback = StepFeedback(keys, np.zeros(len(keys), dtype=np.int64), trainer.signal, trainer.budget)

    def sample(indices: np.ndarray, counts: np.ndarray) -> Any:
        indices, counts = np.asarray(indices, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        asked = int(feedback.requested.sum() + counts.sum())
        if asked > trainer.budget:
            raise ValueError(
                f"the allocator asked for {asked} rollouts this step in all, the budget is {trainer.budget}"
            )
        feedback.requested[indices] += counts
        need = counts.copy()
        got: list[list[float]] = [[] for _ in indices]
        for attempt in range(retries + 1):
            live = np.flatnonzero(need > 0)
            if live.size == 0:
                break
            if attempt:
                feedback.redispatched += int(need[live].sum())
            new = _dispatch(trainer, batch, indices[live], need[live])
            for u, j in zip(new, live):
                round_uids[u] = base_uids[int(indices[j])]
            R.wait_for_groups(new, "train", timeout_s=s.round_timeout_s, max_poll_s=s.round_poll_max_s)
            stored = R.trajectory_keys(new, "train")
            sessions = R.read_session_scores(stored, "train")
            unscored = set()
            raws = [sessions.of(u) for u in new]
            for u, j, raw, scored in zip(new, live, raws, feedback.add(indices[live], raws, need[live])):
                got[j].extend(scored.tolist())
                need[j] -= scored.size
                if scored.size < raw.size:
                    unscored.add(u)
            drop = [k for k in stored if k.split("_", 1)[0] in unscored and _session_unscored(k, sessions)]
            if drop:
                tq.kv_clear(keys=drop, partition_id="train")
        rewards = [np.asarray(g, dtype=float) for g in got]
        if np.any(need > 0):
            if kind == "save":
                return Draw(rewards, need)
            missing = {keys[int(indices[j])]: int(need[j]) for j in np.flatnonzero(need > 0)}
            raise RoundIncomplete(f"rollouts still missing after {s.session_retries} re-dispatches: {missing}")
        return rewards

    try:
        trainer.allocator.run(keys, trainer.budget, sample)
    except RoundIncomplete as err:
        logger.warning("adaptive: %s; training on the rollouts produced so far", err)
        feedback.incomplete = True
    else:  # what the rounds asked for in all: the whole budget (fill) or at most it (save)
        check_counts(feedback.requested, len(keys), trainer.budget, kind)
    stored = R.trajectory_keys(list(round_uids), "train")
    if not keep_if_trained(list(round_uids), stored):
        return feedback, 0
    R.relabel_uids(stored, [round_uids[k.split("_", 1)[0]] for k in stored], "train")
    return feedback, len(round_uids)


def keep_if_trained(uids: list[str], stored: list[str] | None = None) -> bool:
    """Whether any of these terminal prompt uids left a trajectory (``stored``: their trajectory keys,
    read if not given). If none did, their prompt entries are cleared from TransferQueue: verl's
    replay buffer refuses to sample groups that have nothing to train on."""
    import transfer_queue as tq

    if stored is None:
        stored = R.trajectory_keys(uids, "train")
    if stored:
        return True
    if uids:
        tq.kv_clear(keys=list(uids), partition_id="train")
    return False


def _session_unscored(key: str, sessions: R.SessionScores) -> bool:
    uid, session, _ = R.parse_key(key)
    return bool(np.isnan(sessions.scores.get(uid, {}).get(session, np.nan)))

"""Progressive allocation inside one verl step: each ``sample`` call of the allocator is a round.

A round dispatches the asked prompts as a sub-batch with fresh uids and ``__rollout_n__`` = the
round's counts, waits for TransferQueue to mark them terminal, and returns each prompt's rewards.
The step object (`bridge.TrainerStep`, the one every trainer uses) owns the allocator's ``sample``:
a request beyond the budget raises before anything is dispatched; a "fill" allocator whose rounds
asked for less than the budget in all is an error too (`bridge.check_spent`); each round's scores
are mapped to successes at once. This module plays the rounds (``generate``) with verl's retries. An unscored trajectory is
removed from TransferQueue (its reward is unknown, so training on it would train on a made-up
reward). A session that failed (no trajectory) or has no score is handled by the allocator's kind:

- ``"fill"`` (spends exactly the budget): re-dispatched, up to ``adaptive.session_retries`` times, so
  the allocator gets the rewards it asked for. If rollouts are still missing after the retries, the
  allocator's run stops there (`bridge.RoundIncomplete`: its state is left as before the step, it
  learns nothing from the step), the rollouts produced so far are trained on, and
  ``adaptive/incomplete_step`` is 1.
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

from adaptive_rollouts.bridge import Generated, RoundIncomplete, StepResult
from adaptive_rollouts.types import allocator_kind

from . import rollouts as R
from .steps import StepFeedback, assign_rollout_counts

logger = logging.getLogger(__name__)

__all__ = ["RoundIncomplete", "keep_if_trained", "run_rounds", "select_rows"]


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


def run_rounds(trainer: Any, batch: Any, keys: list, base_uids: list[str]) -> tuple[StepResult, StepFeedback, int]:
    """The step (`bridge.TrainerStep`, ``trainer.adaptive_step``) with rounds dispatched through verl; returns
    the step's result, its session feedback and the number of round groups (prompt uids) the replay
    buffer must sample (0: nothing to train)."""
    import transfer_queue as tq

    s = trainer.settings
    kind = allocator_kind(trainer.allocator)
    retries = s.session_retries if kind == "fill" else 0
    round_uids: dict[str, str] = {}  # round uid -> the prompt's original uid
    feedback = StepFeedback(keys, signal=trainer.signal, budget=trainer.budget)

    def generate(indices: np.ndarray, counts: np.ndarray) -> Generated | list[list[float]]:
        """One round (the budget guard and the success mapping are the step's): dispatched, and
        re-dispatched for failed or unscored sessions up to the retries ("fill" only). Returns each
        prompt's scored rewards plus the last attempt's unscored ones (the rest: failed, missing),
        with their completion lengths when verl stored them (`rollouts.session_lengths`)."""
        need = counts.copy()
        got: list[list[float]] = [[] for _ in indices]
        got_len: list[list[int]] = [[] for _ in indices]  # the lengths of ``got``, in its order
        nan_len: list[list[int]] = [[] for _ in indices]  # the lengths of the last attempt's unscored
        with_lengths = True
        nan_left = np.zeros(len(indices), dtype=np.int64)  # last attempt's unscored, not retried yet
        failed_left = np.zeros(len(indices), dtype=np.int64)  # last attempt's failed sessions
        for attempt in range(retries + 1):
            live = np.flatnonzero(need > 0)
            if live.size == 0:
                break
            if attempt:  # the last attempt's failures are re-dispatched: count them now
                feedback.redispatched += int(need[live].sum())
                feedback.failed_sessions += int(failed_left[live].sum())
                feedback.unscored += int(nan_left[live].sum())
            new = _dispatch(trainer, batch, indices[live], need[live])
            for u, j in zip(new, live):
                round_uids[u] = base_uids[int(indices[j])]
            R.wait_for_groups(new, "train", timeout_s=s.round_timeout_s, max_poll_s=s.round_poll_max_s)
            stored = R.trajectory_keys(new, "train")
            sessions = R.read_session_scores(stored, "train")
            prompts = [keys[int(indices[j])] for j in live]
            lengths = R.session_lengths(sessions, new, prompts, trainer.max_response_length)
            with_lengths = with_lengths and lengths is not None
            unscored = set()
            for pos, (u, j) in enumerate(zip(new, live)):
                raw = np.asarray(sessions.of(u), dtype=float)
                scored = raw[~np.isnan(raw)]
                got[j].extend(scored.tolist())
                if lengths is not None:
                    length = np.asarray(lengths[pos], dtype=np.int64)
                    got_len[j].extend(length[~np.isnan(raw)].tolist())
                    nan_len[j] = length[np.isnan(raw)].tolist()
                nan_left[j], failed_left[j] = raw.size - scored.size, need[j] - raw.size
                need[j] -= scored.size
                if scored.size < raw.size:
                    unscored.add(u)
            drop = [k for k in stored if k.split("_", 1)[0] in unscored and _session_unscored(k, sessions)]
            if drop:
                tq.kv_clear(keys=drop, partition_id="train")
        raws = [g + [float("nan")] * int(n) if left else g for g, n, left in zip(got, nan_left, need > 0)]
        answer: Generated | list[list[float]] = raws
        if with_lengths:
            answer = Generated(raws, [a + b if left else a for a, b, left in zip(got_len, nan_len, need > 0)])
        if kind == "fill" and np.any(need > 0):
            missing = {keys[int(indices[j])]: int(need[j]) for j in np.flatnonzero(need > 0)}
            raise RoundIncomplete(f"rollouts still missing after {s.session_retries} re-dispatches: {missing}", answer)
        return answer  # "save": what is missing is spent and unscored (the step's Draw tells the allocator)

    result = trainer.adaptive_step.run(keys, trainer.budget, generate, book=feedback)
    if result.incomplete:
        logger.warning("adaptive: step %d incomplete; training on the rollouts produced so far", trainer.global_steps)
        feedback.incomplete = True
    stored = R.trajectory_keys(list(round_uids), "train")
    if not keep_if_trained(list(round_uids), stored):
        return result, feedback, 0
    R.relabel_uids(stored, [round_uids[k.split("_", 1)[0]] for k in stored], "train")
    return result, feedback, len(round_uids)


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

"""Reading rollouts back from verl's TransferQueue, and grouping their scores per prompt.

verl's agent loop stores each trajectory under the key ``{uid}_{session}_{index}`` (``session`` is
the rollout number of the prompt, ``index`` the output of a multi-output agent loop, whose outputs
all carry the session's final reward), and marks the prompt ``{uid}`` ``finished`` or ``failure``
once every session settled. A failed session leaves no trajectory.

One rollout for the allocator is one *session*: its score is the final output's ``rm_scores``
summed over tokens (verl's sequence score, before any KL penalty); NaN if it has none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "SessionScores",
    "group_sessions",
    "parse_key",
    "read_session_scores",
    "relabel_uids",
    "trajectory_keys",
    "wait_for_groups",
]


def parse_key(key: str) -> tuple[str, int, int]:
    """``"{uid}_{session}_{index}"`` -> (uid, session, index)."""
    parts = key.rsplit("_", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        raise ValueError(f"trajectory key {key!r} is not '{{uid}}_{{session}}_{{index}}'")
    return parts[0], int(parts[1]), int(parts[2])


class SessionScores:
    """Per prompt uid: the sessions that produced a trajectory and each one's score (NaN: unscored)."""

    def __init__(self) -> None:
        self.scores: dict[str, dict[int, float]] = {}

    def add(self, key: str, score: float, final_index: dict[str, int]) -> None:
        uid, session, index = parse_key(key)
        if index == final_index[f"{uid}_{session}"]:
            self.scores.setdefault(uid, {})[session] = score

    def of(self, uid: str) -> np.ndarray:
        """Scores of ``uid``'s sessions, in session order (NaN where a session has no score)."""
        sessions = self.scores.get(uid, {})
        return np.array([sessions[s] for s in sorted(sessions)], dtype=float)


def group_sessions(keys: Sequence[str], scores: Sequence[float]) -> SessionScores:
    """Scores of the final output of each session (multi-output agent loops give several rows)."""
    if len(keys) != len(scores):
        raise ValueError(f"{len(keys)} trajectory keys for {len(scores)} scores")
    final: dict[str, int] = {}
    for key in keys:
        uid, session, index = parse_key(key)
        final[f"{uid}_{session}"] = max(index, final.get(f"{uid}_{session}", -1))
    out = SessionScores()
    for key, score in zip(keys, scores):
        out.add(key, float(score), final)
    return out


def wait_for_groups(
    uids: Sequence[str],
    partition_id: str = "train",
    timeout_s: float | None = None,
    max_poll_s: float = 0.1,
    list_fn: Any = None,
) -> dict[str, str]:
    """Block until every prompt uid is ``finished`` or ``failure``; returns each uid's status.

    TransferQueue has no notification for tag changes (verl's own ReplayBuffer polls every 2 s), so
    this polls ``kv_list`` with a back-off from 1 ms, doubling to ``max_poll_s``: a round that
    finishes after t seconds is seen at most ``min(t, max_poll_s)`` late, with ~log2(t / 1 ms) + t /
    max_poll_s listings (each ~1 ms, measured in tests/verl_plugin).
    """
    if list_fn is None:
        import transfer_queue as tq

        list_fn = tq.kv_list
    pending = set(uids)
    status: dict[str, str] = {}
    start = time.monotonic()
    delay = 1e-3
    while True:
        tags = (list_fn(partition_id) or {}).get(partition_id, {})
        for uid in list(pending):
            s = tags.get(uid, {}).get("status")
            if s in ("finished", "failure"):
                status[uid] = s
                pending.discard(uid)
        if not pending:
            return status
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(
                f"{len(pending)} rollout groups not finished after {timeout_s} s (adaptive.round_timeout_s)"
            )
        time.sleep(delay)
        delay = min(2 * delay, max_poll_s)


def trajectory_keys(uids: Sequence[str], partition_id: str = "train") -> list[str]:
    """Keys of the trajectories stored for these prompt uids."""
    import transfer_queue as tq

    wanted = set(uids)
    tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
    return [k for k, t in tags.items() if not t.get("is_prompt", False) and k.split("_", 1)[0] in wanted]


def read_session_scores(keys: Sequence[str], partition_id: str = "train") -> SessionScores:
    """Read ``rm_scores`` of the trajectories and group them by session."""
    import transfer_queue as tq

    keys = list(keys)
    if not keys:
        return SessionScores()
    try:
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores"])
    except Exception as err:  # the field is missing when rewards come from a colocated reward model
        raise RuntimeError(
            "could not read rm_scores of this step's rollouts from TransferQueue: the allocator needs each "
            "rollout's reward while the step runs (rule-based rewards, or reward.reward_model.enable_resource_pool"
            f"=true): {err}"
        ) from err
    scores = []
    for s in data["rm_scores"]:
        total = float(s.sum().item()) if s is not None else math.nan
        scores.append(total)
    return group_sessions(keys, scores)


def relabel_uids(keys: Sequence[str], new_uids: Sequence[str], partition_id: str = "train") -> None:
    """Overwrite the ``uid`` field of stored trajectories (groups advantages by prompt)."""
    import transfer_queue as tq
    from verl.utils import tensordict_utils as tu

    if keys:
        tq.kv_batch_put(
            keys=list(keys),
            partition_id=partition_id,
            fields=tu.get_tensordict({"uid": np.array(list(new_uids), dtype=object)}),
        )

"""Reading rollouts back from verl's TransferQueue, and grouping their scores per prompt.

verl's agent loop stores each trajectory under the key ``{uid}_{session}_{index}`` (``session`` is
the rollout number of the prompt, ``index`` the output of a multi-output agent loop, whose outputs
all carry the session's final reward), and marks the prompt ``{uid}`` ``finished`` or ``failure``
once every session settled. A failed session leaves no trajectory.

One rollout for the allocator is one *session*: its score is the final output's ``rm_scores``
summed over tokens (verl's sequence score, before any KL penalty); NaN if it has none. Its
completion length is the tokens the model generated in it: the ``response_mask`` of its outputs
summed (tool results, masked out, are not counted), over all its outputs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.checks.lengths import check_lengths

__all__ = [
    "SessionScores",
    "group_sessions",
    "session_lengths",
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
    """Per prompt uid: the sessions that produced a trajectory and each one's score (NaN: unscored),
    and, when read, the completion length of each of their outputs (``lengths``, None: not read)."""

    def __init__(self, with_lengths: bool = False) -> None:
        self.scores: dict[str, dict[int, float]] = {}
        self.lengths: dict[str, dict[int, list[int]]] | None = {} if with_lengths else None

    def add(self, key: str, score: float, final_index: dict[str, int], length: int | None = None) -> None:
        uid, session, index = parse_key(key)
        if index == final_index[f"{uid}_{session}"]:
            self.scores.setdefault(uid, {})[session] = score
        if self.lengths is not None and length is not None:
            self.lengths.setdefault(uid, {}).setdefault(session, []).append(int(length))

    def lengths_of(self, uid: str) -> list[int] | None:
        """Completion tokens of ``uid``'s sessions (summed over each session's outputs), in the order
        of `of`; None when lengths were not read."""
        if self.lengths is None:
            return None
        sessions = self.lengths.get(uid, {})
        return [sum(sessions.get(s, [])) for s in sorted(self.scores.get(uid, {}))]

    def output_lengths(self, uid: str) -> list[int] | None:
        """Completion tokens of every output of ``uid``'s sessions (each at most verl's
        ``response_length``); None when lengths were not read."""
        if self.lengths is None:
            return None
        return [n for s in sorted(self.lengths.get(uid, {})) for n in self.lengths[uid][s]]

    def of(self, uid: str) -> np.ndarray:
        """Scores of ``uid``'s sessions, in session order (NaN where a session has no score)."""
        sessions = self.scores.get(uid, {})
        return np.array([sessions[s] for s in sorted(sessions)], dtype=float)


def group_sessions(keys: Sequence[str], scores: Sequence[float], lengths: Sequence[int] | None = None) -> SessionScores:
    """Scores of the final output of each session (multi-output agent loops give several rows), and
    each output's completion length when ``lengths`` (one per key) is given."""
    if len(keys) != len(scores) or (lengths is not None and len(lengths) != len(keys)):
        raise ValueError(f"{len(keys)} trajectory keys for {len(scores)} scores")
    final: dict[str, int] = {}
    for key in keys:
        uid, session, index = parse_key(key)
        final[f"{uid}_{session}"] = max(index, final.get(f"{uid}_{session}", -1))
    out = SessionScores(with_lengths=lengths is not None)
    for j, (key, score) in enumerate(zip(keys, scores)):
        out.add(key, float(score), final, None if lengths is None else lengths[j])
    return out


def session_lengths(
    sessions: SessionScores, uids: Sequence[str], prompts: Sequence[Any], maximum: int | None
) -> list[list[int]] | None:
    """Each uid's session lengths (`SessionScores.lengths_of`), after checking every output's length
    (`checks.lengths.check_lengths`: a whole number >= 0, at most verl's ``response_length``),
    naming the prompt ``prompts[j]`` of ``uids[j]``; None when the lengths were not read.

    >>> s = group_sessions(["u_0_0", "u_1_0"], [1.0, 0.0], [3, 5])
    >>> session_lengths(s, ["u"], ["q0"], maximum=16)
    [[3, 5]]
    """
    if sessions.lengths is None:
        return None
    outputs = [sessions.output_lengths(u) or [] for u in uids]
    check_lengths(prompts, outputs, [len(o) for o in outputs], maximum, source="verl rollouts (response_mask)")
    return [sessions.lengths_of(u) or [] for u in uids]


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
    """Read ``rm_scores`` and ``response_mask`` of the trajectories and group them by session (the
    lengths are left unread, None, when the batch has no ``response_mask``)."""
    import transfer_queue as tq

    keys = list(keys)
    if not keys:
        return SessionScores(with_lengths=True)
    try:
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores", "response_mask"])
    except Exception:  # no response mask stored: the scores alone (the step then counts rollouts)
        data = None
    if data is not None:
        lengths = [int(m.sum().item()) if m is not None else 0 for m in data["response_mask"]]
        return group_sessions(keys, _scores(data), lengths)
    try:
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores"])
    except Exception as err:  # the field is missing when rewards come from a colocated reward model
        raise RuntimeError(
            "could not read rm_scores of this step's rollouts from TransferQueue: the allocator needs each "
            "rollout's reward while the step runs (rule-based rewards, or reward.reward_model.enable_resource_pool"
            f"=true): {err}"
        ) from err
    return group_sessions(keys, _scores(data))


def _scores(data: Any) -> list[float]:
    """Each trajectory's sequence score: its ``rm_scores`` summed (NaN: none)."""
    return [float(s.sum().item()) if s is not None else math.nan for s in data["rm_scores"]]


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

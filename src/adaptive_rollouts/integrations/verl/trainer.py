"""``AdaptiveRolloutTrainer``: verl's synchronous v1 trainer with per-prompt rollout counts.

Registered in verl's trainer registry as ``trainer.v1.trainer_mode=adaptive``. Per step:

1. fetch ``train_batch_size`` prompts from verl's dataloader (unchanged);
2. single-shot allocators (``plan`` / ``observe``, e.g. ``Uniform``, ``VIP``): ``counts =
   allocator.plan(prompts, budget)``, written to the batch as ``__rollout_n__`` (the per-prompt
   hook of verl's agent loop), then dispatched once;
   progressive allocators (``run`` only, e.g. ``VIGOR``): ``allocator.run(prompts, budget,
   sample)``, where each ``sample`` call dispatches one round (fresh uids, so session ids never
   collide), waits for those groups in TransferQueue and returns their scores; afterwards the
   round trajectories are relabelled with the prompt's uid so each prompt is one group;
3. verl samples, scores, computes advantages and updates as usual; before the advantages, the
   sequence scores (``rm_scores`` summed over tokens, i.e. before any KL penalty) go back to
   ``allocator.observe`` (single-shot only: progressive allocators saw them in ``run``);
4. the allocator state is saved next to verl's checkpoint (``global_step_N/adaptive_allocator``,
   :func:`adaptive_rollouts.state.save_state`) and restored on resume.

``budget`` defaults to ``data.train_batch_size * actor_rollout_ref.rollout.n``, so the number of
sequences per step, verl's padding and its PPO mini-batches (counted as ``ppo_mini_batch_size *
rollout.n`` sequences) are unchanged. A prompt given 0 rollouts finishes with no trajectory.
Progressive allocators need rewards while the step is running: rule-based rewards or a reward
model with its own resource pool (verl's streaming reward path).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

ALLOCATOR_STATE_FILE = "adaptive_allocator.safetensors"

# verl actor.loss_agg_mode -> the aggregation names of adaptive_rollouts.objectives.
AGGREGATION_FROM_LOSS_AGG_MODE = {
    "token-mean": "token-mean",
    "seq-mean-token-mean": "seq-mean",
    "seq-mean-token-sum": "seq-mean",
    "seq-mean-token-sum-norm": "constant",
}


# ----------------------------------------------------------------------------- pure helpers


def load_allocator_class(spec: str) -> type:
    """A registry name (``"vigor"``, ``"vip-paper"``, see ``allocators.ALLOCATORS``), a class name of
    ``adaptive_rollouts.allocators`` (``"VIGOR"``) or ``"pkg.mod:Class"``."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        module = importlib.import_module(module_name)
    else:
        from adaptive_rollouts.allocators import ALLOCATORS

        key = spec.lower().replace("_", "-")
        if key in ALLOCATORS:
            return ALLOCATORS[key]
        module = importlib.import_module("adaptive_rollouts.allocators")
        attr = spec
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"adaptive.allocator: {spec!r} not found in {module.__name__}") from None


def build_allocator(spec: str, kwargs: dict | None = None, aggregation: str | None = None) -> Any:
    """Instantiate the allocator; passes ``aggregation=`` only if its constructor accepts it."""
    cls = load_allocator_class(spec)
    kwargs = dict(kwargs or {})
    if aggregation is not None and "aggregation" not in kwargs:
        from adaptive_rollouts.allocators import takes_keyword

        if takes_keyword(cls, "aggregation"):
            kwargs["aggregation"] = aggregation
    return cls(**kwargs)


def aggregation_for(loss_agg_mode: str | None, override: str | None = "auto") -> str | None:
    """The allocator's ``aggregation`` for verl's ``loss_agg_mode`` (``override`` wins unless 'auto')."""
    if override not in (None, "auto"):
        return override
    if loss_agg_mode is None:
        return None
    if loss_agg_mode not in AGGREGATION_FROM_LOSS_AGG_MODE:
        raise ValueError(
            f"actor.loss_agg_mode {loss_agg_mode!r} has no known aggregation; set adaptive.aggregation "
            f"explicitly (known modes: {sorted(AGGREGATION_FROM_LOSS_AGG_MODE)})"
        )
    return AGGREGATION_FROM_LOSS_AGG_MODE[loss_agg_mode]


def is_single_shot(allocator: Any) -> bool:
    return callable(getattr(allocator, "plan", None)) and callable(getattr(allocator, "observe", None))


def prompt_keys(batch: Any, key: str) -> list:
    """Hashable per-prompt keys from a batch field (``index``: the dataset row)."""
    if key not in batch.keys():
        raise KeyError(f"adaptive.prompt_key {key!r} is not a field of the batch; fields: {sorted(batch.keys())}")
    values = batch[key]
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    out = []
    for v in values:
        v = getattr(v, "data", v)
        v = v.item() if hasattr(v, "item") else v
        out.append(v if isinstance(v, (int, str, float, bool)) else str(v))
    return out


def check_counts(counts: Any, n_prompts: int, budget: int) -> np.ndarray:
    """Integer counts >= 0, one per prompt, summing exactly to ``budget``."""
    arr = np.asarray(counts)
    if arr.shape != (n_prompts,):
        raise ValueError(f"allocator returned counts of shape {arr.shape}, expected ({n_prompts},)")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"allocator returned non-integer counts {arr[:10].tolist()}")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise ValueError(f"allocator returned negative counts {arr[arr < 0][:10].tolist()}")
    if int(arr.sum()) != budget:
        raise ValueError(f"allocator counts sum to {int(arr.sum())}, budget is {budget}")
    return arr


def assign_rollout_counts(batch: Any, counts: Sequence[int] | np.ndarray) -> Any:
    """Write ``__rollout_n__`` (int64 tensor, one entry per prompt) into a verl TensorDict batch."""
    import torch

    arr = np.asarray(counts, dtype=np.int64)
    if arr.shape != (len(batch),):
        raise ValueError(f"counts has shape {arr.shape} for a batch of {len(batch)} prompts")
    batch["__rollout_n__"] = torch.as_tensor(arr)
    return batch


def group_scores(
    uids: Sequence[str],
    scores: Sequence[float],
    order: Sequence[str],
    reward_range: Sequence[float] = (0.0, 1.0),
) -> list[np.ndarray]:
    """Scores grouped by uid, one 1-D array per uid of ``order`` (empty where a uid has none),
    rescaled from ``reward_range`` to [0, 1]: allocators reason about success probabilities.
    A score outside the range raises (set ``adaptive.reward_range`` to your reward's range)."""
    if len(uids) != len(scores):
        raise ValueError(f"{len(uids)} uids for {len(scores)} scores")
    low, high = (float(v) for v in reward_range)
    if not high > low:
        raise ValueError(f"adaptive.reward_range must be [low, high] with high > low, got {list(reward_range)}")
    known = set(order)
    by_uid: dict[str, list[float]] = {u: [] for u in order}
    for u, s in zip(uids, scores):
        if u not in known:
            raise KeyError(f"trajectory uid {u!r} was not dispatched in this step")
        if not (low - 1e-9 <= float(s) <= high + 1e-9):
            raise ValueError(f"trajectory {u!r}: score {float(s)} outside adaptive.reward_range={[low, high]}")
        by_uid[u].append(min(max((float(s) - low) / (high - low), 0.0), 1.0))
    return [np.asarray(by_uid[u], dtype=float) for u in order]


def allocator_metrics(allocator: Any, prefix: str = "adaptive/") -> dict[str, float]:
    """Scalar entries of ``allocator.last_metrics`` for verl's tracker."""
    out = {}
    for k, v in (getattr(allocator, "last_metrics", None) or {}).items():
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if isinstance(v, (int, float, np.integer, np.floating)):
            out[prefix + str(k)] = float(v)
    return out


# ----------------------------------------------------------------------------- TransferQueue I/O


def wait_for_groups(
    uids: Sequence[str], partition_id: str = "train", poll_s: float = 0.5, timeout_s: float | None = None
) -> None:
    """Block until every prompt uid has status ``finished`` or ``failure`` in TransferQueue."""
    import transfer_queue as tq

    pending = set(uids)
    start = time.monotonic()
    while pending:
        tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
        pending = {u for u in pending if tags.get(u, {}).get("status") not in ("finished", "failure")}
        if not pending:
            return
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{len(pending)} rollout groups not finished after {timeout_s} s")
        time.sleep(poll_s)


def trajectory_keys(uids: Sequence[str], partition_id: str = "train") -> list[str]:
    """Keys ``{uid}_{session}_{index}`` of the trajectories stored for these prompt uids."""
    import transfer_queue as tq

    wanted = set(uids)
    tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
    return [k for k, t in tags.items() if not t.get("is_prompt", False) and k.split("_", 1)[0] in wanted]


def read_scores(keys: Sequence[str], partition_id: str = "train") -> tuple[list[str], list[float]]:
    """(uid, sequence score) of each trajectory; the score is ``rm_scores`` summed over tokens."""
    import transfer_queue as tq

    if not keys:
        return [], []
    data = tq.kv_batch_get(keys=list(keys), partition_id=partition_id, select_fields=["uid", "rm_scores"])
    uids = [str(getattr(u, "data", u)) for u in data["uid"]]
    scores = [float(s.sum().item()) for s in data["rm_scores"]]
    return uids, scores


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


# ----------------------------------------------------------------------------- the trainer


def _make_trainer_class():
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils import tensordict_utils as tu

    from adaptive_rollouts.state import load_state, save_state

    class _RoundsReplayBuffer:
        """Delegates to verl's ReplayBuffer; after progressive rounds it samples every round group."""

        def __init__(self, inner: Any, trainer: Any):
            self._inner, self._trainer = inner, trainer

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def sample(self, global_steps: int, partition_id: str, batch_size: int):
            n_rounds = self._trainer._round_group_count
            if partition_id == "train" and n_rounds:
                self._trainer._round_group_count = 0
                batch_size = n_rounds
            return self._inner.sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)

    class AdaptiveRolloutTrainer(PPOTrainerSync):
        """verl's sync v1 trainer; rollout counts per prompt come from an adaptive_rollouts allocator.

        Config (``adaptive:`` section, see ``adaptive_ppo.yaml``): ``allocator``,
        ``allocator_kwargs``, ``prompt_key``, ``budget``, ``aggregation``, ``round_timeout_s``.
        """

        def __init__(self, config):
            self._round_group_count = 0
            super().__init__(config)
            self.trainer_mode = "sync"  # registered as "adaptive", behaves as verl's sync mode
            if self.parameter_sync_step != 1:
                raise ValueError("AdaptiveRolloutTrainer needs parameter_sync_step == 1 (one update per step)")
            acfg = config.get("adaptive", {}) or {}
            self.prompt_key = acfg.get("prompt_key", "index")
            self.budget = int(acfg.get("budget") or config.data.train_batch_size * config.actor_rollout_ref.rollout.n)
            self.round_timeout_s = acfg.get("round_timeout_s", None)
            self.reward_range = tuple(float(v) for v in acfg.get("reward_range", (0.0, 1.0)))
            aggregation = aggregation_for(
                config.actor_rollout_ref.actor.get("loss_agg_mode"), acfg.get("aggregation", "auto")
            )
            kwargs = acfg.get("allocator_kwargs", {}) or {}
            if hasattr(kwargs, "items"):
                kwargs = {k: v for k, v in kwargs.items()}
            self.allocator = build_allocator(str(acfg.get("allocator", "Uniform")), kwargs, aggregation)
            self.single_shot = is_single_shot(self.allocator) and not acfg.get("force_progressive", False)
            self._step_uids: list[str] = []
            self._step_prompts: list = []

        def _build_replay_buffer(self):
            self.trainer_mode = "sync"
            return _RoundsReplayBuffer(super()._build_replay_buffer(), self)

        # -- dispatch ------------------------------------------------------------------

        def prepare_step(self) -> dict:
            batch = self._next_train_batch()
            prompts = prompt_keys(batch, self.prompt_key)
            uids = [str(u) for u in prompt_keys(batch, "uid")]
            if self.single_shot:
                counts = check_counts(self.allocator.plan(prompts, self.budget), len(prompts), self.budget)
                assign_rollout_counts(batch, counts)
                self._step_uids, self._step_prompts = uids, prompts
                self._submit_batch_to_rollout(batch)
            else:
                self._run_rounds(batch, prompts, uids)
                self._step_uids, self._step_prompts = [], []
            return allocator_metrics(self.allocator)

        def _run_rounds(self, batch, prompts: list, base_uids: list[str]) -> None:
            import torch

            round_uids: dict[str, str] = {}  # round uid -> base uid

            def sample(indices: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
                indices, counts = np.asarray(indices, dtype=np.int64), np.asarray(counts, dtype=np.int64)
                live = counts > 0
                out = [np.zeros(0) for _ in indices]
                if not live.any():
                    return out
                sub = tu.index_select_tensor_dict(batch, torch.as_tensor(indices[live]))
                new = [uuid.uuid4().hex for _ in range(int(live.sum()))]  # no "_": keys split on it
                tu.assign_non_tensor_stack(sub, "uid", new)
                assign_rollout_counts(sub, counts[live])
                tu.assign_non_tensor_data(sub, "global_steps", self.global_steps)
                for u, i in zip(new, indices[live]):
                    round_uids[u] = base_uids[int(i)]
                self._submit_batch_to_rollout(sub)
                wait_for_groups(new, "train", timeout_s=self.round_timeout_s)
                uids, scores = read_scores(trajectory_keys(new, "train"), "train")
                grouped = group_scores(uids, scores, new, self.reward_range)
                for slot, g in zip(np.flatnonzero(live), grouped):
                    out[slot] = g
                return out

            self.allocator.run(prompts, self.budget, sample)
            keys = trajectory_keys(list(round_uids), "train")
            relabel_uids(keys, [round_uids[k.split("_", 1)[0]] for k in keys], "train")
            self._round_group_count = len(round_uids)

        # -- feedback ------------------------------------------------------------------

        def _compute_advantage(self, batch, metrics: dict):
            if self.single_shot and self._step_uids:
                keys = [k for k, t in zip(batch.keys, batch.tags) if not t.get("is_padding", False)]
                uids, scores = read_scores(keys, batch.partition_id)
                rewards = group_scores(uids, scores, self._step_uids, self.reward_range)
                self.allocator.observe(self._step_prompts, rewards)
                self._step_uids, self._step_prompts = [], []
            metrics.update(allocator_metrics(self.allocator))
            return super()._compute_advantage(batch, metrics)

        # -- checkpoints ---------------------------------------------------------------

        def _save_checkpoint(self):
            super()._save_checkpoint()
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            os.makedirs(folder, exist_ok=True)
            save_state(os.path.join(folder, ALLOCATOR_STATE_FILE), self.allocator.state_dict())

        def _load_checkpoint(self):
            super()._load_checkpoint()
            if self.global_steps <= 0:
                return
            if self.config.trainer.resume_mode == "resume_path":
                folder = self.config.trainer.resume_from_path
            else:
                folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            path = os.path.join(os.path.abspath(folder), ALLOCATOR_STATE_FILE)
            if os.path.exists(path):
                self.allocator.load_state_dict(load_state(path))
                logger.info("restored allocator state from %s", path)
            else:
                logger.warning("no allocator state at %s: the allocator starts fresh", path)

    AdaptiveRolloutTrainer.__qualname__ = "AdaptiveRolloutTrainer"
    return AdaptiveRolloutTrainer


_TRAINER_CLASS = None


def __getattr__(name: str):
    if name == "AdaptiveRolloutTrainer":
        return trainer_class()
    raise AttributeError(name)


def trainer_class() -> type:
    """The trainer class (built on first use, so importing this module does not import verl)."""
    global _TRAINER_CLASS
    if _TRAINER_CLASS is None:
        _TRAINER_CLASS = _make_trainer_class()
    return _TRAINER_CLASS


def register(name: str = "adaptive") -> type:
    """Register the trainer in verl's v1 trainer registry (idempotent)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    cls = trainer_class()
    if TRAINER_REGISTRY.get(name) is not cls:
        register_trainer(name)(cls)
    return cls

"""``AdaptiveRolloutTrainer``: verl's synchronous v1 trainer with per-prompt rollout counts.

Registered in verl's trainer registry as ``trainer.v1.trainer_mode=adaptive``. Per step:

1. fetch ``train_batch_size`` prompts from verl's dataloader; each prompt's key is its training-set
   row (`rows`), its text is registered as a feature for allocators that predict from text;
2. single-shot allocators (``plan`` / ``observe``, e.g. ``Uniform``, ``VIP``): ``counts =
   allocator.plan(keys, budget)``, written to the batch as ``__rollout_n__`` (the per-prompt hook of
   verl's agent loop), the prompts with a count > 0 dispatched once; progressive allocators
   (``run`` only, e.g. the default, ``VIGOR``): ``allocator.run(keys, budget, sample)``, where each
   ``sample`` call dispatches one round (fresh uids), waits for it in TransferQueue and returns the
   rewards; afterwards the round trajectories are relabelled with the prompt's uid so each prompt
   is one advantage group;
3. verl samples the step's prompt groups, balances, pads, computes log-probs, advantages and updates
   as usual; single-shot allocators get this step's rewards in ``observe`` just before the
   advantages. A ``"save"`` allocator may spend less than the budget and skip prompts (0 rollouts):
   the batch is smaller, verl pads it to its batch multiple with zero-loss rows (logged as
   ``adaptive/padding_rows``, never as rollouts). A step with nothing to train on (every prompt
   skipped) makes no update: the allocator still observes it, the replicas sleep and wake as after
   any step, and ``adaptive/update_skipped`` is 1 (logged with a warning). With
   ``adaptive.loss_rows=uniform`` the advantages are scaled so that verl's loss is normalised as in
   the full batch (`bridge.settings.verl_loss_rows_scale`, logged as ``adaptive/loss_rows_scale``);
4. the allocator's state (with the reward mapping's and the regime tracker's) is written to
   ``global_step_N/adaptive_allocator.safetensors`` before verl saves anything of that step, so a
   checkpoint that verl marks complete (``latest_checkpointed_iteration.txt``, ``on_save``) has it;
   on resume it is checked and loaded before verl loads the model (`checkpoint.resume_in_order`).

Rewards reach the allocator through `adaptive_rollouts.success.SuccessSignal` (any range; unscored
rollouts are not successes). A failed agent-loop session leaves no trajectory: as in verl, the
prompt's other rollouts are trained on; single-shot allocators observe the scored rollouts only,
progressive rounds re-dispatch what is missing (``adaptive.session_retries`` times), and the
metrics ``adaptive/missing_rollouts`` etc. report it. The reward-only regime fingerprints
(`adaptive_rollouts.fingerprints.RegimeTracker`) are logged with the allocation metrics.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

import numpy as np

from adaptive_rollouts.bridge import (
    Generated,
    PlannedStep,
    TrainerStep,
    allocator_kind,
    is_single_shot,
    needs_pool,
    prompt_text,
    text_features,
)
from adaptive_rollouts.bridge.settings import loss_rows_for, verl_loss_rows_scale
from adaptive_rollouts.embeddings import KeyedTexts
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.state import save_state
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Allocator, PlanningAllocator

from . import rollouts as R
from .advantage import advantage_scale, session_keys
from .checkpoint import ALLOCATOR_STATE_FILE, resume_in_order
from .config import (
    aggregation_for,
    build_allocator,
    check_text_encoder,
    check_verl_config,
    estimator_for,
    load_object,
    settings_from_config,
)
from .rounds import keep_if_trained, run_rounds, select_rows
from .rows import KEY_FIELD, batch_keys, batch_texts, dataset_source, rekey_dataloader
from .steps import StepFeedback, assign_rollout_counts, batch_metrics

logger = logging.getLogger(__name__)

NO_UPDATE_TAG = "adaptive_no_update"  # the tag of the placeholder batch of a step with nothing to train on


def _no_update(batch: Any) -> bool:
    return any(t.get(NO_UPDATE_TAG, False) for t in batch.tags)


def _make_trainer_class():
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    class _RoundsReplayBuffer:
        """verl's ReplayBuffer; samples exactly the prompt groups this step dispatched (the prompts
        with rollouts, or every round group of progressive allocators) at once."""

        def __init__(self, inner: Any, trainer: Any):
            self._inner, self._trainer = inner, trainer

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def sample(self, global_steps: int, partition_id: str, batch_size: int):
            groups = self._trainer._step_groups
            if partition_id == "train" and groups:
                self._trainer._step_groups = 0
                batch_size = groups
            return self._inner.sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)

    class AdaptiveRolloutTrainer(PPOTrainerSync):
        """verl's sync v1 trainer; rollout counts per prompt come from an adaptive_rollouts allocator.

        Config: the ``adaptive:`` section of ``adaptive_ppo.yaml``.
        """

        allocator: Allocator
        planner: PlanningAllocator | None  # the allocator, when it plans each step in one go
        texts: KeyedTexts | None  # the prompt texts a text-based predictor reads, registered per batch
        train_dataset: Any  # set by verl's _init_dataloader
        train_dataloader: Any

        def __init__(self, config):
            check_verl_config(config)
            self.settings = settings_from_config(config.get("adaptive"))
            self._step_groups = 0  # prompt groups dispatched this step (0: nothing to train on)
            self._step_spent = 0  # rollouts the allocator asked for this step
            self._dispatched: list[str] = []  # single-shot: the uids of this step's dispatched prompts
            super().__init__(config)
            self.trainer_mode = "sync"  # registered as "adaptive", behaves as verl's sync mode
            s = self.settings
            self.budget = int(s.budget or config.data.train_batch_size * config.actor_rollout_ref.rollout.n)
            # the longest response verl generates: no output's completion length may pass it
            self.max_response_length = int(config.actor_rollout_ref.rollout.response_length)
            self.aggregation = aggregation_for(config.actor_rollout_ref.actor.get("loss_agg_mode"), s.aggregation)
            self.estimator = estimator_for(
                config.algorithm.get("adv_estimator"),
                config.algorithm.get("norm_adv_by_std_in_grpo", True),
                s.estimator,
            )
            self.signal = SuccessSignal(reward_range=s.reward_range, threshold=s.threshold)
            self.regime = RegimeTracker()
            check_text_encoder(s.allocator, s.allocator_kwargs, s.encoder)
            self.encoder = load_object(s.encoder, "adaptive.encoder")() if s.encoder else None
            self.allocator = build_allocator(
                s.allocator, s.allocator_kwargs, aggregation=self.aggregation, estimator=self.estimator
            )
            # single-shot allocators plan the whole step at once (one dispatch), unless told otherwise
            self.planner = self.allocator if is_single_shot(self.allocator) and not s.force_progressive else None
            self.single_shot = self.planner is not None
            # a predictor on the training set's pool gets its texts once the dataloader exists
            pool = needs_pool(s.allocator, s.allocator_kwargs)
            self.texts = None if pool else text_features(self.allocator, encoder=self.encoder)
            self.kind = allocator_kind(self.allocator)
            # loss rows: "uniform" scales the advantages so verl's loss is normalised as in the full batch
            self.loss_rows = loss_rows_for(s.loss_rows, self.kind, "adaptive.loss_rows")
            self.loss_agg_mode = config.actor_rollout_ref.actor.get("loss_agg_mode") or "token-mean"
            # the one step object every trainer uses: rounds, success mapping, clock, metrics, regime
            self.adaptive_step = TrainerStep(self.allocator, self.signal, regime=self.regime, time_rounds=s.time_rounds)
            # single-shot, planned and awaiting rewards: the planned step and the uids
            self._pending: tuple[PlannedStep, list[str]] | None = None

        def _build_replay_buffer(self):
            self.trainer_mode = "sync"
            return _RoundsReplayBuffer(super()._build_replay_buffer(), self)

        def _init_dataloader(self):
            super()._init_dataloader()
            if self.settings.prompt_key is None:
                source = dataset_source(self.config.data.train_files)
                self.train_dataset, self.train_dataloader = rekey_dataloader(self.train_dataloader, source)
            if needs_pool(self.settings.allocator, self.settings.allocator_kwargs):
                if self.settings.prompt_key is not None:
                    raise ValueError("adaptive: VIP's paper GP lives on the training set's rows: leave prompt_key null")
                self.texts = text_features(self.allocator, pool=self._pool, encoder=self.encoder)

        def _pool(self) -> tuple[list, list[str]]:
            """The training set's row keys and prompt texts: the pool of VIP's published GP."""
            rows = [self.train_dataset[i] for i in range(len(self.train_dataset))]
            return [row[KEY_FIELD] for row in rows], [prompt_text(row["raw_prompt"]) for row in rows]

        # -- dispatch ------------------------------------------------------------------

        def prepare_step(self) -> dict:
            batch = self._next_train_batch()
            keys = batch_keys(batch, self.settings.prompt_key)
            if self.texts is not None:
                self.texts.register(keys, batch_texts(batch))
            uids = [str(u) for u in batch_keys(batch, "uid")]
            if self.planner is not None:
                planned = self.adaptive_step.plan(keys, self.budget)
                counts = planned.counts
                live = np.flatnonzero(counts > 0)
                if live.size:  # skipped prompts are not dispatched
                    sub = batch if live.size == len(keys) else select_rows(batch, live, self.global_steps)
                    self._submit_batch_to_rollout(assign_rollout_counts(sub, counts[live]))
                self._pending = (planned, uids)
                self._step_groups, self._step_spent = int(live.size), int(counts.sum())
                self._dispatched = [uids[i] for i in live]
                return {}  # this step's metrics come with its rewards, in _observe_pending
            result, feedback, self._step_groups = run_rounds(self, batch, keys, uids)
            self._step_spent = result.spent
            return result.log(feedback.metrics(prefix=""))

        def _step_once(self, metrics: dict, timing_raw: dict, sample_batch_size: int):
            if self.single_shot and self._step_groups > 0:  # did any session of the dispatch succeed?
                s = self.settings
                R.wait_for_groups(self._dispatched, "train", timeout_s=s.round_timeout_s, max_poll_s=s.round_poll_max_s)
                if not keep_if_trained(self._dispatched):
                    self._step_groups = 0
            if self._step_groups > 0:
                metrics["adaptive/update_skipped"] = 0.0
                return super()._step_once(metrics, timing_raw, sample_batch_size)
            return self._skip_update(metrics)

        def _skip_update(self, metrics: dict):
            """A step with no trajectory to train on: no sample, no update; the replicas sleep as after
            a sample (``on_step_end`` wakes them with the unchanged weights). The step's batch is one
            placeholder entry (a tag, no data) that verl's end-of-step TransferQueue clear removes."""
            import transfer_queue as tq
            from transfer_queue import KVBatchMeta

            self.on_sample_begin()
            self.on_sample_end()
            if self._pending is not None:
                self._observe_pending([], metrics)
            spent = self._step_spent
            reason = "every prompt was skipped" if spent == 0 else f"none of its {spent} rollouts left a trajectory"
            logger.warning("adaptive: step %d has nothing to train on (%s): no update", self.global_steps, reason)
            metrics["adaptive/update_skipped"] = 1.0
            metrics.update(batch_metrics([]))
            key, tag = f"adaptive-no-update-{uuid.uuid4().hex}", {NO_UPDATE_TAG: True, "is_padding": True}
            tq.kv_put(key=key, partition_id="train", tag=tag)
            return KVBatchMeta(partition_id="train", keys=[key], tags=[tag])

        # -- feedback ------------------------------------------------------------------

        def _observe_pending(self, trajectory_keys: list, metrics: dict) -> None:
            """A single-shot step's rewards (read from ``trajectory_keys``) to ``observe``, and its metrics."""
            assert self._pending is not None and self.planner is not None
            planned, uids = self._pending
            self._pending = None
            sessions = R.read_session_scores(trajectory_keys, "train")
            feedback = StepFeedback(planned.keys, signal=self.signal, budget=self.budget)
            raws = [sessions.of(uid) for uid in uids]
            lengths = R.session_lengths(sessions, uids, planned.keys, self.max_response_length)
            answer = raws if lengths is None else Generated(raws, lengths)  # completion tokens, when stored
            result = self.adaptive_step.observe(planned, answer, book=feedback)
            metrics.update(result.log(feedback.metrics(prefix="")))

        def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
            batch = super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
            metrics.update(batch_metrics(batch.tags))
            return batch

        def _compute_advantage(self, batch, metrics: dict):
            if self._pending is not None:
                real = [k for k, t in zip(batch.keys, batch.tags) if not t.get("is_padding", False)]
                self._observe_pending(real, metrics)
            scale = 1.0
            rows = sum(not t.get("is_padding", False) for t in batch.tags)
            if self.loss_rows == "uniform" and rows:
                scale = verl_loss_rows_scale(self.loss_agg_mode, rows=rows, padded_rows=len(batch.keys))
                metrics["adaptive/loss_rows_scale"] = scale
            with session_keys(batch.keys), advantage_scale(scale):
                return super()._compute_advantage(batch, metrics)

        def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
            if not _no_update(batch):
                return super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
            metrics.update({"training/global_step": global_steps, "training/epoch": epoch})

        def _log_rollout_data(self, batch, timing_raw: dict, rollout_data_dir: str):
            if not _no_update(batch):
                super()._log_rollout_data(batch, timing_raw, rollout_data_dir)

        # -- checkpoints ---------------------------------------------------------------

        def _adaptive_state(self) -> dict:
            return {
                "allocator": self.allocator.state_dict(),
                "success": self.signal.state_dict(),
                "regime": self.regime.state_dict(),
                "totals": self.adaptive_step.totals.state_dict(),
            }

        def _save_checkpoint(self):
            # Written first: verl marks the step complete (latest_checkpointed_iteration.txt, then
            # on_save) only at the end of its own save, so a complete checkpoint always has it.
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            os.makedirs(folder, exist_ok=True)
            save_state(os.path.join(folder, ALLOCATOR_STATE_FILE), self._adaptive_state())
            super()._save_checkpoint()

        def _load_checkpoint(self):
            # the allocator's state is checked and loaded before verl loads the model (`checkpoint`)
            parts = {"allocator": self.allocator, "success": self.signal, "regime": self.regime}
            parts["totals"] = self.adaptive_step.totals
            resume_in_order(self, parts, super()._load_checkpoint)

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

"""``AdaptiveGRPOTrainer``: TRL's GRPOTrainer with a rollout allocator.

One training step (one TRL *generation batch* of C rows = Q dataset rows x ``num_generations``):

1. the rows of all processes are gathered; each dataset row is one prompt, keyed by its position
   (``"train#<i>"``, `layout.key_of_row`; the dataloader's rows carry it outside their columns,
   `layout.KeyedRow`), so rows with the same text stay two prompts;
2. on the main process the step object (`bridge.TrainerStep`, the one every trainer uses) runs
   ``allocator.run(keys, C, sample)``, which decides how many rollouts each prompt gets; every
   ``sample(indices, counts)`` call is a *generation round* that all processes run together
   (`rounds.RoundsMixin.run_round`: TRL's own ``_generate`` and ``_calculate_rewards``); the allocator
   gets each rollout's reward as a success signal in [0, 1] (`SuccessSignal`), without the rollouts
   no reward function could score; an allocator that reads the policy (`types.PolicyAware`) first
   gets each prompt's last-layer hidden state (``policy_features``, on by default where the trainer
   can give it, `policy`);
3. the N rollouts (N = C, or N <= C for an allocator of kind ``"save"``; groups of unequal size) are
   laid out on processes, padded with zero-weight copies to equal rows (`layout.padded_rows`), and
   replayed through TRL's ``_generate_and_score_completions`` (`replay.ReplayMixin`: log-probs,
   reference model, importance sampling, logging stay TRL's), whose advantages are then computed on
   the true groups (`_advantages`); with ``loss_rows="uniform"`` they are then scaled so the loss is
   normalised by Uniform's rows (`bridge.settings.trl_loss_rows_scale`).

See docs/trl.md for the estimator and aggregation the allocator is given, checkpoints, and logs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from adaptive_rollouts.advantages import equal_prompt_weights
from adaptive_rollouts.bridge import (
    Generated,
    RunningTotals,
    TrainerStep,
    allocator_kind,
    build_allocator,
    check_policy_features,
    prompt_text,
    text_features,
)
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Allocator

from .checkpoint import ResumableRepeatSampler, load_trainer_state, save_trainer_state
from .layout import (
    KeyedRow,
    KeyedRows,
    assign_groups_to_ranks,
    group_batch,
    key_of_row,
    padded_rows,
    rank_shares,
)
from .logs import LogsMixin
from .policy import policy_features_for
from .replay import ReplayMixin, model_tokens
from .rounds import Rollout, RoundsMixin
from .scoring import trl_advantages
from .settings import (
    IMAGE_COLUMNS,
    aggregation_for_loss_type,
    estimator_for,
    loss_rows_for,
    loss_rows_scale,
    refuse_images,
)

_DONE = "done"
_POLICY = "policy"


class AdaptiveGRPOTrainer(RoundsMixin, LogsMixin, ReplayMixin, GRPOTrainer):
    """GRPOTrainer whose prompts get adaptive numbers of rollouts.

    Args (besides GRPOTrainer's):
        allocator: ``None`` (default: the recommended allocator, ``make_allocator()``), a registry name
            (``"uniform"`` is stock GRPO, ``"vigor"``, ``"vip"``, ...) or an allocator object. Named ones
            are built with the trainer's estimator and aggregation where they model them; an object
            that models other ones is given the trainer's, with a warning naming both
            (`bridge.configure_allocator`).
        advantage_estimator: ``None`` (follow ``scale_rewards``) or ``"rloo"`` (with
            ``scale_rewards="none"`` or ``"batch"``).
        reward_range / reward_threshold / success_fn: how rewards become the allocator's success
            signal in [0, 1] (`adaptive_rollouts.success.SuccessSignal`; at most one). Default: rewards
            in [0, 1] pass unchanged, others are scaled by the range seen so far. Training advantages
            always use the raw rewards, as stock TRL does.
        equal_prompt_weight: ``True`` multiplies each rollout's advantage by N / (Q' n_q)
            (`adaptive_rollouts.advantages.equal_prompt_weights`), so every prompt's group weighs
            alike in the loss however many rollouts it got (the ``prompt-mean`` aggregation, which
            the allocator is then given). Without it TRL's ``grpo`` loss weighs a prompt by its
            rollout count, so allocation also tilts the step's direction toward the prompts it
            favours. Only with loss types that average over completions (``grpo``, ``sapo``).
        policy_features: for an allocator that reads the policy's view of each prompt
            (``observe_policy``, `adaptive_rollouts.types.PolicyAware`): ``True`` gives it the
            policy's last-layer hidden state at each prompt's last token (one no-grad forward pass of
            the trainer's own model over the step's prompts, each process its own;
            `policy.last_token_hidden_states`), or a callable ``rows -> [len(rows), width]`` of your
            own; ``False`` gives none. ``None`` (the default): as ``True`` where the trainer can give
            it (the model's forward takes ``output_hidden_states``, no ``environment_factory``), else
            none, said once in the log (`policy.policy_features_for`). Ignored (nothing runs) for an
            allocator without ``observe_policy``, e.g. ``"uniform"``.
        loss_rows: what the loss is normalised by when a step trains on fewer rows than the
            generation batch (a saving allocator): ``"kept"`` (TRL's own mean over the rows trained
            on) or ``"uniform"`` (Uniform's rows: a cut or skipped group counts as rows of advantage
            0, so the step keeps the size it has under stock GRPO and a rate tuned for stock GRPO
            carries over; every advantage is multiplied by `bridge.settings.trl_loss_rows_scale`,
            logged as ``adaptive/loss_rows_scale``). ``None``: the default for the allocator's kind
            (`bridge.settings.loss_rows_for`). A filling allocator trains on every row either way.
        time_rounds: ``True`` hands each generation round's wall-clock time to the allocator, so
            the default prices an extra round against the tokens it would save
            (`adaptive_rollouts.allocators.round_plan`; on a synchronous engine it then generates
            about one round a step); or a model of the engine the run is sized for: its name
            (``"synchronous"``, ``"slots-64"``, ``"slots-16"``, ``"continuous"``:
            ``adaptive_rollouts.sim.step_time.ENGINES``) or ``seconds(longest, tokens)``
            (deterministic: the round's completion lengths priced, not the machine's clock;
            `bridge.round_clock`). Off by default: with the wall clock the allocation would depend
            on the machine's timings.

    ``num_generations`` becomes the *mean* rollouts per prompt: each step spends exactly
    ``generation_batch_size`` rollouts, as stock TRL does, or at most that under an allocator of kind
    ``"save"`` (then the step trains on the rollouts generated only; docs/trl.md). After each step
    ``trainer.allocation_history`` holds the counts per prompt (main process).
    """

    _signature_columns: Any  # set by transformers' Trainer

    def __init__(
        self,
        *args: Any,
        allocator: Allocator | str | None = None,
        advantage_estimator: str | None = None,
        reward_range: tuple[float, float] | None = None,
        reward_threshold: float | None = None,
        success_fn: Any = None,
        equal_prompt_weight: bool = False,
        policy_features: bool | Callable[[list[dict]], Any] | None = None,
        loss_rows: str | None = None,
        time_rounds: bool | str | Callable[[float, float], float] = False,
        **kwargs: Any,
    ):
        self.success = SuccessSignal(reward_range=reward_range, threshold=reward_threshold, success_fn=success_fn)
        bound = inspect.signature(GRPOTrainer.__init__).bind(self, *args, **kwargs)
        refuse_images(bound.arguments.get("train_dataset"))
        super().__init__(*bound.args[1:], **bound.kwargs)
        self.aggregation = aggregation_for_loss_type(self.loss_type)
        self.equal_prompt_weight = bool(equal_prompt_weight)
        if self.equal_prompt_weight:
            if self.aggregation != "seq-mean":
                raise ValueError(
                    f"equal_prompt_weight=True needs a loss that averages over completions (loss_type "
                    f"'grpo' or 'sapo'); loss_type={self.loss_type!r} aggregates by {self.aggregation}"
                )
            self.aggregation = "prompt-mean"
        self.estimator = estimator_for(self.scale_rewards, advantage_estimator, self.multi_objective_aggregation)
        self.allocator: Allocator = build_allocator(allocator, estimator=self.estimator, aggregation=self.aggregation)
        self.kind = allocator_kind(self.allocator)  # "save": a step may spend less than its budget
        self.loss_rows = loss_rows_for(loss_rows, self.kind)
        self._texts = text_features(self.allocator, self._prompt_pool() if self._map_style() else None)
        self.regime = RegimeTracker()
        self.totals = RunningTotals()
        self.allocation_history: list[np.ndarray] = []
        self.allocator_seconds = 0.0  # total wall time inside the allocator (excluding generation)
        self.last_step: Any = None  # the last step's `bridge.StepResult` (main process), e.g. its policy_seconds
        # completion tokens trained on since the start (checkpointed; not logged: it always equals
        # the running totals' tokens_spent, logged as adaptive/tokens_spent_total)
        self.tokens_total = 0
        self._policy_features = policy_features_for(self, policy_features)
        # one step object: rounds, success mapping, clock, metrics, regime tracker, running totals; each
        # round hands it the completion lengths (tokens the model generated, at most max_completion_length)
        self.adaptive_step = TrainerStep(
            self.allocator,
            self.success,
            regime=self.regime,
            totals=self.totals,
            max_length=self.max_completion_length,
            time_rounds=time_rounds,
        )
        self._step_tools = {"calls": 0.0, "failures": 0.0, "rows": 0}

    def _map_style(self) -> bool:
        return hasattr(self.train_dataset, "__getitem__") and hasattr(self.train_dataset, "__len__")

    def _prompt_pool(self):
        """The dataset's row keys and prompt texts (lazily: only a pool-based predictor asks)."""

        def pool() -> tuple[list[str], list[str]]:
            rows = self.train_dataset
            keys = [key_of_row(KeyedRow({}, i)) for i in range(len(rows))]
            return keys, [prompt_text(p) for p in rows["prompt"]]

        return pool

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        sampler.__class__ = ResumableRepeatSampler  # same order; adds set_epoch
        return sampler

    def _remove_unused_columns(self, dataset, description=None):
        """The training dataloader's rows carry their position (`layout.KeyedRows`), outside their columns."""
        dataset = super()._remove_unused_columns(dataset, description=description)
        return KeyedRows(dataset) if description == "Training" else dataset

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            save_trainer_state(self, f"{self._get_output_dir(trial=trial)}/{folder}")

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            load_trainer_state(self, checkpoint)

    # ------------------------------------------------------------------ allocation
    def _collect(self, rows: list[dict], keys: list[str], budget: int, local: list[dict]):
        """Run the step (`bridge.TrainerStep`, main process) and its rounds (all processes). ``local``:
        this process's own rows, for the policy-features pass. Returns each prompt's rollouts, the
        step result (main process; None elsewhere) and the padding kept unused."""
        world = self.accelerator.num_processes
        per_prompt: list[list[Rollout]] = [[] for _ in rows]
        bank: dict[int, list[Rollout]] = {}

        def play(indices: list[int], counts: list[int]) -> dict[int, list[Rollout]]:
            got = self.run_round(rows, dict(zip(indices, counts)), bank)
            for i, made in got.items():
                per_prompt[i].extend(made)
            return got

        result = None
        if self.accelerator.is_main_process:

            def generate(indices: np.ndarray, counts: np.ndarray) -> Generated:
                if world > 1:
                    broadcast_object_list([("round", indices.tolist(), counts.tolist())])
                got = play(indices.tolist(), counts.tolist())
                rewards = [[r.reward for r in got[i]] for i in indices.tolist()]  # NaN: unscored
                return Generated(rewards, [[model_tokens(r) for r in got[i]] for i in indices.tolist()])

            def features(_prompts: Sequence[Any]) -> np.ndarray | None:
                if world > 1:
                    broadcast_object_list([(_POLICY, None, None)])
                return self._policy_pass(local, keys)

            self.adaptive_step.policy_features = features if self._policy_features is not None else None
            try:
                result = self.adaptive_step.run(keys, budget, generate, prompts=rows)
            finally:
                if world > 1:
                    broadcast_object_list([(_DONE, None, None)])
        else:
            while True:
                message: list[Any] = [None]
                broadcast_object_list(message)
                kind, indices, counts = message[0]
                if kind == _DONE:
                    break
                if kind == _POLICY:
                    self._policy_pass(local, keys)
                    continue
                play(indices, counts)
        padding_unused = sum(len(kept) for kept in bank.values())
        return per_prompt, result, padding_unused

    def _policy_pass(self, local: list[dict], keys: list[str]) -> np.ndarray | None:
        """The policy's features of this step's prompts: every process computes its own rows' (each
        of its prompts once; `policy.policy_features_for`, or the user's callable), so a sharded
        model's forward runs on every process; they are gathered and put in the order of ``keys``
        (main process; None elsewhere). A prompt whose rows span two processes is read by both; the
        first process's row is kept (the one holding its first row), so the choice never varies.
        Collective."""
        assert self._policy_features is not None
        mine: dict[str, Any] = {}
        for row in local:
            mine.setdefault(key_of_row(row), row)
        own = list(mine)
        rows = [mine[k] for k in own]
        vectors = check_policy_features(self._policy_features(rows), len(rows)) if rows else np.zeros((0, 1))
        pairs = list(zip(own, list(vectors)))
        if self.accelerator.num_processes > 1:
            pairs = gather_object(pairs)
        if not self.accelerator.is_main_process:
            return None
        found: dict[str, Any] = {}
        for key, vector in pairs:  # in process order
            found.setdefault(key, vector)
        missing = [k for k in keys if k not in found]
        if missing:
            raise RuntimeError(f"internal error: no policy features for prompts {missing[:5]}")
        return np.stack([np.asarray(found[k], dtype=np.float32) for k in keys])

    # ------------------------------------------------------------------ the step
    def _generate_and_score_completions(self, inputs: list[dict]) -> dict[str, Any]:
        if not self.model.training:  # evaluation keeps stock equal groups
            return super()._generate_and_score_completions(inputs)
        device = self.accelerator.device
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        if any(column in row for row in inputs for column in IMAGE_COLUMNS):
            raise ValueError("AdaptiveGRPOTrainer supports text prompts only (found image columns)")
        global_rows = gather_object(list(inputs)) if world > 1 else list(inputs)
        keys, first = group_batch([key_of_row(row) for row in global_rows], self.num_generations)
        rows = [global_rows[i] for i in first]
        budget = len(global_rows)
        if self._texts is not None and self.accelerator.is_main_process:
            self._texts.register(keys, [prompt_text(row.get("prompt", "")) for row in rows])

        self._step_tools = {"calls": 0.0, "failures": 0.0, "rows": 0}
        with self._vllm_awake_for_step():
            per_prompt, result, padding_unused = self._collect(rows, keys, budget, list(inputs))
        counts = np.array([len(made) for made in per_prompt], dtype=np.int64)

        # Lay the rollouts out on processes, prompt after prompt: equal shares, or as equal as the total
        # allows under a saving allocator; every process then pads its share with zero-weight copies to
        # the same number of rows (`padded_rows`), never with generated rollouts.
        shares = rank_shares(int(counts.sum()), world)
        final: list[tuple[int, Rollout]] = []
        cursor = [0] * len(per_prompt)
        for pieces in assign_groups_to_ranks(counts, world, capacities=shares):
            for g, n in pieces:
                final.extend((g, r) for r in per_prompt[g][cursor[g] : cursor[g] + n])
                cursor[g] += n
        everyone = [r for _, r in final]
        if everyone:
            self._log_generation(everyone)
        start_row = sum(shares[:rank])
        local = final[start_row : start_row + shares[rank]]
        rows_each = padded_rows(shares, self.args.steps_per_generation)
        padding = self._padding(local or final, rows, rows_each - len(local))
        output = self._replay(
            [rows[g] for g, _ in local] + [row for row, _ in padding],
            [r for _, r in local] + [r for _, r in padding],
            everyone,
            shares,
            rows_each,
        )
        advantages = torch.zeros(0, device=device)
        if everyone:
            rewards_per_func = torch.stack([r.rewards for r in everyone]).to(device)
            group_ids = torch.tensor([g for g, _ in final], device=device)
            advantages = self._advantages(rewards_per_func, group_ids)
            self._fix_logs(advantages, rewards_per_func, group_ids)  # the estimator's advantages, unweighted
            if self.equal_prompt_weight:
                advantages = advantages * equal_prompt_weights(group_ids).to(advantages)
        scale = 1.0
        if self.loss_rows == "uniform":
            scale = loss_rows_scale(
                self.loss_type,
                rows=len(everyone),
                padded_rows=rows_each * world,
                budget=budget,
                prompts=int(np.count_nonzero(counts)) if self.equal_prompt_weight else None,
                budget_prompts=len(rows) if self.equal_prompt_weight else None,
            )
            advantages = advantages * scale
        mine = advantages[start_row : start_row + shares[rank]]
        output["advantages"] = torch.cat([mine, mine.new_zeros(rows_each - len(local))])

        values = None
        if result is not None:  # main process
            self.allocation_history.append(result.counts.copy())
            self.allocator_seconds += result.allocator_seconds
            self.last_step = result
            self.tokens_total += sum(model_tokens(r) for r in everyone)
            values = result.log(
                {
                    "padding_unused": padding_unused,
                    "padding_rows": rows_each * world - len(everyone),
                    "empty_step": int(not everyone),
                    **({"loss_rows_scale": scale} if self.loss_rows == "uniform" else {}),
                }
            )
        self._log_allocation(values)
        return output

    def _advantages(self, rewards_per_func: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
        return trl_advantages(
            rewards_per_func,
            group_ids,
            self.reward_weights,
            self.estimator,
            self.scale_rewards,
            self.multi_objective_aggregation,
        )


def rollouts_consumed(trainer: AdaptiveGRPOTrainer) -> int:
    """Total rollouts generated so far (main process view)."""
    return int(sum(int(c.sum()) for c in trainer.allocation_history))


__all__: Sequence[str] = ["AdaptiveGRPOTrainer", "rollouts_consumed"]

"""Generation rounds of `AdaptiveGRPOTrainer`: TRL's own generation and scoring, one call at a time.

A round asks for ``counts[i]`` more rollouts of some prompts. `RoundsMixin.run_round` serves what it
can from rollouts kept from earlier padding, plans the generation calls (`layout.plan_calls`), and
for each call runs TRL's ``_generate`` (transformers, vLLM colocate or server, ``rollout_func``,
``tools``) and ``_calculate_rewards`` on the rows of this process, then gathers the rollouts, so
every process ends a round with the same list. Every process calls `run_round` with the same
arguments (collective).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from .layout import plan_calls
from .scoring import weighted_reward

_GENERATION_METRICS = ("completions/", "tools/", "num_tokens")


@dataclass
class Rollout:
    """One generated and scored rollout (CPU, picklable for ``gather_object``)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion: Any
    logprobs: list | None
    tool_mask: list[int] | None
    rewards: torch.Tensor  # [num reward functions], NaN where a function returned None
    reward: float = math.nan  # weighted sum (NaN: unscored, every function returned None)
    extra: dict[str, Any] = field(default_factory=dict)  # log_extra values of this rollout
    prompt: Any = None  # the prompt as generated (with an environment's reset observation)


class _Prepared(Exception):
    """Stops TRL's ``_generate_and_score_completions`` at its ``_generate`` call (`RoundsMixin._prepare`)."""


class RoundsMixin:
    """Round generation for `AdaptiveGRPOTrainer` (uses GRPOTrainer attributes)."""

    # set by GRPOTrainer / AdaptiveGRPOTrainer
    accelerator: Any
    state: Any
    tools: Any
    reward_weights: Any
    use_vllm: bool
    vllm_mode: str
    num_generations: int
    _last_loaded_step: int
    _metrics: Any
    _pending_extra_logs: Any
    _step_tools: dict[str, float]
    _generate: Any
    _calculate_rewards: Any

    # ------------------------------------------------------------------ vLLM
    def _server_mode(self) -> bool:
        return bool(self.use_vllm and self.vllm_mode == "server")

    @contextmanager
    def _vllm_awake_for_step(self) -> Iterator[None]:
        """vLLM colocate with sleep mode: wake and push the weights once for all rounds of a step.

        TRL's colocated vLLM sleeps (level 2, weights discarded) after every ``generate`` call and
        re-pushes the weights before the next one; several rounds per step would push them once per
        round. Here the engine stays awake from the first round to the last, then sleeps.
        """
        vg = getattr(self, "vllm_generation", None)
        if not (self.use_vllm and self.vllm_mode == "colocate" and vg is not None and vg.enable_sleep_mode):
            yield
            return
        if vg._llm_weights_sleeping or self.state.global_step != self._last_loaded_step:
            vg.sync_weights()  # wakes the weights (sleep mode) and pushes this step's weights
            self._last_loaded_step = self.state.global_step
        vg.llm.wake_up(tags=["kv_cache"])
        vg.enable_sleep_mode = False  # no sleep / re-push between rounds
        try:
            yield
        finally:
            vg.enable_sleep_mode = True
            vg.llm.sleep(level=2)
            vg._llm_weights_sleeping = True

    @contextmanager
    def _generations(self, n: int) -> Iterator[None]:
        saved = self.num_generations
        self.num_generations = n
        try:
            yield
        finally:
            self.num_generations = saved

    # ------------------------------------------------------------------ one round
    def run_round(self, rows: list[dict], need: dict[int, int], bank: dict[int, list[Rollout]]) -> dict[int, list]:
        """``need[i]`` more rollouts of prompt ``rows[i]``: first from ``bank`` (padding kept from earlier
        rounds of this step), the rest generated; new padding goes to ``bank``. Collective."""
        got: dict[int, list[Rollout]] = {}
        missing: dict[int, int] = {}
        for i, c in need.items():
            kept = bank.get(i, [])
            got[i], bank[i] = kept[:c], kept[c:]
            missing[i] = c - len(got[i])
        world = self.accelerator.num_processes
        for call in plan_calls(missing, world, grouped=self._server_mode()):
            ids = call.rows
            made = self._generate_call([rows[i] for i in ids], call.n)
            real = len(ids) - len(call.pad)
            for i, rollout in zip(ids[:real], made[:real], strict=True):
                got[i].append(rollout)
            for i, rollout in zip(call.pad, made[real:], strict=True):
                bank.setdefault(i, []).append(rollout)
        return got

    def _generate_call(self, rows: list[dict], n: int) -> list[Rollout]:
        """Generate and score ``rows`` (``n`` consecutive rows per prompt; a multiple of the process
        count) over all processes with TRL's ``_generate`` and ``_calculate_rewards``. Collective."""
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        per_rank = len(rows) // world
        local = [dict(row) for row in rows[rank * per_rank : (rank + 1) * per_rank]]
        prompts = self._prepare(local)
        metrics = self._metrics["train"]
        before = {k: len(v) for k, v in metrics.items() if k.startswith(_GENERATION_METRICS)}
        tokens_before = self.state.num_input_tokens_seen
        with self._generations(n):
            prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, _, _ = self._generate(prompts)
        self._absorb_generation_metrics(before, tokens_before, len(rows))
        for i, row in enumerate(local):  # rollout_func's extra fields reach the reward functions, as in TRL
            for key, values in (extra_fields or {}).items():
                if isinstance(values, list) and i < len(values):
                    row[key] = values[i]
                elif not isinstance(values, list):
                    row[key] = values
        rewards_per_func = self._calculate_rewards(local, prompts, completions, completion_ids).cpu()
        extras = self._take_extra_logs(len(local), len(rows))
        records = [
            (
                prompts[i],
                list(prompt_ids[i]),
                list(completion_ids[i]),
                completions[i],
                None if logprobs is None else list(logprobs[i]),
                None if tool_mask is None else list(tool_mask[i]),
            )
            for i in range(len(local))
        ]
        gathered = gather_object(records) if world > 1 else records
        totals = weighted_reward(rewards_per_func, self.reward_weights.cpu())
        return [
            Rollout(ids, completion, text, lps, mask, rewards_per_func[i], float(totals[i]), extras[i], prompt)
            for i, (prompt, ids, completion, text, lps, mask) in enumerate(gathered)
        ]

    def _prepare(self, local: list[dict]) -> list:
        """TRL's own preparation of ``local`` (one row per rollout) for generation, run up to its
        ``_generate`` call: with ``environment_factory``, one environment per row drawn from TRL's pool
        and ``reset`` with the row's columns, the prompt extended by the reset observation, and TRL's
        errors for a bad environment name; with tools, the per-row tool dicts. Returns the prompts."""
        captured: list = []

        def stop(prompts: list) -> Any:
            captured.append(prompts)
            raise _Prepared

        self._generate = stop
        try:
            GRPOTrainer._generate_and_score_completions(self, local)
        except _Prepared:
            pass
        finally:
            del self._generate
        return captured[0]

    def _absorb_generation_metrics(self, before: dict[str, int], tokens_before: int, n_rows: int) -> None:
        """Take back what ``_generate`` logged for this call (it is logged once per step over the rollouts
        used, `logs.LogsMixin._log_generation`), keeping the tool-call totals."""
        metrics = self._metrics["train"]
        calls = failures = None
        for key in [k for k in metrics if k.startswith(_GENERATION_METRICS)]:
            added = metrics[key][before.get(key, 0) :]
            if key == "tools/call_frequency" and added:
                calls = added[-1] * n_rows
            if key == "tools/failure_frequency" and added:
                failures = added[-1]
            if key == "num_tokens":
                del metrics[key]
            else:
                del metrics[key][before.get(key, 0) :]
        self.state.num_input_tokens_seen = tokens_before
        if calls is not None:
            stats = self._step_tools
            stats["calls"] += calls
            stats["failures"] += (failures or 0.0) * calls
            stats["rows"] += n_rows

    def _take_extra_logs(self, n_local: int, n_rows: int) -> list[dict[str, Any]]:
        """The ``log_extra`` values the reward functions logged for this call, one dict per row (in the
        gathered order), so they can follow their rollout to the completions table."""
        pending = self._pending_extra_logs
        world = self.accelerator.num_processes
        columns = sorted(set(gather_object(list(pending)))) if world > 1 else sorted(pending)
        out: list[dict[str, Any]] = [{} for _ in range(n_rows)]
        for column in columns:
            values = list(pending.get(column, []))[:n_local]
            values += [None] * (n_local - len(values))
            gathered = gather_object(values) if world > 1 else values
            for i, value in enumerate(gathered):
                out[i][column] = value
        self._pending_extra_logs = defaultdict(list)
        return out

"""The replay of `AdaptiveGRPOTrainer`: TRL's ``_generate_and_score_completions`` on rollouts already made.

Each process replays its share of the step's rollouts with ``_generate`` / ``_calculate_rewards``
returning them (so log-probs, the reference model, importance sampling and logging are TRL's code),
then padding rows (`ReplayMixin._padding`: copies, never generated) up to the row count every
process holds; padding rows leave with a zero loss mask, advantage 0 and no trace in the
completions table.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from .rounds import Rollout


class ReplayMixin:
    """Replay for `AdaptiveGRPOTrainer` (uses GRPOTrainer attributes)."""

    # set by GRPOTrainer / AdaptiveGRPOTrainer
    accelerator: Any
    eos_token_ids: list[int]
    reward_funcs: list
    _logs: Any
    _pending_extra_logs: Any
    _generate: Any
    _calculate_rewards: Any
    _generations: Any  # RoundsMixin
    environment_factories: Any
    environments: Any

    def _padding(self, source: list[tuple[int, Rollout]], rows: list[dict], n: int) -> list[tuple[dict, Rollout]]:
        """``n`` rows that fill this process's share up to the common row count: copies of ``source``
        (this process's rollouts, or anyone's), which get no loss weight; in a step with no rollouts at
        all, a one-token stand-in. Nothing is generated for them."""
        if n <= 0:
            return []
        if not source:
            eos = int(self.eos_token_ids[0])
            stand_in = Rollout(
                prompt_ids=[eos],
                completion_ids=[eos],
                completion="",
                logprobs=[0.0],
                tool_mask=None,
                rewards=torch.full((len(self.reward_funcs),), float("nan")),
            )
            return [(rows[0], stand_in)] * n
        return [(rows[source[i % len(source)][0]], source[i % len(source)][1]) for i in range(n)]

    def _replay(
        self,
        local_rows: list[dict],
        rollouts: list[Rollout],
        everyone: list[Rollout],
        shares: list[int],
        rows_each: int,
    ) -> dict[str, Any]:
        """TRL's ``_generate_and_score_completions`` on the rollouts already made (this process's share,
        then its padding rows); padding rows leave with zero loss mask and no trace in the logs."""
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        columns = sorted({column for r in everyone for column in r.extra})
        extras = [r.extra for r in rollouts[: shares[rank]]] + [{}] * (len(rollouts) - shares[rank])
        self._pending_extra_logs = defaultdict(list, {c: [e.get(c) for e in extras] for c in columns})
        known = everyone or rollouts
        tool_mask = None
        if any(r.tool_mask is not None for r in known):
            tool_mask = [r.tool_mask if r.tool_mask is not None else [1] * len(r.completion_ids) for r in rollouts]
        logprobs = None if any(r.logprobs is None for r in known) else [r.logprobs for r in rollouts]
        cached: tuple[Any, ...] = (
            [r.prompt_ids for r in rollouts],
            [r.completion_ids for r in rollouts],
            tool_mask,
            [r.completion for r in rollouts],
            logprobs,
            {},
            None,
            [],
        )
        k = len(self.reward_funcs)
        rewards_per_func = torch.stack([r.rewards for r in everyone]) if everyone else torch.zeros(0, k)
        rewards_per_func = rewards_per_func.to(self.accelerator.device)
        self._generate = lambda prompts: cached
        self._calculate_rewards = lambda *args, **kwargs: rewards_per_func
        padded = rows_each * world > len(everyone)
        # the prompts as generated (environments' observations included); environments are not drawn or
        # reset again: their rewards are in the rollouts, and `environments` stays the last call's
        local_rows = [
            {**row, "prompt": r.prompt} if r.prompt is not None else row for row, r in zip(local_rows, rollouts)
        ]
        factories, environments = getattr(self, "environment_factories", None), getattr(self, "environments", None)
        if factories is not None:
            self.environment_factories, self.environments = None, None
        try:
            with self._generations(1):
                output = super()._generate_and_score_completions(local_rows)  # type: ignore[misc]
        finally:
            del self._generate, self._calculate_rewards
            if factories is not None:
                self.environment_factories, self.environments = factories, environments
        if padded:
            keep = [r * rows_each + i for r in range(world) for i in range(shares[r])]
            tables = [self._logs["prompt"], self._logs["completion"], *(self._logs["extra"][c] for c in columns)]
            _drop_padding_logs(tables, keep, rows_each * world)
            real = shares[rank]
            output["completion_mask"][real:] = 0
            if output.get("tool_mask") is not None:
                output["tool_mask"][real:] = 0
            loss_mask = output["completion_mask"]
            if output.get("tool_mask") is not None:
                loss_mask = loss_mask * output["tool_mask"]
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output


def model_tokens(rollout: Rollout) -> int:
    """Completion tokens the model generated for a rollout (tool results, masked out, not counted)."""
    return int(sum(rollout.tool_mask)) if rollout.tool_mask is not None else len(rollout.completion_ids)


def _drop_padding_logs(logs: list[Any], keep: list[int], total: int) -> None:
    """Remove the padding rows from completion-table logs to which the replay appended ``total``
    gathered rows each (deques may have dropped older rows on the left), keeping positions ``keep``."""
    for log in logs:
        appended = [log.pop() for _ in range(total)][::-1]
        log.extend(appended[i] for i in keep)

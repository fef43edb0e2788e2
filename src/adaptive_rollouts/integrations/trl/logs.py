"""What `AdaptiveGRPOTrainer` logs: TRL's own metrics over the rollouts used, and the allocation.

- `LogsMixin._log_generation`: ``completions/*``, ``num_tokens`` and ``tools/*`` once per step over
  the rollouts trained on, computed as TRL's ``_generate`` computes them for a stock batch;
- `LogsMixin._fix_logs`: the replay ran with groups of one; the logged advantages and
  ``frac_reward_zero_std`` are put back for the true groups;
- `LogsMixin._log_allocation`: the step's log (`bridge.StepResult.log`: one name per quantity under
  ``adaptive/``, the running totals, ``tokens_spent`` / ``tokens_saved`` from each rollout's
  completion length, the regime fingerprints under ``regime/``, plus what only this trainer knows:
  ``padding_unused``, ``padding_rows``, ``empty_step``), on every process. The key list: docs/trl.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accelerate.utils import broadcast_object_list

from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.types import Allocator

from .rounds import Rollout


class LogsMixin:
    """Logging for `AdaptiveGRPOTrainer` (uses GRPOTrainer attributes)."""

    # set by GRPOTrainer / AdaptiveGRPOTrainer
    accelerator: Any
    state: Any
    tools: Any
    reward_weights: Any
    eos_token_ids: list[int]
    scale_rewards: str
    multi_objective_aggregation: str
    allocator: Allocator
    regime: RegimeTracker
    _tokenizer: Any
    _metrics: Any
    _logs: Any
    _step_tools: dict[str, float]

    def _log_generation(self, rollouts: Sequence[Rollout]) -> None:
        """TRL's generation metrics for ``rollouts`` (all processes' rollouts of this step)."""
        metrics = self._metrics["train"]
        if self.tools or any(r.tool_mask is not None for r in rollouts):
            lengths = [sum(r.tool_mask) if r.tool_mask is not None else len(r.completion_ids) for r in rollouts]
        else:
            lengths = [len(r.completion_ids) for r in rollouts]
        completion_lengths = torch.tensor(lengths)
        prompt_tokens = sum(len(r.prompt_ids) for r in rollouts)
        self.state.num_input_tokens_seen += int(prompt_tokens + completion_lengths.sum().item())
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]
        metrics["completions/mean_length"].append(completion_lengths.float().mean().item())
        metrics["completions/min_length"].append(completion_lengths.float().min().item())
        metrics["completions/max_length"].append(completion_lengths.float().max().item())
        eos_and_pad = [*self.eos_token_ids, self._tokenizer.pad_token_id]
        truncated = torch.tensor([r.completion_ids[-1] not in eos_and_pad for r in rollouts])
        metrics["completions/clipped_ratio"].append(truncated.float().mean().item())
        terminated = completion_lengths[~truncated]
        if len(terminated) == 0:
            terminated = torch.zeros(1)
        metrics["completions/mean_terminated_length"].append(terminated.float().mean().item())
        metrics["completions/min_terminated_length"].append(terminated.float().min().item())
        metrics["completions/max_terminated_length"].append(terminated.float().max().item())
        if self.tools:
            stats = self._step_tools
            calls = stats["calls"]
            metrics["tools/call_frequency"].append(calls / stats["rows"] if stats["rows"] else 0.0)
            metrics["tools/failure_frequency"].append(stats["failures"] / calls if calls > 0 else 0.0)

    def _fix_logs(self, advantages: torch.Tensor, rewards_per_func: torch.Tensor, group_ids: torch.Tensor) -> None:
        """The replay ran with groups of one; put back the statistics of the true groups."""
        n = len(advantages)
        logged = self._logs["advantages"]
        for _ in range(min(n, len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        metrics = self._metrics["train"]
        if not metrics["frac_reward_zero_std"]:
            return
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        scorable = ~torch.isnan(rewards_per_func).all(dim=1)
        if self.scale_rewards == "batch" or self.multi_objective_aggregation == "normalize_then_sum":
            # TRL compares one batch-wide std with 0 for every rollout
            kept = rewards[scorable]
            zero = bool(kept.numel() < 2 or torch.isclose(kept.std(), kept.new_zeros(())))
            metrics["frac_reward_zero_std"][-1] = float(zero)
            return
        _, dense = torch.unique(group_ids, return_inverse=True)
        size = int(dense.max()) + 1
        low = torch.full((size,), float("inf"), dtype=rewards.dtype)
        high = torch.full((size,), float("-inf"), dtype=rewards.dtype)
        low = low.scatter_reduce(0, dense[scorable], rewards[scorable], "amin")
        high = high.scatter_reduce(0, dense[scorable], rewards[scorable], "amax")
        flat = ~(high > low)  # no spread (also a group of one, or of unscored rollouts only)
        metrics["frac_reward_zero_std"][-1] = flat[dense].float().mean().item()

    def _log_allocation(self, values: dict[str, float] | None) -> None:
        """Log ``values`` (the step's log, built on the main process) on every process."""
        if self.accelerator.num_processes > 1:
            holder = [values]
            broadcast_object_list(holder)
            values = holder[0]
        metrics = self._metrics["train"]
        for name, value in (values or {}).items():
            metrics[name].append(value)

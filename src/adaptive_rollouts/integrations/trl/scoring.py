"""TRL's rewards and advantages on groups of unequal size (torch; no TRL import).

`trl_advantages` is what ``GRPOTrainer._generate_and_score_completions`` computes on equal groups
of ``num_generations``, on the true (ragged) groups of an adaptive step:

- ``sum_then_normalize``: the weighted sum of the reward functions (`weighted_reward`), then the
  estimator per group (`adaptive_rollouts.advantages.group_advantages` with TRL's eps 1e-4), then,
  for ``scale_rewards="batch"``, a division by the batch std;
- ``normalize_then_sum``: each reward function normalised per group (GRPO), the weighted sum, then
  normalised over the batch.

A rollout that no reward function scored (all None, NaN here) gets advantage 0 and stays out of its
group's baseline and of the batch statistics, as in stock TRL.
"""

from __future__ import annotations

import torch

from adaptive_rollouts.advantages import group_advantages

TRL_EPS = 1e-4  # TRL adds 1e-4 to the std in its advantages


def weighted_reward(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """TRL's ``sum_then_normalize`` reward: weighted nansum, NaN where every function returned None.

    >>> weighted_reward(torch.tensor([[1.0, float("nan")], [float("nan")] * 2]), torch.tensor([0.5, 2.0])).tolist()
    [0.5, nan]
    """
    weights = weights.to(rewards_per_func.device, rewards_per_func.dtype)
    total = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
    return total


def trl_advantages(
    rewards_per_func: torch.Tensor,
    group_ids: torch.Tensor,
    weights: torch.Tensor,
    estimator: str,
    scale_rewards: str,
    multi_objective_aggregation: str = "sum_then_normalize",
) -> torch.Tensor:
    """Advantages ``[N]`` for rewards ``[N, K]`` (NaN = None) of rollouts in groups ``group_ids [N]``."""
    device = rewards_per_func.device
    weights = weights.to(device)
    unscored = torch.isnan(rewards_per_func).all(dim=1)
    ids = torch.where(unscored, -1 - torch.arange(len(group_ids), device=device), group_ids)  # singletons: 0
    if multi_objective_aggregation == "normalize_then_sum":
        normalized = torch.zeros_like(rewards_per_func)
        for k in range(rewards_per_func.shape[1]):
            have = ~torch.isnan(rewards_per_func[:, k])
            if have.any():
                normalized[have, k] = group_advantages(rewards_per_func[have, k], ids[have], "grpo", eps=TRL_EPS)
        rewards = (normalized * weights.unsqueeze(0)).sum(dim=1)
        kept = rewards[~unscored]
        if kept.numel() == 0:
            return torch.zeros_like(rewards)
        std = kept.std() if kept.numel() > 1 else kept.new_zeros(())
        return torch.where(unscored, torch.zeros_like(rewards), (rewards - kept.mean()) / (std + TRL_EPS))
    rewards = weighted_reward(rewards_per_func, weights)
    advantages = group_advantages(torch.nan_to_num(rewards, nan=0.0), ids, estimator, eps=TRL_EPS)
    if scale_rewards == "batch":
        kept = rewards[~unscored]
        std = kept.std() if kept.numel() > 1 else rewards.new_zeros(())
        advantages = advantages / (std + TRL_EPS)
    return advantages

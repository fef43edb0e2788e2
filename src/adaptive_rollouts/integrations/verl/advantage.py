"""verl advantage estimators for groups of unequal size.

Registered with verl's ``register_adv_est`` under three names (select one with
``algorithm.adv_estimator=...``):

==================  ==========================================  ============================
name                advantage of rollout i in a group of n       matches verl's (n >= 2)
==================  ==========================================  ============================
``adaptive_grpo``   ``(r_i - mean) / (std + epsilon)``           ``grpo``
                    (``r_i - mean`` when                         (``grpo`` with
                    ``algorithm.norm_adv_by_std_in_grpo=false``)  ``norm_adv_by_std_in_grpo=false``)
``adaptive_drgrpo`` ``r_i - mean``                               ``grpo``, no std scaling
``adaptive_rloo``   ``r_i - mean of the other n - 1``            ``rloo`` / ``rloo_vectorized``
==================  ==========================================  ============================

``r_i`` is the sequence score (``token_level_rewards.sum(-1)``), std the unbiased standard
deviation, ``epsilon = 1e-6`` as in verl. Differences from verl's stock estimators, both
deliberate: a group with one rollout gets advantage 0 (verl returns the raw reward, which for an
adaptive allocator that leaves prompts at one rollout would push every such sequence up by its
raw score), and a group whose std is below ``1e-6`` gets exactly 0. Computation is vectorised
(:func:`adaptive_rollouts.advantages.group_advantages`), not verl's per-rollout Python loop.

In verl's v1 trainer, estimators other than ``grpo`` receive every output row of a multi-output
agent loop as its own group member (``compute_advantage_for_multi_trajectories`` only collapses
sessions for ``grpo``); for the usual single-turn agent loop one session is one row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from adaptive_rollouts.advantages import group_advantages

ESTIMATOR_NAMES = {
    "adaptive_grpo": "grpo",
    "adaptive_drgrpo": "drgrpo",
    "adaptive_rloo": "rloo",
}

__all__ = ["ESTIMATOR_NAMES", "group_ids_from_index", "outcome_advantage", "register"]


def group_ids_from_index(index: Any) -> torch.Tensor:
    """Dense integer group ids from verl's ``uid`` array (strings, ints or any hashable)."""
    values = np.asarray(index, dtype=object).reshape(-1)
    if values.size == 0:
        raise ValueError("index (verl uid array) is empty")
    try:
        _, inverse = np.unique(values.astype(str), return_inverse=True)
    except TypeError as exc:  # pragma: no cover - unusual uid types
        raise ValueError(f"index must hold strings or numbers, got {values[:3]!r}") from exc
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long)


def outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    estimator: str = "grpo",
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Outcome-reward advantages broadcast over response tokens: ``(advantages, returns)``.

    Same shapes and conventions as verl's ``compute_*_outcome_advantage``: scores are summed
    over tokens, the per-sequence advantage is multiplied by ``response_mask``, and returns equal
    advantages.
    """
    if token_level_rewards.ndim != 2:
        raise ValueError(f"token_level_rewards must be [batch, response_len], got {tuple(token_level_rewards.shape)}")
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(
            f"response_mask shape {tuple(response_mask.shape)} != token_level_rewards shape "
            f"{tuple(token_level_rewards.shape)}"
        )
    if len(index) != token_level_rewards.shape[0]:
        raise ValueError(f"index has {len(index)} entries for {token_level_rewards.shape[0]} sequences")
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        ids = group_ids_from_index(index).to(scores.device)
        adv = group_advantages(scores, ids, estimator=estimator, eps=epsilon)
        adv = adv.unsqueeze(-1) * response_mask.to(adv.dtype)
    return adv, adv


def _config_get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if callable(getter):
        try:
            return getter(key, default)
        except Exception:  # dataclass configs whose .get differs
            pass
    return getattr(config, key, default)


def _make(estimator: str):
    def compute(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: Any = None,
        epsilon: float = 1e-6,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if index is None:
            raise ValueError(f"adaptive_{estimator} needs the group index (verl's 'uid' field)")
        est = estimator
        if est == "grpo" and not _config_get(config, "norm_adv_by_std_in_grpo", True):
            est = "drgrpo"
        return outcome_advantage(token_level_rewards, response_mask, index, est, epsilon)

    compute.__name__ = f"compute_adaptive_{estimator}_outcome_advantage"
    compute.__doc__ = f"verl advantage estimator 'adaptive_{estimator}' (see module docstring)."
    return compute


compute_adaptive_grpo_outcome_advantage = _make("grpo")
compute_adaptive_drgrpo_outcome_advantage = _make("drgrpo")
compute_adaptive_rloo_outcome_advantage = _make("rloo")

_FUNCTIONS = {
    "adaptive_grpo": compute_adaptive_grpo_outcome_advantage,
    "adaptive_drgrpo": compute_adaptive_drgrpo_outcome_advantage,
    "adaptive_rloo": compute_adaptive_rloo_outcome_advantage,
}


def register() -> list[str]:
    """Register the three estimators with verl (idempotent). Returns the registered names."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    for name, fn in _FUNCTIONS.items():
        if ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            register_adv_est(name)(fn)
    return list(_FUNCTIONS)

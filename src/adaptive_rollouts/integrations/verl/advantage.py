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
raw score), and a group whose rewards span at most ``1e-6`` gets exactly 0. Computation is vectorised
(:func:`adaptive_rollouts.advantages.group_advantages`), not verl's per-rollout Python loop.

Loss rows (``adaptive.loss_rows=uniform``): inside `advantage_scale` the estimators multiply every
advantage by the trainer's factor (`bridge.settings.verl_loss_rows_scale`), so verl's loss is
normalised as in the full batch; outside it (or with factor 1) they are verl's.

Multi-output agent loops (one row per turn, keys ``{uid}_{session}_{index}``): verl's v1 trainer
collapses sessions only for its own ``grpo`` (``compute_advantage_for_multi_trajectories``). Inside
``AdaptiveRolloutTrainer`` the row keys are known (`session_keys`), and these estimators do the
same: a group's members are its sessions, each scored by its final output, and every row of a
session gets the session's advantage. Called with no session keys (another trainer), every row
is a member.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from adaptive_rollouts.advantages import group_advantages
from adaptive_rollouts.bridge.settings import verl_estimator
from adaptive_rollouts.checks.validation import ESTIMATORS

__all__ = ["advantage_scale", "group_ids_from_index", "outcome_advantage", "register", "session_keys"]

_SESSION_KEYS: contextvars.ContextVar[Sequence[str] | None] = contextvars.ContextVar("_SESSION_KEYS", default=None)
_SCALE: contextvars.ContextVar[float] = contextvars.ContextVar("_SCALE", default=1.0)


@contextlib.contextmanager
def advantage_scale(scale: float) -> Iterator[None]:
    """Within the block, the estimators multiply every advantage by ``scale`` (> 0, finite)."""
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"advantage_scale: scale must be finite and > 0, got {scale}")
    token = _SCALE.set(float(scale))
    try:
        yield
    finally:
        _SCALE.reset(token)


@contextlib.contextmanager
def session_keys(keys: Sequence[str]) -> Iterator[None]:
    """Within the block, estimators treat rows as the trajectories ``keys`` (in row order)."""
    token = _SESSION_KEYS.set(list(keys))
    try:
        yield
    finally:
        _SESSION_KEYS.reset(token)


def _final_rows(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(row of each session's final output, session number of every row) for keys {uid}_{s}_{i}."""
    final: dict[str, tuple[int, int]] = {}
    session_of = []
    for row, key in enumerate(keys):
        parts = key.rsplit("_", 2)
        if len(parts) != 3:
            raise ValueError(f"trajectory key {key!r} is not '{{uid}}_{{session}}_{{index}}'")
        session, index = f"{parts[0]}_{parts[1]}", int(parts[2])
        session_of.append(session)
        if session not in final or final[session][0] < index:
            final[session] = (index, row)
    order = {s: j for j, s in enumerate(final)}
    return np.array([r for _, r in final.values()], dtype=np.int64), np.array([order[s] for s in session_of])


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
        adv, _ = unscaled(token_level_rewards, response_mask, index, epsilon, config)
        scale = _SCALE.get()
        if scale != 1.0:
            adv = adv * scale
        return adv, adv

    def unscaled(
        token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any, epsilon: float, config: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if index is None:
            raise ValueError(f"adaptive_{estimator} needs the group index (verl's 'uid' field)")
        # verl's norm_adv_by_std_in_grpo=False turns GRPO into Dr. GRPO (the trainer-settings table)
        est = verl_estimator(f"adaptive_{estimator}", bool(_config_get(config, "norm_adv_by_std_in_grpo", True)))
        assert est is not None
        keys = _SESSION_KEYS.get()
        if keys is None or len(keys) != token_level_rewards.shape[0]:
            return outcome_advantage(token_level_rewards, response_mask, index, est, epsilon)
        final, session_of = _final_rows(keys)
        if final.size == len(keys):  # one row per session
            return outcome_advantage(token_level_rewards, response_mask, index, est, epsilon)
        outcome_advantage(token_level_rewards, response_mask, index, est, epsilon)  # input checks
        rows = torch.as_tensor(final)
        with torch.no_grad():
            scores = token_level_rewards[rows].sum(dim=-1)
            ids = group_ids_from_index(np.asarray(index, dtype=object).reshape(-1)[final]).to(scores.device)
            per_session = group_advantages(scores, ids, estimator=est, eps=epsilon)
            out = per_session[torch.as_tensor(session_of)].unsqueeze(-1) * response_mask.to(per_session.dtype)
        return out, out

    compute.__name__ = f"compute_adaptive_{estimator}_outcome_advantage"
    compute.__doc__ = f"verl advantage estimator 'adaptive_{estimator}' (see module docstring)."
    return compute


# One verl estimator "adaptive_<name>" per estimator of adaptive_rollouts.checks.validation.ESTIMATORS.
_FUNCTIONS = {f"adaptive_{name}": _make(name) for name in ESTIMATORS}
compute_adaptive_grpo_outcome_advantage = _FUNCTIONS["adaptive_grpo"]
compute_adaptive_drgrpo_outcome_advantage = _FUNCTIONS["adaptive_drgrpo"]
compute_adaptive_rloo_outcome_advantage = _FUNCTIONS["adaptive_rloo"]


def register() -> list[str]:
    """Register the three estimators with verl (idempotent). Returns the registered names."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    for name, fn in _FUNCTIONS.items():
        if ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            register_adv_est(name)(fn)
    return list(_FUNCTIONS)

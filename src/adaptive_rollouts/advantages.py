"""Group-relative advantages over groups of unequal size (torch).

Adaptive allocation gives prompts different numbers of rollouts, so the groups a GRPO-family
update sees are ragged: 1, 2, 6, 30 rollouts, in any order in the batch. ``group_advantages``
computes the three common outcome-reward estimators for such a batch in one vectorised pass
(``index_add_`` over groups; no Python loop over groups).

For a group ``g`` with rewards ``r_1 .. r_n``, mean ``m = sum(r) / n`` and unbiased standard
deviation ``s = sqrt(sum((r - m)^2) / (n - 1))``:

==========  =========================================  =====================================
estimator   advantage of rollout i                      as in
==========  =========================================  =====================================
``grpo``    ``(r_i - m) / (s + eps)``                   GRPO (DeepSeekMath); verl ``grpo``
``drgrpo``  ``r_i - m``                                 Dr. GRPO; verl ``grpo`` with
                                                        ``norm_adv_by_std_in_grpo=False``
``rloo``    ``r_i - (sum(r) - r_i) / (n - 1)``          RLOO (Ahmadian et al. 2024); verl
            ``= n / (n - 1) * (r_i - m)``               ``rloo``
==========  =========================================  =====================================

Conventions, and where they differ from the trainers:

* ``eps`` (default ``1e-6``) is added to the standard deviation, not the variance, exactly as verl
  does (``epsilon=1e-6``). TRL's ``GRPOTrainer`` uses ``1e-4``; pass ``eps=1e-4`` to match it.
* A singleton group (``n = 1``) has no baseline, so every estimator returns **0** for it: the
  rollout carries no learning signal. verl's stock ``grpo`` / ``rloo`` instead return the raw
  reward (mean 0, std 1 for a singleton), which pushes up every singleton by its raw score.
* A group whose rewards are all equal gets exactly 0 for every estimator. The test is
  `checks.rewards.all_equal` on the group's smallest and largest reward (span ``<= std_tol``,
  default ``checks.rewards.ZERO_VARIANCE_TOL = 1e-6``), the test every count of all-equal groups
  uses; equal rewards span exactly 0, even where their float mean differs from them in the last
  bit. Rewards that genuinely differ by less than ``std_tol`` are treated as equal.
* The formula of each estimator is its object's (`objectives.Estimator.from_centred`), shared with
  the numpy advantages of `objectives.Estimator.advantages`.
* Overflow-safe: each group is scaled by a power of two (exact in floating point) before its sums,
  so rewards near the float64 limit (``+-1e300``) give the same advantages as ``+-1`` would.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .checks.rewards import ZERO_VARIANCE_TOL, all_equal
from .checks.validation import ESTIMATORS
from .objectives import Estimator, get_estimator
from .objectives.estimator import group_scale

__all__ = ["ESTIMATORS", "group_advantages", "group_ids_from_counts"]


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    estimator: str | Estimator = "grpo",
    eps: float = 1e-6,
    std_tol: float = ZERO_VARIANCE_TOL,
) -> torch.Tensor:
    """Per-rollout advantages for groups of any size, in any order.

    Args:
        rewards: float tensor ``[N]``, one scalar reward per rollout (finite).
        group_ids: integer tensor ``[N]``; rollouts with equal ids form a group. Ids need not be
            contiguous, sorted or start at 0.
        estimator: a name of ``checks.validation.ESTIMATORS`` (``"grpo"``, ``"drgrpo"``, ``"rloo"``;
            see the module docstring) or an `objectives.Estimator`, whose formula is used.
        eps: added to the unbiased standard deviation in ``grpo`` (verl: 1e-6, TRL: 1e-4).
        std_tol: a group whose rewards span ``<= std_tol`` counts as zero-variance and gets 0
            (`checks.rewards.all_equal`, the test every count of all-equal groups uses).

    Returns:
        Tensor ``[N]`` with the dtype of ``rewards`` (float32 for integer or bool rewards), on
        the same device. Singleton and zero-variance groups get exactly 0.

    Raises:
        ValueError: unknown estimator, non-1-D or mismatched shapes, empty input, non-finite
            rewards, non-integer group ids, negative ``eps`` / ``std_tol``.

    >>> import torch
    >>> r = torch.tensor([1.0, 0.0, 1.0, 5.0, 0.0, 0.0])
    >>> g = torch.tensor([0, 0, 0, 1, 2, 2])
    >>> group_advantages(r, g, "rloo").tolist()
    [0.5, -1.0, 0.5, 0.0, 0.0, 0.0]
    >>> group_advantages(r, g, "drgrpo").tolist()[:3]  # doctest: +ELLIPSIS
    [0.333..., -0.666..., 0.333...]
    """
    est = get_estimator(estimator)
    if not (eps >= 0.0):
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    if not (std_tol >= 0.0):
        raise ValueError(f"std_tol must be >= 0, got {std_tol!r}")
    if not isinstance(rewards, torch.Tensor):
        raise ValueError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if not isinstance(group_ids, torch.Tensor):
        raise ValueError(f"group_ids must be a torch.Tensor, got {type(group_ids).__name__}")
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    if group_ids.shape != rewards.shape:
        raise ValueError(
            f"group_ids shape {tuple(group_ids.shape)} does not match rewards shape {tuple(rewards.shape)}"
        )
    if rewards.numel() == 0:
        raise ValueError("rewards is empty: need at least one rollout")
    if group_ids.dtype.is_floating_point or group_ids.dtype.is_complex or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor, got dtype {group_ids.dtype}")
    if rewards.dtype.is_complex:
        raise ValueError(f"rewards must be real, got dtype {rewards.dtype}")
    finite = torch.isfinite(rewards)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"rewards contain NaN or inf at positions {bad} (values "
            f"{rewards[bad].tolist()}); score every rollout before computing advantages"
        )

    out_dtype = rewards.dtype if rewards.dtype.is_floating_point else torch.float32
    r = rewards.detach().to(torch.float64)
    # Dense 0..G-1 group index; unique sorts, which keeps this O(N log N) and loop-free.
    _, g = torch.unique(group_ids, return_inverse=True)
    n_groups = int(g.max()) + 1
    zeros = torch.zeros(n_groups, dtype=torch.float64, device=r.device)

    # Each group is scaled by a power of two 2^k with |reward| / 2^k < 2 before the sums, so the sum
    # and the sum of squares cannot overflow (rewards of +-1e300 still give +-0.707 in grpo).
    # Scaling by a power of two is exact in floating point: for ordinary rewards the results are
    # bit-identical to the unscaled formulas.
    low = zeros.clone().scatter_reduce_(0, g, r, reduce="amin", include_self=False)
    high = zeros.clone().scatter_reduce_(0, g, r, reduce="amax", include_self=False)
    scale = group_scale(torch.maximum(low.abs(), high.abs()), torch.frexp, torch.ldexp)  # 2^1023 at most
    s = r / scale[g]
    count = zeros.clone().index_add_(0, g, torch.ones_like(r))
    mean = zeros.clone().index_add_(0, g, s) / count
    centred = s - mean[g]
    sq = zeros.clone().index_add_(0, g, centred * centred)
    std = torch.sqrt(sq / (count - 1.0).clamp_min(1.0))  # in units of the group's scale
    informative = (count >= 2.0) & ~all_equal(low, high, std_tol)  # a span that overflows to inf is not flat

    adv = est.from_centred(centred, count.clamp_min(2.0)[g], std[g], eps, scale[g])
    adv = torch.where(informative[g], adv, torch.zeros_like(adv))
    return adv.to(out_dtype)


def group_ids_from_counts(counts: Sequence[int] | torch.Tensor, device=None) -> torch.Tensor:
    """Group ids for rollouts laid out prompt after prompt: ``[0]*c0 + [1]*c1 + ...``.

    A count of 0 (a skipped prompt) contributes no rollouts; its id is simply absent.

    >>> group_ids_from_counts([2, 0, 3]).tolist()
    [0, 0, 2, 2, 2]
    """
    c = torch.as_tensor(counts, device=device)
    if c.ndim != 1:
        raise ValueError(f"counts must be 1-D, got shape {tuple(c.shape)}")
    if c.dtype.is_floating_point:
        if not bool((c == c.round()).all()):
            raise ValueError(f"counts must be integers, got {c.tolist()[:10]}")
    c = c.long()
    if bool((c < 0).any()):
        raise ValueError(f"counts must be >= 0, got {c.tolist()[:10]}")
    return torch.repeat_interleave(torch.arange(c.numel(), device=c.device), c)


def equal_prompt_weights(group_ids: torch.Tensor) -> torch.Tensor:
    """Per-rollout weights ``N / (Q' n_q)`` that give every prompt's group the same total weight.

    N rollouts in Q' non-empty groups, n_q of them in group q. Multiplying each rollout's advantage
    by its weight turns a loss that averages over rollouts (TRL's ``grpo`` loss: token mean per
    completion, then mean over completions) into the mean over prompts of each prompt's mean
    (``prompt-mean``): a prompt given more rollouts is estimated more precisely but does not
    weigh more in the step's direction. With equal groups every weight is 1. The policy-gradient
    loss is linear in the advantage (PPO's clipped term too, for positive weights), so the
    weights act exactly as per-rollout loss weights.

    >>> [round(w, 3) for w in equal_prompt_weights(torch.tensor([0, 0, 0, 1])).tolist()]  # N = 4, Q' = 2
    [0.667, 0.667, 0.667, 2.0]
    """
    g = torch.as_tensor(group_ids)
    if g.ndim != 1:
        raise ValueError(f"group_ids must be 1-D, got shape {tuple(g.shape)}")
    if g.numel() == 0:
        return torch.ones(0, device=g.device)
    _, inverse, counts = torch.unique(g, return_inverse=True, return_counts=True)
    n = counts[inverse].to(torch.float32)
    return g.numel() / (counts.numel() * n)

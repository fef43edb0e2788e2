"""Per-step metrics, the same dict for every allocator (`allocator.last_metrics`).

A group is the set of rollouts of one prompt in one step. Rewards are binary {0, 1} or graded in
[0, 1]; "signal" means the group's rewards are not all equal (within `tol`), since an all-equal group
gets zero advantage under GRPO, Dr. GRPO and RLOO alike.

Keys (all JSON-able; `allocation_histogram` has int keys, which JSON turns into strings):

| key | meaning |
|---|---|
| num_prompts | prompts in the batch |
| rollouts_spent | rollouts generated: sum of counts, plus those left unscored |
| unscored | rollouts generated without a reward (failed generation or scoring) |
| budget | the step's budget (None when not given) |
| rollouts_saved | budget - rollouts_spent: what a "save" allocator did not spend (None without a budget) |
| skipped | prompts given zero rollouts |
| singletons | prompts given exactly one rollout (no signal possible) |
| zero_variance_groups | groups of >= 1 rollout whose rewards span <= tol (singletons included) |
| signal_groups | groups of >= 2 rollouts whose rewards span > tol |
| effective_rollouts | rollouts in signal groups |
| effective_fraction | effective_rollouts / rollouts (0 when nothing was spent) |
| solve_all / solve_none | groups whose rewards are all >= 1 - tol / all <= tol |
| mean_reward | mean over all rollouts (nan when nothing was spent) |
| count_min / count_max / count_mean | over prompts that were not skipped |
| allocation_histogram | {n: number of prompts given n rollouts}, n = 0 included |
| predicted_success / observed_success | rollout-weighted means of the prediction and of the rewards |
| brier | mean over rollouts of (predicted p - reward)^2 (graded rewards: squared error) |
| brier_group | mean over non-skipped groups of (predicted p - group mean reward)^2 |
| allocator_seconds | seconds the allocator itself spent (sampling excluded; `clock.AllocatorClock`) |
| tokens_spent | completion tokens of every rollout generated (only when ``sample`` gave lengths; `token_metrics`) |
| tokens_saved | an estimate of the tokens Uniform would have spent beyond them (`token_metrics`) |

The two token keys are there only when every rollout of the step came with its completion length
(`types.Draw`); without lengths the dict is the same as before they existed.

The predictor-quality four are None when no prediction is given, or when it is the same for every
prompt of the step (a prior: nothing learned about them yet); ``allocator_seconds`` when no time is.
The counts (``skipped``, ``singletons``, ``count_*``, the histogram) are of the rollouts generated
(``generated``), which may exceed the rewards scored: a prompt whose rollouts were all generated but
left unscored is not skipped. Renamed keys stay readable for one release (`DEPRECATED_NAMES`, with a
``DeprecationWarning``), but are not listed among the keys.

>>> import numpy as np
>>> m = step_metrics(["a", "b", "c"], [2, 0, 3],
...                  [np.array([0.0, 1.0]), np.array([]), np.array([1.0, 1.0, 1.0])])
>>> m["skipped"], m["zero_variance_groups"], m["effective_rollouts"], m["solve_all"]
(1, 1, 2, 1)
>>> m["allocation_histogram"]
{0: 1, 2: 1, 3: 1}
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .checks.rewards import ZERO_VARIANCE_TOL, all_equal, group_extremes
from .checks.validation import check_rewards_flat
from .solvers.split import equal_split
from .types import Prediction, Prompt

__all__ = ["DEPRECATED_NAMES", "PREDICTION_KEYS", "StepMetrics", "step_metrics", "group_has_signal", "token_metrics"]

PREDICTION_KEYS = ("predicted_success", "observed_success", "brier", "brier_group")
"""What only an allocator that predicts can report: the quality of its prediction."""

DEPRECATED_NAMES = {"allocator_wall_time_s": "allocator_seconds"}
"""Old metric name -> its name now; the old one is readable for one release (CHANGELOG.md)."""


class StepMetrics(dict):
    """The metrics dict: a plain dict whose renamed keys (`DEPRECATED_NAMES`) are still readable,
    with a ``DeprecationWarning``; they are not among its keys, so nothing logs a quantity twice.

    >>> import warnings
    >>> m = StepMetrics(allocator_seconds=0.5)
    >>> with warnings.catch_warnings(record=True):
    ...     m["allocator_wall_time_s"], list(m)
    (0.5, ['allocator_seconds'])
    """

    def __missing__(self, key: str) -> Any:
        new = DEPRECATED_NAMES.get(key)
        if new is None or new not in self:
            raise KeyError(key)
        warnings.warn(f"metric {key!r} is now {new!r}; the old name goes in the next release", DeprecationWarning, 2)
        return self[new]


def group_has_signal(rewards: np.ndarray, tol: float = ZERO_VARIANCE_TOL) -> bool:
    """True when a group's rewards are not all equal (`checks.rewards.all_equal`); needs >= 2 rollouts."""
    rewards = np.asarray(rewards, dtype=float)
    return rewards.size >= 2 and not bool(all_equal(rewards.min(), rewards.max(), tol))


def _check(prompts: Sequence[Prompt], counts: np.ndarray, rewards: Sequence[np.ndarray]) -> np.ndarray:
    """All rewards concatenated, after checking one finite 1-D group of counts[q] per prompt."""
    if counts.ndim != 1 or len(counts) != len(prompts):
        raise ValueError(f"counts must be 1-D with one entry per prompt ({len(prompts)}), got shape {counts.shape}")
    if np.any(counts < 0):
        raise ValueError(f"counts must be >= 0, got {counts[counts < 0].tolist()}")
    return check_rewards_flat(prompts, rewards, counts, arrays=False, unit_range=False)[1]


def step_metrics(
    prompts: Sequence[Prompt],
    counts: Sequence[int] | np.ndarray,
    rewards: Sequence[np.ndarray],
    prediction: Prediction | None = None,
    wall_time_s: float | None = None,
    tol: float = ZERO_VARIANCE_TOL,
    flat: np.ndarray | None = None,
    budget: int | None = None,
    spent: int | None = None,
    generated: Sequence[int] | np.ndarray | None = None,
) -> StepMetrics:
    """Metrics of one step; `counts[q]` must equal `len(rewards[q])` (the rollouts scored).
    ``generated[q]``: rollouts generated for prompt q, when some were left unscored (default:
    ``counts``); ``spent``: their sum (default: ``generated.sum()``).
    Vectorised over the concatenated rewards (``flat``: that concatenation, when the caller
    already has it and has checked it)."""
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iu":
        if counts.size and not np.all(counts == np.round(counts)):
            raise ValueError(f"counts must be integers, got {counts.tolist()}")
        counts = counts.astype(np.int64)
    flat = _check(prompts, counts, rewards) if flat is None else flat
    made = counts if generated is None else np.asarray(generated, dtype=np.int64)
    if made.shape != counts.shape or np.any(made < counts):
        raise ValueError(f"generated {made.tolist()} must be >= the scored counts {counts.tolist()}, one per prompt")
    scored = int(counts.sum())
    spent = int(made.sum()) if spent is None else int(spent)
    if spent < scored or (budget is not None and spent > budget):
        raise ValueError(f"rollouts spent ({spent}) must lie in [scored ({scored}), budget ({budget})]")
    used = counts > 0  # groups with a reward
    low, high, total = group_extremes(flat, counts)
    with np.errstate(invalid="ignore"):
        signal = (counts >= 2) & ~all_equal(low, high, tol)
        solve_all = used & (low >= 1.0 - tol)
        solve_none = used & (high <= tol)
    flat_groups = used & ~signal
    values, freq = np.unique(made, return_counts=True)
    rolled = made > 0  # prompts given rollouts (scored or not)
    out = StepMetrics(
        {
            "num_prompts": len(prompts),
            "rollouts_spent": spent,
            "unscored": spent - scored,
            "budget": None if budget is None else int(budget),
            "rollouts_saved": None if budget is None else int(budget) - spent,
            "skipped": int(np.sum(~rolled)),
            "singletons": int(np.sum(made == 1)),
            "zero_variance_groups": int(flat_groups.sum()),
            "signal_groups": int(signal.sum()),
            "effective_rollouts": int(counts[signal].sum()),
            "effective_fraction": float(counts[signal].sum() / spent) if spent else 0.0,
            "solve_all": int(solve_all.sum()),
            "solve_none": int(solve_none.sum()),
            "mean_reward": float(flat.mean()) if scored else float("nan"),
            "count_min": int(made[rolled].min()) if rolled.any() else 0,
            "count_max": int(made[rolled].max()) if rolled.any() else 0,
            "count_mean": float(made[rolled].mean()) if rolled.any() else 0.0,
            "allocation_histogram": {int(v): int(f) for v, f in zip(values, freq)},
            "predicted_success": None,
            "observed_success": None,
            "brier": None,
            "brier_group": None,
            "allocator_seconds": None if wall_time_s is None else float(wall_time_s),
        }
    )
    if prediction is not None:
        mean = np.asarray(prediction.mean, dtype=float)
        if mean.shape != (len(prompts),):
            raise ValueError(f"prediction.mean has shape {mean.shape}, expected ({len(prompts)},)")
        # a prediction equal for every prompt (a prior: nothing learned about these prompts yet) is not
        # scored: its Brier score would measure the rewards' spread, not the predictor
        if scored and float(np.ptp(mean)) > 0.0:
            per_rollout = np.repeat(mean, counts)
            out["predicted_success"] = float(per_rollout.mean())
            out["observed_success"] = float(flat.mean())
            out["brier"] = float(np.mean((per_rollout - flat) ** 2))
            group_means = total[used] / counts[used]
            out["brier_group"] = float(np.mean((mean[used] - group_means) ** 2))
    return out


def token_metrics(lengths: Sequence[np.ndarray], budget: int | None) -> dict[str, Any]:
    """``tokens_spent`` and ``tokens_saved`` of a step whose prompt q generated ``n_q = len(lengths[q])``
    rollouts of completion lengths ``lengths[q]`` (tokens), out of a budget C.

    tokens_spent = sum_q sum_j lengths[q][j], measured.

    tokens_saved = sum_q (u_q - n_q) L_q, an *estimate*: u = Uniform's counts for the same budget
    (``floor(C / Q)`` each, the first ``C mod Q`` prompts one more; `solvers.equal_split`), L_q the
    mean length of prompt q's rollouts in this step, or, for a prompt with none (skipped), the mean
    length over all rollouts of the step. The rollouts Uniform would have generated and this step
    did not are priced at what this step's rollouts of the same prompt cost; a prompt given more than
    Uniform's count adds its extra tokens as negative savings, so a "fill" allocator that moves
    rollouts to shorter prompts saves tokens without saving rollouts. Its rollout part,
    sum_q (u_q - n_q), is ``rollouts_saved``. None without a budget, or when nothing was generated
    (no length to price the rollouts not generated).

    >>> m = token_metrics([np.array([100, 300]), np.array([], dtype=int), np.array([50, 50, 50, 50])], 9)
    >>> m["tokens_spent"], m["tokens_saved"]  # Uniform: 3 each; 1 x 200 + 3 x 100 (step mean) - 1 x 50
    (600, 450.0)
    """
    sizes = np.array([len(g) for g in lengths], dtype=np.int64)
    totals = np.array([float(np.sum(g)) for g in lengths])
    spent = int(totals.sum())
    saved = None
    if budget is not None and sizes.sum() > 0:
        step_mean = totals.sum() / sizes.sum()
        per_rollout = np.where(sizes > 0, totals / np.maximum(sizes, 1), step_mean)
        saved = float(np.dot(equal_split(int(budget), len(lengths)) - sizes, per_rollout))
    return {"tokens_spent": spent, "tokens_saved": saved}

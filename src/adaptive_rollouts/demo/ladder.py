"""The ladder's shape: per-prompt success at the warm start, and what the known-p skip rule saves there.

Each pool prompt gets ``2 m`` completions at temperature 1 (the demo's). Its success rate over all
of them gives the histogram: a pool shaped like real RLVR has many prompts almost never solved
(p < 0.05), many almost always (p > 0.95), a frontier between. The known-p skip rule
(`sim.oracle.SkipOracle`, the demo's ``oracle-skip`` arm) then decides on the first ``m`` samples,
as the arm does on its own ``m`` = 16: with Uniform's group of n per prompt it skips a prompt whose
group would be all-equal with probability p^n + (1 - p)^n > 0.9. What the decision costs is read
on the other ``m`` samples, so that a prompt skipped because none of its first samples succeeded is
not also scored as worthless by them: each prompt's expected Uniform group signal E[a(K; n)] is
estimated without bias from those samples (`objectives.signal.sampled_group_signal`). The rule
generates the share of Uniform's rollouts it does not skip and keeps the share of that signal its
kept prompts carry.

>>> import numpy as np
>>> s = skip_rule_savings(np.array([0, 16, 8, 8]), np.array([0, 16, 9, 7]), 16, 8)
>>> s["spent"], s["kept"]
(0.5, 1.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptive_rollouts.objectives.signal import sampled_group_signal
from adaptive_rollouts.sim.oracle import SkipOracle

EXTREME = 0.05  # "almost never" below it, "almost always" above 1 - it
ESTIMATOR, AGGREGATION = "grpo", "seq-mean"  # the demo's loss: TRL's GRPO, one weight per sequence


def success_histogram(p: np.ndarray, bins: int = 10) -> dict[str, Any]:
    """Share of prompts per bin of [0, 1] (``bins`` equal bins), the shares almost never (p < 0.05)
    and almost always (p > 0.95) solved, and those never / always solved in every sample.

    >>> h = success_histogram(np.array([0.0, 0.01, 0.5, 0.97, 1.0]), bins=2)
    >>> h["shares"], h["below_0.05"], h["above_0.95"], h["at_0"], h["at_1"]
    ([0.4, 0.6], 0.4, 0.4, 0.2, 0.2)
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or p.size == 0 or np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p must be a non-empty 1-d array of rates in [0, 1], got shape {p.shape}")
    counts, edges = np.histogram(p, bins=bins, range=(0.0, 1.0))
    return {
        "edges": edges.round(6).tolist(),
        "shares": (counts / p.size).tolist(),
        f"below_{EXTREME:g}": float(np.mean(p < EXTREME)),
        f"above_{1 - EXTREME:g}": float(np.mean(p > 1 - EXTREME)),
        "at_0": float(np.mean(p == 0)),
        "at_1": float(np.mean(p == 1)),
    }


def skip_rule_savings(
    decide: np.ndarray, score: np.ndarray, samples: int, group: int, flat_above: float = 0.9
) -> dict[str, float]:
    """What the known-p skip rule saves on a pool. ``decide`` / ``score``: per prompt, successes
    among ``samples`` completions; the rule decides on ``decide`` (p = decide / samples), the
    signal is estimated on ``score``. ``group``: Uniform's group size n. Returns ``spent`` (share of
    Uniform's rollouts generated), ``kept`` (share of Uniform's expected signal on kept prompts),
    ``skipped`` (prompts skipped) and ``signal_per_rollout`` (kept / spent: the rule's signal per
    rollout over Uniform's)."""
    decide, score = np.asarray(decide), np.asarray(score)
    if decide.shape != score.shape or decide.ndim != 1 or decide.size == 0:
        raise ValueError(f"decide and score need one count per prompt, got shapes {decide.shape} and {score.shape}")
    if group < 2:
        raise ValueError(f"group must be >= 2, got {group}")
    p = decide / float(samples)
    rule = SkipOracle(lambda prompts: (p[np.asarray(prompts)], p * (1 - p)), flat_above=flat_above)
    counts = rule.plan(list(range(p.size)), group * p.size).counts
    signal = sampled_group_signal(group, score, samples, estimator=ESTIMATOR, aggregation=AGGREGATION)
    kept = float(signal[counts > 0].sum() / signal.sum()) if signal.sum() > 0 else float("nan")
    spent = float(counts.sum() / (group * p.size))
    return {"spent": spent, "kept": kept, "skipped": int(np.sum(counts == 0)), "signal_per_rollout": kept / spent}


def by_length(p: np.ndarray, lengths: np.ndarray) -> dict[str, dict[str, float]]:
    """Per list length: prompts, mean success rate, and the shares below 0.05 and above 0.95.

    >>> by_length(np.array([0.0, 1.0, 0.5]), np.array([3, 3, 4]))["3"]
    {'prompts': 2, 'mean': 0.5, 'below_0.05': 0.5, 'above_0.95': 0.5}
    """
    p, lengths = np.asarray(p, dtype=float), np.asarray(lengths)
    out = {}
    for n in sorted(set(lengths.tolist())):
        q = p[lengths == n]
        out[str(n)] = {
            "prompts": int(q.size),
            "mean": float(q.mean()),
            f"below_{EXTREME:g}": float(np.mean(q < EXTREME)),
            f"above_{1 - EXTREME:g}": float(np.mean(q > 1 - EXTREME)),
        }
    return out

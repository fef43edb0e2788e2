"""How well predicted probabilities of binary events match how often the events happen (Brier
score, log-loss, expected calibration error and the reliability diagram's bins) and how well they
rank the events (AUROC)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import rankdata

__all__ = ["auroc", "calibration_scores"]

_LOG_CLIP = 1e-6  # log-loss of a prediction of exactly 0 or 1 that misses is finite, not inf


def auroc(scores: Any, outcome: Any) -> float:
    """The chance that a random event scores above a random non-event (Mann-Whitney U / (pos neg),
    ties counted half): 1 ranks every event first, 0.5 is no better than chance; NaN when ``outcome``
    holds only one class.

    >>> auroc([0.9, 0.2, 0.6, 0.6], [1, 0, 1, 0])
    0.875
    """
    s, y = np.asarray(scores, dtype=float).ravel(), np.asarray(outcome).ravel().astype(bool)
    if s.shape != y.shape:
        raise ValueError(f"scores and outcome must be of one length, got {s.shape} and {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError(
            f"scores must be finite (NaN or inf at positions {np.flatnonzero(~np.isfinite(s))[:5].tolist()})"
        )
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def calibration_scores(prob: Any, outcome: Any, bins: int = 10) -> dict[str, Any]:
    """Scores of predictions ``prob`` of binary ``outcome``s:

    - brier = mean (prob - outcome)^2;
    - log_loss = -mean [outcome log prob + (1 - outcome) log(1 - prob)], prob clipped to [1e-6, 1 - 1e-6];
    - ece = sum_b (n_b / N) |mean prob_b - mean outcome_b| over ``bins`` equal-width bins of prob;
    - auroc: how well prob ranks the outcomes (`auroc`): calibration says the chances are right on
      average, the AUROC how much they tell the events apart (a constant chance at the base rate is
      calibrated and scores 0.5);
    - the diagram: per bin its count, mean prediction and observed frequency (empty bins: count 0, NaN).

    >>> s = calibration_scores([0.1, 0.1, 0.9, 0.9], [0, 0, 1, 0], bins=2)
    >>> round(s["brier"], 4), round(s["ece"], 4), s["count"]
    (0.21, 0.25, [2, 2])
    """
    p, y = np.asarray(prob, dtype=float).ravel(), np.asarray(outcome, dtype=float).ravel()
    if p.shape != y.shape or p.size == 0:
        raise ValueError(f"prob and outcome must be non-empty and of one length, got {p.shape} and {y.shape}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("prob must lie in [0, 1]")
    if np.any((y != 0) & (y != 1)):
        raise ValueError("outcome must be 0 or 1")
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=p, minlength=bins) / count
        freq = np.bincount(which, weights=y, minlength=bins) / count
    used = count > 0
    q = np.clip(p, _LOG_CLIP, 1 - _LOG_CLIP)
    return {
        "n": int(p.size),
        "brier": float(np.mean((p - y) ** 2)),
        "log_loss": float(-np.mean(y * np.log(q) + (1 - y) * np.log1p(-q))),
        "ece": float(np.sum(count[used] * np.abs(mean_p[used] - freq[used])) / p.size),
        "auroc": auroc(p, y),
        "base_rate": float(y.mean()),
        "count": count.tolist(),
        "mean_prediction": mean_p.tolist(),
        "frequency": freq.tolist(),
    }

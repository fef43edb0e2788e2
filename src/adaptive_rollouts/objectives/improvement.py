"""Expected one-step improvement of giving a prompt n rollouts, averaged over the predictor's
Beta belief about p (docs/objectives.md, section 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.validation import AGGREGATIONS, ESTIMATORS, check_choice
from ..types import Prediction
from .aggregation import aggregation_weight
from .beta import beta_from_moments, beta_moment, power_moments

__all__ = ["group_moments", "grpo_moment_table", "improvement_table"]

_EXACT_UP_TO = 128  # GRPO: exact sum over successes up to this n, the S_k ~ sqrt(pq) form above


def _falling(n: np.ndarray, j: int) -> np.ndarray:
    out = np.ones_like(n, dtype=float)
    for i in range(j):
        out = out * np.maximum(n - i, 0.0)
    return out


def _centred_moments(
    estimator: str, n: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`group_moments` of Dr. GRPO / RLOO in closed form (binomial factorial moments)."""
    m11, m22 = beta_moment(mean, var, 1, 1), beta_moment(mean, var, 2, 2)
    n2, n3, n4 = _falling(n, 2), _falling(n, 3), _falling(n, 4)
    live = n >= 2
    safe = np.where(live, n, 2.0)
    # a_dr = k(n-k)/n: E = (n-1) pq; E[k^2 (n-k)^2] = n4 p^2q^2 + (n3 + n2) pq
    scale = 1.0 if estimator == "drgrpo" else safe / (safe - 1.0)
    sig = scale * (safe - 1.0) * m22
    sec = scale**2 * (n4 * m22 + (n3 + n2) * m11) / safe**2
    noi = scale**2 * (safe - 1.0) * m11
    return np.where(live, sig, 0.0), np.where(live, sec, 0.0), np.where(live, noi, 0.0)


def group_moments(
    estimator: str, n: Any, mean: Any, var: Any = 0.0, *, eps: float = 0.0, exact_up_to: int = _EXACT_UP_TO
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior moments of one binary-reward group of n rollouts (p ~ Beta(mean, var)).

    Returns (signal, second, noise), arrays broadcast over (mean, n):
      signal = E[pq a]   (E <grad J_q, S_q> / kappa with |g_q|^2 = kappa p^2 q^2: the logistic
                          link, g = pq grad logit),
      second = E[a^2]    (E |signal part of S_q|^2 / kappa),
      noise  = E[sum A_i^2]  (E |noise part of S_q|^2 / (D s^2)).
    Dr. GRPO / RLOO use binomial factorial moments and Beta moments (closed form). GRPO sums over
    k exactly for n <= exact_up_to; above, E[pq a] uses S_k ~ sqrt(pq) (relative error O(1/(n pq))).
    n = 0 or 1 gives zeros (no group / a singleton has advantage 0).

    >>> [round(float(x), 4) for x in group_moments("drgrpo", 4, 0.5)]  # E[pq a] = (n-1) p^2 q^2
    [0.1875, 0.6562, 0.75]
    """
    check_choice("estimator", estimator, ESTIMATORS)
    n, mean, var = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n, mean, var)))
    if estimator != "grpo":
        return _centred_moments(estimator, n, mean, var)
    out = (np.zeros(n.shape), np.zeros(n.shape), np.zeros(n.shape))
    live = n >= 2
    if not live.any():
        return out
    # every distinct (mean, var) gets one row of the table over n = 0..max n, then gathered
    pairs = np.stack([mean[live], var[live]], axis=1)
    rows, inverse = np.unique(pairs, axis=0, return_inverse=True)
    tables = grpo_moment_table(rows[:, 0], rows[:, 1], int(n[live].max()), eps=eps, exact_up_to=exact_up_to)
    cols = n[live].astype(np.int64)
    for dst, table in zip(out, tables):
        dst[live] = table[inverse.reshape(-1), cols]
    return out


def _advantage_stats(top: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Per (n, k), n, k = 0..top, of a binary GRPO group: a(k) = sum_i A_i (r_i - rbar) and
    sum_i A_i^2 (0 where the group is all equal or n < 2)."""
    nn = np.arange(top + 1, dtype=float)[:, None]
    kk = np.arange(top + 1, dtype=float)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd2 = np.where((kk <= nn) & (nn >= 2), kk * (nn - kk) / (nn * (nn - 1.0)), 0.0)
        sd = np.sqrt(np.maximum(sd2, 0.0))
        adv_sum = np.where(sd > 0, (nn - 1.0) * sd2 / (sd + eps), 0.0)
        adv_sq = np.where(sd > 0, (nn - 1.0) * sd2 / (sd + eps) ** 2, 0.0)
    return adv_sum, adv_sq


def _beta_binomial_rows(alpha: np.ndarray, inv_total: np.ndarray, top: int) -> np.ndarray:
    """[R, top + 1, top + 1]: P(k successes among n) for n, k = 0..top by the Polya-urn recursion;
    inv_total[:, n] = 1 / (alpha + beta + n)."""
    w = np.zeros((alpha.shape[0], top + 1, top + 1))
    w[:, 0, 0] = 1.0
    kk = np.arange(top + 1, dtype=float)[None, :]
    for n in range(1, top + 1):
        prev = w[:, n - 1, :n]
        grow = prev * (alpha + kk[:, :n]) * inv_total[:, n - 1 : n]  # P(next is a success | k of n-1)
        w[:, n, :n] = prev - grow
        w[:, n, 1 : n + 1] += grow
    return w


def grpo_moment_table(
    mean: Any, var: Any, upper: int, *, eps: float = 0.0, exact_up_to: int = _EXACT_UP_TO
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`group_moments` of GRPO for every n = 0..upper at once: three [R, upper + 1] arrays.

    Exact part (n <= exact_up_to, or every n when eps > 0): the Beta-binomial distribution of the
    number of successes for every n by its Polya-urn recursion (a point mass is the binomial),
    O(R upper^2) in `upper` vectorised steps; E[C(n,k) p^(k+1) q^(n-k+1)] = E[pq] BB(k; n,
    alpha + 1, beta + 1) gives the signal weights. Above exact_up_to (eps = 0): S_k ~ sqrt(pq).
    """
    mean, var = np.asarray(mean, dtype=float).reshape(-1), np.asarray(var, dtype=float).reshape(-1)
    r = mean.size
    sig, sec, noi = (np.zeros((r, upper + 1)) for _ in range(3))
    if upper < 2 or r == 0:
        return sig, sec, noi
    al, be = beta_from_moments(mean, var)
    point = ~(np.isfinite(al) & (var > 0))
    # a point mass is a Beta of strength 1e15: its urn rates equal p to ~1e-14
    strength = np.where(point, 1e15, al + be)
    a0 = np.where(point, np.clip(mean, 0.0, 1.0) * 1e15, al)
    m11 = beta_moment(mean, var, 1, 1)
    top = upper if eps > 0.0 else min(upper, exact_up_to)
    adv_sum, adv_sq = _advantage_stats(top, eps)
    # rows 0..r-1: BetaBinomial(alpha, beta); rows r..2r-1: BetaBinomial(alpha + 1, beta + 1)
    alpha = np.concatenate([a0, a0 + 1.0])[:, None]
    inv_total = 1.0 / (np.concatenate([strength, strength + 2.0])[:, None] + np.arange(top, dtype=float)[None, :])
    chunk = max(1, 4_000_000 // max(1, (top + 1) ** 2))  # bound the [rows, n, k] buffer
    for lo in range(0, r, chunk):
        hi = min(r, lo + chunk)
        rows = np.r_[lo:hi, r + lo : r + hi]
        w = _beta_binomial_rows(alpha[rows], inv_total[rows], top)
        half = hi - lo
        sig[lo:hi, : top + 1] = np.einsum("rnk,nk->rn", w[half:], adv_sum) * m11[lo:hi, None]
        sec[lo:hi, : top + 1] = np.einsum("rnk,nk->rn", w[:half], adv_sum * adv_sum)
        noi[lo:hi, : top + 1] = np.einsum("rnk,nk->rn", w[:half], adv_sq)
    if top < upper:  # eps = 0, large n: S_k ~ sqrt(pq)
        big = np.arange(top + 1, upper + 1, dtype=float)
        sig[:, top + 1 :] = (big - 1.0)[None, :] * beta_moment(mean, var, 1.5, 1.5)[:, None]
        sec[:, top + 1 :] = (big - 1.0)[None, :] ** 2 * m11[:, None]
        noi[:, top + 1 :] = (big - 1.0)[None, :] * (1.0 - power_moments(mean, var, big))
    return sig, sec, noi


def _belief(prediction_or_p: Any) -> tuple[np.ndarray, np.ndarray]:
    """(mean, var) of a Prediction-like object, or (p, 0) for plain probabilities, checked."""
    if isinstance(prediction_or_p, Prediction) or (
        hasattr(prediction_or_p, "mean")
        and hasattr(prediction_or_p, "var")
        and not isinstance(prediction_or_p, np.ndarray)
    ):
        mean = np.asarray(prediction_or_p.mean, dtype=float).reshape(-1)
        var = np.asarray(prediction_or_p.var, dtype=float).reshape(-1)
    else:
        mean = np.asarray(prediction_or_p, dtype=float).reshape(-1)
        var = np.zeros_like(mean)
    if mean.size == 0:
        raise ValueError("empty batch: no prompts")
    if np.any(~np.isfinite(mean) | (mean < 0) | (mean > 1)):
        raise ValueError(f"success probabilities must lie in [0, 1], got {mean[~((mean >= 0) & (mean <= 1))][:5]}")
    if np.any(~np.isfinite(var) | (var < 0)):
        raise ValueError("prediction.var must be finite and >= 0")
    if var.shape != mean.shape:
        raise ValueError(f"prediction mean has {mean.size} entries but var {var.size}")
    return mean, var


def improvement_table(
    prediction_or_p: Any,
    upper: int,
    *,
    aggregation: str = "seq-mean",
    estimator: str = "grpo",
    lr_noise: float = 0.01,
    noise_ratio: float = 0.25,
    total_budget: int | None = None,
    eps: float = 0.0,
    constant: float | None = None,
) -> np.ndarray:
    """Expected one-step improvement of giving prompt q n rollouts: GAIN table [Q, upper + 1]
    (higher is better; column 0 = 0: a skipped prompt gains nothing). Maximise with
    ``solve_table(-improvement_table(...), ...)``.

        gain_q(n) = w(n) E[pq a] - lr_noise w(n)^2 (E[a^2] + noise_ratio E[sum A^2])

    with w(n) = C c(n) the relative weight of `aggregation_weight` (1 for seq-mean and token-mean,
    1 / ``constant`` for "constant" with ``constant`` = K / C (default 1), n_bar / n for
    prompt-mean with n_bar = C / Q, C = ``total_budget``, default 8 per prompt), expectations over
    the posterior p ~ Beta(mean, var) and the group's rewards (`group_moments`);
    lr_noise = L eta Q / (2 C) (the step size, dimensionless), noise_ratio = D s^2 / kappa
    (per-sample score noise relative to the prompt's signal). Derivation and assumptions:
    docs/objectives.md, section 4.

    >>> t = improvement_table(np.array([0.5, 0.02]), 4, estimator="drgrpo")
    >>> bool(t[0, 4] > t[1, 4]) and t[:, 0].tolist() == [0.0, 0.0]
    True
    """
    mean, var = _belief(prediction_or_p)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    check_choice("estimator", estimator, ESTIMATORS)
    if upper < 0:
        raise ValueError(f"upper must be >= 0, got upper={upper}")
    if lr_noise < 0 or noise_ratio < 0:
        raise ValueError(f"lr_noise and noise_ratio must be >= 0, got {lr_noise}, {noise_ratio}")
    q = mean.size
    n = np.arange(upper + 1, dtype=float)
    # a zero budget allows only the empty allocation: any positive C gives the same (unused) table
    budget = 8.0 * q if total_budget is None else max(float(total_budget), 1.0)
    # the planner's Q' is the batch size Q: which prompts will be skipped is what it decides
    c = aggregation_weight(
        aggregation, n, num_prompts=q, budget=budget, constant=None if constant is None else constant * budget
    )
    w = c / aggregation_weight("seq-mean", 1.0, num_prompts=q, budget=budget)  # C c(n), exactly 1 for seq-mean
    if estimator == "grpo":
        sig, sec, noi = grpo_moment_table(mean, var, upper, eps=eps)
    else:
        sig, sec, noi = group_moments(estimator, n[None, :], mean[:, None], var[:, None], eps=eps)
    gain = w * sig - lr_noise * w**2 * (sec + noise_ratio * noi)
    gain[:, 0] = 0.0
    return gain

"""GRPO: the centred reward divided by the group's standard deviation.

The std normalisation cancels the reward variance, so GRPO's allocation cost depends on each
prompt's p through the chance that its group is not all equal (an all-equal group carries no
gradient): c_q(n) = f(n) P(mixed) + c0 (1 - P(mixed)), f(n) = (n - 1) / n^2 (`objectives.pricing`).
Its moments for the improvement objective are exact sums over the number of successes
(`grpo_moment_table`). Derivations: docs/objectives.md, sections 1, 2 and 4.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.stats import binom

from .beta import beta_from_moments, beta_moment, power_moments
from .centred import DrGRPO
from .estimator import Estimator
from .mixing import mixed_probability

__all__ = ["GRPO", "grpo_moment_table"]

EXACT_UP_TO = 128  # exact sums over successes up to this n; above, the S_k ~ sqrt(pq) form


def _variance_eps(p: np.ndarray, n: np.ndarray, score_var: float, eps: float, low: float, high: float) -> np.ndarray:
    """The exact binomial sum of `GRPO.variance` for eps > 0."""
    out = np.zeros(p.shape)
    for n_val in np.unique(n):
        if n_val < 2:
            continue
        sel = n == n_val
        k = np.arange(int(n_val) + 1, dtype=float)
        sd2 = (high - low) ** 2 * k * (n_val - k) / (n_val * (n_val - 1.0))
        term = (n_val - 1.0) * sd2 / (np.sqrt(sd2) + eps) ** 2
        pmf = binom.pmf(k[None, :], n_val, p[sel][:, None])
        out[sel] = score_var / n_val**2 * (pmf * term[None, :]).sum(axis=1)
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
    mean: Any, var: Any, upper: int, *, eps: float = 0.0, exact_up_to: int = EXACT_UP_TO
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


class GRPO(Estimator):
    """GRPO (Shao et al. 2024, DeepSeekMath): A_i = (r_i - mean) / (s + eps), s the unbiased std.

    Binary rewards, per-prompt-mean loss, eps = 0: variance s^2 (n-1)/n^2 (1 - p^n - (1-p)^n); the
    variance objective's weights are ones (importances). TRL's default (``scale_rewards="group"``,
    eps 1e-4); verl ``grpo`` (eps 1e-6).

    >>> est = GRPO()
    >>> est.advantages(np.array([1.0, 0.0]), np.array([0, 0]), eps=0.0).round(4).tolist()
    [0.7071, -0.7071]
    >>> round(float(est.variance(2, success_prob=0.5)), 6)   # (1/4) * (1 - 1/4 - 1/4)
    0.125
    """

    name = "grpo"
    convex_from: ClassVar[int | None] = None
    cost_depends_on_p = True

    def from_centred(self, centred: Any, count: Any, std: Any, eps: float, scale: Any) -> Any:
        return centred / (std + eps / scale)

    def unit_variance(self, n: Any) -> np.ndarray:
        raise ValueError("GRPO's variance depends on p, not only on n: use variance(n, success_prob=...)")

    # at a fixed chance of signal a GRPO group's cost in n has Dr. GRPO's shape (the std
    # normalisation moves the weight, not the shape): one formula, Dr. GRPO's
    unit_cost = DrGRPO.unit_cost
    unit_marginal = DrGRPO.unit_marginal

    def _signal_cost(self, n: np.ndarray, c0: float, success_prob: Any, mixed: Any) -> np.ndarray:
        if mixed is None:
            if success_prob is None:
                raise ValueError(f"estimator {self.name!r} needs success_prob (its chance of a group with signal)")
            mixed = mixed_probability(success_prob, n)
        m = np.asarray(mixed, dtype=float)
        f = (np.maximum(n, 1.0) - 1.0) / np.maximum(n, 1.0) ** 2
        return f * m + c0 * (1.0 - m)

    def weights(self, reward_var: Any) -> np.ndarray:
        """Ones: the std normalisation cancels the reward variance, which the cost's P(mixed) holds."""
        return np.ones_like(np.asarray(reward_var, dtype=float))

    def variance(
        self,
        n: Any,
        *,
        success_prob: Any = None,
        reward_var: Any = None,
        score_var: float = 1.0,
        eps: float = 0.0,
        low: float = 0.0,
        high: float = 1.0,
    ) -> np.ndarray:
        """eps = 0: s^2 (n-1)/n^2 (1 - p^n - (1-p)^n) (exact; n = 1 gives 0). eps > 0: s^2/n^2
        sum_k Binom(k; n, p) (n-1) sd_k^2/(sd_k + eps)^2, sd_k^2 = (high-low)^2 k (n-k) / (n (n-1)),
        summed exactly over k (O(n) per entry). ``reward_var`` is not used (the std cancels it)."""
        if success_prob is None:
            raise ValueError(f"objective={self.name!r} needs success_prob")
        p = np.asarray(success_prob, dtype=float)
        n = np.asarray(n, dtype=float)
        if np.any(n < 1):
            raise ValueError(f"grpo_variance needs n >= 1, got n={np.unique(n[n < 1]).tolist()}")
        if np.any((p < 0) | (p > 1) | np.isnan(p)):
            raise ValueError("grpo_variance needs success probabilities p in [0, 1]")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got eps={eps}")
        p, n = np.broadcast_arrays(p, n)
        if eps == 0.0:
            return score_var * (n - 1.0) / n**2 * mixed_probability(p, n)
        return _variance_eps(p, n, score_var, eps, low, high)

    def graded_variance(self, n: Any, level_probs: Any, score_var: float = 1.0) -> np.ndarray:
        """Graded rewards on finitely many levels, eps = 0: s^2 (n-1)/n^2 (1 - sum_v pi_v^n), where
        level_probs[..., v] = pi_v is the chance a rollout gets reward level v (rewards i.i.d.,
        independent of the score vectors). Continuous rewards: the bracket is 1.

        >>> round(float(GRPO().graded_variance(2, [0.5, 0.5])), 6)
        0.125
        """
        pi = np.asarray(level_probs, dtype=float)
        if pi.ndim == 0 or np.any(pi < 0) or not np.allclose(pi.sum(axis=-1), 1.0):
            raise ValueError("level_probs must be probabilities over reward levels (last axis sums to 1)")
        n = np.asarray(n, dtype=float)
        all_equal = (pi[..., None, :] ** n[..., :, None]).sum(axis=-1) if n.ndim else (pi**n).sum(axis=-1)
        return score_var * (n - 1.0) / n**2 * np.maximum(1.0 - all_equal, 0.0)

    def table_unit_cost(
        self, n: np.ndarray, p: np.ndarray | None, mixed: Any, skip_cost: float | None, eps: float
    ) -> np.ndarray:
        if p is None and mixed is None:
            raise ValueError(f"objective={self.name!r} needs success_prob")
        if mixed is None:
            assert p is not None
            mixed = mixed_probability(p[:, None], n[None, :])
        unit = self.allocation_cost(n[None, :], skip_cost=skip_cost, mixed=mixed)
        if eps > 0 and p is not None:  # informative part from the exact binomial sum
            c0 = self.no_signal_cost(skip_cost)
            informative = self.variance(np.maximum(n, 1)[None, :], success_prob=p[:, None], eps=eps)
            unit = np.where(n[None, :] >= 1, informative + c0 * (1.0 - np.asarray(mixed)), unit)
        return unit

    def group_moments(
        self, n: np.ndarray, mean: np.ndarray, var: np.ndarray, *, eps: float = 0.0, exact_up_to: int = EXACT_UP_TO
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact sums over k for n <= exact_up_to; above, E[pq a] uses S_k ~ sqrt(pq) (relative error
        O(1/(n pq))). Every distinct (mean, var) gets one row of `grpo_moment_table`, then gathered."""
        out = (np.zeros(n.shape), np.zeros(n.shape), np.zeros(n.shape))
        live = n >= 2
        if not live.any():
            return out
        pairs = np.stack([mean[live], var[live]], axis=1)
        rows, inverse = np.unique(pairs, axis=0, return_inverse=True)
        tables = grpo_moment_table(rows[:, 0], rows[:, 1], int(n[live].max()), eps=eps, exact_up_to=exact_up_to)
        cols = n[live].astype(np.int64)
        for dst, table in zip(out, tables):
            dst[live] = table[inverse.reshape(-1), cols]
        return out

    def moment_table(
        self, mean: np.ndarray, var: np.ndarray, upper: int, *, eps: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return grpo_moment_table(mean, var, upper, eps=eps)

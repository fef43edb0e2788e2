"""Per-prompt objectives: how the number of rollouts n shapes the policy-gradient estimate.

Part 1 - gradient variance under a per-prompt-mean loss (VIP paper, METHODS section 2).

Model. A prompt's n rollouts have rewards r_1..r_n (i.i.d., mean mu, variance sigma^2) and
projected score vectors z_i = <grad log pi(y_i), u> that are independent of the rewards, with
E z_i = 0 and Var z_i = s^2 ("score_var"). The prompt's gradient estimate is the per-prompt mean

    g_hat = (1/n) sum_i A_i z_i,   A_i = advantage of rollout i (a function of r_1..r_n only).

Conditioning on the rewards, E[g_hat | r] = 0 and Var[g_hat | r] = s^2/n^2 sum_i A_i^2, so

    Var g_hat = s^2 / n^2 * E[sum_i A_i^2].                                   (1)

* Dr. GRPO, A_i = r_i - mean(r):  E sum (r_i - rbar)^2 = (n-1) sigma^2, so
  Var = s^2 sigma^2 (n-1)/n^2.
* RLOO, A_i = r_i - mean of the others = n/(n-1) (r_i - rbar): Var = s^2 sigma^2 / (n-1).
* GRPO, A_i = (r_i - rbar) / (std + eps) with the unbiased std (TRL, verl): sum A_i^2 =
  (n-1) std^2/(std + eps)^2, which is n-1 whenever the rewards are not all equal and 0 when they
  are (advantages all 0). With eps = 0:  Var = s^2 (n-1)/n^2 * P(not all equal), and for binary
  rewards P(not all equal) = 1 - p^n - (1-p)^n. With eps > 0 the exact value is the binomial sum
  over k successes of (n-1) sd_k^2/(sd_k + eps)^2, sd_k^2 = (hi-lo)^2 k(n-k)/(n(n-1)).
  The normalisation removes sigma^2: GRPO's variance does not grow with the reward variance.

Reward scale. This library's rewards are {0, 1}: sigma^2 = p(1-p). METHODS section 2 writes
rewards in {-1, +1}: sigma^2 = 4 p(1-p), hence its factor 4 (``bernoulli_variance(p, -1, 1)``).
GRPO is scale-free except through eps, which is in reward units (``low``, ``high``).

Graded rewards (fractions of tests passed, in [0, 1]): formulas (1) hold with sigma^2 the reward
variance, assuming rewards i.i.d. within the group and independent of the score vectors (same
assumption as the binary case). For GRPO the binomial probability of "all equal" becomes
sum_v pi_v^n for a reward distribution pi over finitely many levels (eps = 0).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "bernoulli_variance",
    "drgrpo_variance",
    "rloo_variance",
    "grpo_variance",
    "grpo_variance_graded",
    "variance",
    "variance_table",
    "VARIANCE_OBJECTIVES",
]

VARIANCE_OBJECTIVES = ("rloo", "drgrpo", "grpo")


def _as_float(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def bernoulli_variance(p, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Variance of a reward that is `high` with probability p and `low` otherwise:
    (high - low)^2 p (1 - p). {0, 1}: p(1-p); {-1, +1}: 4 p(1-p).

    >>> float(bernoulli_variance(0.5, -1.0, 1.0))
    1.0
    """
    p = _as_float(p)
    return (high - low) ** 2 * p * (1.0 - p)


def drgrpo_variance(n, reward_var, score_var: float = 1.0) -> np.ndarray:
    """Dr. GRPO (A_i = r_i - mean r), per-prompt mean: s^2 sigma^2 (n-1)/n^2 (n >= 1; 0 at n = 1).

    >>> round(float(drgrpo_variance(6, bernoulli_variance(0.3, -1, 1))), 6)  # 4 p(1-p) (n-1)/n^2
    0.116667
    """
    n = _as_float(n)
    if np.any(n < 1):
        raise ValueError(f"drgrpo_variance needs n >= 1, got n={np.unique(n[n < 1]).tolist()}")
    return score_var * _as_float(reward_var) * (n - 1.0) / n**2


def rloo_variance(n, reward_var, score_var: float = 1.0) -> np.ndarray:
    """RLOO (A_i = r_i - mean of the other n-1), per-prompt mean: s^2 sigma^2 / (n-1) (n >= 2).

    >>> round(float(rloo_variance(6, bernoulli_variance(0.3))), 6)
    0.042
    """
    n = _as_float(n)
    if np.any(n < 2):
        raise ValueError(f"rloo_variance needs n >= 2 (a leave-one-out baseline), got n={np.unique(n[n < 2]).tolist()}")
    return score_var * _as_float(reward_var) / (n - 1.0)


def _binom_pmf(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    from scipy.stats import binom

    return binom.pmf(k, n, p)


def grpo_variance(p, n, score_var: float = 1.0, eps: float = 0.0, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """GRPO (A_i = (r_i - mean r) / (unbiased std + eps)), binary rewards, per-prompt mean.

    eps = 0:  s^2 (n-1)/n^2 (1 - p^n - (1-p)^n)   (exact; n = 1 gives 0).
    eps > 0:  s^2/n^2 sum_k Binom(k; n, p) (n-1) sd_k^2/(sd_k + eps)^2, sd_k^2 =
    (high-low)^2 k (n-k) / (n (n-1)); computed exactly by summing over k (cost O(n) per entry).

    p and n broadcast. TRL uses eps = 1e-4, verl 1e-6 (both negligible unless sd_k ~ eps).

    >>> round(float(grpo_variance(0.5, 2)), 6)   # (1/4) * (1 - 1/4 - 1/4)
    0.125
    """
    p = _as_float(p)
    n = _as_float(n)
    if np.any(n < 1):
        raise ValueError(f"grpo_variance needs n >= 1, got n={np.unique(n[n < 1]).tolist()}")
    if np.any((p < 0) | (p > 1) | np.isnan(p)):
        raise ValueError("grpo_variance needs success probabilities p in [0, 1]")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got eps={eps}")
    p, n = np.broadcast_arrays(p, n)
    if eps == 0.0:
        with np.errstate(divide="ignore"):  # p^n as exp(n log p): much faster than pow
            mixed = 1.0 - np.exp(n * np.log(p)) - np.exp(n * np.log1p(-p))
        return score_var * (n - 1.0) / n**2 * np.maximum(mixed, 0.0)
    out = np.zeros(p.shape)
    for n_val in np.unique(n):
        sel = n == n_val
        if n_val < 2:
            continue
        k = np.arange(int(n_val) + 1, dtype=float)
        sd2 = (high - low) ** 2 * k * (n_val - k) / (n_val * (n_val - 1.0))
        sd = np.sqrt(sd2)
        term = (n_val - 1.0) * sd2 / (sd + eps) ** 2
        pmf = _binom_pmf(k[None, :], n_val, p[sel][:, None])
        out[sel] = score_var / n_val**2 * (pmf * term[None, :]).sum(axis=1)
    return out


def grpo_variance_graded(n, level_probs, score_var: float = 1.0) -> np.ndarray:
    """GRPO with graded rewards on finitely many levels, eps = 0:
    s^2 (n-1)/n^2 (1 - sum_v pi_v^n), where level_probs[..., v] = pi_v is the chance a rollout
    gets reward level v (rewards i.i.d., independent of the score vectors). Continuous rewards:
    the bracket is 1.

    >>> round(float(grpo_variance_graded(2, [0.5, 0.5])), 6)
    0.125
    """
    pi = _as_float(level_probs)
    if pi.ndim == 0 or np.any(pi < 0) or not np.allclose(pi.sum(axis=-1), 1.0):
        raise ValueError("level_probs must be probabilities over reward levels (last axis sums to 1)")
    n = _as_float(n)
    all_equal = (pi[..., None, :] ** n[..., :, None]).sum(axis=-1) if n.ndim else (pi**n).sum(axis=-1)
    return score_var * (n - 1.0) / n**2 * np.maximum(1.0 - all_equal, 0.0)


def variance(
    objective: str, n, *, success_prob=None, reward_var=None, score_var: float = 1.0, eps: float = 0.0
) -> np.ndarray:
    """Per-prompt gradient variance for "rloo" | "drgrpo" | "grpo" (binary rewards in {0, 1}
    unless ``reward_var`` is given for RLOO / Dr. GRPO)."""
    if objective in ("rloo", "drgrpo"):
        if reward_var is None:
            if success_prob is None:
                raise ValueError(f"objective={objective!r} needs reward_var or success_prob")
            reward_var = bernoulli_variance(success_prob)
        fn = rloo_variance if objective == "rloo" else drgrpo_variance
        return fn(n, reward_var, score_var)
    if objective == "grpo":
        if success_prob is None:
            raise ValueError("objective='grpo' needs success_prob")
        return grpo_variance(success_prob, n, score_var, eps)
    raise ValueError(f"objective must be one of {VARIANCE_OBJECTIVES}, got {objective!r}")


def variance_table(
    objective: str,
    success_prob=None,
    weights=None,
    *,
    upper: int,
    lower: int = 2,
    score_var: float = 1.0,
    eps: float = 0.0,
    allow_skip: bool = False,
    skip_cost: float | None = None,
) -> np.ndarray:
    """Cost table [Q, upper + 1] for `solvers.solve_table`: costs[q, n] = w_q f_q(n).

    * "rloo" / "drgrpo": f(n) = s^2 / (n-1) or s^2 (n-1)/n^2; w_q defaults to the reward variance
      p_q (1 - p_q) from ``success_prob`` (pass ``weights`` for graded rewards or the posterior
      expectation E[p(1-p)]).
    * "grpo": f_q(n) = `grpo_variance`(p_q, n); needs ``success_prob``; ``weights`` default to 1
      and act as importance multipliers (the std normalisation cancels the reward variance).

    Entries with n < lower (or forbidden, e.g. RLOO at n = 1) are +inf; column 0 is
    ``w_q * skip_cost`` when ``allow_skip`` (required then: see `solvers` on why the variance
    model cannot price skipping).

    >>> variance_table("rloo", success_prob=[0.5], upper=4).round(4).tolist()
    [[inf, inf, 0.25, 0.125, 0.0833]]
    """
    if lower < 0 or upper < lower:
        raise ValueError(f"need 0 <= lower <= upper, got lower={lower}, upper={upper}")
    p = None if success_prob is None else _as_float(success_prob).reshape(-1)
    if p is not None and np.any(~np.isfinite(p) | (p < 0) | (p > 1)):
        raise ValueError("success_prob must lie in [0, 1]")
    if weights is None:
        if p is None:
            raise ValueError("variance_table needs success_prob or weights")
        w = bernoulli_variance(p) if objective in ("rloo", "drgrpo") else np.ones_like(p)
    else:
        w = _as_float(weights).reshape(-1)
        if np.any(~np.isfinite(w) | (w < 0)):
            raise ValueError("weights must be finite and >= 0")
        if p is not None and p.shape != w.shape:
            raise ValueError(f"success_prob has {p.size} entries but weights {w.size}")
    if w.size == 0:
        raise ValueError("empty batch: no prompts")
    n = np.arange(upper + 1)
    table = np.full((w.size, upper + 1), np.inf)
    first = max(lower, {"rloo": 2, "drgrpo": 1, "grpo": 1}.get(objective, 1))
    cols = n[first:]
    if objective in ("rloo", "drgrpo"):
        f = variance(objective, cols, reward_var=1.0, score_var=score_var)
        table[:, first:] = w[:, None] * f[None, :]
    elif objective == "grpo":
        if p is None:
            raise ValueError("objective='grpo' needs success_prob")
        table[:, first:] = w[:, None] * grpo_variance(p[:, None], cols[None, :], score_var, eps)
    else:
        raise ValueError(f"objective must be one of {VARIANCE_OBJECTIVES}, got {objective!r}")
    if allow_skip and lower > 0:
        if skip_cost is None:
            raise ValueError("allow_skip=True needs skip_cost for a variance objective")
        table[:, 0] = w * float(skip_cost)
    return table


# =============================================================================================
# Part 2 - loss aggregation: how n_q enters the expected batch gradient (issue 9, METHODS s. 6)
# =============================================================================================
#
# Model (extends part 1). Prompt q's true gradient is g_q = grad E[r]; a rollout's score vector
# (the vector multiplying its advantage in the loss) is z = mu(r) + xi with E[z] = 0, signal
# E[z | r] = mu(r) and noise xi independent of r with E|xi|^2 = D s^2. For binary rewards
# mu(1) = g/p, mu(0) = -g/(1-p) is forced by E z = 0, E r z = g; for graded rewards we assume the
# linear form mu(r) = g (r - E r) / sigma^2 (exact for binary). Then, for a group of n rollouts,
#
#   S_q = sum_i A_i z_i,  E[S_q | r] = g a(r) / sigma^2,  a(r) = sum_i A_i (r_i - rbar)
#
# (sum_i A_i = 0 for all three estimators), so
#
#   E S_q      = g E[a] / sigma^2,
#   E |S_q|^2  = |g|^2 E[a^2] / sigma^4 + D s^2 E[sum_i A_i^2].
#
#   estimator  a(r)                        sum_i A_i^2          E[a] (binary, sigma^2 = pq)
#   Dr. GRPO   (n-1) S^2                   (n-1) S^2            (n-1) pq
#   RLOO       n S^2                       n^2/(n-1) S^2        n pq
#   GRPO       (n-1) S^2/(S + eps)         (n-1) S^2/(S+eps)^2  sum_k Binom(k) (n-1) S_k^2/(S_k+eps)
#
# with S^2 the unbiased sample variance of the group's rewards (binary, k successes:
# S_k^2 = k(n-k)/(n(n-1))). So the expected contribution of prompt q is m(n) g_q with
# m = E[a]/sigma^2: n - 1 (Dr. GRPO), n (RLOO, unbiased), about (n-1)/sigma (GRPO).
#
# Aggregation multiplies S_q by a weight c(n_q):
#   prompt-mean  c = 1/(Q n)   (VIP's theory; mean over a prompt's rollouts, then over prompts)
#   seq-mean     c = 1/C       (TRL "grpo": mean over all C sequences of the batch)
#   token-mean   c = 1/(C lbar) (TRL "dapo"/"bnpo", verl "token-mean": sum over all tokens / T;
#                with lengths independent of rewards T concentrates at C lbar and each sequence's
#                token-sum score has signal lbar mu(r) and noise lbar s^2: seq-mean up to the scale
#                of (|g|^2, s^2), plus a factor (1 + cv^2) of the length on the signal's square)
#   constant     c = 1/K       (Dr. GRPO, verl "seq-mean-token-sum-norm": a fixed normaliser)
# With C = sum n_q fixed, the last three differ only by a constant factor (the learning-rate
# confound): under them E G = sum_q (m(n_q)/C) g_q grows with n_q, so allocation changes the
# *expected* update; under prompt-mean E G = (1/Q) sum_q (m(n_q)/n_q) g_q, which for RLOO does not
# depend on n_q at all (VIP's premise). Var: Var G = sum_q c(n_q)^2 Var S_q for independent groups.

AGGREGATIONS = ("prompt-mean", "seq-mean", "token-mean", "constant")
__all__ += ["AGGREGATIONS", "aggregation_weight", "group_moments", "batch_gradient_moments", "improvement_table"]


def aggregation_weight(
    aggregation: str, n, *, num_prompts: int, budget: int, constant: float | None = None, mean_length: float = 1.0
) -> np.ndarray:
    """c(n): the factor multiplying a group's S_q = sum_i A_i z_i in the batch gradient."""
    n = _as_float(n)
    if aggregation == "prompt-mean":
        with np.errstate(divide="ignore"):
            return np.where(n > 0, 1.0 / (num_prompts * np.maximum(n, 1.0)), 0.0)
    if aggregation == "seq-mean":
        return np.full(n.shape, 1.0 / budget)
    if aggregation == "token-mean":
        return np.full(n.shape, 1.0 / (budget * mean_length))
    if aggregation == "constant":
        return np.full(n.shape, 1.0 / (budget if constant is None else constant))
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")


def _beta_params(mean: np.ndarray, var: np.ndarray):
    """Beta(alpha, beta) with the given mean and variance (var clipped below mean(1-mean));
    alpha = inf marks a point mass (var = 0)."""
    m = np.clip(mean, 1e-12, 1 - 1e-12)
    v = np.clip(var, 0.0, m * (1 - m) * (1 - 1e-9))
    with np.errstate(divide="ignore", invalid="ignore"):
        total = m * (1 - m) / v - 1.0
    return m * total, (1 - m) * total


def _moment(mean, var, a: float, b: float) -> np.ndarray:
    """E[p^a (1-p)^b] under the Beta posterior (plug-in when var = 0)."""
    from scipy.special import betaln

    mean = _as_float(mean)
    var = _as_float(var)
    al, be = _beta_params(mean, var)
    with np.errstate(divide="ignore", invalid="ignore"):
        plug = np.where(a > 0, mean**a, 1.0) * np.where(b > 0, (1 - mean) ** b, 1.0)
        if float(a).is_integer() and float(b).is_integer() and a + b <= 16:
            # rising factorials: exact and stable even when alpha + beta is huge (var -> 0)
            post = np.ones(np.broadcast(al, be).shape)
            for i in range(int(a)):
                post = post * (al + i) / (al + be + i)
            for j in range(int(b)):
                post = post * (be + j) / (al + be + int(a) + j)
        else:
            post = np.exp(betaln(al + a, be + b) - betaln(al, be))
            post = np.where(al + be > 1e8, plug, post)  # betaln cancels badly there; the mass is a point
    return np.where(np.isfinite(al) & (var > 0), post, plug)


def _falling(n: np.ndarray, j: int) -> np.ndarray:
    out = np.ones_like(n, dtype=float)
    for i in range(j):
        out = out * np.maximum(n - i, 0.0)
    return out


def group_moments(estimator: str, n, mean, var=0.0, *, eps: float = 0.0, exact_up_to: int = 128):
    """Posterior moments of one binary-reward group of n rollouts (p ~ Beta(mean, var)).

    Returns (signal, second, noise), arrays broadcast over (mean, n):
      signal = E[pq a]   (E <grad J_q, S_q> / kappa with |g_q|^2 = kappa p^2 q^2: the logistic
                          link, g = pq grad logit),
      second = E[a^2]    (E |signal part of S_q|^2 / kappa),
      noise  = E[sum A_i^2]  (E |noise part of S_q|^2 / (D s^2)).
    Dr. GRPO / RLOO use binomial factorial moments and Beta moments (closed form). GRPO sums over
    k exactly for n <= exact_up_to; above, E[pq a] uses S_k ~ sqrt(pq) (relative error O(1/(n pq))).
    n = 0 or 1 gives zeros (no group / a singleton has advantage 0).
    """
    n = _as_float(n)
    mean, var = _as_float(mean), _as_float(var)
    n, mean, var = np.broadcast_arrays(n, mean, var)
    m11, m22 = _moment(mean, var, 1, 1), _moment(mean, var, 2, 2)
    n2, n3, n4 = _falling(n, 2), _falling(n, 3), _falling(n, 4)
    live = n >= 2
    safe = np.where(live, n, 2.0)
    if estimator in ("drgrpo", "rloo"):
        # a_dr = k(n-k)/n: E = (n-1) pq; E[k^2 (n-k)^2] = n4 p^2q^2 + (n3 + n2) pq
        scale = 1.0 if estimator == "drgrpo" else safe / (safe - 1.0)
        sig = scale * (safe - 1.0) * m22
        sec = scale**2 * (n4 * m22 + (n3 + n2) * m11) / safe**2
        noise_scale = 1.0 if estimator == "drgrpo" else (safe / (safe - 1.0)) ** 2
        noi = noise_scale * (safe - 1.0) * m11
        return tuple(np.where(live, x, 0.0) for x in (sig, sec, noi))
    if estimator != "grpo":
        raise ValueError(f"estimator must be 'rloo', 'drgrpo' or 'grpo', got {estimator!r}")
    out = tuple(np.zeros(n.shape) for _ in range(3))
    if not live.any():
        return out
    # every distinct (mean, var) gets one row of the table over n = 0..max n, then gathered
    pairs = np.stack([mean[live], var[live]], axis=1)
    rows, inverse = np.unique(pairs, axis=0, return_inverse=True)
    tables = _grpo_moment_table(rows[:, 0], rows[:, 1], int(n[live].max()), eps=eps, exact_up_to=exact_up_to)
    cols = n[live].astype(np.int64)
    for dst, table in zip(out, tables):
        dst[live] = table[inverse.reshape(-1), cols]
    return out


def _grpo_moment_table(mean: np.ndarray, var: np.ndarray, upper: int, *, eps: float = 0.0, exact_up_to: int = 128):
    """`group_moments` of GRPO for every n = 0..upper at once: three [R, upper + 1] arrays.

    Exact part (n <= exact_up_to, or every n when eps > 0): the Beta-binomial distribution of the
    number of successes k is built by its Polya-urn recursion over n,

        w_{n+1}(k) = w_n(k) (beta + n - k) / (alpha + beta + n) + w_n(k-1) (alpha + k - 1) / (alpha + beta + n)

    (for a point mass, var = 0, the rates are q and p: the binomial), so the whole table costs
    O(R upper^2) in `upper` vectorised steps instead of one log-gamma evaluation per (prompt, n, k).
    E[C(n,k) p^(k+1) q^(n-k+1)] = E[pq] BetaBinomial(k; n, alpha+1, beta+1) gives the signal weights.
    Above exact_up_to (eps = 0): S_k ~ sqrt(pq), as documented in `group_moments`.
    """
    mean, var = _as_float(mean).reshape(-1), _as_float(var).reshape(-1)
    r = mean.size
    sig, sec, noi = (np.zeros((r, upper + 1)) for _ in range(3))
    if upper < 2 or r == 0:
        return sig, sec, noi
    al, be = _beta_params(mean, var)
    point = ~(np.isfinite(al) & (var > 0))
    # a point mass is a Beta of strength 1e15: its urn rates equal p to ~1e-14
    strength = np.where(point, 1e15, al + be)
    a0 = np.where(point, np.clip(mean, 0.0, 1.0) * 1e15, al)
    m11 = _moment(mean, var, 1, 1)
    exact_top = upper if eps > 0.0 else min(upper, exact_up_to)
    # per-(n, k) advantage statistics, shared by every prompt
    nn = np.arange(exact_top + 1, dtype=float)[:, None]
    kk = np.arange(exact_top + 1, dtype=float)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd2 = np.where((kk <= nn) & (nn >= 2), kk * (nn - kk) / (nn * (nn - 1.0)), 0.0)
        sd = np.sqrt(np.maximum(sd2, 0.0))
        adv_sum = np.where(sd > 0, (nn - 1.0) * sd2 / (sd + eps), 0.0)  # a(k) = sum_i A_i (r_i - rbar)
        adv_sq = np.where(sd > 0, (nn - 1.0) * sd2 / (sd + eps) ** 2, 0.0)  # sum_i A_i^2
    # rows 0..r-1: BetaBinomial(alpha, beta); rows r..2r-1: BetaBinomial(alpha + 1, beta + 1)
    alpha = np.concatenate([a0, a0 + 1.0])[:, None]
    inv_total = 1.0 / (np.concatenate([strength, strength + 2.0])[:, None] + np.arange(exact_top, dtype=float)[None, :])
    chunk = max(1, 4_000_000 // max(1, (exact_top + 1) ** 2))  # bound the [rows, n, k] buffer
    for lo in range(0, r, chunk):
        hi = min(r, lo + chunk)
        rows = np.r_[lo:hi, r + lo : r + hi]
        w = np.zeros((rows.size, exact_top + 1, exact_top + 1))
        w[:, 0, 0] = 1.0
        al_c, inv_c = alpha[rows], inv_total[rows]
        for n in range(1, exact_top + 1):
            prev = w[:, n - 1, :n]
            rate = (al_c + kk[:, :n]) * inv_c[:, n - 1 : n]  # P(next is a success | k of n-1)
            grow_ = prev * rate
            w[:, n, :n] = prev - grow_
            w[:, n, 1 : n + 1] += grow_
        half = hi - lo
        sig[lo:hi, : exact_top + 1] = np.einsum("rnk,nk->rn", w[half:], adv_sum) * m11[lo:hi, None]
        sec[lo:hi, : exact_top + 1] = np.einsum("rnk,nk->rn", w[:half], adv_sum * adv_sum)
        noi[lo:hi, : exact_top + 1] = np.einsum("rnk,nk->rn", w[:half], adv_sq)
    if exact_top < upper:  # eps = 0, large n: S_k ~ sqrt(pq)
        big = np.arange(exact_top + 1, upper + 1, dtype=float)
        sig[:, exact_top + 1 :] = (big - 1.0)[None, :] * _moment(mean, var, 1.5, 1.5)[:, None]
        sec[:, exact_top + 1 :] = (big - 1.0)[None, :] ** 2 * m11[:, None]
        all_equal = _power_moments(mean, var, big)
        noi[:, exact_top + 1 :] = (big - 1.0)[None, :] * (1.0 - all_equal)
    return sig, sec, noi


def _power_moments(mean: np.ndarray, var: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """E[p^n] + E[q^n] for each prompt (rows) and n in `powers` (columns), Beta or point mass."""
    from scipy.special import betaln

    al, be = _beta_params(mean, var)
    point = ~(np.isfinite(al) & (var > 0))
    m = np.clip(mean, 0.0, 1.0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        plug = m ** powers[None, :] + (1.0 - m) ** powers[None, :]
        a, b = np.where(point, 1.0, al)[:, None], np.where(point, 1.0, be)[:, None]
        base = betaln(a, b)
        post = np.exp(betaln(a + powers, b) - base) + np.exp(betaln(a, b + powers) - base)
    return np.where(point[:, None] | ((al + be) > 1e8)[:, None], plug, post)  # betaln cancels there


def _binary_group_terms(estimator: str, n: int, eps: float = 0.0):
    """Per number of successes k = 0..n: the success / failure advantages A_s(k), A_f(k)."""
    k = np.arange(n + 1, dtype=float)
    if n < 2:
        return k, np.zeros(n + 1), np.zeros(n + 1)
    mean = k / n
    a_s, a_f = 1.0 - mean, -mean
    if estimator == "rloo":
        a_s, a_f = a_s * n / (n - 1.0), a_f * n / (n - 1.0)
    elif estimator == "grpo":
        sd = np.sqrt(k * (n - k) / (n * (n - 1.0)))
        with np.errstate(invalid="ignore", divide="ignore"):
            a_s = np.where(sd > 0, a_s / (sd + eps), 0.0)
            a_f = np.where(sd > 0, a_f / (sd + eps), 0.0)
    elif estimator != "drgrpo":
        raise ValueError(f"estimator must be 'rloo', 'drgrpo' or 'grpo', got {estimator!r}")
    return k, a_s, a_f


def batch_gradient_moments(
    counts,
    success_prob,
    *,
    estimator: str,
    aggregation: str,
    eps: float = 0.0,
    constant: float | None = None,
    mean_length: float = 1.0,
    length_cv: float = 0.0,
):
    """How the counts enter the batch gradient G = sum_q c(n_q) S_q (binary rewards, known p).

    Returns per-prompt (mean_coef, signal_sq_coef, noise_coef) with
        E G      = sum_q mean_coef_q g_q,
        E |G|^2  = sum_q signal_sq_coef_q |g_q|^2 + D s^2 sum_q noise_coef_q,
    for orthogonal prompt gradients g_q (exact sums over the number of successes).
    mean_coef = c(n) E[a]/pq,  signal_sq_coef = c(n)^2 E[(sum_i A_i (r_i - p))^2] / (pq)^2,
    noise_coef = c(n)^2 E[sum_i A_i^2].
    token-mean / constant with random lengths l = lbar (1 + delta), delta independent of rewards
    with sd ``length_cv`` (a sequence's score is the sum of its per-token scores, each with
    signal mu(r)/lbar and noise variance s^2/lbar, so it matches z on average): the signal's square gains cv^2 E[sum_i A_i^2 (r_i - p)^2]/(pq)^2,
    the noise is unchanged; the random token count T is replaced by C lbar (error O(cv^2 / C)).
    """
    counts = np.asarray(counts, dtype=np.int64)
    p = _as_float(success_prob)
    if counts.shape != p.shape or counts.ndim != 1:
        raise ValueError(f"counts and success_prob must be 1-D of equal length, got {counts.shape}, {p.shape}")
    q, budget = counts.size, int(counts.sum())
    c = aggregation_weight(
        aggregation, counts, num_prompts=q, budget=budget, constant=constant, mean_length=mean_length
    )
    cv2 = length_cv**2 if aggregation in ("token-mean", "constant") else 0.0
    mean_coef, sq_coef, noise_coef = (np.zeros(q) for _ in range(3))
    from scipy.stats import binom

    for i, (n, pi) in enumerate(zip(counts.tolist(), p.tolist())):
        pq = pi * (1 - pi)
        if n < 2 or pq == 0:
            continue
        k, a_s, a_f = _binary_group_terms(estimator, n, eps)
        w = binom.pmf(k, n, pi)
        a = k * a_s * (1 - pi) - (n - k) * a_f * pi  # sum_i A_i (r_i - p)
        a2 = k * a_s**2 * (1 - pi) ** 2 + (n - k) * a_f**2 * pi**2
        sumsq = k * a_s**2 + (n - k) * a_f**2
        mean_coef[i] = c[i] * (w * a).sum() / pq
        sq_coef[i] = c[i] ** 2 * ((w * a**2).sum() + cv2 * (w * a2).sum()) / pq**2
        noise_coef[i] = c[i] ** 2 * (w * sumsq).sum()
    return mean_coef, sq_coef, noise_coef


def improvement_table(
    prediction_or_p,
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

    One SGD step theta += eta G on the batch objective J = (1/Q) sum_q p_q, with an L-smooth J and
    orthogonal per-prompt gradients |g_q|^2 = kappa p_q^2 (1-p_q)^2 (logistic link), gives
    E dJ = eta <grad J, E G> - (L eta^2 / 2) E|G|^2, separable over prompts. Dividing by
    eta kappa / (Q C) with the relative weight w(n) = C c(n) (1 for seq-mean, token-mean and
    constant with K = C; n_bar / n for prompt-mean, n_bar = C / Q):

        gain_q(n) = w(n) E[pq a] - lr_noise w(n)^2 (E[a^2] + noise_ratio E[sum A^2])

    with expectations over the posterior p ~ Beta(mean, var) (not the plug-in mean) and the group's
    rewards (`group_moments`); lr_noise = L eta Q / (2 C) (the step size, dimensionless),
    noise_ratio = D s^2 / kappa (per-sample score noise relative to the prompt's signal).
    token-mean and constant give the same table as seq-mean: with a fixed budget they differ only
    by a constant scale (absorbed in lr_noise; assumes sequence lengths independent of rewards,
    and neglects the length-variance term cv^2 E[sum A^2 (r-p)^2] of `batch_gradient_moments`,
    a small part of the penalty). ``total_budget`` gives n_bar for prompt-mean (default 8 per
    prompt). ``constant`` = K / C for "constant" (default 1).

    >>> t = improvement_table(np.array([0.5, 0.02]), 4, estimator="drgrpo")
    >>> bool(t[0, 4] > t[1, 4]) and t[:, 0].tolist() == [0.0, 0.0]
    True
    """
    from .types import Prediction

    if isinstance(prediction_or_p, Prediction) or (
        hasattr(prediction_or_p, "mean")
        and hasattr(prediction_or_p, "var")
        and not isinstance(prediction_or_p, np.ndarray)
    ):
        mean = _as_float(prediction_or_p.mean).reshape(-1)
        var = _as_float(prediction_or_p.var).reshape(-1)
    else:
        mean = _as_float(prediction_or_p).reshape(-1)
        var = np.zeros_like(mean)
    if mean.size == 0:
        raise ValueError("empty batch: no prompts")
    if np.any(~np.isfinite(mean) | (mean < 0) | (mean > 1)):
        raise ValueError(f"success probabilities must lie in [0, 1], got {mean[~((mean >= 0) & (mean <= 1))][:5]}")
    if np.any(~np.isfinite(var) | (var < 0)):
        raise ValueError("prediction.var must be finite and >= 0")
    if var.shape != mean.shape:
        raise ValueError(f"prediction mean has {mean.size} entries but var {var.size}")
    if upper < 0:
        raise ValueError(f"upper must be >= 0, got upper={upper}")
    if lr_noise < 0 or noise_ratio < 0:
        raise ValueError(f"lr_noise and noise_ratio must be >= 0, got {lr_noise}, {noise_ratio}")
    q = mean.size
    n = np.arange(upper + 1, dtype=float)
    if aggregation == "prompt-mean":
        n_bar = 8.0 if total_budget is None else total_budget / q
        with np.errstate(divide="ignore"):
            w = np.where(n > 0, n_bar / np.maximum(n, 1.0), 0.0)
    elif aggregation in ("seq-mean", "token-mean"):
        w = np.ones_like(n)
    elif aggregation == "constant":
        w = np.full(n.shape, 1.0 if constant is None else 1.0 / constant)
    else:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if estimator == "grpo":
        sig, sec, noi = _grpo_moment_table(mean, var, upper, eps=eps)
    else:
        sig, sec, noi = group_moments(estimator, n[None, :], mean[:, None], var[:, None], eps=eps)
    gain = w * sig - lr_noise * w**2 * (sec + noise_ratio * noi)
    gain[:, 0] = 0.0
    return gain

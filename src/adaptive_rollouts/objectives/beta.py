"""A Beta belief about a success probability p, fitted to a prediction's (mean, var), and its moments.

The objectives average over this belief instead of plugging in the mean (docs/objectives.md,
section 4); the progressive allocator uses it as the prior of its per-step posterior.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import betaln

from .mixing import mixed_probability

__all__ = ["beta_from_moments", "beta_mean_var", "beta_moment", "power_moments", "all_equal_beta", "stays_flat_beta"]

_MEAN_EPS = 1e-12  # the mean is kept inside (0, 1) so that both Beta parameters are positive
_POINT_STRENGTH = 1e8  # above this alpha + beta, betaln differences cancel: treat as a point mass


def beta_from_moments(
    mean: Any, var: Any, *, min_strength: float = 1e-9, max_strength: float = np.inf
) -> tuple[np.ndarray, np.ndarray]:
    """Beta(alpha, beta) with the given mean and variance (moment matching).

    The strength alpha + beta = m (1 - m) / v - 1 is clipped to [min_strength, max_strength]:
    a variance at or above m (1 - m) (no Beta has it) gives the weakest belief, and v = 0 gives
    alpha = inf (a point mass) unless ``max_strength`` caps it. The mean is clipped into
    [1e-12, 1 - 1e-12].

    >>> [x.tolist() for x in beta_from_moments([0.5], [0.05])]
    [[2.0], [2.0]]
    """
    m = np.clip(np.asarray(mean, dtype=float), _MEAN_EPS, 1 - _MEAN_EPS)
    v = np.clip(np.asarray(var, dtype=float), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        strength = np.where(v > 0, m * (1 - m) / np.where(v > 0, v, 1.0) - 1.0, np.inf)
    strength = np.clip(strength, min_strength, max_strength)
    return m * strength, (1 - m) * strength


def beta_mean_var(alpha: Any, beta: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean alpha / (alpha + beta) and variance alpha beta / ((alpha + beta)^2 (alpha + beta + 1)) of
    Beta(alpha, beta): the inverse of `beta_from_moments` (a posterior's prediction).

    >>> [x.tolist() for x in beta_mean_var(np.array([2.0]), np.array([2.0]))]
    [[0.5], [0.05]]
    """
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    total = alpha + beta
    return alpha / total, alpha * beta / (total * total * (total + 1.0))


def _is_point(alpha: np.ndarray, var: np.ndarray) -> np.ndarray:
    return ~(np.isfinite(alpha) & (var > 0))


def beta_moment(mean: Any, var: Any, a: float, b: float) -> np.ndarray:
    """E[p^a (1-p)^b] under the Beta belief (plug-in when var = 0).

    >>> round(float(beta_moment(0.5, 0.05, 1, 1)), 6)  # m (1 - m) - v
    0.2
    """
    mean = np.asarray(mean, dtype=float)
    var = np.asarray(var, dtype=float)
    al, be = beta_from_moments(mean, var)
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
            post = np.where(al + be > _POINT_STRENGTH, plug, post)
    return np.where(_is_point(al, var), plug, post)


def power_moments(mean: np.ndarray, var: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """E[p^n] + E[(1-p)^n] for each prompt (rows) and n in `powers` (columns), under the Beta
    belief or the point mass: the chance that n rollouts all agree, so 1 minus it is the
    posterior `mixed_probability`.

    >>> power_moments(np.array([0.5]), np.array([0.0]), np.array([1.0, 2.0])).tolist()
    [[1.0, 0.5]]
    """
    mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    al, be = beta_from_moments(mean, var)
    point = _is_point(al, var)
    m = np.clip(mean, 0.0, 1.0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        plug = 1.0 - mixed_probability(m, powers[None, :])
        a, b = np.where(point, 1.0, al)[:, None], np.where(point, 1.0, be)[:, None]
        base = betaln(a, b)
        post = np.exp(betaln(a + powers, b) - base) + np.exp(betaln(a, b + powers) - base)
    return np.where(point[:, None] | ((al + be) > _POINT_STRENGTH)[:, None], plug, post)


def _beta_and_counts(alpha: Any, beta: Any, counts: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Beta parameters (finite, > 0) and rollout counts (whole, >= 0) as float arrays, else a
    ValueError naming the bad input (``name``: the counts')."""
    a, b = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    n = np.asarray(counts, dtype=float)
    if np.any(~(a > 0)) or np.any(~(b > 0)) or np.any(~np.isfinite(a)) or np.any(~np.isfinite(b)):
        raise ValueError("alpha and beta must be finite and > 0")
    if np.any(n < 0) or np.any(n != np.round(n)):
        raise ValueError(f"{name} must be whole numbers >= 0, got {np.unique(n[(n < 0) | (n != np.round(n))])[:5]}")
    return a, b, n


def all_equal_beta(alpha: Any, beta: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    """The chance that a group of n rollouts is all-equal (every reward 0, or every reward 1) when
    p ~ Beta(alpha, beta), and its spread over the belief: with f(p) = p^n + (1 - p)^n,

        P = E[f] = B(alpha + n, beta) / B(alpha, beta) + B(alpha, beta + n) / B(alpha, beta)

    (exact: the beta-binomial chance of 0 or n successes), and sd = sqrt(E[f^2] - E[f]^2) with
    E[f^2] = E[p^2n] + 2 E[p^n (1 - p)^n] + E[(1 - p)^2n], all Beta moments. ``sd`` is how sure the
    belief is of P: 0 for a known p, largest when the belief splits its mass between the ends.

    >>> prob, sd = all_equal_beta([1.0], [1.0], [4])   # p ~ Uniform: 2 / (n + 1)
    >>> round(float(prob[0]), 4), bool(sd[0] > 0)
    (0.4, True)
    """
    a, b, n = _beta_and_counts(alpha, beta, n, "n")
    base = betaln(a, b)

    def moment(i: Any, j: Any) -> np.ndarray:  # E[p^i (1 - p)^j]
        return np.exp(betaln(a + i, b + j) - base)

    prob = moment(n, 0.0) + moment(0.0, n)
    second = moment(2 * n, 0.0) + 2.0 * moment(n, n) + moment(0.0, 2 * n)
    return np.clip(prob, 0.0, 1.0), np.sqrt(np.clip(second - prob * prob, 0.0, None))


def stays_flat_beta(alpha: Any, beta: Any, passed: Any, rest: Any) -> np.ndarray:
    """The chance that ``rest`` more rollouts all repeat an all-equal pilot's reward when
    p ~ Beta(alpha, beta) (the posterior after the pilot): after a pilot of successes
    (``passed`` True) E[p^rest] = B(alpha + rest, beta) / B(alpha, beta), after failures
    E[(1 - p)^rest] = B(alpha, beta + rest) / B(alpha, beta) (the beta-binomial chance of rest
    equal outcomes). The completed group is then all-equal too, and carries nothing.

    >>> round(float(stays_flat_beta([1.0], [5.0], [False], [4])[0]), 4)  # Beta(1, 5): 5 / 9
    0.5556
    """
    a, b, m = _beta_and_counts(alpha, beta, rest, "rest")
    up = np.asarray(passed, dtype=bool)
    log = np.where(up, betaln(a + m, b), betaln(a, b + m)) - betaln(a, b)
    return np.clip(np.exp(log), 0.0, 1.0)

"""The Gaussian updates of `GaussianProcess`: the Laplace site of a binomial count, a Kalman update
of the shared weights, and an SPD inverse."""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack
from scipy.special import expit

__all__ = ["kalman_update", "laplace_site", "spd_inverse"]

_NEWTON_STEPS = 25


def laplace_site(
    successes: np.ndarray, counts: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Laplace approximation of Binomial(k | n, sigmoid(g)) N(g | mean, var), as a Gaussian site.

    Returns (y, r): the likelihood is replaced by N(y | g, r), so that the posterior of g is
    N(g_hat, (1/var + 1/r)^-1) with g_hat the posterior mode. r = 1 / (n p_hat (1 - p_hat)) shrinks
    with the number of rollouts n: one rollout weighs far less than 32.
    """
    g = mean.copy()
    for _ in range(_NEWTON_STEPS):
        p = expit(g)
        grad = successes - counts * p - (g - mean) / var
        hess = counts * p * (1.0 - p) + 1.0 / var
        g = g + np.clip(grad / hess, -4.0, 4.0)  # concave objective; clip guards the first steps
    p = expit(g)
    precision = np.maximum(counts * p * (1.0 - p), 1e-12)
    y = g + (g - mean) / (var * precision)
    return y, 1.0 / precision


def spd_inverse(a: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive-definite matrix (LAPACK potrf + potri)."""
    chol, info = lapack.dpotrf(a, lower=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix is not positive definite (potrf info {info})")
    inv, info = lapack.dpotri(chol, lower=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"potri failed (info {info})")
    inv = np.tril(inv)
    return inv + np.tril(inv, -1).T


def kalman_update(
    mean: np.ndarray, cov: np.ndarray, phi: np.ndarray, y: np.ndarray, noise: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior of w ~ N(mean, cov) after y = phi w + e, e ~ N(0, diag(noise)).

    B observations, D weights: the B x B (observation) form, O(B D^2 + B^3), when B < D / 2 (a
    small batch: the demo's 16 prompts), else the D x D information form, O(B D^2 + D^3)."""
    b, d = phi.shape
    if 2 * b < d:
        pc = phi @ cov  # [B, D]
        s = pc @ phi.T
        s[np.diag_indices_from(s)] += noise
        chol, info = lapack.dpotrf(s, lower=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"innovation matrix is not positive definite (potrf info {info})")
        gain_t, info = lapack.dpotrs(chol, pc, lower=True)  # S^-1 phi cov = K^T
        resid = y - phi @ mean
        new_cov = cov - pc.T @ gain_t
        new_cov = 0.5 * (new_cov + new_cov.T)
        return mean + gain_t.T @ resid, new_cov
    precision = spd_inverse(cov)
    info_vec = precision @ mean + phi.T @ (y / noise)
    precision += phi.T @ (phi / noise[:, None])
    new_cov = spd_inverse(precision)
    return new_cov @ info_vec, new_cov

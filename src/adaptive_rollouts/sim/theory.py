"""Theory checks printed in the benchmark report.

1. Monte Carlo of the per-prompt gradient variance (docs/objectives.md, section 2): rewards in {-1, +1},
   projected score Z ~ N(0, s^2) independent of the reward, g = (1/n) sum_i A_i Z_i;
   Dr. GRPO Var = 4 s^2 p(1-p)(n-1)/n^2, RLOO Var = 4 s^2 p(1-p)/(n-1), GRPO estimated.
2. VIGOR Theorem 2: speedup eta^(1/3) with
   eta = sum_{i<T} (gamma alpha^(1-1/k))^i / sum_{i<T} (alpha gamma)^i for Pareto(k) reward std.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptive_rollouts import objectives as obj
from adaptive_rollouts.sim.estimators import group_advantages_np
from adaptive_rollouts.sim.problem import PARETO_TAIL_INDEX, make_problem

__all__ = ["variance_formula", "monte_carlo_variance", "vigor_speedup", "hill_tail_index", "theory_checks"]


def variance_formula(p: float, n: int, estimator: str, s: float = 1.0) -> float:
    """The library's closed forms (``adaptive_rollouts.objectives``), rewards in {-1, +1}.

    Dr. GRPO 4 s^2 p(1-p)(n-1)/n^2; RLOO 4 s^2 p(1-p)/(n-1); GRPO (eps = 1e-6, as simulated)
    s^2/n^2 sum_k Binom(k; n, p) (n-1) sd_k^2/(sd_k + eps)^2.

    >>> round(variance_formula(0.3, 6, "rloo"), 4)
    0.168
    """
    est = obj.get_estimator(estimator)
    return float(est.variance(n, success_prob=p, score_var=s * s, eps=1e-6, low=-1.0, high=1.0))


def monte_carlo_variance(
    p: float, n: int, estimator: str, s: float = 1.0, draws: int = 200_000, seed: int = 0
) -> tuple[float, float]:
    """(variance, its standard error) of g = (1/n) sum_i A_i Z_i by simulation."""
    rng = np.random.default_rng(seed)
    r = np.where(rng.random((draws, n)) < p, 1.0, -1.0)
    group = np.repeat(np.arange(draws), n)
    adv = group_advantages_np(r.ravel(), group, estimator).reshape(draws, n)
    g = (adv * rng.normal(0.0, s, size=(draws, n))).mean(axis=1)
    var = float(g.var())
    # Standard error of a sample variance: sqrt((m4 - var^2) / draws).
    se = float(np.sqrt(max(np.mean((g - g.mean()) ** 4) - var**2, 0.0) / draws))
    return var, se


def vigor_speedup(k: float, alpha: float = 0.5, gamma: float = 2.0, rounds: int = 4) -> float:
    """VIGOR Theorem 2 speedup over uniform GRPO, eta^(1/3).

    >>> round(vigor_speedup(2.0), 4)
    1.2188
    """
    i = np.arange(rounds)
    eta = np.sum((gamma * alpha ** (1 - 1 / k)) ** i) / np.sum((alpha * gamma) ** i)
    return float(eta ** (1 / 3))


def hill_tail_index(x: np.ndarray, tail: float = 0.2) -> float:
    """Hill estimator of a Pareto tail index from the largest ``tail`` share of ``x > 0``."""
    x = np.sort(np.asarray(x, dtype=float)[np.asarray(x) > 0])[::-1]
    m = max(int(tail * x.size), 2)
    if x.size <= m:
        return float("nan")
    return float(1.0 / np.mean(np.log(x[:m] / x[m])))


def theory_checks(draws: int = 200_000) -> dict[str, Any]:
    """Every check of the module docstring, as the benchmark report prints them."""
    rows: list[dict[str, Any]] = []
    for est in obj.ESTIMATORS:
        for p in (0.1, 0.3, 0.5):
            for n in (2, 4, 8, 16):
                mc, se = monte_carlo_variance(p, n, est, draws=draws, seed=len(rows))
                rows.append(
                    {
                        "estimator": est,
                        "p": p,
                        "n": n,
                        "formula": variance_formula(p, n, est),
                        "monte_carlo": mc,
                        "se": se,
                    }
                )
    pb = make_problem("pareto", n_prompts=4000, n_test=10, seed=0)
    sigma = np.sqrt(pb.reward_variance())
    k_hat = hill_tail_index(sigma[sigma < 0.5 - 1e-9], tail=0.3)
    return {
        "variance": rows,
        "pareto_k": PARETO_TAIL_INDEX,
        "pareto_k_hill": k_hat,
        "vigor_predicted": vigor_speedup(PARETO_TAIL_INDEX),
        "vigor_predicted_hill": vigor_speedup(k_hat) if np.isfinite(k_hat) else float("nan"),
    }

"""The simulator's analog of a hidden-state probe: a noisy view of the policy's own logit margin
for each prompt, with the noise set so that the view ranks successes above failures as well as
published probes do (AUROC about 0.75-0.85; docs/flatness.md cites them).

For the linear-softmax policy with one correct answer, the margin of prompt q, the correct answer's
logit minus the log-sum-exp of the others, is exactly logit(p_q). A probe on an LLM's activations
does not see p: it errs, and consistently so on a given prompt (its input, the prompt's hidden
state, is the same each time the prompt comes back at the same weights). The view is therefore

    z_q = logit(p_q) + e_q,      e_q ~ N(0, sigma^2) drawn once per prompt,

and it moves with p_q as the policy trains. sigma is set on the train pool at the start so that the
view's AUROC for success, over rollouts (a success of one prompt against a failure of another, ties
counted half), equals ``auroc``:

    AUROC(sigma) = sum_{i != j} p_i (1 - p_j) Phi((l_i - l_j) / (sigma sqrt 2)) + 1/2 sum_i p_i (1 - p_i)
                   -------------------------------------------------------------------------------
                                         sum_i p_i  sum_j (1 - p_j)

(l = logit p), which falls from the known-p AUROC at sigma = 0 toward 1/2; where even the known p
ranks worse than ``auroc`` (a pool of middling p), sigma is 0. ``auroc`` = 1 asks for more than any
view of a pool with 0 < p < 1 can give, so it is the exact margin: sigma = 0, z_q = logit(p_q).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.special import logit, ndtr

from adaptive_rollouts.checks.validation import check_range
from adaptive_rollouts.sim.problem import Problem

__all__ = ["PolicyView", "view_auroc", "PROBE_AUROC"]

PROBE_AUROC = 0.8
"""The middle of the range published probes reach for success before generation."""
_P_CLIP = 1e-6
_MAX_PROMPTS = 800  # the AUROC is computed on at most this many prompts (pairs grow as the square)


def view_auroc(p: np.ndarray, sigma: float, margin: np.ndarray | None = None) -> float:
    """The expected AUROC for success of z = margin + N(0, sigma^2) (margin: logit p by default)."""
    return _auroc_curve(p, margin)(sigma)


def _auroc_curve(p: np.ndarray, margin: np.ndarray | None = None) -> Callable[[float], float]:
    """sigma -> `view_auroc` (p, sigma, margin), the pairs' margins and weights computed once (the
    calibration evaluates it a dozen times on up to 800 x 800 pairs; ``ndtr`` is the normal cdf
    without `scipy.stats`' argument handling, the same numbers)."""
    p = np.asarray(p, dtype=float)
    lg = logit(np.clip(p, _P_CLIP, 1 - _P_CLIP)) if margin is None else np.asarray(margin, dtype=float)
    diff = lg[:, None] - lg[None, :]
    pairs = p[:, None] * (1.0 - p)[None, :]
    total = p.sum() * (1.0 - p).sum()

    win = np.empty_like(diff)  # one buffer for every sigma: the calibration's time is mostly allocation otherwise

    def auroc(sigma: float) -> float:
        if sigma == 0:
            win[...] = np.where(diff > 0, 1.0, np.where(diff < 0, 0.0, 0.5))
        else:
            ndtr(np.divide(diff, sigma * np.sqrt(2), out=win), out=win)
        np.fill_diagonal(win, 0.5)
        return float(np.multiply(pairs, win, out=win).sum() / total)

    return auroc


class PolicyView:
    """The noisy margin view of a `Problem`'s policy: ``features(idx)`` is [len(idx), 1].

    >>> from adaptive_rollouts.sim.problem import make_problem
    >>> pb = make_problem("hard-heavy", n_prompts=400, n_test=10, seed=0)
    >>> view = PolicyView(pb, auroc=0.8, seed=0)
    >>> round(view_auroc(pb.success(), view.sigma), 3), view.features([0, 1]).shape
    (0.8, (2, 1))
    """

    def __init__(self, problem: Problem, auroc: float = PROBE_AUROC, seed: int = 0):
        self.problem = problem
        self.auroc = check_range(auroc, "auroc", 0.5, 1.0, high_closed=True)
        rng = np.random.default_rng([seed, 7])
        p0 = problem.success()
        pool = p0 if p0.size <= _MAX_PROMPTS else p0[rng.choice(p0.size, _MAX_PROMPTS, replace=False)]
        self.sigma = self._calibrate(pool)
        self.noise = rng.standard_normal(problem.n_prompts) * self.sigma

    def _calibrate(self, p: np.ndarray) -> float:
        curve = _auroc_curve(p)
        if curve(0.0) <= self.auroc:
            return 0.0
        return float(brentq(lambda s: curve(s) - self.auroc, 1e-6, 1e3, xtol=1e-6))

    def features(self, idx: np.ndarray | list) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        margin = logit(np.clip(self.problem.success(idx), _P_CLIP, 1 - _P_CLIP))
        return (margin + self.noise[idx])[:, None]

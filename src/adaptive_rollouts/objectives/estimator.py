"""`Estimator`: one object per group advantage estimator, holding everything the library asks of it.

An estimator turns a group's rewards into per-rollout advantages; the allocators and solvers need
to know what that does to the gradient. Each estimator class holds, in one place:

* its advantage formula (`from_centred`), shared by the numpy advantages here (`advantages`, used by
  the simulator) and the torch ones of `adaptive_rollouts.advantages` (used by the trainers);
* its variance per unit reward and score variance f(n) (`unit_variance`, `unit_cost`,
  `unit_marginal`) and the allocation cost c(n) of `objectives.pricing` (`allocation_cost`);
* the per-prompt weight the variance objective multiplies f(n) by (`weights`);
* the advantages of a binary group (`binary_group_terms`) and the posterior moments of its signal
  (`group_moments`, `moment_table`) for the improvement objective;
* what the solvers may assume: `convex_from`, `cost_depends_on_p`, `first_n`, `kkt_counts`.

Estimators register under a name in `checks.validation.ESTIMATORS` (the one name list), in
`objectives.registry`; users pass the name (``estimator="rloo"``), and every entry point resolves
it once with `objectives.registry.get_estimator` (an unknown name raises the `check_choice` error
naming the input). Adding an estimator is one class and one registry line: nothing else in the
library branches on an estimator's name.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..checks.rewards import ZERO_VARIANCE_TOL, all_equal
from .beta import beta_moment
from .mixing import bernoulli_variance

__all__ = ["CentredEstimator", "Estimator", "group_scale"]


def group_scale(peak: Any, frexp: Any, ldexp: Any) -> Any:
    """The overflow guard: per group, the power of two 2^k with ``peak / 2^k < 2`` (``peak`` = the
    group's largest |reward|), by which its rewards are divided before any sum. Scaling by a power of
    two is exact in floating point, so ordinary rewards give bit-identical results, and rewards near
    the float64 limit (+-1e300, whose squares overflow) give the advantages of +-1. ``frexp`` /
    ``ldexp`` are the array library's (numpy or torch), so both backends share the guard.

    >>> group_scale(np.array([0.0, 1.0, 3.0, 1e300]), np.frexp, np.ldexp)[:3].tolist()
    [0.5, 1.0, 2.0]
    """
    exponent = frexp(peak)[1]
    return ldexp(peak * 0 + 1, exponent - 1)


class Estimator:
    """A group advantage estimator (subclass it, set ``name``, and register an instance).

    Subclasses define `from_centred` (the advantage of a rollout from its centred reward) and the
    variance f(n) (`unit_variance`, `unit_cost`, `unit_marginal`); the rest follows.
    """

    name: ClassVar[str]
    first_n: ClassVar[int] = 1
    """The smallest group size with a defined variance (RLOO: 2, a leave-one-out baseline)."""
    convex_from: ClassVar[int | None] = 2
    """The smallest ``lower`` from which the allocation cost is one convex curve f(n) shared by every
    prompt (times its weight), so the solvers may take the smallest marginal costs; None when the
    cost depends on each prompt's p (`cost_depends_on_p`) and is never shared."""
    cost_depends_on_p: ClassVar[bool] = False
    """True when the allocation cost depends on the prompt's success probability beyond its weight
    (GRPO: the std normalisation cancels the reward variance, and an all-equal group carries no
    gradient); then the cost tables need ``success_prob`` (or the chance of a mixed group)."""

    # ------------------------------------------------------------------ advantages
    def from_centred(self, centred: Any, count: Any, std: Any, eps: float, scale: Any) -> Any:
        """Advantage of each rollout from its group's statistics, in the group's scaled units
        (`group_scale`): ``centred`` = (r - mean) / scale, ``std`` = the unbiased std / scale,
        ``count`` = the group size (>= 2; groups without signal are zeroed by the caller). Only
        arithmetic, so numpy arrays and torch tensors both work."""
        raise NotImplementedError

    def advantages(self, rewards: Any, group: Any, eps: float = 1e-6, std_tol: float = ZERO_VARIANCE_TOL) -> np.ndarray:
        """Per-rollout advantages (numpy) over ragged groups; ``group`` holds dense ids 0..G-1.
        Singleton and all-equal groups (`checks.rewards.all_equal` with tolerance ``std_tol``) get 0.
        The torch twin is `adaptive_rollouts.advantages.group_advantages`.

        >>> from adaptive_rollouts.objectives import get_estimator
        >>> get_estimator("rloo").advantages(np.array([1., 0., 1., 5., 0., 0.]), np.array([0, 0, 0, 1, 2, 2]))
        array([ 0.5, -1. ,  0.5,  0. ,  0. ,  0. ])
        """
        r = np.asarray(rewards, dtype=float)
        if not np.all(np.isfinite(r)):
            raise ValueError("rewards contain NaN or inf")
        if r.size == 0:
            return r.copy()
        g = np.asarray(group, dtype=np.int64)
        n = np.bincount(g).astype(float)
        low, high = np.full(n.size, np.inf), np.full(n.size, -np.inf)
        np.minimum.at(low, g, r)
        np.maximum.at(high, g, r)
        scale = group_scale(np.maximum(np.abs(low), np.abs(high)), np.frexp, np.ldexp)
        s = r / scale[g]
        mean = np.bincount(g, weights=s) / np.maximum(n, 1)
        centred = s - mean[g]
        std = np.sqrt(np.bincount(g, weights=centred * centred, minlength=n.size) / np.maximum(n - 1, 1))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            live = (n >= 2) & ~all_equal(low, high, std_tol)  # a span that overflows to inf is not flat
            adv = self.from_centred(centred, np.maximum(n, 2.0)[g], std[g], eps, scale[g])
        return np.where(live[g], adv, 0.0)

    def binary_group_terms(self, n: int, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per number of successes k = 0..n: (k, A_s(k), A_f(k)), the advantages of a success and of
        a failure in a binary group of n with k successes (0 for an all-equal group, k = 0 or n)."""
        k = np.arange(n + 1, dtype=float)
        if n < 2:
            return k, np.zeros(n + 1), np.zeros(n + 1)
        mean = k / n
        sd = np.sqrt(k * (n - k) / (n * (n - 1.0)))
        flat = (k == 0) | (k == n)
        with np.errstate(invalid="ignore", divide="ignore"):
            a_s = self.from_centred(1.0 - mean, float(n), sd, eps, 1.0)
            a_f = self.from_centred(-mean, float(n), sd, eps, 1.0)
        return k, np.where(flat, 0.0, a_s), np.where(flat, 0.0, a_f)

    # ------------------------------------------------------------------ variance and its price
    def unit_variance(self, n: Any) -> np.ndarray:
        """f(n): the variance per unit reward variance and unit score variance (+inf below `first_n`)."""
        raise NotImplementedError

    def unit_cost(self, n: Any) -> np.ndarray:
        """f(n) for n >= 2 (smaller n are read as 2; `allocation_cost` prices them)."""
        raise NotImplementedError

    def unit_marginal(self, n: Any) -> np.ndarray:
        """f(n + 1) - f(n) for n >= 2, in closed form (no cancellation at large n)."""
        raise NotImplementedError

    def no_signal_cost(self, skip_cost: float | None = None) -> float:
        """c0: the price of a group without gradient, ``skip_cost`` or else f(2) (`objectives.pricing`)."""
        return float(self.unit_cost(2.0)) if skip_cost is None else float(skip_cost)

    def allocation_cost(
        self, n: Any, success_prob: Any = None, skip_cost: float | None = None, mixed: Any = None
    ) -> np.ndarray:
        """c(n) per unit weight (`objectives.pricing`): f(n) for n >= 2, c0 at n = 1, ``skip_cost``
        at n = 0 (+inf when None)."""
        n = np.asarray(n, dtype=float)
        cost = self._signal_cost(n, self.no_signal_cost(skip_cost), success_prob, mixed)
        skip = np.inf if skip_cost is None else float(skip_cost)
        return np.where(n <= 0, skip, cost)

    def _signal_cost(self, n: np.ndarray, c0: float, success_prob: Any, mixed: Any) -> np.ndarray:
        cost = np.broadcast_to(self.unit_cost(n), n.shape).copy()
        return np.where(n == 1, c0, cost)

    def weights(self, reward_var: Any) -> np.ndarray:
        """The per-prompt weight w_q of the variance objective sum_q w_q c_q(n_q), from the reward
        variance (plug-in p(1-p) or its posterior expectation): the reward variance itself."""
        return np.asarray(reward_var, dtype=float)

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
        """Per-prompt gradient variance under a per-prompt-mean loss: s^2 sigma^2 f(n), sigma^2 the
        reward variance (``reward_var``, or that of rewards in {low, high} with ``success_prob``)."""
        if reward_var is None:
            if success_prob is None:
                raise ValueError(f"objective={self.name!r} needs reward_var or success_prob")
            reward_var = bernoulli_variance(success_prob, low, high)
        n = np.asarray(n, dtype=float)
        if np.any(n < self.first_n):
            bad = np.unique(n[n < self.first_n]).tolist()
            raise ValueError(f"{self.name}_variance needs n >= {self.first_n}, got n={bad}")
        return score_var * np.asarray(reward_var, dtype=float) * self.unit_variance(n)

    def table_unit_cost(
        self, n: np.ndarray, p: np.ndarray | None, mixed: Any, skip_cost: float | None, eps: float
    ) -> np.ndarray:
        """The cost per unit weight of `objectives.variance_table`, [1 or Q, len(n)]."""
        return self.allocation_cost(n, skip_cost=skip_cost)[None, :]

    # ------------------------------------------------------------------ the improvement objective
    def group_moments(
        self, n: np.ndarray, mean: np.ndarray, var: np.ndarray, *, eps: float = 0.0, exact_up_to: int = 128
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(E[pq a], E[a^2], E[sum A^2]) of a binary group of n, p ~ Beta(mean, var) (broadcast
        arrays; `objectives.improvement.group_moments`)."""
        raise NotImplementedError

    def moment_table(
        self, mean: np.ndarray, var: np.ndarray, upper: int, *, eps: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`group_moments` for every n = 0..upper: three [Q, upper + 1] arrays."""
        n = np.arange(upper + 1, dtype=float)
        shaped = np.broadcast_arrays(n[None, :], mean[:, None], var[:, None])
        return self.group_moments(*shaped, eps=eps)

    # ------------------------------------------------------------------ the VIP paper's KKT solver
    def kkt_counts(self, a: np.ndarray, lam: float, lower: int, upper: int) -> np.ndarray:
        """Continuous KKT counts n_q(lambda) of the VIP paper's solver (`solvers.solve_kkt`); the paper
        gives them for RLOO and Dr. GRPO only, other estimators raise."""
        raise ValueError(f"solve_kkt has no KKT counts for estimator {self.name!r}; use allocate")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _falling(n: np.ndarray, j: int) -> np.ndarray:
    out = np.ones_like(n, dtype=float)
    for i in range(j):
        out = out * np.maximum(n - i, 0.0)
    return out


class CentredEstimator(Estimator):
    """An estimator whose advantage is the centred reward times a factor of the group size:
    A_i = factor(n) (r_i - mean). Its moments have a closed form (binomial factorial moments)."""

    def factor(self, n: Any) -> Any:
        """A_i / (r_i - mean) for a group of n >= 2."""
        raise NotImplementedError

    def from_centred(self, centred: Any, count: Any, std: Any, eps: float, scale: Any) -> Any:
        return centred * scale * self.factor(count)

    def group_moments(
        self, n: np.ndarray, mean: np.ndarray, var: np.ndarray, *, eps: float = 0.0, exact_up_to: int = 128
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m11, m22 = beta_moment(mean, var, 1, 1), beta_moment(mean, var, 2, 2)
        n2, n3, n4 = _falling(n, 2), _falling(n, 3), _falling(n, 4)
        live = n >= 2
        safe = np.where(live, n, 2.0)
        # a = factor k(n-k)/n: E[k(n-k)/n] = (n-1) pq; E[k^2 (n-k)^2] = n4 p^2q^2 + (n3 + n2) pq
        scale = self.factor(safe)
        sig = scale * (safe - 1.0) * m22
        sec = scale**2 * (n4 * m22 + (n3 + n2) * m11) / safe**2
        noi = scale**2 * (safe - 1.0) * m11
        return np.where(live, sig, 0.0), np.where(live, sec, 0.0), np.where(live, noi, 0.0)

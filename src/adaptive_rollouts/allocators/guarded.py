"""The recommended default: progressive allocation that falls back toward Uniform when unsure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..checks.validation import check_real
from ..fingerprints import RegimeTracker
from ..solvers import equal_split
from ..state.tree import describe
from ..types import Prompt, Rewards, SampleFn, StateDict
from .posterior_progressive import PosteriorProgressive, Round

__all__ = ["GuardedProgressive", "equal_split", "measured_persistence", "shrink_toward"]


def measured_persistence(tracker: RegimeTracker) -> float:
    """rho: the persistence of p a tracker has measured in this run, clipped to [0, 1]; 0 before it
    is measurable (how far a prompt's history may be trusted to predict its next visit)."""
    rho = tracker.metrics()["regime/p_persistence"]
    return float(np.clip(rho, 0.0, 1.0)) if np.isfinite(rho) else 0.0


def shrink_toward(reference: np.ndarray, target: np.ndarray, trust: float) -> np.ndarray:
    """Integers with the same sum as ``reference`` and ``target`` closest to
    ``reference + trust (target - reference)``: floor, then +1 by largest remainder (ties: first).

    Every entry lies between floor and ceil of the convex combination, so integer bounds that hold
    for both ``reference`` and ``target`` hold for the result.

    >>> shrink_toward(np.array([4, 4, 4]), np.array([0, 2, 10]), 0.5).tolist()
    [2, 3, 7]
    """
    reference = np.asarray(reference, dtype=np.int64)
    target = np.asarray(target, dtype=np.int64)
    if reference.shape != target.shape or reference.sum() != target.sum():
        raise ValueError(f"reference and target must have equal shapes and sums, got {reference} and {target}")
    if not 0.0 <= trust <= 1.0:
        raise ValueError(f"trust must be in [0, 1], got {trust}")
    x = reference + trust * (target - reference)
    out = np.floor(x + 1e-9).astype(np.int64)
    left = int(reference.sum() - out.sum())
    order = np.argsort(-(x - out), kind="stable")
    out[order[:left]] += 1
    return out


class GuardedProgressive(PosteriorProgressive):
    """The recommended default (``make_allocator()``): `PosteriorProgressive` with a history
    predictor (no embeddings needed) whose every round is shrunk toward Uniform by how much
    evidence the belief holds (this project).

    Rule, per step with Q prompts and budget C, in rounds of sizes C_r (`round_fractions`):
    prompt q's belief is Beta(a_q + s_q, b_q + k_q - s_q) - the history predictor's (mean, var)
    moment-matched to Beta(a_q, b_q) (strength a_q + b_q capped at ``max_prior_strength``), updated
    with the s_q successes among the k_q rollouts drawn for q so far in this step. Round r draws

        d_q = round( u_q + lambda_r (d*_q - u_q) ),   sum_q d_q = C_r,
        lambda_r = (1/Q) sum_q  e_q / (e_q + kappa),   e_q = rho (a_q + b_q) + k_q,

    where u = the equal split of C_r (Uniform's round), d* = `PosteriorProgressive`'s exact
    optimum of the round under the belief (objective for the trainer's ``estimator`` and loss
    ``aggregation``), e_q the evidence in pseudo-rollouts, and kappa (``trust_scale``,
    default 16) the evidence at which the optimum is trusted half-way. rho in [0, 1] is how
    persistent p has been *in this run*: the noise-corrected correlation of a prompt's mean reward
    between consecutive visits (`fingerprints.RegimeTracker`, over the rewards this allocator has
    drawn), clipped to [0, 1], and 0 until it can be measured. History counts only as far as it
    has predicted the next visit: where p is not persistent (or prompts never recur) the trust
    rests on this step's own rollouts k_q alone. Round one is the equal
    split (lambda_1 = 0, ``first_round_uniform``), so every prompt gets fresh evidence before any
    is favoured. Rounding keeps the exact budget and the bounds [L, U] (floor + largest remainder).

    Opt-in ``zero_variance_gate=(low, high)`` multiplies every lambda_r by g = clip((z - low) /
    (high - low), 0, 1), z = the run's mean zero-variance group fraction so far (the waste that
    allocation can recover): below ``low`` the allocation is Uniform's. Off by default: the regime
    map could not resolve whether it helps (docs/benchmark.md).

    So with no (persistent) history (e = k) the allocation stays close to Uniform; it moves
    toward the optimum only as history and in-step rollouts accumulate; kappa -> inf is Uniform
    (up to where the remainder of C / Q lands). Works with any hashable prompt keys (integer ids
    included) and rewards in [0, 1] (map a trainer's rewards with `SuccessSignal`).
    ``predictor`` defaults to "beta" (`DiscountedBeta`, discount 0.9); any predictor works.

    >>> import numpy as np
    >>> def sample(idx, counts):  # prompt 1 always fails, the others alternate
    ...     return [np.zeros(c) if i == 1 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
    >>> alloc = GuardedProgressive(estimator="rloo", objective="variance")
    >>> [len(r) for r in alloc.run([10, 11, 12, 13], 32, sample)]   # no history: Uniform's counts
    [8, 8, 8, 8]
    >>> [len(r) for r in alloc.run([10, 11, 12, 13], 32, sample)]   # history, persistence not yet measured
    [8, 8, 8, 8]
    >>> [len(r) for r in alloc.run([10, 11, 12, 13], 32, sample)]   # p persistent: away from prompt 11
    [9, 6, 9, 8]
    >>> alloc.last_metrics["persistence"], [round(t, 2) for t in alloc.last_metrics["trust"]]
    (1.0, [0.0, 0.43, 0.47])
    >>> [len(r) for r in GuardedProgressive(trust_scale=1e9).run([10, 11, 12], 24, sample)]
    [8, 8, 8]
    """

    name = "guarded-progressive"

    def __init__(
        self,
        predictor: Any = "beta",
        *,
        trust_scale: float = 16.0,
        first_round_uniform: bool = True,
        zero_variance_gate: tuple[float, float] | None = None,
        **options: Any,
    ):
        """``options``: the keywords of `PosteriorProgressive` (features, round_fractions, objective,
        estimator, aggregation, lower, upper, improvement_options, max_prior_strength, seed), except
        ``allow_skip`` / ``skip_cost``: the default never skips a prompt."""
        if zero_variance_gate is not None and not 0.0 <= zero_variance_gate[0] < zero_variance_gate[1] <= 1.0:
            raise ValueError(
                f"zero_variance_gate must be (low, high) with 0 <= low < high <= 1, got {zero_variance_gate}"
            )
        if not check_real(trust_scale, "trust_scale") > 0:  # inf allowed: Uniform's counts
            raise ValueError(f"trust_scale must be > 0, got {trust_scale}")
        for never in ("allow_skip", "skip_cost"):
            if never in options:
                raise TypeError(f"GuardedProgressive never skips a prompt: it takes no {never!r}")
        super().__init__(predictor, allow_skip=False, **options)
        self.trust_scale = float(trust_scale)
        self.first_round_uniform = bool(first_round_uniform)
        self.last_trust: list[float] = []
        self.tracker = RegimeTracker()
        self.zero_variance_gate = None if zero_variance_gate is None else tuple(map(float, zero_variance_gate))
        self._rho = 0.0
        self._gate = 1.0

    def persistence(self) -> float:
        """rho: the measured persistence of p in this run (`measured_persistence`)."""
        return measured_persistence(self.tracker)

    def gate(self) -> float:
        """g in [0, 1]: 1 without a ``zero_variance_gate``; else the run's mean zero-variance group
        fraction z so far mapped linearly from (low, high) to (0, 1), clipped (1 before any step)."""
        if self.zero_variance_gate is None:
            return 1.0
        z = self.tracker.metrics()["regime/zero_variance_fraction_mean"]
        if not np.isfinite(z):
            return 1.0
        low, high = self.zero_variance_gate
        return float(np.clip((z - low) / (high - low), 0.0, 1.0))

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        self._rho = self.persistence()
        self._gate = self.gate()
        rewards = super()._run(prompts, budget, sample)
        self.tracker.update(list(prompts), [np.asarray(r, dtype=float) for r in rewards])
        if self.last_metrics is not None:
            self.last_metrics["trust"] = list(self.last_trust)
            self.last_metrics["persistence"] = self._rho
        return rewards

    def stores_prompts(self) -> bool:
        """Always: the tracker keeps each prompt's last visit, whatever the predictor keeps."""
        return True

    def _extra_state(self) -> StateDict:
        return {**super()._extra_state(), "tracker": self.tracker.state_dict()}

    def _load_extra_state(self, state: StateDict) -> None:
        """The tracker's state is checked in full before the predictor's is loaded (which checks
        its own first), so a refused state of either part leaves both as they were."""
        if "tracker" not in state:
            raise ValueError(f"GuardedProgressive state, {describe(state, 'tracker')}: missing")
        tracker = RegimeTracker.from_state(state["tracker"])
        super()._load_extra_state(state)
        self.tracker = tracker

    def trust(self, evidence: np.ndarray) -> float:
        """lambda = mean_q e_q / (e_q + kappa) for evidence e_q in pseudo-rollouts (0 = Uniform)."""
        e = np.clip(np.asarray(evidence, dtype=float), 0.0, None)
        return float(np.mean(e / (e + self.trust_scale)))

    def _round_increments(self, rnd: Round) -> np.ndarray | None:
        if rnd.number == 0:
            self.last_trust = []
        even = equal_split(rnd.size, rnd.counts.size)
        evidence = self._rho * rnd.prior_strength + rnd.counts
        lam = 0.0 if (rnd.number == 0 and self.first_round_uniform) else self._gate * self.trust(evidence)
        fits = bool(np.all(rnd.counts + even <= rnd.upper) and np.all(rnd.counts + even >= self.lower))
        if lam == 0.0 and fits:
            self.last_trust.append(0.0)
            return even
        best = super()._round_increments(rnd)
        if best is None or not fits:
            self.last_trust.append(1.0 if best is not None else float("nan"))
            return best
        self.last_trust.append(lam)
        return shrink_toward(even, best, lam)

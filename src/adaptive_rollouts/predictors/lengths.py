"""`LengthBelief`: what a rollout of a prompt is expected to cost in generated tokens.

In reasoning RL a failed rollout is often much longer than a successful one (it runs on, or to the
cap), so a prompt's expected tokens per rollout depend on its chance of success p:

    E[L_q] = p_q m_q(1) + (1 - p_q) m_q(0),

with m_q(s) the prompt's mean length of a success (s = 1) and of a failure (s = 0). Each m_q(s) is
the prompt's own mean shrunk towards the mean over all prompts (its outcome pooled):

    m_q(s) = (S_q(s) + w M(s)) / (N_q(s) + w),     M(s) = S(s) / N(s),

with N_q(s), S_q(s) the (discounted) count and token sum of the prompt's rollouts with outcome s,
N(s), S(s) the same over every prompt, and ``prior_weight`` w pseudo-rollouts. A prompt never seen
gets M(s); an outcome never seen anywhere gets the other outcome's pooled mean. A rollout's outcome
weighs it: reward r (clipped to [0, 1]) counts r towards s = 1 and 1 - r towards s = 0, so binary
rewards split exactly and graded ones in proportion. Lengths drift over training: at each update the
pooled sums, and a prompt's sums when it is seen again, are multiplied by ``discount`` first.

``this_step`` lengths (the pilot of the step under way) enter the prompt's sums for one estimate
without being kept; `update` keeps a step's lengths once it is over. Pure numpy; the state is a
JSON-able dict.

>>> belief = LengthBelief()
>>> belief.known
False
>>> belief.update(["a", "b"], [np.array([1.0, 0.0]), np.array([0.0, 0.0])], [np.array([100, 300]), np.array([500, 700])])
>>> belief.rollout_tokens(["a", "b", "new"], np.array([0.5, 0.0, 0.5])).round(1).tolist()
[266.7, 550.0, 300.0]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_range
from ..state.checks import StateReader
from ..types import StateDict

__all__ = ["LengthBelief"]

# columns of the per-prompt and pooled statistics: count and token sum of failures, then of successes
_N0, _S0, _N1, _S1 = range(4)


class LengthBelief:
    """Per prompt, the expected completion length of a success and of a failure (module docstring).

    ``prior_weight``: pseudo-rollouts of the pooled mean in each prompt's estimate (> 0);
    ``discount``: the weight left to earlier lengths at each update (in (0, 1]).
    """

    def __init__(self, prior_weight: float = 2.0, discount: float = 0.9):
        self.prior_weight = check_range(prior_weight, "prior_weight", 0.0)
        self.discount = check_range(discount, "discount", 0.0, 1.0)
        self._rows: dict[Hashable, int] = {}
        self._stats = np.zeros((0, 4))
        self._pooled = np.zeros(4)

    @property
    def known(self) -> bool:
        """Whether any length has been seen (before that the allocator counts rollouts)."""
        return bool(self._pooled[_N0] + self._pooled[_N1] > 0)

    @staticmethod
    def _sums(rewards: Sequence[np.ndarray], lengths: Sequence[np.ndarray]) -> np.ndarray:
        """[Q, 4] counts and token sums per outcome of each prompt's rollouts (the scored ones: the
        first len(rewards[i]) lengths; unscored rollouts have no outcome)."""
        out = np.zeros((len(rewards), 4))
        for i, (r, n) in enumerate(zip(rewards, lengths)):
            r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
            n = np.asarray(n, dtype=float)[: r.size]
            out[i] = (float((1.0 - r).sum()), float(((1.0 - r) * n).sum()), float(r.sum()), float((r * n).sum()))
        return out

    def _prompt_stats(self, prompts: Sequence[Hashable]) -> np.ndarray:
        rows = np.array([self._rows.get(p, -1) for p in prompts], dtype=np.int64)
        stats = np.zeros((len(prompts), 4))
        seen = rows >= 0
        stats[seen] = self._stats[rows[seen]]
        return stats

    def _pooled_means(self) -> tuple[float, float]:
        """M(0), M(1): the pooled mean length of a failure and of a success (the other's when one
        outcome was never seen)."""
        n0, s0, n1, s1 = self._pooled.tolist()
        m0 = s0 / n0 if n0 > 0 else None
        m1 = s1 / n1 if n1 > 0 else None
        if m0 is None and m1 is None:
            raise RuntimeError("internal error: LengthBelief used before any length was seen (check `known`)")
        return (m0 if m0 is not None else m1), (m1 if m1 is not None else m0)  # type: ignore[return-value]

    def means(
        self,
        prompts: Sequence[Hashable],
        this_step: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """m_q(0), m_q(1) per prompt; ``this_step``: (rewards, lengths) of the step under way, one
        entry per prompt, counted in without being kept."""
        stats = self._prompt_stats(prompts)
        if this_step is not None:
            stats = stats + self._sums(*this_step)
        m0, m1 = self._pooled_means()
        w = self.prior_weight
        fail = (stats[:, _S0] + w * m0) / (stats[:, _N0] + w)
        success = (stats[:, _S1] + w * m1) / (stats[:, _N1] + w)
        return fail, success

    def rollout_tokens(
        self,
        prompts: Sequence[Hashable],
        p: np.ndarray,
        this_step: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
    ) -> np.ndarray:
        """E[L_q] = p_q m_q(1) + (1 - p_q) m_q(0): the expected tokens of one more rollout of each
        prompt whose chance of success is ``p`` (expected; clipped to [0, 1])."""
        fail, success = self.means(prompts, this_step)
        p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
        return p * success + (1.0 - p) * fail

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray], lengths: Sequence[np.ndarray]) -> None:
        """Keep a finished step's lengths (checked by the caller, `checks.lengths.check_lengths`):
        the pooled sums and those of the prompts seen are discounted, then the step's added."""
        sums = self._sums(rewards, lengths)
        seen = (sums[:, _N0] + sums[:, _N1]) > 0
        if not seen.any():
            return
        self._pooled = self.discount * self._pooled + sums[seen].sum(axis=0)
        new: list[np.ndarray] = []
        for p, row in zip([p for p, s in zip(prompts, seen) if s], sums[seen]):
            i = self._rows.get(p)
            if i is None:
                self._rows[p] = len(self._rows)
                new.append(row)
            elif i < self._stats.shape[0]:
                self._stats[i] = self.discount * self._stats[i] + row
            else:  # a prompt listed twice in one step, first seen in it
                new[i - self._stats.shape[0]] = self.discount * new[i - self._stats.shape[0]] + row
        if new:
            self._stats = np.vstack([self._stats, np.asarray(new)])

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> StateDict:
        return {
            "class": "LengthBelief",
            "prior_weight": self.prior_weight,
            "discount": self.discount,
            "keys": list(self._rows),
            "stats": self._stats.tolist(),
            "pooled": self._pooled.tolist(),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the state; every value checked first (counts and sums >= 0 and finite, distinct
        keys, the constructor's ranges; no sum without a count), and a refused state changes nothing."""
        reader = StateReader(state, "LengthBelief", ["prior_weight", "discount", "keys", "stats", "pooled"])
        unknown = sorted(set(state) - {"class", "prior_weight", "discount", "keys", "stats", "pooled"}, key=str)
        if unknown:
            raise reader.error(None, f"unknown entries {unknown}")
        prior_weight = reader.real("prior_weight", low=0.0, low_open=True)
        discount = reader.real("discount", low=0.0, high=1.0, low_open=True)
        keys = reader.keys()
        empty = not keys and isinstance(state["stats"], (list, tuple, np.ndarray)) and len(state["stats"]) == 0
        stats = np.zeros((0, 4)) if empty else reader.array("stats", (len(keys), 4), low=0.0)
        pooled = reader.array("pooled", (4,), low=0.0)
        for name, arr in (("stats", stats), ("pooled", pooled.reshape(1, 4))):
            orphan = np.flatnonzero(((arr[:, _S0] > 0) & (arr[:, _N0] <= 0)) | ((arr[:, _S1] > 0) & (arr[:, _N1] <= 0)))
            if orphan.size:
                raise reader.error(name, f"tokens without rollouts at row {int(orphan[0])}")
        self.prior_weight, self.discount = prior_weight, discount
        self._rows = {k: i for i, k in enumerate(keys)}
        self._stats, self._pooled = stats, pooled

"""Blend a model's prediction with a prompt's own last visit, by an evidence weight chosen online."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..state_checks import StateReader
from ..types import StateDict
from ..validation import check_choice, check_range
from ._common import RowIndex, grow

__all__ = ["LastVisitBlend", "BLEND_STRENGTHS"]

BLEND_STRENGTHS = (np.inf, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5)
CRITERIA = ("log-loss", "abs")  # how a blend strength is scored on revisits


class LastVisitBlend:
    """Posterior mean of p with the model's prediction as a Beta prior of strength kappa, updated
    with the s successes of the n rollouts of the prompt's last visit:

        mean = (kappa m + s) / (kappa + n),      var = mean (1 - mean) / (kappa + n + 1),

    (kappa = inf: the model's (m, v) unchanged; a prompt never seen: unchanged). kappa is the
    candidate of ``strengths`` with the lowest discounted score on revisits so far: each update,
    before the new rewards enter, every candidate's prediction of the revisited prompts is scored
    on those rewards; scores decay by ``discount`` per update. ``criterion`` "log-loss" (default:
    -log P of the rewards, p clipped to [1e-3, 1 - 1e-3], a proper scoring rule, so the belief
    stays calibrated) or "abs" (|mean - the visit's mean reward|, which favours the median: lower
    error on extreme p at some cost in log-loss). So the per-prompt history gets exactly the weight that has predicted the next visit
    best in this run: none where the model already knows better (kappa = inf), most where p is
    extreme and persistent in a way the model's features and prior cannot express.

    >>> blend = LastVisitBlend()
    >>> for _ in range(3):   # prompt "a" always fails; the model keeps saying 0.3
    ...     blend.observe(["a"], np.array([0.0]), np.array([8.0]), np.array([0.3]))
    >>> mean, var = blend.adjust(["a", "new"], np.array([0.3, 0.3]), np.array([0.01, 0.01]))
    >>> blend.strength, mean.round(3).tolist()
    (0.5, [0.018, 0.3])
    """

    def __init__(
        self, strengths: Sequence[float] = BLEND_STRENGTHS, discount: float = 0.99, criterion: str = "log-loss"
    ):
        s = np.asarray(strengths, dtype=float)
        if s.ndim != 1 or s.size == 0 or np.any(s <= 0):
            raise ValueError(f"strengths must be a non-empty list of values > 0 (inf allowed), got {list(strengths)}")
        self.strengths = s
        self.discount = check_range(discount, "discount", 0.0, 1.0, high_closed=True)
        self.criterion = check_choice("criterion", criterion, CRITERIA)
        self.scores = np.zeros(s.size)
        self._index = RowIndex()
        self._succ = np.zeros(0)
        self._count = np.zeros(0)

    @property
    def strength(self) -> float:
        """The kappa in use (lowest score; the first candidate, inf by default, on ties)."""
        return float(self.strengths[int(np.argmin(self.scores))])

    def _last(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        rows = self._index.lookup(prompts)
        known = rows >= 0
        s, n = np.zeros(len(prompts)), np.zeros(len(prompts))
        s[known], n[known] = self._succ[rows[known]], self._count[rows[known]]
        return s, n

    @staticmethod
    def _blend(
        kappa: float, m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if np.isinf(kappa):
            return m, v
        has = n > 0
        mean = np.where(has, (kappa * m + s) / (kappa + n), m)
        var = np.where(has, mean * (1.0 - mean) / (kappa + n + 1.0), v)
        return mean, var

    def adjust(self, prompts: Sequence[Hashable], mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The blended (mean, var) for ``prompts`` given the model's (mean, var)."""
        s, n = self._last(list(prompts))
        return self._blend(self.strength, np.asarray(mean, float), np.asarray(var, float), s, n)

    def observe(
        self, prompts: Sequence[Hashable], successes: np.ndarray, counts: np.ndarray, model_mean: np.ndarray
    ) -> None:
        """Score every candidate on this visit (``model_mean``: the model's prediction *before* it
        saw these rewards), then remember the visit. Prompts with ``counts`` 0 are ignored."""
        prompts = list(prompts)
        successes, counts = np.asarray(successes, float), np.asarray(counts, float)
        keep = counts > 0
        prompts = [p for p, k in zip(prompts, keep) if k]
        successes, counts, m = successes[keep], counts[keep], np.asarray(model_mean, float)[keep]
        if not prompts:
            return
        s, n = self._last(prompts)
        seen = n > 0
        self.scores *= self.discount
        if seen.any():
            for j, kappa in enumerate(self.strengths):
                p, _ = self._blend(kappa, m[seen], np.zeros(int(seen.sum())), s[seen], n[seen])
                k, c = successes[seen], counts[seen]
                if self.criterion == "abs":
                    self.scores[j] += float(np.abs(p - k / c).sum())
                else:
                    p = np.clip(p, 1e-3, 1.0 - 1e-3)
                    self.scores[j] -= float(k @ np.log(p) + (c - k) @ np.log1p(-p))
        rows = self._index.add(prompts, self._index.lookup(prompts))
        size = len(self._index)
        self._succ, self._count = grow(self._succ, size, 0.0), grow(self._count, size, 0.0)
        self._succ[rows], self._count[rows] = successes, counts

    def state_dict(self) -> StateDict:
        return {
            "strengths": self.strengths.copy(),
            "discount": self.discount,
            "criterion": self.criterion,
            "scores": self.scores.copy(),
            **self._index.state(successes=self._succ, counts=self._count),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the blend's state; every value is checked first and a refused state changes nothing."""
        reader = StateReader(
            state, "LastVisitBlend", ["strengths", "discount", "scores", "keys", "successes", "counts"]
        )
        keys = reader.keys()
        strengths = np.asarray(state["strengths"], dtype=float).reshape(-1)  # inf = the GP alone
        if strengths.size == 0 or np.any(np.isnan(strengths) | (strengths < 0)):
            raise reader.error("strengths", f"must be a non-empty list of values >= 0 (inf allowed), got {strengths}")
        scores = reader.array("scores", strengths.shape)
        succ = reader.array("successes", (len(keys),), low=0.0)
        count = reader.array("counts", (len(keys),), low=0.0)
        if np.any(succ > count):
            raise reader.error("successes", "more successes than rollouts for some prompt")
        discount = reader.real("discount", low=0.0, high=1.0, low_open=True)
        criterion = reader.hyperparameters(
            check_choice, [], name="criterion", value=str(state.get("criterion", "log-loss")), allowed=CRITERIA
        )
        self.strengths, self.discount, self.scores = strengths, discount, scores
        self.criterion = criterion
        self._index = RowIndex(keys)
        self._succ, self._count = succ, count

"""Blend a model's prediction with a prompt's own last visit, by an evidence weight chosen online."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_choice, check_range
from ..state.checks import StateReader
from ..types import StateDict
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
    on those rewards; scores decay by ``discount`` per update.

    ``split_unanimous`` (default): two kappas, one for prompts whose last visit was unanimous (every
    reward 0, or every reward 1) and one for the rest, each chosen on its own revisits. A unanimous
    visit is where a smooth model is least right: its Gaussian belief on the logit is pulled toward
    0.5 while such prompts mostly stay at 0 or 1 (zero-variance groups persist across epochs);
    a mixed visit is where the model's smoothing of a noisy 8-rollout mean helps.

    ``criterion``: "abs" (default: |mean - the visit's mean reward|; it favours the median, which on
    extreme p is the better point prediction and gives the better E[p (1 - p)], the quantity the
    allocators act on) or "log-loss" (-log P of the rewards, p clipped to [1e-3, 1 - 1e-3], a proper
    scoring rule: the mean stays calibrated). So the per-prompt history gets exactly the weight that
    has predicted the next visit best in this run: none where the model already knows better
    (kappa = inf), most where p is extreme and persistent in a way the model's features and prior
    cannot express.

    >>> blend = LastVisitBlend()
    >>> for _ in range(3):   # prompt "a" always fails; the model keeps saying 0.3
    ...     blend.observe(["a"], np.array([0.0]), np.array([8.0]), np.array([0.3]))
    >>> mean, var = blend.adjust(["a", "new"], np.array([0.3, 0.3]), np.array([0.01, 0.01]))
    >>> blend.strength(unanimous=True), blend.strength(unanimous=False), mean.round(3).tolist()
    (0.5, inf, [0.018, 0.3])
    """

    def __init__(
        self,
        strengths: Sequence[float] = BLEND_STRENGTHS,
        discount: float = 0.99,
        criterion: str = "abs",
        split_unanimous: bool = True,
    ):
        s = np.asarray(strengths, dtype=float)
        if s.ndim != 1 or s.size == 0 or np.any(s <= 0):
            raise ValueError(f"strengths must be a non-empty list of values > 0 (inf allowed), got {list(strengths)}")
        self.strengths = s
        self.discount = check_range(discount, "discount", 0.0, 1.0, high_closed=True)
        self.criterion = check_choice("criterion", criterion, CRITERIA)
        self.split_unanimous = bool(split_unanimous)
        self.scores = np.zeros((2 if self.split_unanimous else 1, s.size))  # [group, candidate]
        self._index = RowIndex()
        self._succ = np.zeros(0)
        self._count = np.zeros(0)

    def strength(self, unanimous: bool = False) -> float:
        """The kappa in use for prompts whose last visit was (not) unanimous: the lowest score, the
        first candidate (inf by default) on ties; one kappa for all without ``split_unanimous``."""
        row = self.scores[1 if unanimous and self.split_unanimous else 0]
        return float(self.strengths[int(np.argmin(row))])

    def _groups(self, s: np.ndarray, n: np.ndarray) -> np.ndarray:
        """Row of ``scores`` per prompt: 1 where the last visit was unanimous (with the split)."""
        if not self.split_unanimous:
            return np.zeros(len(n), dtype=np.int64)
        return ((n > 0) & ((s == 0) | (s == n))).astype(np.int64)

    def _last(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        rows = self._index.lookup(prompts)
        known = rows >= 0
        s, n = np.zeros(len(prompts)), np.zeros(len(prompts))
        s[known], n[known] = self._succ[rows[known]], self._count[rows[known]]
        return s, n

    @staticmethod
    def _blend(
        kappa: float | np.ndarray, m: np.ndarray, v: np.ndarray, s: np.ndarray, n: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The formula above, per prompt (``kappa`` a scalar or one per prompt; inf: the model)."""
        kappa = np.broadcast_to(np.asarray(kappa, dtype=float), np.shape(m))
        use = (n > 0) & np.isfinite(kappa)
        k = np.where(use, kappa, 1.0)  # placeholder where unused: keeps inf out of the arithmetic
        mean = np.where(use, (k * m + s) / (k + n), m)
        var = np.where(use, mean * (1.0 - mean) / (k + n + 1.0), v)
        return mean, var

    def adjust(self, prompts: Sequence[Hashable], mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The blended (mean, var) for ``prompts`` given the model's (mean, var)."""
        s, n = self._last(list(prompts))
        mean, var = np.asarray(mean, float), np.asarray(var, float)
        kappa = self.strengths[np.argmin(self.scores, axis=1)][self._groups(s, n)]
        return self._blend(kappa, mean, var, s, n)

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
        groups = self._groups(s, n)
        self.scores *= self.discount
        for g in range(self.scores.shape[0]):
            seen = (n > 0) & (groups == g)
            if seen.any():
                k, c = successes[seen], counts[seen]
                for j, kappa in enumerate(self.strengths):
                    p, _ = self._blend(kappa, m[seen], np.zeros(int(seen.sum())), s[seen], n[seen])
                    if self.criterion == "abs":
                        self.scores[g, j] += float(np.abs(p - k / c).sum())
                    else:
                        p = np.clip(p, 1e-3, 1.0 - 1e-3)
                        self.scores[g, j] -= float(k @ np.log(p) + (c - k) @ np.log1p(-p))
        rows = self._index.add(prompts, self._index.lookup(prompts))
        size = len(self._index)
        self._succ, self._count = grow(self._succ, size, 0.0), grow(self._count, size, 0.0)
        self._succ[rows], self._count[rows] = successes, counts

    def state_dict(self) -> StateDict:
        return {
            "strengths": self.strengths.copy(),
            "discount": self.discount,
            "criterion": self.criterion,
            "split_unanimous": self.split_unanimous,
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
        split = bool(state.get("split_unanimous", False))  # states saved before the split had one kappa
        groups = 2 if split else 1
        legacy = not split and np.ndim(state["scores"]) == 1
        scores = reader.array("scores", strengths.shape if legacy else (groups, strengths.size)).reshape(groups, -1)
        succ = reader.array("successes", (len(keys),), low=0.0)
        count = reader.array("counts", (len(keys),), low=0.0)
        if np.any(succ > count):
            raise reader.error("successes", "more successes than rollouts for some prompt")
        discount = reader.real("discount", low=0.0, high=1.0, low_open=True)
        criterion = reader.hyperparameters(
            check_choice, [], name="criterion", value=str(state.get("criterion", "log-loss")), allowed=CRITERIA
        )
        self.strengths, self.discount, self.scores = strengths, discount, scores
        self.split_unanimous = split
        self.criterion = criterion
        self._index = RowIndex(keys)
        self._succ, self._count = succ, count

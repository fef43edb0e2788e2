"""Knapsack-RL / GRESO: the success rate over a prompt's most recent observations."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_prompts
from ..state.checks import StateReader, restore_on_error
from ..types import Prediction, StateDict
from ._common import RowIndex, check_batch, check_prior_mean, empirical_prediction, grow


def _check_window(window: int) -> int:
    if isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    return int(window)


class WindowedMean:
    """Success rate over the last `window` times a prompt was rolled out.

        p_hat_q = sum_{j in last W visits} s_qj / sum_{j in last W visits} n_qj
        Var     = p_hat_q (1 - p_hat_q) / sum n_qj

    Knapsack-RL (Li et al. 2025) plugs in the previous epoch's success rate (``window=1``, the
    default); GRESO (Zheng et al. 2025) keeps the last few epochs' results per prompt (``window=k``).
    A prompt with no rollouts gets the prior: mean `prior_mean`, variance 1/12.

    >>> pred = WindowedMean(window=2)
    >>> for r in ([1.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0]):
    ...     pred.update(["a"], [np.array(r)])
    >>> pred.predict(["a", "new"]).mean.tolist()   # last two visits: 1 success of 6
    [0.16666666666666666, 0.5]
    """

    stores_prompts = True  # keeps per-prompt state keyed by prompt: prompts must be checkpointable

    def __init__(self, window: int = 1, prior_mean: float = 0.5):
        self.window = _check_window(window)
        self.prior_mean = check_prior_mean(prior_mean)
        self._index = RowIndex()
        self._sums = np.zeros((0, self.window))  # ring buffer of the last W visits
        self._counts = np.zeros((0, self.window))
        self._next = np.zeros(0, dtype=np.int64)  # next slot per prompt

    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        rows = self._index.lookup(prompts)
        known = rows >= 0
        count, total = np.zeros(len(prompts)), np.zeros(len(prompts))
        count[known] = self._counts[rows[known]].sum(axis=1)
        total[known] = self._sums[rows[known]].sum(axis=1)
        return empirical_prediction(count, total, self.prior_mean)

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        observed = counts > 0  # a skipped prompt (no rollouts) is no visit
        prompts = [p for p, o in zip(prompts, observed) if o]
        rows = self._index.add(prompts, self._index.lookup(prompts))
        n = len(self._index)
        self._sums, self._counts = grow(self._sums, n, 0.0), grow(self._counts, n, 0.0)
        self._next = grow(self._next, n, 0)
        slots = self._next[rows]
        self._sums[rows, slots] = successes[observed]
        self._counts[rows, slots] = counts[observed]
        self._next[rows] = (slots + 1) % self.window

    def state_dict(self) -> StateDict:
        return {
            "class": "WindowedMean",
            "window": self.window,
            "prior_mean": self.prior_mean,
            **self._index.state(sums=self._sums, counts=self._counts, next=self._next),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (0 <= sums <= counts,
        finite, slots in [0, window), distinct keys, the constructor's ranges), and a refused state
        changes nothing."""
        reader = StateReader(state, "WindowedMean", ["window", "prior_mean", "keys", "sums", "counts", "next"])
        window = reader.hyperparameters(_check_window, ["window"])
        prior_mean = reader.hyperparameters(check_prior_mean, ["prior_mean"])
        keys = reader.keys()
        counts = reader.array("counts", (len(keys), window), low=0.0)
        sums = reader.array("sums", (len(keys), window), low=0.0)
        if np.any(sums > counts):
            raise reader.error("sums", "a visit's reward sum exceeds its number of rollouts (rewards are in [0, 1])")
        nxt = reader.array("next", (len(keys),), dtype=np.int64, low=0, high=window - 1)
        with restore_on_error(self):
            self.window, self.prior_mean = window, prior_mean
            self._index = RowIndex(keys)
            self._sums, self._counts, self._next = sums, counts, nxt

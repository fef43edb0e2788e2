"""DynaMO's predictor: the cumulative success rate of every rollout a prompt has had."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..types import Prediction, StateDict
from ..validation import check_prompts
from ._common import RowIndex, check_batch, check_state_keys, empirical_prediction, grow


class CumulativeMean:
    """Cumulative mean of all rewards seen for a prompt (DynaMO, Neyman allocation's p estimate).

        p_hat_q = S_q / N_q,   S_q = sum of all rewards of q so far,   N_q = their number
        Var     = p_hat_q (1 - p_hat_q) / N_q        (squared standard error of the mean)

    A prompt with no rollouts yet gets the prior: mean `prior_mean`, variance 1/12 (uniform p).

    >>> pred = CumulativeMean()
    >>> pred.update(["a", "b"], [np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0])])
    >>> pred.update(["a"], [np.array([0.0, 0.0, 0.0, 1.0])])
    >>> pred.predict(["a", "b", "new"]).mean.tolist()
    [0.5, 0.0, 0.5]
    """

    def __init__(self, prior_mean: float = 0.5):
        if not 0.0 < prior_mean < 1.0:
            raise ValueError(f"prior_mean must be in (0, 1), got {prior_mean}")
        self.prior_mean = float(prior_mean)
        self._index = RowIndex()
        self._sum = np.zeros(0)
        self._count = np.zeros(0)

    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        rows = self._index.lookup(prompts)
        known = rows >= 0
        count, total = np.zeros(len(prompts)), np.zeros(len(prompts))
        count[known] = self._count[rows[known]]
        total[known] = self._sum[rows[known]]
        return empirical_prediction(count, total, self.prior_mean)

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        rows = self._index.add(prompts, self._index.lookup(prompts))
        self._sum = grow(self._sum, len(self._index), 0.0)
        self._count = grow(self._count, len(self._index), 0.0)
        self._sum[rows] += successes
        self._count[rows] += counts

    def state_dict(self) -> StateDict:
        n = len(self._index)
        return {
            "class": "CumulativeMean",
            "prior_mean": self.prior_mean,
            "keys": list(self._index.keys),
            "sum": self._sum[:n].copy(),
            "count": self._count[:n].copy(),
        }

    def load_state_dict(self, state: StateDict) -> None:
        check_state_keys(state, ["prior_mean", "keys", "sum", "count"], "CumulativeMean")
        keys = list(state["keys"])
        arrays = [np.array(state[k], dtype=np.float64) for k in ("sum", "count")]
        if any(a.shape != (len(keys),) for a in arrays):
            raise ValueError(f"state arrays must have shape ({len(keys)},) to match keys")
        self.prior_mean = float(state["prior_mean"])
        self._index = RowIndex(keys)
        self._sum, self._count = arrays

"""DynaMO's predictor: the cumulative success rate of every rollout a prompt has had."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_prompts
from ..state.checks import StateReader, restore_on_error
from ..types import Prediction, StateDict
from ._common import RowIndex, check_batch, check_prior_mean, empirical_prediction, grow


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

    stores_prompts = True  # keeps per-prompt state keyed by prompt: prompts must be checkpointable

    def __init__(self, prior_mean: float = 0.5):
        self.prior_mean = check_prior_mean(prior_mean)
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
        return {
            "class": "CumulativeMean",
            "prior_mean": self.prior_mean,
            **self._index.state(sum=self._sum, count=self._count),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (0 <= sum <= count, finite,
        distinct keys, the constructor's ranges), and a refused state changes nothing."""
        reader = StateReader(state, "CumulativeMean", ["prior_mean", "keys", "sum", "count"])
        prior_mean = reader.hyperparameters(check_prior_mean, ["prior_mean"])
        keys = reader.keys()
        count = reader.array("count", (len(keys),), low=0.0)
        total = reader.array("sum", (len(keys),), low=0.0)
        if np.any(total > count):
            raise reader.error("sum", "a prompt's reward sum exceeds its number of rollouts (rewards are in [0, 1])")
        with restore_on_error(self):
            self.prior_mean = prior_mean
            self._index = RowIndex(keys)
            self._sum, self._count = total, count

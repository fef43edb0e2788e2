"""MoPPS / SPO: a Beta posterior per prompt whose counts are discounted toward the prior."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_prompts, check_range
from ..objectives.beta import beta_mean_var
from ..state.checks import StateReader, restore_on_error
from ..types import Prediction, StateDict
from ._common import RowIndex, check_batch, grow


def _hyperparameters(discount: float, prior_alpha: float, prior_beta: float) -> tuple[float, float, float]:
    """The constructor's checks (also applied to a loaded state)."""
    return (
        check_range(discount, "discount", 0.0, 1.0, low_closed=True, high_closed=True),
        check_range(prior_alpha, "prior_alpha", 0.0),
        check_range(prior_beta, "prior_beta", 0.0),
    )


class DiscountedBeta:
    """Per-prompt Beta(alpha, beta) posterior with exponential forgetting (MoPPS, Qu et al. 2025;
    SPO's per-prompt value tracker is the same rule with a discount on the success rate).

    Each time prompt q is observed with s successes (sum of rewards) out of n rollouts:

        alpha_q <- lambda alpha_q + (1 - lambda) alpha_0 + s
        beta_q  <- lambda beta_q  + (1 - lambda) beta_0  + (n - s)

    p ~ Beta(alpha_q, beta_q): mean alpha / (alpha + beta), variance
    alpha beta / ((alpha + beta)^2 (alpha + beta + 1)). As in MoPPS the discount applies when the
    prompt is observed (not on every training step); an unseen prompt has the prior Beta(alpha_0, beta_0).

    >>> pred = DiscountedBeta(discount=0.5)
    >>> pred.update(["a"], [np.array([1.0, 1.0, 1.0, 0.0])])   # alpha = 1 + 3, beta = 1 + 1
    >>> pred.update(["a"], [np.array([0.0, 0.0])])              # alpha = 2.5, beta = 1 + 0.5 + 2
    >>> pred.predict(["a", "new"]).mean.round(4).tolist()
    [0.4167, 0.5]
    """

    stores_prompts = True  # keeps per-prompt state keyed by prompt: prompts must be checkpointable

    def __init__(self, discount: float = 0.9, prior_alpha: float = 1.0, prior_beta: float = 1.0):
        self.discount, self.prior_alpha, self.prior_beta = _hyperparameters(discount, prior_alpha, prior_beta)
        self._index = RowIndex()
        self._alpha = np.zeros(0)
        self._beta = np.zeros(0)

    def _params(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        rows = self._index.lookup(prompts)
        alpha = np.full(len(prompts), self.prior_alpha)
        beta = np.full(len(prompts), self.prior_beta)
        known = rows >= 0
        alpha[known] = self._alpha[rows[known]]
        beta[known] = self._beta[rows[known]]
        return alpha, beta

    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        alpha, beta = self._params(check_prompts(prompts, nonempty=False, distinct=False))
        return Prediction(*beta_mean_var(alpha, beta))

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        observed = counts > 0
        prompts = [p for p, o in zip(prompts, observed) if o]
        successes, counts = successes[observed], counts[observed]
        alpha, beta = self._params(prompts)
        lam = self.discount
        alpha = lam * alpha + (1.0 - lam) * self.prior_alpha + successes
        beta = lam * beta + (1.0 - lam) * self.prior_beta + (counts - successes)
        rows = self._index.add(prompts, self._index.lookup(prompts))
        self._alpha = grow(self._alpha, len(self._index), self.prior_alpha)
        self._beta = grow(self._beta, len(self._index), self.prior_beta)
        self._alpha[rows] = alpha
        self._beta[rows] = beta

    def state_dict(self) -> StateDict:
        return {
            "class": "DiscountedBeta",
            "discount": self.discount,
            "prior_alpha": self.prior_alpha,
            "prior_beta": self.prior_beta,
            **self._index.state(alpha=self._alpha, beta=self._beta),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (alpha, beta > 0 and finite,
        distinct keys, the constructor's ranges), and a refused state changes nothing."""
        reader = StateReader(
            state, "DiscountedBeta", ["discount", "prior_alpha", "prior_beta", "keys", "alpha", "beta"]
        )
        hyper = reader.hyperparameters(_hyperparameters, ["discount", "prior_alpha", "prior_beta"])
        keys = reader.keys()
        alpha = reader.array("alpha", (len(keys),), low=0.0, low_open=True)
        beta = reader.array("beta", (len(keys),), low=0.0, low_open=True)
        with restore_on_error(self):
            self.discount, self.prior_alpha, self.prior_beta = hyper
            self._index = RowIndex(keys)
            self._alpha, self._beta = alpha, beta

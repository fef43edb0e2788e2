"""MoPPS / SPO: a Beta posterior per prompt whose counts are discounted toward the prior."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..types import Prediction, StateDict
from ..validation import check_prompts
from ._common import RowIndex, check_batch, check_state_keys, grow


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

    def __init__(self, discount: float = 0.9, prior_alpha: float = 1.0, prior_beta: float = 1.0):
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        if not (prior_alpha > 0 and prior_beta > 0):
            raise ValueError(f"prior_alpha and prior_beta must be > 0, got {prior_alpha}, {prior_beta}")
        self.discount = float(discount)
        self.prior_alpha = float(prior_alpha)
        self.prior_beta = float(prior_beta)
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
        total = alpha + beta
        return Prediction(alpha / total, alpha * beta / (total * total * (total + 1.0)))

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
        n = len(self._index)
        return {
            "class": "DiscountedBeta",
            "discount": self.discount,
            "prior_alpha": self.prior_alpha,
            "prior_beta": self.prior_beta,
            "keys": list(self._index.keys),
            "alpha": self._alpha[:n].copy(),
            "beta": self._beta[:n].copy(),
        }

    def load_state_dict(self, state: StateDict) -> None:
        check_state_keys(state, ["discount", "prior_alpha", "prior_beta", "keys", "alpha", "beta"], "DiscountedBeta")
        keys = list(state["keys"])
        alpha, beta = (np.array(state[k], dtype=np.float64) for k in ("alpha", "beta"))
        if alpha.shape != (len(keys),) or beta.shape != (len(keys),):
            raise ValueError(f"state alpha/beta must have shape ({len(keys)},) to match keys")
        self.discount = float(state["discount"])
        self.prior_alpha, self.prior_beta = float(state["prior_alpha"]), float(state["prior_beta"])
        self._index = RowIndex(keys)
        self._alpha, self._beta = alpha, beta

"""VIP's ablation predictor: ridge regression of the logit success rate on prompt embeddings."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..checks.validation import check_prompts, check_range
from ..embeddings import FeatureTable
from ..state.checks import StateReader, restore_on_error
from ..types import Encoder, Prediction, StateDict
from ._common import (
    check_batch,
    check_feature_space,
    check_features,
    delta_prediction,
    empirical_logit,
    encode,
    feature_model,
)


def _hyperparameters(alpha: float, prior_mean: float, clip: float, forgetting: float) -> tuple[float, ...]:
    """The constructor's checks (also applied to a loaded state)."""
    return (
        check_range(alpha, "alpha", 0.0),
        check_range(prior_mean, "prior_mean"),
        check_range(clip, "clip", 0.0, 0.5),
        check_range(forgetting, "forgetting", 0.0, 1.0, high_closed=True),
    )


class Ridge:
    """Ridge regression on embeddings (VIP, arXiv 2602.01601, ablation "ridge predictor + VIP").

    Every observed (prompt, step) pair is one row: z = [x, 1], target y = logit(clip(mean reward,
    eps, 1 - eps)) - m_0 (the same pseudo-observation as `PaperGP`), and

        w = (sum z z^T + lambda D)^-1 sum z y,    D = diag(1, ..., 1, 0)  (intercept unpenalised)
        g_q = m_0 + z_q^T w,   p_q = sigmoid(g_q)

    over all steps so far (``forgetting`` < 1 multiplies the sums by it before each step; the paper's
    ablation does not say, the default 1.0 keeps everything). Variance: the Bayesian-ridge posterior
    s_q = sigma^2 z_q^T (sum z z^T + lambda D)^-1 z_q with sigma^2 the residual mean square (1 before any
    data), mapped to p by the delta method Var[p] ~ (p (1 - p))^2 s_q (capped at p (1 - p)). Unknown prompts are fine as long
    as `features` can encode them.

    >>> table = FeatureTable(["a", "b", "c"], [[0.0], [1.0], [2.0]])
    >>> model = Ridge(table, alpha=1e-9, prior_mean=0.0)
    >>> model.update(["a", "c"], [np.array([1.0, 0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0, 0.0])])
    >>> model.predict(["b"]).mean.round(6).tolist()   # the line through logit(.25) and logit(.75)
    [0.5]
    """

    def __init__(
        self,
        features: FeatureTable | Encoder,
        alpha: float = 1.0,
        prior_mean: float = -1.0,
        clip: float = 1e-6,
        forgetting: float = 1.0,
    ):
        self.dim = check_features(features)
        self.alpha, self.prior_mean, self.clip, self.forgetting = _hyperparameters(alpha, prior_mean, clip, forgetting)
        self.features = features
        d = self.dim + 1
        self._gram = np.zeros((d, d))
        self._zy = np.zeros(d)
        self._yy = 0.0
        self._n = 0.0
        self._refit()

    def _refit(self) -> None:
        d = self.dim + 1
        penalty = np.full(d, self.alpha)
        penalty[-1] = 1e-9 * max(self.alpha, 1.0)  # intercept: unpenalised, kept invertible
        self._chol = cho_factor(self._gram + np.diag(penalty), lower=True)
        self._w = cho_solve(self._chol, self._zy)
        if self._n > 1:
            rss = self._yy - 2.0 * self._w @ self._zy + self._w @ self._gram @ self._w
            self._noise = max(rss, 0.0) / (self._n - 1.0)
        else:
            self._noise = 1.0

    def _design(self, prompts: list) -> np.ndarray:
        x = encode(self.features, prompts, self.dim)
        return np.hstack([x, np.ones((len(prompts), 1))])

    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        z = self._design(check_prompts(prompts, nonempty=False, distinct=False))
        g = self.prior_mean + z @ self._w
        if self._n > 0:
            s = self._noise * np.einsum("ij,ji->i", z, cho_solve(self._chol, z.T))
        else:
            s = np.ones(len(z))
        return delta_prediction(g, s)

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        z = self._design(prompts)
        observed = counts > 0
        z = z[observed]
        y = empirical_logit(successes[observed], counts[observed], self.clip) - self.prior_mean
        f = self.forgetting
        self._gram = f * self._gram + z.T @ z
        self._zy = f * self._zy + z.T @ y
        self._yy = f * self._yy + float(y @ y)
        self._n = f * self._n + float(observed.sum())
        self._refit()

    def state_dict(self) -> StateDict:
        return {
            "class": "Ridge",
            "dim": self.dim,
            "feature_model": feature_model(self.features),
            "alpha": self.alpha,
            "prior_mean": self.prior_mean,
            "clip": self.clip,
            "forgetting": self.forgetting,
            "gram": self._gram.copy(),
            "zy": self._zy.copy(),
            "yy": self._yy,
            "n": self._n,
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (finite sums, a symmetric
        Gram matrix with a non-negative diagonal, yy and n >= 0, the constructor's ranges), and a
        refused state changes nothing."""
        names = ["alpha", "prior_mean", "clip", "forgetting"]
        reader = StateReader(state, "Ridge", ["dim", "gram", "zy", "yy", "n", *names])
        check_feature_space(reader, self.features, self.dim)
        hyper = reader.hyperparameters(_hyperparameters, names)
        d = self.dim + 1
        gram, zy = reader.array("gram", (d, d)), reader.array("zy", (d,))
        if not np.allclose(gram, gram.T, rtol=1e-10, atol=0.0) or np.any(np.diag(gram) < 0):
            raise reader.error("gram", "must be symmetric with a non-negative diagonal (a sum of z z^T)")
        yy, n = reader.real("yy", low=0.0), reader.real("n", low=0.0)
        with restore_on_error(self):
            self.alpha, self.prior_mean, self.clip, self.forgetting = hyper
            self._gram, self._zy, self._yy, self._n = gram, zy, yy, n
            try:
                self._refit()
            except np.linalg.LinAlgError as err:
                raise reader.error("gram", f"the regularised Gram matrix is not positive definite ({err})") from None

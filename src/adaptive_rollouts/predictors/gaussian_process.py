"""Our success predictor: a drifting, count-aware GP over embeddings plus a per-prompt residual."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..checks.validation import check_prompts, check_range
from ..embeddings import FeatureTable
from ..state.checks import StateReader, restore_on_error
from ..types import Encoder, Prediction, StateDict
from ._common import (
    RowIndex,
    check_batch,
    check_feature_space,
    check_features,
    encode,
    feature_model,
    grow,
    logistic_normal_moments,
)
from .gaussian_updates import kalman_update, laplace_site
from .history_blend import LastVisitBlend
from .paper_gp import median_heuristic

_POSITIVE = ("signal_var", "bias_var", "residual_var", "shared_half_life", "residual_half_life")


def _hyperparameters(
    n_features: int,
    bandwidth: float | None,
    signal_var: float,
    bias_var: float,
    residual_var: float,
    prior_mean: float,
    shared_half_life: float,
    residual_half_life: float,
    seed: int,
) -> dict:
    """The constructor's checks (also applied to a loaded state); returns the values by name."""
    if isinstance(n_features, (bool, np.bool_)) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
        raise ValueError(f"n_features must be an integer >= 1, got {n_features!r}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    out: dict = {"n_features": int(n_features), "seed": int(seed)}
    values = dict(zip(_POSITIVE, (signal_var, bias_var, residual_var, shared_half_life, residual_half_life)))
    for name, value in values.items():
        out[name] = check_range(value, name, 0.0)
    out["prior_mean"] = check_range(prior_mean, "prior_mean")
    out["bandwidth"] = None if bandwidth is None else check_range(bandwidth, "bandwidth", 0.0)
    return out


class GaussianProcess:
    """Scalable, drift-aware, count-aware GP predictor of success probability (ours).

    Model, on the logit g_q,t of prompt q at step t:

        g_q,t = m_0 + f_t(x_q) + u_q,t
        f_t(x) = phi(x)^T w_t        phi: D random Fourier features of K(x,x') = exp(-|x-x'|^2/(2h^2))
                                      plus a bias; w ~ N(0, diag(s_f^2, ..., s_f^2, s_b^2))
        u_q,t                         per-prompt residual, prior N(0, tau^2), independent across prompts

    Drift: between consecutive steps w and every u decay toward their prior (Ornstein-Uhlenbeck):
    w_t = rho_w w_{t-1} + noise, u_t = rho_u u_{t-1} + noise, with the noise that keeps the prior
    variance stationary; rho = 0.5 ** (1 / half_life). A prompt unseen for many steps falls back to
    what its neighbours say; an often-seen one trusts its own (recent) history.

    Likelihood: the k successes (sum of rewards) of n rollouts are Binomial(n, sigmoid(g)); each step
    every observed prompt's likelihood is replaced by its Laplace approximation at the posterior
    mode (a Gaussian site with variance ~ 1/(n p(1-p)), so the count matters). Assumed-density filtering:
    the exact Gaussian posterior of (w, u_B) given the sites is computed - w by a Kalman update with u
    marginalised out, each u_q as its exact marginal - and then stored factorised (w and each u_q
    independent). Cost per step: O(B D^2 + min(B, D)^3) for B prompts (`kalman_update` takes the
    B x B form for small batches), independent of the pool size; memory: 3 numbers per seen prompt
    plus a key -> row dict.

    Prediction: g_q ~ N(mean, var) with both parts propagated one step ahead; E[p] and Var[p] of
    p = sigmoid(g) by 32-node Gauss-Hermite quadrature (so E[p(1-p)] = E[p] - E[p]^2 - Var[p] is exact
    under the Gaussian belief).

    History blend (``history_blend=True``, the default): the predicted (mean, var) of a prompt
    already seen is the Beta posterior with the GP's prediction as a prior of strength kappa,
    updated with the prompt's last visit (`LastVisitBlend`); kappa is chosen online among a few
    strengths (inf = the GP alone), separately for prompts whose last visit was unanimous (all
    rewards 0 or all 1) and for the rest, by discounted absolute error on revisits
    (``blend_criterion="abs"``, the default) or log-loss ("log-loss": the mean stays calibrated, at
    a higher point error on extreme p). On simulator training traces whose p is extreme per prompt
    in ways the features cannot see, this brought the GP's next-visit error below the last visit's
    while keeping a lower log-loss than every history-only predictor (docs/benchmark.md); where
    the GP already predicts better, kappa stays at inf.

    Hyperparameters (defaults; the benchmark benchmarks/predictors.py sweeps them): h = median pairwise
    distance of the first update's features (or of a FeatureTable's rows, a seeded sample of <= 1000;
    1.0 if the first update has a single distinct vector);
    D = 128 (256 gains < 1% log-loss in the benchmark at 3x the cost); s_f^2 = 1, s_b^2 = 4, tau^2 = 1, m_0 = 0 on the logit scale (p in roughly [0.02, 0.98]
    a priori); half-lives 50 steps for the shared part (it sees a whole batch each step) and 200 for
    the residuals.

    >>> table = FeatureTable(["a", "b", "far"], [[0.0, 0.0], [0.05, 0.0], [5.0, 5.0]])
    >>> gp = GaussianProcess(table, bandwidth=1.0, seed=0)
    >>> gp.update(["a", "far"], [np.ones(32), np.zeros(32)])
    >>> pred = gp.predict(["a", "b", "far"])   # b, never seen, borrows from its neighbour a
    >>> pred.mean.round(2).tolist(), bool(pred.var[1] > pred.var[0])
    ([0.88, 0.72, 0.12], True)
    """

    stores_prompts = True  # keeps per-prompt state keyed by prompt: prompts must be checkpointable
    n_features: int
    seed: int
    bandwidth: float | None
    signal_var: float
    bias_var: float
    residual_var: float
    prior_mean: float
    shared_half_life: float
    residual_half_life: float

    def __init__(
        self,
        features: FeatureTable | Encoder,
        n_features: int = 128,  # D
        bandwidth: float | None = None,  # h (None: the median heuristic)
        signal_var: float = 1.0,  # s_f^2
        bias_var: float = 4.0,  # s_b^2
        residual_var: float = 1.0,  # tau^2
        prior_mean: float = 0.0,  # m_0, on the logit scale
        shared_half_life: float = 50.0,  # steps, of w
        residual_half_life: float = 200.0,  # steps, of each u_q
        seed: int = 0,
        history_blend: bool = True,
        blend_criterion: str = "abs",
    ):
        self.dim = check_features(features)
        hyper = _hyperparameters(
            n_features,
            bandwidth,
            signal_var,
            bias_var,
            residual_var,
            prior_mean,
            shared_half_life,
            residual_half_life,
            seed,
        )
        self._set_hyperparameters(hyper)
        self.features = features
        rng = np.random.default_rng(self.seed)
        self._omega: np.ndarray = rng.standard_normal((self.dim, self.n_features))  # scaled by 1/h when used
        self._phase: np.ndarray = rng.uniform(0.0, 2.0 * np.pi, self.n_features)
        if self.bandwidth is None and isinstance(features, FeatureTable) and len(features) > 1:
            self.bandwidth = median_heuristic(features.vectors, seed=self.seed)
        self._prior_cov = np.append(np.full(self.n_features, self.signal_var), self.bias_var)
        self._w_mean: np.ndarray = np.zeros(self.n_features + 1)
        self._w_cov: np.ndarray = np.diag(self._prior_cov)
        self.step = 0
        self._index = RowIndex()
        self._u_mean: np.ndarray = np.zeros(0)
        self._u_var: np.ndarray = np.zeros(0)
        self._u_step: np.ndarray = np.zeros(0, dtype=np.int64)
        self.blend = LastVisitBlend(criterion=blend_criterion) if history_blend else None

    def _set_hyperparameters(self, hyper: dict) -> None:
        """The values `_hyperparameters` checked, as attributes."""
        self.n_features = hyper["n_features"]
        self.seed = hyper["seed"]
        self.bandwidth = hyper["bandwidth"]
        self.signal_var = hyper["signal_var"]
        self.bias_var = hyper["bias_var"]
        self.residual_var = hyper["residual_var"]
        self.prior_mean = hyper["prior_mean"]
        self.shared_half_life = hyper["shared_half_life"]
        self.residual_half_life = hyper["residual_half_life"]

    # -- pieces ----------------------------------------------------------------------------------
    @property
    def _rho_w(self) -> float:
        return 0.5 ** (1.0 / self.shared_half_life)

    @property
    def _rho_u(self) -> float:
        return 0.5 ** (1.0 / self.residual_half_life)

    def _phi(self, x: np.ndarray, bandwidth: float) -> np.ndarray:
        proj = x @ self._omega / bandwidth + self._phase
        phi = np.empty((x.shape[0], self.n_features + 1))
        np.cos(proj, out=phi[:, :-1])
        phi[:, :-1] *= np.sqrt(2.0 / self.n_features)
        phi[:, -1] = 1.0
        return phi

    def _shared_prior(self) -> tuple[np.ndarray, np.ndarray]:
        """Belief about w one step after the last update."""
        rho = self._rho_w
        cov = rho * rho * self._w_cov
        cov[np.diag_indices_from(cov)] += (1.0 - rho * rho) * self._prior_cov
        return rho * self._w_mean, cov

    def _residual_prior(self, rows: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Belief about u_q at `step` (rows < 0: never seen -> the prior)."""
        mean = np.zeros(len(rows))
        var = np.full(len(rows), self.residual_var)
        known = rows >= 0
        if known.any():
            r = rows[known]
            decay = self._rho_u ** (step - self._u_step[r]).astype(np.float64)
            mean[known] = decay * self._u_mean[r]
            var[known] = decay * decay * self._u_var[r] + (1.0 - decay * decay) * self.residual_var
        return mean, var

    def latent(self, prompts: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of the logit g for the next step (one step of drift after the last update)."""
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        x = encode(self.features, prompts, self.dim)
        u_mean, u_var = self._residual_prior(self._index.lookup(prompts), self.step + 1)
        w_mean, w_cov = self._shared_prior()
        if self.bandwidth is None:  # no data yet: w is at its prior, E phi^T phi = s_f^2 (RFF)
            return self.prior_mean + u_mean, u_var + self.signal_var + self.bias_var
        phi = self._phi(x, self.bandwidth)
        f_var = np.einsum("ij,ij->i", phi @ w_cov, phi)
        return self.prior_mean + phi @ w_mean + u_mean, f_var + u_var

    # -- protocol --------------------------------------------------------------------------------
    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        mean, var = self.latent(prompts)
        m, v = logistic_normal_moments(mean, var)
        if self.blend is not None:
            m, v = self.blend.adjust(list(prompts), m, v)
        return Prediction(m, v)

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        x = encode(self.features, prompts, self.dim)  # may raise: still nothing mutated
        observed = counts > 0
        prompts = [p for p, o in zip(prompts, observed) if o]
        x, successes, counts = x[observed], successes[observed], counts[observed].astype(np.float64)
        bandwidth = self.bandwidth
        if bandwidth is None and prompts:
            try:
                bandwidth = median_heuristic(x, seed=self.seed)
            except ValueError:  # fewer than two distinct vectors: a unit length scale
                bandwidth = 1.0
        step = self.step + 1
        w_mean, w_cov = self._shared_prior()
        if prompts:
            rows = self._index.lookup(prompts)
            u_mean, u_var = self._residual_prior(rows, step)
            phi = self._phi(x, 1.0 if bandwidth is None else bandwidth)  # set above when prompts
            f_mean = phi @ w_mean
            f_var = np.einsum("ij,ij->i", phi @ w_cov, phi)
            if self.blend is not None:  # score the blend on this visit with the prediction made before it
                prior_p = logistic_normal_moments(self.prior_mean + f_mean + u_mean, f_var + u_var)[0]
                self.blend.observe(prompts, successes, counts, prior_p)
            y, r = laplace_site(successes, counts, self.prior_mean + f_mean + u_mean, f_var + u_var)
            y = y - self.prior_mean
            # Kalman update of w, with u marginalised: y - E[u] = phi^T w + e, e ~ N(0, v_u + r)
            noise = u_var + r
            w_mean, w_cov = kalman_update(w_mean, w_cov, phi, y - u_mean, noise)
            # exact marginal of each u_q given all sites
            gain = u_var / (u_var + r)
            post_f_var = np.einsum("ij,ij->i", phi @ w_cov, phi)
            new_u_mean = u_mean + gain * (y - phi @ w_mean - u_mean)
            new_u_var = u_var * (1.0 - gain) + gain * gain * post_f_var
            rows = self._index.add(prompts, rows)
            n = len(self._index)
            self._u_mean, self._u_var = grow(self._u_mean, n, 0.0), grow(self._u_var, n, self.residual_var)
            self._u_step = grow(self._u_step, n, 0)
            self._u_mean[rows], self._u_var[rows], self._u_step[rows] = new_u_mean, new_u_var, step
            self.bandwidth = bandwidth
        self._w_mean, self._w_cov, self.step = w_mean, w_cov, step

    def state_dict(self) -> StateDict:
        return {
            "class": "GaussianProcess",
            "dim": self.dim,
            "feature_model": feature_model(self.features),
            "n_features": self.n_features,
            "bandwidth": self.bandwidth,
            "signal_var": self.signal_var,
            "bias_var": self.bias_var,
            "residual_var": self.residual_var,
            "prior_mean": self.prior_mean,
            "shared_half_life": self.shared_half_life,
            "residual_half_life": self.residual_half_life,
            "seed": self.seed,
            "step": self.step,
            "omega": self._omega.copy(),
            "phase": self._phase.copy(),
            "w_mean": self._w_mean.copy(),
            "w_cov": self._w_cov.copy(),
            **self._index.state(u_mean=self._u_mean, u_var=self._u_var, u_step=self._u_step),
            "history_blend": self.blend is not None,
            **({} if self.blend is None else {f"blend_{k}": v for k, v in self.blend.state_dict().items()}),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (finite means, a symmetric
        covariance with a positive diagonal, residual variances > 0, residual steps in [0, step],
        distinct keys, the constructor's ranges), and a refused state changes nothing."""
        hyper_names = ["n_features", "bandwidth", *_POSITIVE, "prior_mean", "seed"]
        arrays = ["omega", "phase", "w_mean", "w_cov", "keys", "u_mean", "u_var", "u_step"]
        reader = StateReader(state, "GaussianProcess", ["dim", "step", *hyper_names, *arrays])
        check_feature_space(reader, self.features, self.dim)
        hyper = reader.hyperparameters(_hyperparameters, hyper_names)
        step = reader.integer("step", low=0)
        d, keys = hyper["n_features"], reader.keys()
        omega, phase = reader.array("omega", (self.dim, d)), reader.array("phase", (d,))
        w_mean, w_cov = reader.array("w_mean", (d + 1,)), reader.array("w_cov", (d + 1, d + 1))
        if not np.allclose(w_cov, w_cov.T, rtol=1e-8, atol=1e-12) or np.any(np.diag(w_cov) <= 0):
            raise reader.error("w_cov", "must be a covariance: symmetric with a positive diagonal")
        u_mean = reader.array("u_mean", (len(keys),))
        u_var = reader.array("u_var", (len(keys),), low=0.0, low_open=True)
        u_step = reader.array("u_step", (len(keys),), dtype=np.int64, low=0, high=step)
        blend = LastVisitBlend() if state.get("history_blend", False) else None
        if blend is not None:
            blend.load_state_dict({k[len("blend_") :]: v for k, v in state.items() if k.startswith("blend_")})
        with restore_on_error(self):
            self.blend = blend
            self._set_hyperparameters(hyper)
            self.step = step
            self._prior_cov = np.append(np.full(d, self.signal_var), self.bias_var)
            self._omega, self._phase = omega, phase
            self._w_mean, self._w_cov = w_mean, w_cov
            self._index = RowIndex(keys)
            self._u_mean, self._u_var, self._u_step = u_mean, u_var, u_step

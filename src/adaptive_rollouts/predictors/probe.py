"""An online Bayesian logistic regression of group outcomes with forgetting, and the running
standardiser of its inputs: the learner behind `FlatnessPredictor` (docs/flatness.md argues the
choice)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from ..checks.validation import check_integer, check_range
from ..state.checks import StateReader
from ..types import StateDict

__all__ = ["OnlineLogistic", "RunningScaler"]

_NEWTON_STEPS = 50  # at most; each step is damped (halved until the objective rises), so it converges
_HALVINGS = 30


class OnlineLogistic:
    """Bayesian logistic regression of successes on inputs z, learned online by a Laplace step per
    batch, with forgetting (old observations age as the inputs' meaning drifts).

    Belief about the weights: w ~ N(mean, precision^-1). Before each batch the precision decays
    toward the prior's, ``precision <- forget * precision + (1 - forget) / prior_var``; then the
    mean moves to the maximum of

        log N(w; mean, precision^-1) + sum_q c_q [s_q log sigmoid(z_q w) + (n_q - s_q) log sigmoid(-z_q w)]

    (Newton's method), and the precision adds the likelihood's curvature there,
    sum_q c_q n_q sigma_q (1 - sigma_q) z_q z_q^T. c_q weighs a group: 1 for independent rollouts,
    less when rollouts of one prompt share a p that varies between prompts (a group of n is then
    worth fewer independent rollouts). ``predict(z)`` returns the latent logit's mean z . mean and
    variance z precision^-1 z^T. The maximum is found by Newton's method with each step halved until
    the objective rises: a full step overshoots on a small batch in many dimensions.

    ``batch``: that many independent regressions updated at once (inputs, counts and outputs gain a
    leading axis of that length); ``initial_mean``: the weights' mean before any data (zeros).

    >>> model = OnlineLogistic(2)
    >>> z = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> for _ in range(20):
    ...     model.update(z, np.array([7.0, 1.0]), np.array([8.0, 8.0]))
    >>> m, v = model.predict(z)
    >>> bool(m[0] > 1.0 > -1.0 > m[1]), bool(v.max() < 0.1)
    (True, True)
    """

    def __init__(
        self,
        dim: int,
        forget: float = 0.95,
        prior_var: float = 1.0,
        *,
        batch: int | None = None,
        initial_mean: np.ndarray | None = None,
    ):
        self.dim = check_integer(dim, "dim", least=1)
        self.forget = check_range(forget, "forget", 0.0, 1.0, high_closed=True)
        self.prior_var = check_range(prior_var, "prior_var", 0.0)
        self.batch: tuple[int, ...] = () if batch is None else (check_integer(batch, "batch", least=1),)
        start = np.zeros(self.dim) if initial_mean is None else np.asarray(initial_mean, dtype=float)
        if start.shape != (self.dim,) or not np.isfinite(start).all():
            raise ValueError(f"initial_mean must be {self.dim} finite numbers, got {initial_mean!r}")
        self.mean = np.broadcast_to(start, self.batch + (self.dim,)).copy()
        self.precision = np.broadcast_to(np.eye(self.dim) / self.prior_var, self.batch + (self.dim,) * 2).copy()

    def add_inputs(self, extra: int) -> None:
        """Append ``extra`` inputs (last) whose weights start at the prior, mean 0 and variance
        ``prior_var``, independent of the others: inputs about which nothing has been learned."""
        extra = check_integer(extra, "extra", least=0)
        mean = np.concatenate([self.mean, np.zeros(self.batch + (extra,))], axis=-1)
        precision = np.zeros(self.batch + (self.dim + extra,) * 2)
        precision[..., : self.dim, : self.dim] = self.precision
        precision[..., self.dim :, self.dim :] = np.eye(extra) / self.prior_var
        self.dim, self.mean, self.precision = self.dim + extra, mean, precision

    def logit_mean(self, z: np.ndarray) -> np.ndarray:
        """The latent logit's mean z . mean alone (no inverse of the precision)."""
        return np.einsum("...rd,...d->...r", self._check(z), self.mean)

    def predict(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = self._check(z)
        cov = np.linalg.inv(self.precision)
        return self.logit_mean(z), np.einsum("...rd,...de,...re->...r", z, cov, z)

    def update(
        self, z: np.ndarray, successes: np.ndarray, trials: np.ndarray, weight: np.ndarray | None = None
    ) -> None:
        z = self._check(z)
        s, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
        c = np.ones(n.shape) if weight is None else np.asarray(weight, dtype=float)
        if not (s.shape == n.shape == c.shape == z.shape[:-1]):
            raise ValueError(f"successes, trials, weight need one entry per row of z ({z.shape[:-1]})")
        prior_prec = self.forget * self.precision + (1.0 - self.forget) * np.eye(self.dim) / self.prior_var
        prior_mean, w = self.mean, self.mean.copy()

        def objective(x: np.ndarray) -> np.ndarray:
            g = np.einsum("...rd,...d->...r", z, x)
            fit = np.sum(c * (s * log_expit(g) + (n - s) * log_expit(-g)), axis=-1)
            gap = x - prior_mean
            return fit - 0.5 * np.einsum("...d,...de,...e->...", gap, prior_prec, gap)

        value = objective(w)
        for _ in range(_NEWTON_STEPS):
            sig = expit(np.einsum("...rd,...d->...r", z, w))
            grad = np.einsum("...rd,...r->...d", z, c * (s - n * sig)) - np.einsum(
                "...de,...e->...d", prior_prec, w - prior_mean
            )
            hess = prior_prec + np.einsum("...rd,...r,...re->...de", z, c * n * sig * (1.0 - sig), z)
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
            # a full Newton step can overshoot on a small batch in many dimensions (the objective is
            # concave but far from quadratic): halve it, per regression, until the objective rises
            step_taken, trial = step, objective(w + step)
            for _ in range(_HALVINGS):
                worse = trial < value - 1e-12 * np.abs(value)
                if not worse.any():
                    break
                step_taken = np.where(worse[..., None], 0.5 * step_taken, step_taken)
                trial = objective(w + step_taken)
            w, value = w + step_taken, trial
            if float(np.abs(step_taken).max()) < 1e-10:
                break
        sig = expit(np.einsum("...rd,...d->...r", z, w))
        self.mean = w
        self.precision = prior_prec + np.einsum("...rd,...r,...re->...de", z, c * n * sig * (1.0 - sig), z)

    def log_likelihood(self, z: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> float:
        """log P(successes | trials, w = mean), for tests and diagnostics."""
        g = np.einsum("...rd,...d->...r", self._check(z), self.mean)
        return float(np.sum(successes * log_expit(g) + (trials - successes) * log_expit(-g)))

    def _check(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if z.ndim != 2 + len(self.batch) or z.shape[:-2] != self.batch or z.shape[-1] != self.dim:
            raise ValueError(
                f"inputs must be [{', '.join(map(str, self.batch + ('rows', self.dim)))}], got shape {z.shape}"
            )
        return z

    def state_dict(self) -> StateDict:
        return {
            "dim": self.dim,
            "forget": self.forget,
            "prior_var": self.prior_var,
            "mean": self.mean.copy(),
            "precision": self.precision.copy(),
        }

    def load_state_dict(self, state: StateDict) -> None:
        reader = StateReader(state, "OnlineLogistic", ["dim", "forget", "prior_var", "mean", "precision"])
        if reader.integer("dim") != self.dim:
            raise reader.error("dim", f"{state['dim']} inputs, this model has {self.dim}")
        forget = reader.real("forget", low=0.0, high=1.0, low_open=True)
        prior_var = reader.real("prior_var", low=0.0, low_open=True)
        mean = reader.array("mean", self.batch + (self.dim,))
        precision = reader.array("precision", self.batch + (self.dim, self.dim))
        if not np.allclose(precision, np.swapaxes(precision, -1, -2)) or np.linalg.eigvalsh(precision).min() <= 0:
            raise reader.error("precision", "must be symmetric positive definite")
        self.forget, self.prior_var, self.mean, self.precision = forget, prior_var, mean, precision


class RunningScaler:
    """Per-column mean and variance of every input seen so far (each batch weighs alike), by which
    ``transform`` centres and scales (a column without spread is set to 0). The scale settles as
    batches accumulate: re-centring on recent batches would hide from the probe a shift of every
    prompt's representation at once (the policy getting better at everything), which is signal.

    >>> scaler = RunningScaler(1)
    >>> scaler.observe(np.array([[1.0], [3.0]]))
    >>> scaler.transform(np.array([[1.0], [3.0]])).ravel().tolist()
    [-1.0, 1.0]
    """

    def __init__(self, dim: int):
        self.dim = check_integer(dim, "dim", least=1)
        self.mean, self.var, self.seen = np.zeros(self.dim), np.zeros(self.dim), 0

    def observe(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=float)
        mean, var = x.mean(axis=0), x.var(axis=0)
        self.seen += 1
        keep = 1.0 - 1.0 / self.seen
        new_mean = keep * self.mean + (1.0 - keep) * mean
        self.var = keep * (self.var + (self.mean - new_mean) ** 2) + (1.0 - keep) * (var + (mean - new_mean) ** 2)
        self.mean = new_mean

    def transform(self, x: np.ndarray) -> np.ndarray:
        sd = np.sqrt(self.var)
        return np.where(sd > 1e-12, (np.asarray(x, dtype=float) - self.mean) / np.where(sd > 1e-12, sd, 1.0), 0.0)

    def state_dict(self) -> StateDict:
        return {"dim": self.dim, "mean": self.mean.copy(), "var": self.var.copy(), "seen": self.seen}

    def load_state_dict(self, state: StateDict) -> None:
        reader = StateReader(state, "RunningScaler", ["dim", "mean", "var", "seen"])
        if reader.integer("dim") != self.dim:
            raise reader.error("dim", f"{state['dim']} columns, this scaler has {self.dim}")
        seen = reader.integer("seen", low=0)
        mean = reader.array("mean", (self.dim,))
        var = reader.array("var", (self.dim,), low=0.0)
        self.mean, self.var, self.seen = mean, var, seen

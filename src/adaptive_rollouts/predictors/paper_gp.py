"""VIP's Gaussian-process predictor as published (arXiv 2602.01601), without the N x N cache."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.spatial.distance import pdist

from ..checks.validation import check_prompts, check_range, names
from ..embeddings import FeatureTable
from ..state import check_savable_keys
from ..state.checks import StateReader, real_number, restore_on_error
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

_GIB = 2.0**30


def _hyperparameters(bandwidth: float, prior_mean: float, jitter: float, clip: float) -> tuple[float, ...]:
    """The constructor's checks (also applied to a loaded state)."""
    return (
        check_range(bandwidth, "bandwidth", 0.0),
        check_range(prior_mean, "prior_mean"),
        check_range(jitter, "jitter", 0.0),
        check_range(clip, "clip", 0.0, 0.5),
    )


def batch_memory_bytes(batch_size: int, chunk_rows: int) -> float:
    """Peak bytes of one `PaperGP.update` / `predict` beyond the pool's own arrays: the B x B kernel
    factorised in place (kept for the variance) and two chunk x B blocks of kernel rows."""
    b = float(batch_size)
    return 8.0 * (b * b + 2.0 * chunk_rows * b)


def rbf(
    xa: np.ndarray, xb: np.ndarray, bandwidth: float, sq_a: np.ndarray | None = None, sq_b: np.ndarray | None = None
) -> np.ndarray:
    """K[i, j] = exp(-|xa_i - xb_j|^2 / (2 h^2)), built in place in one |a| x |b| array."""
    sq_a = np.einsum("ij,ij->i", xa, xa) if sq_a is None else sq_a
    sq_b = np.einsum("ij,ij->i", xb, xb) if sq_b is None else sq_b
    k = xa @ xb.T
    k *= -2.0
    k += sq_a[:, None]
    k += sq_b[None, :]
    np.maximum(k, 0.0, out=k)  # squared distances, rounding below 0 cut
    k *= -1.0 / (2.0 * bandwidth * bandwidth)
    return np.exp(k, out=k)


def median_heuristic(x: np.ndarray, max_points: int = 1000, seed: int = 0) -> float:
    """Median pairwise Euclidean distance over (a seeded sample of at most max_points of) the rows of x."""
    if x.shape[0] > max_points:
        x = x[np.random.default_rng(seed).choice(x.shape[0], max_points, replace=False)]
    dist = pdist(np.asarray(x, dtype=np.float64))
    dist = dist[dist > 0]
    if dist.size == 0:
        raise ValueError("median heuristic needs at least two distinct feature vectors in the pool")
    return float(np.median(dist))


class PaperGP:
    """VIP's GP success predictor, faithfully (arXiv 2602.01601), kernel rows computed on demand.

    Latent logit g ~ GP(m, K), K(x, x') = exp(-|x - x'|^2 / (2 h^2)), h = median pairwise distance
    of the pool's features (a seeded sample of <= 1000), p = sigmoid(g). After each step, every prompt
    of the batch B with n >= 1 rollouts gives the exact pseudo-observation

        g_hat_q = logit(clip(mean reward_q, eps, 1 - eps))      (eps = 1e-6: |g_hat| <= 13.8)

    and the mean over the whole pool moves by the recursive update with the *prior* kernel

        m <- m + K[:, B] (K[B, B] + jitter I)^-1 (g_hat_B - m_B),      jitter = 1e-4,

    so only the last step's data enters the solve and the new mean is the next step's prior mean
    (constant prior mean m_0 = `prior_mean` on the logit scale; the paper's code uses -1 or -5).
    Predicted mean: sigmoid(m_q) (the plug-in value VIP allocates with).

    Variance (the paper allocates with the plug-in p(1-p) and uses none): we report the posterior
    variance of g given the last step's data, s_q = 1 - K[q, B] (K[B, B] + jitter I)^-1 K[B, q]
    (1 before the first update), mapped to the p scale by the delta method,
    Var[p_q] ~ (p_q (1 - p_q))^2 s_q, capped at p_q (1 - p_q).

    The model lives on a known prompt pool (as in the paper): the keys of a `FeatureTable`, or the
    `pool` prompts encoded once when `features` is another Encoder. A prompt outside the pool raises
    KeyError. Cost per update of B prompts: O(N B d + B^3) time, the pool visited in chunks of
    `chunk_size` rows; memory O(N + B^2): the mean over the pool (N floats) and the B x B kernel and
    its Cholesky factor (factorised in place, kept for the variance) and two blocks of `chunk_size` x B
    kernel rows: ``8 (B^2 + 2 chunk_size B)`` bytes at the peak beyond the pool's arrays (0.9 GiB for
    B = 10,000, `batch_memory_bytes`). An update whose batch would need more than `max_batch_memory_gib` raises a
    ValueError naming the batch size and the memory instead of running out of memory; raise the
    limit if the machine has the room. The paper's N x N distance matrix is never built.

    >>> table = FeatureTable(["a", "b", "c"], [[0.0, 0.0], [0.1, 0.0], [3.0, 0.0]])
    >>> gp = PaperGP(table, prior_mean=0.0, bandwidth=0.5)
    >>> gp.update(["a"], [np.array([1.0, 1.0, 1.0, 0.0])])
    >>> gp.predict(["a", "b", "c"]).mean.round(3).tolist()   # b borrows from a, c stays at the prior
    [0.75, 0.746, 0.5]
    """

    def __init__(
        self,
        features: FeatureTable | Encoder,
        pool: Sequence[Hashable] | None = None,
        bandwidth: float | None = None,
        prior_mean: float = -1.0,
        jitter: float = 1e-4,
        clip: float = 1e-6,
        chunk_size: int = 4096,
        max_batch_memory_gib: float = 4.0,
    ):
        dim = check_features(features)
        if pool is None:
            if not isinstance(features, FeatureTable):
                raise ValueError(
                    "PaperGP works on a known prompt pool: pass pool=[...] with an Encoder, "
                    "or a FeatureTable as features"
                )
            keys, x = features.keys, features.vectors
            index = features._index
        else:
            keys = check_prompts(pool, "pool")
            x = encode(features, keys, dim)
            index = {k: i for i, k in enumerate(keys)}
        if len(keys) == 0:
            raise ValueError("pool is empty")
        check_savable_keys(keys, "pool")
        self.max_batch_memory_gib = real_number("max_batch_memory_gib", max_batch_memory_gib)
        if not self.max_batch_memory_gib > 0:
            raise ValueError(f"max_batch_memory_gib must be > 0, got {max_batch_memory_gib}")
        self.features = features
        self.dim = dim
        self._keys, self._index, self._x = keys, index, x
        self._sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
        self.bandwidth, self.prior_mean, self.jitter, self.clip = _hyperparameters(
            median_heuristic(x) if bandwidth is None else bandwidth, prior_mean, jitter, clip
        )
        self.chunk_size = int(chunk_size)
        self.step = 0
        self._mean = np.full(len(keys), self.prior_mean)
        self._last_rows = np.zeros(0, dtype=np.int64)
        self._last_chol: tuple[np.ndarray, bool] | None = None

    # -- helpers -------------------------------------------------------------------------------
    def _rows(self, prompts: list) -> np.ndarray:
        get = self._index.get
        rows = np.fromiter((get(p, -1) for p in prompts), dtype=np.int64, count=len(prompts))
        if (rows < 0).any():
            missing = [p for p, r in zip(prompts, rows) if r < 0]
            raise KeyError(f"PaperGP has no features for prompts outside its pool: {names(missing)}")
        return rows

    def _kernel(self, rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
        xa = np.asarray(self._x[rows_a], dtype=np.float64)
        xb = np.asarray(self._x[rows_b], dtype=np.float64)
        return rbf(xa, xb, self.bandwidth, self._sq[rows_a], self._sq[rows_b])

    def _factor(self, rows: np.ndarray) -> tuple[np.ndarray, bool]:
        need = batch_memory_bytes(rows.size, min(self.chunk_size, len(self._keys)))
        if need > self.max_batch_memory_gib * _GIB:
            raise ValueError(
                f"PaperGP update of a batch of {rows.size} prompts needs about {need / _GIB:.1f} GiB for its "
                f"{rows.size} x {rows.size} kernel, above max_batch_memory_gib={self.max_batch_memory_gib:g}; "
                "split the batch or raise max_batch_memory_gib"
            )
        k_bb = self._kernel(rows, rows)
        k_bb[np.diag_indices_from(k_bb)] += self.jitter
        # factorised in place: the transpose of the (symmetric) C-ordered kernel is the Fortran-ordered
        # array LAPACK works on without a copy
        return cho_factor(k_bb.T, lower=True, overwrite_a=True)

    def latent(self, prompts: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the logit g (variance from the last step's data only)."""
        rows = self._rows(check_prompts(prompts, nonempty=False, distinct=False))
        var = np.ones(len(rows))
        if self._last_chol is not None and len(rows):
            for start in range(0, len(rows), self.chunk_size):  # O(chunk x B) memory
                part = rows[start : start + self.chunk_size]
                k_bq = self._kernel(part, self._last_rows).T  # Fortran-ordered: solved in place
                half = solve_triangular(self._last_chol[0], k_bq, lower=True, overwrite_b=True)
                var[start : start + part.size] = np.maximum(1.0 - np.einsum("ij,ij->j", half, half), 0.0)
        return self._mean[rows].copy(), var

    # -- protocol ------------------------------------------------------------------------------
    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        return delta_prediction(*self.latent(prompts))

    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        prompts, successes, counts = check_batch(prompts, rewards)
        rows = self._rows(prompts)
        observed = counts > 0
        rows, successes, counts = rows[observed], successes[observed], counts[observed]
        if rows.size == 0:
            self.step += 1
            return
        chol = self._factor(rows)  # may raise: nothing mutated before this point
        alpha = cho_solve(chol, empirical_logit(successes, counts, self.clip) - self._mean[rows])
        self.step += 1
        xb = np.asarray(self._x[rows], dtype=np.float64)
        sq_b = self._sq[rows]
        for start in range(0, len(self._keys), self.chunk_size):
            stop = min(start + self.chunk_size, len(self._keys))
            xa = np.asarray(self._x[start:stop], dtype=np.float64)
            self._mean[start:stop] += rbf(xa, xb, self.bandwidth, self._sq[start:stop], sq_b) @ alpha
        self._last_rows, self._last_chol = rows, chol

    def state_dict(self) -> StateDict:
        return {
            "class": "PaperGP",
            "dim": self.dim,
            "feature_model": feature_model(self.features),
            "keys": list(self._keys),
            "bandwidth": self.bandwidth,
            "prior_mean": self.prior_mean,
            "jitter": self.jitter,
            "clip": self.clip,
            "step": self.step,
            "mean": self._mean.copy(),
            "last_rows": self._last_rows.copy(),
        }

    def load_state_dict(self, state: StateDict) -> None:
        """Replace this predictor's state; every value is checked first (the same pool, a finite
        mean, distinct batch rows inside the pool, the constructor's ranges), and a refused state
        changes nothing."""
        names_ = ["bandwidth", "prior_mean", "jitter", "clip"]
        reader = StateReader(state, "PaperGP", ["keys", "step", "mean", "last_rows", *names_])
        check_feature_space(reader, self.features, self.dim, legacy=True)  # states before "dim" was recorded pass
        hyper = reader.hyperparameters(_hyperparameters, names_)
        if reader.keys() != list(self._keys):
            raise reader.error("keys", "do not match this PaperGP's prompt pool")
        step = reader.integer("step", low=0)
        mean = reader.array("mean", (len(self._keys),))
        last_rows = np.asarray(state["last_rows"])
        last_rows = reader.array("last_rows", (last_rows.size,), dtype=np.int64, low=0, high=len(self._keys) - 1)
        if np.unique(last_rows).size != last_rows.size:
            raise reader.error("last_rows", "has repeated rows (a batch holds each prompt once)")
        with restore_on_error(self):
            self.bandwidth, self.prior_mean, self.jitter, self.clip = hyper
            self.step, self._mean, self._last_rows = step, mean, last_rows
            self._last_chol = self._factor(last_rows) if last_rows.size else None

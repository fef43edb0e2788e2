"""Shared pieces of the predictors: the batch check, the prompt -> row registry, logistic helpers."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import repeat
from typing import Any

import numpy as np
from scipy.special import expit, logit

from ..checks.validation import check_prompts, check_range, check_rewards_flat, group_sums, names
from ..state import check_savable_keys
from ..types import Encoder, Prediction

# Gauss-Hermite nodes for E[f(g)], g ~ N(m, s): 32 nodes; error < 1e-4 for sd <= 3 (tested)
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(32)
_GH_W = _GH_W / _GH_W.sum()

UNIFORM_PRIOR_VAR = 1.0 / 12.0  # Var[p] under p ~ Uniform(0, 1) = Beta(1, 1)


def empirical_prediction(count: np.ndarray, total: np.ndarray, prior_mean: float) -> Prediction:
    """Success rate total/count with its binomial standard error squared; the prior where unseen."""
    seen = count > 0
    mean = np.where(seen, total / np.maximum(count, 1.0), prior_mean)
    var = np.where(seen, mean * (1.0 - mean) / np.maximum(count, 1.0), UNIFORM_PRIOR_VAR)
    return Prediction(mean, var)


def logistic_normal_moments(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[p] and Var[p] for p = sigmoid(g), g ~ N(mean, var), by 32-node Gauss-Hermite quadrature."""
    mean = np.asarray(mean, dtype=np.float64)
    sd = np.sqrt(np.maximum(np.asarray(var, dtype=np.float64), 0.0))
    p = expit(mean[..., None] + sd[..., None] * _GH_X)
    first = p @ _GH_W
    second = (p * p) @ _GH_W
    return first, np.maximum(second - first * first, 0.0)


def delta_method(p: np.ndarray, latent_var: np.ndarray) -> np.ndarray:
    """Var[p] ~ (p (1 - p))^2 Var[g] for p = sigmoid(g), capped at p (1 - p) (the largest variance of a
    probability whose mean is p)."""
    bernoulli = p * (1.0 - p)
    return np.minimum(bernoulli * bernoulli * latent_var, bernoulli)


def delta_prediction(g_mean: np.ndarray, g_var: np.ndarray) -> Prediction:
    """The prediction of p = sigmoid(g) for a latent logit g of mean ``g_mean`` and variance
    ``g_var``: mean sigmoid(g_mean), variance by `delta_method`."""
    p = expit(g_mean)
    return Prediction(p, delta_method(p, g_var))


def empirical_logit(successes: np.ndarray, counts: np.ndarray, clip: float) -> np.ndarray:
    """logit of the success rate clipped to [clip, 1 - clip] (a finite pseudo-observation of g even
    for an all-correct or all-wrong group)."""
    return logit(np.clip(successes / counts, clip, 1.0 - clip))


def check_batch(prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> tuple[list, np.ndarray, np.ndarray]:
    """Validate one step's data; returns (prompts, successes, counts) per prompt.

    successes = sum of the rewards (fractional for graded rewards), counts = number of rollouts.
    Raises ValueError naming the offending prompt; nothing is mutated here.
    """
    prompts = check_prompts(prompts)
    _, flat, counts = check_rewards_flat(prompts, rewards, arrays=False)
    return prompts, group_sums(flat, counts), counts


def check_features(features: Any) -> int:
    if not (hasattr(features, "encode") and hasattr(features, "dim")):
        raise ValueError(
            f"features must be an Encoder or FeatureTable (with .dim and .encode), got {type(features).__name__}"
        )
    dim = int(features.dim)
    if dim < 1:
        raise ValueError(f"features.dim must be >= 1, got {dim}")
    return dim


def feature_model(features: Any) -> str | None:
    """The embedding model behind ``features`` (an encoder's ``model_name``, also through
    `KeyedTexts`); None for a table of vectors, whose source is not known."""
    name = getattr(features, "model_name", None)
    return name if isinstance(name, str) else None


def check_feature_space(reader: Any, features: Any, dim: int, legacy: bool = False) -> None:
    """Refuse (``reader.error``) a state learned on other features: another dimension, or another
    embedding model of the same dimension (states record both; ``legacy``: one without ``dim``
    passes, as do states or features of unknown model)."""
    state = reader.state
    if not (legacy and "dim" not in state) and reader.integer("dim") != dim:
        raise reader.error("dim", f"feature dim {state['dim']}, this {reader.cls} has {dim}")
    saved, current = state.get("feature_model"), feature_model(features)
    if saved is not None and current is not None and saved != current:
        raise reader.error(
            "feature_model", f"learned on features of {saved!r}; this {reader.cls} embeds with {current!r}"
        )


def encode(features: Encoder, prompts: list, dim: int) -> np.ndarray:
    """features.encode(prompts) as float64 [Q, dim]; ValueError on a wrong dimension or NaN."""
    x = np.asarray(features.encode(prompts), dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(prompts) or x.shape[1] != dim:
        raise ValueError(
            f"features.encode returned shape {x.shape} for {len(prompts)} prompts; "
            f"expected ({len(prompts)}, {dim}) (wrong feature dimension?)"
        )
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
    if bad.size:
        raise ValueError(f"features of prompts {names([prompts[i] for i in bad])} contain NaN/inf")
    return x


class RowIndex:
    """prompt -> row of the per-prompt arrays; rows are appended in first-seen order."""

    def __init__(self, keys: Sequence[Hashable] = ()):
        self.keys: list = list(keys)
        self.rows: dict = {k: i for i, k in enumerate(self.keys)}

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, prompts: list) -> np.ndarray:
        """Row of each prompt, -1 where unknown."""
        return np.fromiter(map(self.rows.get, prompts, repeat(-1)), dtype=np.int64, count=len(prompts))

    def add(self, prompts: list, rows: np.ndarray) -> np.ndarray:
        """Assign rows to prompts whose row is -1; returns all rows. New prompts must be keys a
        checkpoint can hold (ValueError naming them, before anything changes)."""
        rows = rows.copy()
        new = np.flatnonzero(rows < 0)
        added = prompts if new.size == len(prompts) else [prompts[i] for i in new.tolist()]
        check_savable_keys(added)
        first = len(self.keys)
        rows[new] = np.arange(first, first + new.size)
        self.rows.update(zip(added, range(first, first + new.size)))  # distinct prompts: one row each
        self.keys.extend(added)
        return rows

    def state(self, **columns: np.ndarray) -> dict:
        """The per-prompt part of a state dict: the keys, then a copy of each column's used rows."""
        n = len(self.keys)
        return {"keys": list(self.keys), **{name: column[:n].copy() for name, column in columns.items()}}


def grow(array: np.ndarray, size: int, fill: Any) -> np.ndarray:
    """Return `array` with at least `size` rows (capacity doubles), new rows set to `fill`."""
    if array.shape[0] >= size:
        return array
    new = np.empty((max(size, 2 * array.shape[0], 16),) + array.shape[1:], dtype=array.dtype)
    new[: array.shape[0]] = array
    new[array.shape[0] :] = fill
    return new


def check_prior_mean(prior_mean: float) -> float:
    """A prior success probability strictly inside (0, 1) (the empirical predictors' constructor check)."""
    return check_range(prior_mean, "prior_mean", 0.0, 1.0)

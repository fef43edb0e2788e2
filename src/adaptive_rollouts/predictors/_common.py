"""Shared pieces of the predictors: input checks, the prompt -> row registry, logistic helpers."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

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


def names(items: Sequence, limit: int = 5) -> str:
    items = list(items)
    shown = ", ".join(repr(p) for p in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def logit(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def logistic_normal_moments(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[p] and Var[p] for p = sigmoid(g), g ~ N(mean, var), by 32-node Gauss-Hermite quadrature."""
    mean = np.asarray(mean, dtype=np.float64)
    sd = np.sqrt(np.maximum(np.asarray(var, dtype=np.float64), 0.0))
    p = sigmoid(mean[..., None] + sd[..., None] * _GH_X)
    first = p @ _GH_W
    second = (p * p) @ _GH_W
    return first, np.maximum(second - first * first, 0.0)


def delta_method(p: np.ndarray, latent_var: np.ndarray) -> np.ndarray:
    """Var[p] ~ (p (1 - p))^2 Var[g] for p = sigmoid(g), capped at p (1 - p) (the largest variance of a
    probability whose mean is p)."""
    bernoulli = p * (1.0 - p)
    return np.minimum(bernoulli * bernoulli * latent_var, bernoulli)


def check_prompts(prompts: Sequence[Hashable], argname: str = "prompts") -> list:
    if isinstance(prompts, (str, bytes)):
        raise ValueError(f"{argname} must be a sequence of prompts, got a single string {prompts!r}")
    try:
        prompts = list(prompts)
    except TypeError:
        raise ValueError(f"{argname} must be a sequence of prompts, got {type(prompts).__name__}") from None
    unhashable = [p for p in prompts if not isinstance(p, Hashable)]
    if unhashable:
        raise ValueError(f"{argname} must be hashable keys, got {names(unhashable)}")
    return prompts


def check_batch(prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> tuple[list, np.ndarray, np.ndarray]:
    """Validate one step's data; returns (prompts, successes, counts) per prompt.

    successes = sum of the rewards (fractional for graded rewards), counts = number of rollouts.
    Raises ValueError naming the offending prompts; nothing is mutated here.
    """
    prompts = check_prompts(prompts)
    if not prompts:
        raise ValueError("prompts is empty: update needs at least one prompt")
    try:
        n_rewards = len(rewards)
    except TypeError:
        raise ValueError(f"rewards must be a sequence of 1-D arrays, got {type(rewards).__name__}") from None
    if n_rewards != len(prompts):
        raise ValueError(f"rewards has {n_rewards} entries but prompts has {len(prompts)}; need one array per prompt")
    if len(set(prompts)) != len(prompts):
        seen, dup = set(), []
        for p in prompts:
            if p in seen:
                dup.append(p)
            seen.add(p)
        raise ValueError(f"prompts has duplicates {names(dup)}; merge their rewards into one array")
    successes = np.empty(len(prompts))
    counts = np.empty(len(prompts), dtype=np.int64)
    bad_shape, bad_value = [], []
    for i, (p, r) in enumerate(zip(prompts, rewards)):
        if r is None:
            bad_value.append(p)
            continue
        try:
            arr = np.asarray(r, dtype=np.float64)
        except (TypeError, ValueError):
            bad_value.append(p)
            continue
        if arr.ndim != 1:
            bad_shape.append(p)
            continue
        if not (np.all(np.isfinite(arr)) and np.all((arr >= 0.0) & (arr <= 1.0))):
            bad_value.append(p)
            continue
        successes[i] = arr.sum()
        counts[i] = arr.size
    if bad_shape:
        raise ValueError(f"rewards must be 1-D arrays; not so for prompts {names(bad_shape)}")
    if bad_value:
        raise ValueError(
            f"rewards must be finite numbers in [0, 1] (binary or graded); NaN/inf/None/out-of-range "
            f"rewards for prompts {names(bad_value)}"
        )
    return prompts, successes, counts


def check_features(features) -> int:
    if not (hasattr(features, "encode") and hasattr(features, "dim")):
        raise ValueError(
            f"features must be an Encoder or FeatureTable (with .dim and .encode), got {type(features).__name__}"
        )
    dim = int(features.dim)
    if dim < 1:
        raise ValueError(f"features.dim must be >= 1, got {dim}")
    return dim


def encode(features: Encoder, prompts: list, dim: int) -> np.ndarray:
    """features.encode(prompts) as float64 [Q, dim]; ValueError on a wrong dimension or NaN."""
    x = np.asarray(features.encode(prompts), dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(prompts) or x.shape[1] != dim:
        raise ValueError(
            f"features.encode returned shape {x.shape} for {len(prompts)} prompts; "
            f"expected ({len(prompts)}, {dim}) (wrong feature dimension?)"
        )
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValueError(f"features of prompts {names([p for p, b in zip(prompts, bad) if b])} contain NaN/inf")
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
        get = self.rows.get
        return np.fromiter((get(p, -1) for p in prompts), dtype=np.int64, count=len(prompts))

    def add(self, prompts: list, rows: np.ndarray) -> np.ndarray:
        """Assign rows to prompts whose row is -1; returns all rows."""
        rows = rows.copy()
        for i in np.flatnonzero(rows < 0):
            self.rows[prompts[i]] = rows[i] = len(self.keys)
            self.keys.append(prompts[i])
        return rows


def grow(array: np.ndarray, size: int, fill) -> np.ndarray:
    """Return `array` with at least `size` rows (capacity doubles), new rows set to `fill`."""
    if array.shape[0] >= size:
        return array
    new = np.empty((max(size, 2 * array.shape[0], 16),) + array.shape[1:], dtype=array.dtype)
    new[: array.shape[0]] = array
    new[array.shape[0] :] = fill
    return new


def check_state_keys(state: dict, required: Sequence[str], cls: str) -> None:
    missing = [k for k in required if k not in state]
    if missing:
        raise ValueError(f"state for {cls} is missing keys {missing}")
    if state.get("class", cls) != cls:
        raise ValueError(f"state is for {state['class']!r}, not {cls!r}")

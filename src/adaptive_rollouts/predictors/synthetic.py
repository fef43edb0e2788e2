"""Synthetic success traces with known truth, for testing and benchmarking predictors.

Truth on the logit scale, for prompt q with features x_q (unit vectors around a few clusters):

    g_q(t) = level(t) + f(x_q) + tilt(t) c^T x_q + u_q + o_q(t)

level(t) rises linearly (the policy learns), f is a smooth random function of x (random Fourier
features), the tilt makes drift depend on the embedding, u_q is a fixed per-prompt offset and o_q(t) an
Ornstein-Uhlenbeck wander per prompt. Each step draws `batch_size` distinct prompts and a rollout count
per prompt from `count_choices` (1 rollout to 32), and Bernoulli rewards at p = sigmoid(g).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ..embeddings import FeatureTable
from ..types import Predictor


@dataclass
class TraceStep:
    indices: np.ndarray  # [B] prompt rows
    counts: np.ndarray  # [B] rollouts per prompt
    rewards: list  # B arrays of 0/1 rewards
    true_p: np.ndarray  # [B] success probability at this step


@dataclass
class SyntheticTrace:
    keys: list
    features: np.ndarray
    steps: list

    @property
    def table(self) -> FeatureTable:
        return FeatureTable(self.keys, self.features)


def synthetic_trace(
    n_prompts: int = 2000,
    n_steps: int = 200,
    batch_size: int = 64,
    dim: int = 16,  # of the features x_q
    n_clusters: int = 20,
    shared_scale: float = 1.5,  # std of f(x_q) over the prompts
    identity_scale: float = 0.7,  # std of u_q
    wander_scale: float = 0.4,  # stationary std of o_q(t)
    wander_half_life: float = 100.0,  # steps, of o_q(t)
    level_start: float = -1.5,  # level(t) at the first step
    level_end: float = 1.0,  # and at the last
    tilt_end: float = 1.5,  # tilt(t) at the last step (0 at the first)
    count_choices: tuple = (1, 2, 4, 8, 16, 32),
    count_probs: tuple = (0.1, 0.15, 0.2, 0.3, 0.15, 0.1),  # of each count choice
    seed: int = 0,
) -> SyntheticTrace:
    """A drifting, embedding-correlated success trace; see the module docstring for the model."""
    if batch_size > n_prompts:
        raise ValueError(f"batch_size {batch_size} exceeds n_prompts {n_prompts}")
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n_clusters, dim))
    x = centers[rng.integers(n_clusters, size=n_prompts)] + 0.6 * rng.standard_normal((n_prompts, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    n_rff = 64
    omega = rng.standard_normal((dim, n_rff)) / 0.7
    phase = rng.uniform(0, 2 * np.pi, n_rff)
    f = np.sqrt(2.0 / n_rff) * np.cos(x @ omega + phase) @ rng.standard_normal(n_rff)
    f = shared_scale * (f - f.mean()) / f.std()
    direction = rng.standard_normal(dim)
    tilt_axis = x @ (direction / np.linalg.norm(direction))
    tilt_axis = (tilt_axis - tilt_axis.mean()) / tilt_axis.std()
    identity = identity_scale * rng.standard_normal(n_prompts)
    rho = 0.5 ** (1.0 / wander_half_life)
    wander = wander_scale * rng.standard_normal(n_prompts)
    probs = np.asarray(count_probs, dtype=float) / np.sum(count_probs)
    steps = []
    for t in range(n_steps):
        frac = t / max(n_steps - 1, 1)
        g = level_start + (level_end - level_start) * frac + f + tilt_end * frac * tilt_axis + identity + wander
        idx = rng.choice(n_prompts, batch_size, replace=False)
        counts = rng.choice(np.asarray(count_choices), size=batch_size, p=probs)
        p = expit(g[idx])
        rewards = [(rng.random(n) < pq).astype(np.float64) for n, pq in zip(counts, p)]
        steps.append(TraceStep(idx, counts, rewards, p))
        wander = rho * wander + np.sqrt(1 - rho * rho) * wander_scale * rng.standard_normal(n_prompts)
    return SyntheticTrace([f"q{i}" for i in range(n_prompts)], x, steps)


def evaluate(
    predictor: Predictor, trace: SyntheticTrace, clip: float = 1e-3, warmup: int = 0, revisits_only: bool = False
) -> dict:
    """Next-step quality: predict each batch before seeing its rewards, then update.

    log_loss: mean over rollouts of -log P(reward) with E[p] clipped to [clip, 1 - clip];
    brier: mean over rollouts of (reward - E[p])^2; mae: mean over prompts of |E[p] - true p|;
    variance_mae: mean over prompts of |E[p (1 - p)] - p (1 - p)| (`Prediction.expected_bernoulli_variance`,
    the reward variance the allocators act on).
    Steps before `warmup` update the predictor but are not scored; with ``revisits_only`` only
    prompts seen before are scored (next-visit quality once a prompt has history).
    """
    log_loss = brier = mae = variance_mae = 0.0
    n_rollouts = n_prompts = 0
    seen: set = set()
    for t, step in enumerate(trace.steps):
        keys = [trace.keys[i] for i in step.indices]
        prediction = predictor.predict(keys)
        mean = np.asarray(prediction.mean, dtype=float)
        scored = np.array([k in seen for k in keys]) if revisits_only else np.ones(len(keys), dtype=bool)
        if t >= warmup and scored.any():
            m, truth, counts = mean[scored], step.true_p[scored], step.counts[scored]
            rewards = [r for r, s in zip(step.rewards, scored) if s]
            p = np.clip(m, clip, 1 - clip)
            succ = np.array([r.sum() for r in rewards])
            log_loss -= float(succ @ np.log(p) + (counts - succ) @ np.log1p(-p))
            brier += float(sum(((r - x) ** 2).sum() for r, x in zip(rewards, m)))
            mae += float(np.abs(m - truth).sum())
            bernoulli = np.asarray(prediction.expected_bernoulli_variance, dtype=float)[scored]
            variance_mae += float(np.abs(bernoulli - truth * (1.0 - truth)).sum())
            n_rollouts += int(counts.sum())
            n_prompts += int(scored.sum())
        seen.update(keys)
        predictor.update(keys, step.rewards)
    if n_prompts == 0:
        raise ValueError("nothing was scored: no step after warmup (or no revisit with revisits_only)")
    return {
        "log_loss": log_loss / n_rollouts,
        "brier": brier / n_rollouts,
        "mae": mae / n_prompts,
        "variance_mae": variance_mae / n_prompts,
    }

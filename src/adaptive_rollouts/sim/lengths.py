"""Completion lengths of simulated rollouts: what a rollout costs in generated tokens.

A rollout of prompt q at training step t that succeeds (``s = 1``, full reward) or fails (``s = 0``)
has length

    m_q(s, t) = base x drift(t) x (1 if s else 1 + (ratio - 1) h_q),   h_q = 1 - p0_q,
    drift(t)  = 1 + growth x t / 100,
    X ~ Gamma(shape k, scale m_q(s, t) / k)            (mean m, coefficient of variation 1 / sqrt(k)),
    L = min(ceil(X), max_tokens)                       (tokens; the engine stops at ``max_tokens``),

with p0_q the prompt's success before training (`Problem.initial_success`): a failure on the hardest
prompts (p0 near 0) is ``ratio`` times as long as a success on average, on the easiest about as long.
Because ceil(X) >= 1 for X > 0, E[L] = sum_{j=0}^{M-1} P(X > j) and the truncated share is
P(L = M) = P(X > M - 1) (`expected_length`, `truncated_share`).

Where the parameters come from (published measurements, reasoning RL on math):

* failures longer than successes: DeepScaleR (Luo et al. 2025, "DeepScaleR: Surpassing O1-Preview
  with a 1.5B Model by Scaling RL") found DeepSeek-R1-Distill-Qwen-1.5B's incorrect AIME responses
  about 3x longer than its correct ones; Su et al. 2025 (arXiv 2505.00127, "Between Underthinking and
  Overthinking") and the o1-like-model studies they cite find incorrect answers longer for the same
  questions. Hence ``ratio`` 3 by default, and map cells at 2 to 4.
* scale and truncation: DeepScaleR trained at an 8K maximum, where its mean response length went
  from about 5,500 to 3,500 tokens, and the long incorrect responses ran into the cap; DAPO (Yu et al.
  2025, arXiv 2503.14476) caps at 20,480 tokens with a 4,096-token soft overlong buffer because
  truncated samples are common enough to need their own reward shaping. Hence ``max_tokens`` 8,192
  and ``base`` 1,500: a hard prompt's failures average 4,500 tokens before drift and a visible share
  reaches the cap.
* drift: DeepSeek-R1-Zero's mean response length grows steadily over RL (DeepSeek-AI 2025, Nature,
  Fig. 1b), and Liu et al. 2025 (arXiv 2503.20783, "Understanding R1-Zero-Like Training") show
  GRPO's length normalisation lengthens incorrect responses in particular. Hence ``growth`` 0.5:
  lengths 1.5x their start after 100 steps (the simulator's runs stand for a whole training run).
* the spread (``shape`` 4, coefficient of variation 0.5) is an assumption: the sources above report
  means, not a dispersion.

Lengths are drawn from a generator of their own (`Simulator`), after the rewards, so switching the
model on leaves every reward, update and accuracy of a run exactly as it was.

>>> model = LengthModel()
>>> float(mean_length(model, np.array([True, False]), np.array([1.0, 1.0]), step=0)[1])
4500.0
>>> sample_lengths(model, np.array([False]), np.array([1.0]), 0, np.random.default_rng(0)).dtype
dtype('int64')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import gamma

from adaptive_rollouts.checks.validation import check_integer, check_range

__all__ = ["LengthModel", "mean_length", "sample_lengths", "expected_length", "truncated_share"]


@dataclass(frozen=True)
class LengthModel:
    """Parameters of the length model (see the module docstring for the formula and the sources)."""

    base: float = 1500.0  # mean tokens of a success at step 0
    ratio: float = 3.0  # mean failure / success length on the hardest prompts (p0 = 0)
    max_tokens: int = 8192  # the generation cap: longer rollouts are cut here
    shape: float = 4.0  # Gamma shape k: coefficient of variation 1 / sqrt(k)
    growth: float = 0.5  # relative growth of every mean per 100 steps (drift over training)

    def __post_init__(self) -> None:
        check_range(self.base, "base", 0.0)
        check_range(self.ratio, "ratio", 1.0, low_closed=True)
        check_integer(self.max_tokens, "max_tokens", least=1)
        check_range(self.shape, "shape", 0.0)
        check_range(self.growth, "growth", -1.0)


def mean_length(model: LengthModel, success: np.ndarray, hardness: np.ndarray, step: int) -> np.ndarray:
    """m_q(s, t) before the cap, per rollout (``success`` bool and ``hardness`` h_q in [0, 1], same shape)."""
    success = np.asarray(success, dtype=bool)
    hardness = np.asarray(hardness, dtype=float)
    if success.shape != hardness.shape:
        raise ValueError(f"success {success.shape} and hardness {hardness.shape} differ in shape")
    if hardness.size and (np.any(~np.isfinite(hardness)) or hardness.min() < 0 or hardness.max() > 1):
        raise ValueError(f"hardness must be in [0, 1], got {hardness[(hardness < 0) | (hardness > 1)][:5].tolist()}")
    drift = 1.0 + model.growth * check_integer(step, "step", least=0) / 100.0
    if drift <= 0:
        raise ValueError(f"growth {model.growth} makes lengths vanish by step {step}")
    return model.base * drift * np.where(success, 1.0, 1.0 + (model.ratio - 1.0) * hardness)


def sample_lengths(
    model: LengthModel, success: np.ndarray, hardness: np.ndarray, step: int, rng: np.random.Generator
) -> np.ndarray:
    """L = min(ceil(X), max_tokens) per rollout, X ~ Gamma(k, m / k): int64 tokens in [1, max_tokens]."""
    m = mean_length(model, success, hardness, step)
    x = rng.gamma(model.shape, m / model.shape)
    return np.clip(np.ceil(x), 1, model.max_tokens).astype(np.int64)


def expected_length(model: LengthModel, mean: float) -> float:
    """E[min(ceil(X), M)] = sum_{j=0}^{M-1} P(X > j) for X ~ Gamma(k, mean / k), exactly."""
    j = np.arange(model.max_tokens, dtype=float)
    return float(gamma.sf(j, model.shape, scale=mean / model.shape).sum())


def truncated_share(model: LengthModel, mean: float) -> float:
    """P(min(ceil(X), M) = M) = P(X > M - 1): the share of rollouts cut at the cap."""
    return float(gamma.sf(model.max_tokens - 1, model.shape, scale=mean / model.shape))

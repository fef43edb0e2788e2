"""A training run's settings (`TrainConfig`) and the `Simulator`: sampling rollouts from a problem
and turning them into policy gradients (the update itself is `train`'s)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from adaptive_rollouts.checks.validation import LOSS_ROWS, check_choice
from adaptive_rollouts.sim.estimators import aggregation_weights, group_advantages_np
from adaptive_rollouts.sim.lengths import sample_lengths
from adaptive_rollouts.sim.problem import Problem
from adaptive_rollouts.sim.step_time import ENGINES
from adaptive_rollouts.types import Allocator, Draw

__all__ = ["TrainConfig", "Simulator", "LOSS_ROWS"]

Arr = np.ndarray


@dataclass(frozen=True)
class TrainConfig:
    """One training run. ``budget`` rollouts per step over ``batch_prompts`` prompts."""

    steps: int = 100
    batch_prompts: int = 64
    budget: int = 512
    lr: float = 0.03
    optimizer: str = "adamw"  # or "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float | None = None
    estimator: str = "grpo"
    aggregation: str = "seq-mean"
    seed: int = 0
    grad_var_every: int = 10  # 0 disables the gradient-variance probe
    grad_var_resamples: int = 8
    fingerprint_every: int = 0  # > 0: noise-to-signal of the per-rollout gradients every k steps
    snapshot_step: int | None = None  # step whose (p, n) pairs are kept for the allocation plot
    # AUROC of the policy's noisy view of its own margin (`sim.policy_view`), given each step to an
    # allocator that takes it (``observe_policy``); None: no view
    policy_view_auroc: float | None = 0.8
    # "kept": the loss is normalised by the rows trained on; "uniform": by Uniform's rows (budget,
    # batch prompts), a cut or skipped group counting as rows of zero advantage (`aggregation_weights`)
    loss_rows: str = "kept"
    # a length cell's generation engine (`sim.step_time.ENGINES`): each round's modelled time is handed
    # to the allocator with its lengths (`types.Draw.seconds`); None: rounds are not timed
    engine: str | None = None

    def __post_init__(self) -> None:
        if self.engine is not None:
            check_choice("engine", self.engine, tuple(ENGINES))


class Simulator:
    """Owns a problem, a sampling generator and the rollout log of the current step.

    With a length model on the problem (`Problem.length_model`), every ``sample`` call (one generation
    round) also draws each rollout's completion length, from a generator of its own (so the rewards
    are the draws they are without lengths), at the drift of step ``step`` (the trainer sets it);
    `drain_rounds` hands the lengths over, round by round, and ``sample`` answers with a
    `types.Draw` carrying them, so allocators see what each rollout cost; with an ``engine``
    (a name of `sim.step_time.ENGINES`) the Draw also carries the round's modelled time (``seconds``).
    """

    def __init__(self, problem: Problem, seed: int = 0, engine: str | None = None):
        if engine is not None and problem.length_model is None:
            raise ValueError(f"engine {engine!r} times rounds from their lengths: the problem has no length model")
        self.problem = problem
        self.engine = None if engine is None else ENGINES[check_choice("engine", engine, tuple(ENGINES))]
        self.rng = np.random.default_rng(seed)
        # a stream of its own, so reasoning tokens leave the answers' draws as they are without them
        self.token_rng = np.random.default_rng([seed, 1])
        self.length_rng = np.random.default_rng([seed, 2])  # likewise for completion lengths
        self.step = 0
        self._hardness = None if problem.length_model is None else 1.0 - problem.initial_success()
        self._log_rounds: list[tuple[np.ndarray, np.ndarray]] = []
        self._log_tokens: list[np.ndarray] = []
        self._log_prompt: list[np.ndarray] = []
        self._log_answer: list[np.ndarray] = []
        self._log_reward: list[np.ndarray] = []
        self.rollouts = 0

    # -- what allocators see -------------------------------------------------------------
    def truth(self, prompts) -> tuple[np.ndarray, np.ndarray]:
        idx = self._index(prompts)
        return self.problem.success(idx), self.problem.reward_variance(idx)

    def sampler(self, prompts):
        """The ``sample(indices, counts)`` callback for one step's prompt list."""
        idx_of = self._index(prompts)

        def sample(indices, counts):
            indices = np.asarray(indices, dtype=np.int64)
            counts = np.asarray(counts, dtype=np.int64)
            if indices.shape != counts.shape:
                raise ValueError(f"indices {indices.shape} and counts {counts.shape} differ in shape")
            if np.any(counts < 0):
                raise ValueError(f"counts must be >= 0, got {counts[counts < 0][:5].tolist()}")
            q = np.repeat(idx_of[indices], counts)
            answers, rewards = self.problem.sample(q, self.rng)
            tokens = self.problem.sample_reasoning(q, self.token_rng)
            if tokens is not None:
                self._log_tokens.append(tokens)
            model = self.problem.length_model
            lengths = None
            if model is not None and self._hardness is not None and q.size:
                success = rewards >= 1.0  # full credit; graded partial credit counts as a failure
                lengths = sample_lengths(model, success, self._hardness[q], self.step, self.length_rng)
                self._log_rounds.append((lengths, success))
            self._log_prompt.append(q)
            self._log_answer.append(answers)
            self._log_reward.append(rewards)
            self.rollouts += int(q.size)
            cuts = np.cumsum(counts)[:-1]
            out = [np.array(r) for r in np.split(rewards, cuts)] if counts.size else []
            if lengths is None:
                return out
            # the allocator sees the lengths of exactly the rollouts it drew (`types.Draw`), and the
            # round's modelled time when an engine is set
            seconds = None if self.engine is None else self.engine.round_time(lengths)
            return Draw.with_lengths(out, [np.array(n) for n in np.split(lengths, cuts)], seconds)

        return sample

    def drain(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(prompt, answer, reward, reasoning-token counts or None) of every rollout since the last
        drain, in sampling order."""
        pb_tokens = self.problem.reasoning_tokens
        if not self._log_prompt:
            e = np.zeros(0, dtype=np.int64)
            return e, e, np.zeros(0), None if pb_tokens == 0 else np.zeros((0, self.problem.n_answers))
        out = (np.concatenate(self._log_prompt), np.concatenate(self._log_answer), np.concatenate(self._log_reward))
        tokens = np.concatenate(self._log_tokens) if self._log_tokens else None
        self._log_prompt, self._log_answer, self._log_reward, self._log_tokens = [], [], [], []
        return (*out, tokens)

    def drain_rounds(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(lengths, success) of every generation round since the last call, one pair per ``sample``
        call that generated rollouts (empty without a length model)."""
        out, self._log_rounds = self._log_rounds, []
        return out

    def _index(self, prompts) -> np.ndarray:
        idx = np.asarray([int(p) for p in prompts], dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.problem.n_prompts):
            bad = idx[(idx < 0) | (idx >= self.problem.n_prompts)][:5].tolist()
            raise KeyError(f"unknown prompts {bad}")
        return idx

    # -- the update ----------------------------------------------------------------------
    def rollout_coefficients(
        self, q: Arr, answers: Arr, rewards: Arr, cfg: TrainConfig, tokens: Arr | None = None
    ) -> Arr:
        """Per-rollout logit-gradient rows w_i A_i (e_{a_i} - pi(. | q_i) + c_i - L pi(. | q_i)): [N, K],
        c_i the rollout's reasoning-token counts (``tokens``; drawn here when the problem has reasoning
        tokens and none are given; no such term without them)."""
        pb = self.problem
        _, group = np.unique(q, return_inverse=True)
        adv = group_advantages_np(rewards, group, cfg.estimator)
        check_choice("loss_rows", cfg.loss_rows, LOSS_ROWS)
        uniform_rows = (cfg.budget, cfg.batch_prompts) if cfg.loss_rows == "uniform" else None
        w = aggregation_weights(group, pb.lengths[q, answers], cfg.aggregation, cfg.budget, pb.max_length, uniform_rows)
        coef = w * adv
        pi = pb.probs(q)
        M = -pi * coef[:, None]
        M[np.arange(q.size), answers] += coef
        if pb.reasoning_tokens > 0:
            c = pb.sample_reasoning(q, self.token_rng) if tokens is None else tokens
            M += coef[:, None] * (c - pb.reasoning_tokens * pi)
        return M

    def batch_gradient(self, q: Arr, answers: Arr, rewards: Arr, cfg: TrainConfig, tokens: Arr | None = None) -> Arr:
        """The loss gradient (ascent direction) from rollouts (q, answers, rewards), flat over the
        parameters (W, then E when the problem has a per-prompt component)."""
        pb = self.problem
        if q.size == 0:
            return np.zeros(pb.n_params)
        M = self.rollout_coefficients(q, answers, rewards, cfg, tokens)
        gW = pb.shared_scale * (pb.features[q].T @ M)
        if not pb.own_scale:
            return gW.ravel()
        gE = np.zeros_like(pb.E)
        np.add.at(gE, q, pb.own_scale * M)
        return np.concatenate([gW.ravel(), gE.ravel()])

    def rollout_gradients(self, q: Arr, answers: Arr, rewards: Arr, cfg: TrainConfig, tokens: Arr | None = None) -> Arr:
        """Per-rollout gradients [N, n_params] (their sum is `batch_gradient` with the same ``tokens``)."""
        pb = self.problem
        M = self.rollout_coefficients(q, answers, rewards, cfg, tokens)
        gW = pb.shared_scale * pb.features[q][:, :, None] * M[:, None, :]
        rows = [gW.reshape(q.size, -1)]
        if pb.own_scale:
            gE = np.zeros((q.size,) + pb.E.shape)
            gE[np.arange(q.size), q] = pb.own_scale * M
            rows.append(gE.reshape(q.size, -1))
        return np.concatenate(rows, axis=1)

    def resampled_gradients(
        self, idx: np.ndarray, counts: np.ndarray, cfg: TrainConfig, repeats: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Batch gradients of ``repeats`` fresh samples with fixed counts: [repeats, n_params]."""
        q = np.repeat(idx, counts)
        out = []
        for _ in range(repeats):
            a, r = self.problem.sample(q, rng)
            out.append(self.batch_gradient(q, a, r, cfg))
        return np.array(out)

    def rerun_gradients(
        self, allocator: Allocator, prompts: list, cfg: TrainConfig, repeats: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Batch gradients of ``repeats`` fresh runs of a copy of ``allocator`` on ``prompts``
        (its allocation is redrawn too, so progressive allocators are measured as they act)."""
        out = []
        for _ in range(repeats):
            probe = Simulator(self.problem, seed=int(rng.integers(2**31)))
            returned = copy.deepcopy(allocator).run(prompts, cfg.budget, probe.sampler(prompts))
            q, a, r, c = probe.drain()
            kept = np.array([int(prompts[i]) for i, x in enumerate(returned) if len(x) > 0], dtype=np.int64)
            keep = np.isin(q, kept)
            out.append(self.batch_gradient(q[keep], a[keep], r[keep], cfg, None if c is None else c[keep]))
        return np.array(out)

"""The training loop: allocator -> sampled rollouts -> group advantages -> AdamW (or SGD) step.

The update is AdamW by default (betas 0.9 / 0.999, eps 1e-8, weight decay 0, optional gradient-norm
clipping), as TRL and verl train; ``optimizer="sgd"`` keeps plain SGD. The parameters are the
shared weights W and, when the problem has one, the per-prompt component E (``Problem.own_scale``).

Prompts are integer keys (train-pool indices). Every rollout the allocator asks for through
``sample`` costs one unit of budget, whether or not the allocator later keeps it (DAPO-style
over-sampling pays for what it drops). The update uses the groups the allocator returns.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import VIP
from adaptive_rollouts.clock import AllocatorClock
from adaptive_rollouts.fingerprints import RegimeTracker, batch_variance_stats, noise_to_signal
from adaptive_rollouts.sim.optim import make_optimizer
from adaptive_rollouts.sim.oracle import TruePredictor
from adaptive_rollouts.sim.policy_view import PolicyView
from adaptive_rollouts.sim.problem import Problem
from adaptive_rollouts.sim.simulator import Simulator, TrainConfig
from adaptive_rollouts.types import Allocator

__all__ = ["TrainConfig", "Simulator", "train", "TOKEN_TRACE", "PROMPT_CLASSES", "CLASS_EDGE", "prompt_class"]

TOKEN_TRACE = (
    "tokens",
    "round_max_tokens",
    "round_tokens",
    "truncated",
    "success_tokens",
    "success_rollouts",
    "class_rollouts",
    "class_tokens",
)
"""The trace's token accounting, per step, recorded when the problem has a length model (see `train`)."""

PROMPT_CLASSES = ("hopeless", "mixed", "solved")
CLASS_EDGE = 0.05
"""A prompt of the step is hopeless when its true chance of success is below ``CLASS_EDGE``, solved
when above 1 - ``CLASS_EDGE``, mixed otherwise (the trace's ``class_rollouts`` / ``class_tokens``)."""


def prompt_class(p: np.ndarray) -> np.ndarray:
    """0 (hopeless), 1 (mixed) or 2 (solved) per prompt of true success ``p``, by `CLASS_EDGE`.

    >>> prompt_class(np.array([0.01, 0.5, 0.99])).tolist()
    [0, 1, 2]
    """
    p = np.asarray(p, dtype=float)
    return np.where(p < CLASS_EDGE, 0, np.where(p > 1.0 - CLASS_EDGE, 2, 1))


def train(problem: Problem, allocator: Allocator, cfg: TrainConfig, predictor: Any = None) -> dict[str, Any]:
    """Train ``problem.W`` (and ``problem.E``; both reset to zero) with ``allocator``; return the trace.

    The trace holds per-step lists: cumulative rollouts (and, when the problem has a length model,
    cumulative generated tokens ``tokens``, the longest rollout of each generation round
    ``round_max_tokens`` and the tokens of each ``round_tokens``, rollouts cut at the cap
    ``truncated``, tokens and count of the successful rollouts ``success_tokens`` /
    ``success_rollouts``, and the rollouts and tokens generated for the step's hopeless, mixed and
    solved prompts, `prompt_class`, ``class_rollouts`` / ``class_tokens``), held-out accuracy, zero-variance group
    fraction, wasted-rollout fraction, allocator seconds, prompts skipped; gradient probes every
    ``grad_var_every`` steps: trace of the covariance and debiased squared mean of the batch
    gradient over ``grad_var_resamples`` fresh reruns of the method's step (allocation redrawn)
    and of the true-p optimum of the library's expected-improvement objective for the run's
    estimator and aggregation (`VIP` with the true p) on the same prompts and policy; the
    noise-to-signal ratio of the per-rollout gradients every ``fingerprint_every`` steps; the
    reward-only fingerprints of `RegimeTracker`; calibration pairs (predicted vs true p) when
    ``predictor`` is given; and (p, n) pairs at ``snapshot_step``. An allocator with
    ``observe_policy`` gets, each step before ``run``, the policy's noisy view of its own margin on
    the step's prompts (`sim.policy_view.PolicyView`, AUROC ``cfg.policy_view_auroc``).
    """
    problem.reset_parameters()
    opt = make_optimizer(
        cfg.optimizer,
        cfg.lr,
        **(
            {"betas": cfg.betas, "eps": cfg.eps, "weight_decay": cfg.weight_decay, "max_grad_norm": cfg.max_grad_norm}
            if cfg.optimizer == "adamw"
            else {"max_grad_norm": cfg.max_grad_norm}
        ),
    )
    tracker = RegimeTracker()
    sim = Simulator(problem, seed=cfg.seed, engine=cfg.engine)
    expect_times = getattr(allocator, "expect_round_times", None)
    if cfg.engine is not None and expect_times is not None:  # every round will be timed
        expect_times()
    order_rng = np.random.default_rng(cfg.seed + 7919)
    probe_rng = np.random.default_rng(cfg.seed + 104729)
    observe_policy = getattr(allocator, "observe_policy", None)
    view = (
        PolicyView(problem, cfg.policy_view_auroc, seed=cfg.seed) if cfg.policy_view_auroc and observe_policy else None
    )
    N = problem.n_prompts
    perm, pos = order_rng.permutation(N), 0
    snapshot = cfg.snapshot_step if cfg.snapshot_step is not None else cfg.steps // 2
    tr: dict[str, Any] = {
        k: []
        for k in (
            "rollouts",
            "accuracy",
            "train_success",
            "zero_variance_fraction",
            "wasted_frac",
            "allocator_seconds",
            "skipped_frac",
            "probe_step",
            "probe_var",
            "probe_signal",
            "probe_oracle_var",
            "probe_oracle_signal",
            "calib_pred",
            "calib_true",
            "nsr_rollout",
        )
    }
    tr["accuracy0"] = problem.test_accuracy()
    tr["alloc_p"], tr["alloc_n"] = [], []
    length_model = problem.length_model
    if length_model is not None:
        for k in TOKEN_TRACE:
            tr[k] = []
    total = total_tokens = 0
    for step in range(cfg.steps):
        if pos + cfg.batch_prompts > N:
            perm, pos = order_rng.permutation(N), 0
        idx = perm[pos : pos + cfg.batch_prompts]
        pos += cfg.batch_prompts
        prompts = [int(i) for i in idx]
        true_p, true_var = sim.truth(prompts)
        if predictor is not None and step % 5 == 0:
            pred = predictor.predict(prompts)
            tr["calib_pred"].extend(np.asarray(pred.mean, float).tolist())
            tr["calib_true"].extend(true_p.tolist())
        if view is not None and observe_policy is not None:  # the policy's view, before any rollout
            observe_policy(prompts, view.features(idx))
        probing = bool(cfg.grad_var_every) and step % cfg.grad_var_every == 0
        before = copy.deepcopy(allocator) if probing else None
        clock, sampler = AllocatorClock(), sim.sampler(prompts)
        sim.step = step  # the length model's drift

        def sample(indices: np.ndarray, counts: np.ndarray, sampler: Any = sampler, clock: Any = clock) -> Any:
            with clock.paused():  # the simulator's sampling is not the allocator's time
                return sampler(indices, counts)

        with clock.running():
            returned = allocator.run(prompts, cfg.budget, sample)
        tracker.update(prompts, [np.asarray(r, dtype=float) for r in returned])
        tr["allocator_seconds"].append(clock.seconds)
        q, answers, rewards, tokens = sim.drain()
        step_total = q.size
        total += step_total
        if length_model is not None:  # every generated rollout's tokens, kept or not, round by round
            rounds = sim.drain_rounds()
            total_tokens += sum(int(n.sum()) for n, _ in rounds)
            tr["tokens"].append(total_tokens)
            tr["round_max_tokens"].append([int(n.max()) for n, _ in rounds])
            tr["round_tokens"].append([int(n.sum()) for n, _ in rounds])
            # rounds and the rollout log are in the same (sampling) order
            lengths = np.concatenate([n for n, _ in rounds]) if rounds else np.zeros(0, dtype=np.int64)
            kind = np.zeros(N, dtype=np.int64)
            kind[idx] = prompt_class(true_p)
            tr["class_rollouts"].append(np.bincount(kind[q], minlength=3).tolist())
            tr["class_tokens"].append(np.bincount(kind[q], weights=lengths, minlength=3).astype(np.int64).tolist())
            tr["truncated"].append(sum(int((n >= length_model.max_tokens).sum()) for n, _ in rounds))
            tr["success_tokens"].append(sum(int(n[ok].sum()) for n, ok in rounds))
            tr["success_rollouts"].append(sum(int(ok.sum()) for _, ok in rounds))
        # Keep the groups the allocator returned (all of a prompt's rollouts, or none if dropped).
        kept_prompts = {int(idx[i]) for i, r in enumerate(returned) if len(r) > 0}
        keep = np.isin(q, np.fromiter(kept_prompts, dtype=np.int64, count=len(kept_prompts)))
        q, answers, rewards = q[keep], answers[keep], rewards[keep]
        tokens = None if tokens is None else tokens[keep]
        counts = np.bincount(q, minlength=N)[idx]
        for i, r in enumerate(returned):
            if len(r) and len(r) != counts[i]:
                raise ValueError(
                    f"allocator returned {len(r)} rewards for prompt {prompts[i]} "
                    f"but sampled {counts[i]}; the simulator needs whole groups"
                )
        grad = sim.batch_gradient(q, answers, rewards, cfg, tokens)
        # Statistics of the groups that entered the update.
        if q.size:
            uq, group = np.unique(q, return_inverse=True)
            n = np.bincount(group)
            spread = np.bincount(group, weights=rewards**2) / n - (np.bincount(group, weights=rewards) / n) ** 2
            dead = (n < 2) | (spread <= 1e-12)
            tr["zero_variance_fraction"].append(float(dead.mean()))
            dropped = step_total - q.size
            tr["wasted_frac"].append(float((n[dead].sum() + dropped) / max(step_total, 1)))
        else:
            tr["zero_variance_fraction"].append(1.0)
            tr["wasted_frac"].append(1.0)
        tr["skipped_frac"].append(float(np.mean(counts == 0)))
        if step == snapshot:
            tr["alloc_p"] = true_p.tolist()
            tr["alloc_n"] = counts.tolist()
        if cfg.fingerprint_every and step % cfg.fingerprint_every == 0 and q.size >= 2:
            tr["nsr_rollout"].append(noise_to_signal(sim.rollout_gradients(q, answers, rewards, cfg, tokens)))
        if before is not None and counts.sum() >= 2 * idx.size:
            oracle = VIP(TruePredictor(sim.truth), estimator=cfg.estimator, aggregation=cfg.aggregation)
            oracle_n = oracle.plan(prompts, cfg.budget).counts
            Gm = sim.rerun_gradients(before, prompts, cfg, cfg.grad_var_resamples, probe_rng)
            Go = sim.resampled_gradients(idx, oracle_n, cfg, cfg.grad_var_resamples, probe_rng)
            v, s = batch_variance_stats(Gm)
            vo, so = batch_variance_stats(Go)
            tr["probe_step"].append(step)
            tr["probe_var"].append(v)
            tr["probe_signal"].append(s)
            tr["probe_oracle_var"].append(vo)
            tr["probe_oracle_signal"].append(so)
        problem.set_parameters(problem.parameters() + opt.step(problem.parameters(), grad))
        tr["rollouts"].append(total)
        tr["accuracy"].append(problem.test_accuracy())
        tr["train_success"].append(
            float(problem.success().mean()) if step % 10 == 0 or step == cfg.steps - 1 else float("nan")
        )
    tr["regime"] = tracker.metrics()
    return tr

"""Success traces from the simulator: prompts recur every few steps while the policy learns.

Used to measure next-visit prediction quality (benchmarks/predictors.py, docs/benchmark.md) on
the same kind of p the allocators face: extreme per prompt, partly invisible to the features, and
moving as training goes.
"""

from __future__ import annotations

import numpy as np

from adaptive_rollouts.predictors.synthetic import SyntheticTrace, TraceStep
from adaptive_rollouts.sim.optim import make_optimizer
from adaptive_rollouts.sim.regimes import Cell
from adaptive_rollouts.sim.train import Simulator, TrainConfig

__all__ = ["training_trace"]


def training_trace(cell: Cell, seed: int = 0, steps: int = 150, lr: float = 0.2) -> SyntheticTrace:
    """Train with Uniform (``cell.per_prompt`` rollouts per prompt, AdamW, GRPO, seq-mean) on an
    epoch-shuffled pass over ``cell.n_prompts`` prompts (a prompt recurs every n_prompts /
    batch_prompts steps) and record each step's prompts, rewards and true p *before* the step.
    Keys are the integer prompt ids; features are the problem's.

    >>> trace = training_trace(Cell("bimodal", dim=8, batch_prompts=4, n_prompts=12), steps=6)
    >>> len(trace.steps), trace.steps[0].counts.tolist(), trace.features.shape
    (6, [8, 8, 8, 8], (12, 8))
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    pb = cell.problem(seed, n_test=10)
    pb.reset_parameters()
    sim = Simulator(pb, seed)
    cfg = TrainConfig(batch_prompts=cell.batch_prompts, budget=cell.budget, lr=lr)
    opt = make_optimizer("adamw", lr)
    order = np.random.default_rng(seed + 7919)
    perm, pos = order.permutation(pb.n_prompts), 0
    out = []
    for _ in range(steps):
        if pos + cell.batch_prompts > pb.n_prompts:
            perm, pos = order.permutation(pb.n_prompts), 0
        idx = perm[pos : pos + cell.batch_prompts]
        pos += cell.batch_prompts
        p = pb.success(idx)
        q = np.repeat(idx, cell.per_prompt)
        answers, rewards = pb.sample(q, sim.rng)
        out.append(TraceStep(idx, np.full(idx.size, cell.per_prompt), np.split(rewards, idx.size), p))
        grad = sim.batch_gradient(q, answers, rewards, cfg)
        pb.set_parameters(pb.parameters() + opt.step(pb.parameters(), grad))
    return SyntheticTrace(list(range(pb.n_prompts)), pb.features, out)

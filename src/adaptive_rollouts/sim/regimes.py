"""Regime cells of the map: physical knobs in, fingerprints measured from rollouts out.

Knobs (what a cell configures):

- gradient noise: feature dimension ``dim`` (parameters = dim x answers) against rollouts per step
  (``batch_prompts`` x ``per_prompt``), and ``reasoning_tokens`` per rollout (the score noise of the
  tokens an LLM emits before its answer, which carry no reward signal);
- transfer between prompts: ``transfer`` t, the share of the learning signal that lands on weights
  all prompts share (the rest on a per-prompt component, `Problem.own_scale`);
- difficulty: the ``scenario`` (share of prompts near p = 0 and p = 1);
- persistence of p across epochs: the pool size ``n_prompts`` (how many steps pass between two
  visits of a prompt; a small pool is revisited often, before p has drifted far);
- cost per rollout: ``failure_ratio`` > 0 gives the rollouts completion lengths (`sim.lengths`:
  failures on hard prompts ``failure_ratio`` times as long as successes, a cap, drift over training);
  0 (every cell of the earlier maps) leaves lengths out, and those cells' runs exactly as they were.
  Lengths change what a rollout costs, never what it teaches (their generator is separate), so a
  length cell learns exactly as its base cell does; `TOKEN_CELLS` are the map's length cells.

Fingerprints (what the map reports) are never these values: `measured_transfer` here, and the
noise-to-signal ratio, zero-variance fraction and persistence of p that `train` measures through
`adaptive_rollouts.fingerprints` on Uniform's rollouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from adaptive_rollouts.sim.lengths import LengthModel
from adaptive_rollouts.sim.problem import Problem, make_problem
from adaptive_rollouts.sim.train import Simulator, TrainConfig

__all__ = ["Cell", "TOKEN_CELLS", "measured_transfer", "select_cells"]


@dataclass(frozen=True)
class Cell:
    """One regime of the map (see the module docstring for the knobs)."""

    scenario: str = "hard-heavy"
    dim: int = 16
    batch_prompts: int = 16
    per_prompt: int = 8  # mean rollouts per prompt: budget = batch_prompts x per_prompt
    transfer: float = 1.0  # share of the learning signal on the shared weights
    n_prompts: int = 1000
    reasoning_tokens: int = 0
    failure_ratio: float = 0.0  # > 0: completion lengths, failures up to this many times longer (`sim.lengths`)

    @property
    def length_model(self) -> LengthModel | None:
        return LengthModel(ratio=self.failure_ratio) if self.failure_ratio else None

    @property
    def budget(self) -> int:
        return self.batch_prompts * self.per_prompt

    @property
    def regime(self) -> str:
        """The noise / transfer / persistence part of the cell, as a short label."""
        label = f"d{self.dim}-Q{self.batch_prompts}"
        if self.per_prompt != 8:  # the maps' group size; others are marked (d16-Q32-n4)
            label += f"-n{self.per_prompt}"
        if self.transfer != 1.0:
            label += f"-t{self.transfer:g}"
        if self.n_prompts != 1000:
            label += f"-pool{self.n_prompts}"
        if self.reasoning_tokens:
            label += f"-L{self.reasoning_tokens}"
        if self.failure_ratio:
            label += f"-F{self.failure_ratio:g}"
        return label

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.regime}"

    def problem(self, seed: int, n_test: int = 500) -> Problem:
        return make_problem(
            self.scenario,
            n_prompts=self.n_prompts,
            n_test=n_test,
            dim=self.dim,
            seed=seed,
            transfer=self.transfer,
            reasoning_tokens=self.reasoning_tokens,
            length_model=self.length_model,
        )

    def as_dict(self) -> dict:
        """The knobs, budget, regime and key; ``failure_ratio`` only when lengths are on, so the cells
        of maps run before lengths existed keep the settings their stored runs were checked against."""
        knobs = {k: v for k, v in asdict(self).items() if k != "failure_ratio" or v}
        return {**knobs, "budget": self.budget, "regime": self.regime, "key": self.key}


TOKEN_CELLS = tuple(
    Cell(scenario, dim=16, batch_prompts=32, failure_ratio=ratio)
    for ratio in (2.5, 4.0)
    for scenario in ("hard-heavy", "cold-start", "pareto")
)
"""The length cells: three difficulty scenarios of the saving map's low-noise row (d16, 32 prompts a
step), with failures on the hardest prompts 2.5 and 4 times as long as successes (averaged over the
prompts that fail, about 2.2 and 3.2 times: within the 2-4 times the sources report)."""


def select_cells(cells: Sequence[Cell], names: Sequence[str]) -> list[Cell]:
    """The cells whose key ("pareto/d16-Q32") or regime ("d16-Q32") is among ``names``, in map order.

    >>> grid = [Cell("pareto", dim=16), Cell("bimodal", dim=16), Cell("pareto", dim=128)]
    >>> [c.key for c in select_cells(grid, ["d16-Q16", "pareto/d128-Q16"])]
    ['pareto/d16-Q16', 'bimodal/d16-Q16', 'pareto/d128-Q16']
    """
    known = {c.key for c in cells} | {c.regime for c in cells}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown cells {unknown}; known: {sorted(known)}")
    return [c for c in cells if c.key in names or c.regime in names]


def measured_transfer(problem: Problem, seed: int = 0, clusters: int = 4, per_prompt: int = 8) -> float:
    """How much a step on some prompts helps similar prompts it did not touch, measured.

    For each of ``clusters`` clusters: take half of the cluster's train prompts, draw ``per_prompt``
    rollouts each at the current policy, and move the parameters a small distance along their
    batch gradient (GRPO, seq-mean). The fingerprint is mean dp over the *other* half of the cluster
    divided by mean dp over the stepped half, averaged over clusters: 1 = learning transfers fully
    to unseen similar prompts, 0 = it stays with the prompts that were rolled out. The parameters
    are restored afterwards.
    """
    rng = np.random.default_rng(seed)
    theta0 = problem.parameters()
    sim = Simulator(problem, seed=seed)
    cfg = TrainConfig(estimator="grpo", aggregation="seq-mean", budget=1)
    ratios = []
    sizes = np.bincount(problem.cluster)
    for c in rng.permutation(np.flatnonzero(sizes >= 8))[:clusters]:
        members = rng.permutation(np.flatnonzero(problem.cluster == c))
        stepped, others = members[: members.size // 2], members[members.size // 2 :]
        q = np.repeat(stepped, per_prompt)
        answers, rewards = problem.sample(q, sim.rng)
        grad = sim.batch_gradient(q, answers, rewards, cfg)
        norm = float(np.linalg.norm(grad))
        if norm == 0.0:
            continue
        p_s, p_o = problem.success(stepped), problem.success(others)
        problem.set_parameters(theta0 + 0.5 * grad / norm)
        d_s, d_o = problem.success(stepped) - p_s, problem.success(others) - p_o
        problem.set_parameters(theta0)
        if d_s.mean() > 0:
            ratios.append(float(d_o.mean() / d_s.mean()))
    return float(np.mean(ratios)) if ratios else float("nan")

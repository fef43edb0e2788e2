"""Where a saving allocator's rollouts go: the share of Uniform's gradient signal each method keeps,
against the share of Uniform's rollouts it generates, on the cells of the saving map.

The simulator knows every prompt's success probability p, so at each step Uniform's expected signal
on the step's prompts is sum_q E[a(K; n_q)], K ~ Binomial(n_q, p_q), with a(k; n) the group's update
along the prompt's expected direction (`objectives.signal.known_p_group_signal`; 0 for an
all-equal group). Per run of 60 steps:

- spent: rollouts generated / the budget (every rollout counts, also those of a cut group);
- kept: the signal of the groups the method returned, sum a(k; n), / Uniform's expected signal on
  the same prompts and policy (1 for Uniform up to sampling noise);
- lost: Uniform's expected signal of the prompts the method gave fewer than n_q rollouts (skipped
  or cut), / the same total: what its stop decisions gave up, priced before any rollout;
- given: the same, priced at what the method had seen when it stopped (`given_up_signal`: a cut
  group's E[a(s + T; n_q)], T ~ Binomial(n_q - k, p), after k rollouts with s successes; a skipped
  prompt's as in lost): what its stops gave up in expectation (kept ~ 1 - given; a cut after a flat
  pilot gives up less than the group's signal before it, so lost overstates it); ``skipped``: the
  part of it given up by prompts that got no rollout (the rest: groups cut after some);
- claimed (the default): what the rule says it gave up, its `signal_given_up`, the share of its
  belief's expected signal, averaged over the steps; and (``--pool`` runs aside) where the given-up
  signal comes from, by the prompt's true p (`P_BINS`).

The known-p skip rule (``oracle-skip``) keeps nearly everything at its spend; the distance of a learned
method from that point is what its predictions cost. Every method runs at one learning rate (``--lr``):
this measures allocation decisions along a run, not learning speed (the regime map does that).

Run: .venv/bin/python benchmarks/saving_signal.py [--seeds 4] [--lr 0.4] [--cells a,b] [--methods a,b]
(writes results/saving_signal/saving_signal.json, rendered into docs/saving.md by ``make docs``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

from adaptive_rollouts.allocators import SavingProgressive, saving_allocators
from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.experiments.map_run import cell_run
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.objectives.signal import group_signal, known_p_group_signal
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.regimes import Cell, select_cells
from adaptive_rollouts.sim.train import train
from adaptive_rollouts.solvers import equal_split

OUT = Path(__file__).resolve().parents[1] / "results" / "saving_signal" / "saving_signal.json"
METHODS = ("uniform", "oracle-skip", "uniform-rounds", *saving_allocators())  # every registered saving allocator
ESTIMATOR, AGGREGATION = SAVING_MAP.estimator, SAVING_MAP.aggregation  # the runs' (`cell_run`)
P_BINS = (0.0, 0.02, 0.1, 0.3, 0.7, 0.9, 0.98, 1.0)
"""Edges of the bins of true p by which the given-up signal is split (the last bin holds p = 1)."""


def given_up_signal(n: int, drawn: int, successes: int, p: float) -> float:
    """E[a(s + T; n)], T ~ Binomial(n - k, p): what completing a group of n after k = ``drawn``
    rollouts with s = ``successes`` would have carried, with p known (k = 0: Uniform's expected
    signal, `known_p_group_signal`).

    >>> round(given_up_signal(4, 2, 1, 0.5), 4) == round(float(group_signal("grpo", 4)[1:4] @ [0.25, 0.5, 0.25]), 4)
    True
    """
    row = group_signal(ESTIMATOR, n, AGGREGATION)
    t = np.arange(n - drawn + 1)
    return float(binom.pmf(t, n - drawn, p) @ row[successes + t])


def p_bin(p: float) -> int:
    """The `P_BINS` bin of p."""
    return int(min(np.searchsorted(P_BINS, p, side="right") - 1, len(P_BINS) - 2))


class SignalLedger:
    """Wraps an allocator: per step, Uniform's expected signal on the step's prompts, the signal of
    the groups the allocator returned, what its short groups gave up, and the rollouts it drew."""

    def __init__(self, allocator: Any, problem: Any):
        self.allocator, self.problem = allocator, problem
        self.expected = self.kept = self.lost = self.given = self.skipped = 0.0
        self.spent = self.budget = 0
        self.claimed: list[float] = []  # the rule's own share given up per step (the default)
        self.by_p = np.zeros(len(P_BINS) - 1)  # the given-up signal by the prompt's true p

    def __getattr__(self, name: str) -> Any:  # the training loop may read the allocator's attributes
        return getattr(self.allocator, name)

    def run(self, prompts: list, budget: int, sample: Any) -> list:
        drawn = [0]

        def counted(indices: Any, counts: Any) -> Any:
            drawn[0] += int(np.sum(counts))
            return sample(indices, counts)

        groups = self.allocator.run(prompts, budget, counted)
        sizes = equal_split(budget, len(prompts))  # Uniform's group sizes
        p = self.problem.success(np.asarray([int(q) for q in prompts]))
        uniform = np.zeros(len(prompts))
        for n in np.unique(sizes).tolist():
            uniform[sizes == n] = known_p_group_signal(n, p[sizes == n], estimator=ESTIMATOR, aggregation=AGGREGATION)
        for j, g in enumerate(groups):
            r = np.asarray(g, dtype=float)
            if r.size >= 2 and float(np.ptp(r)) > 1e-8:
                self.kept += float(group_signal(ESTIMATOR, r.size, AGGREGATION)[int(round(float(r.sum())))])
            if r.size < sizes[j]:
                self.lost += float(uniform[j])
                given = given_up_signal(int(sizes[j]), r.size, int(round(float(r.sum()))), float(p[j]))
                self.given += given
                self.skipped += given if r.size == 0 else 0.0
                self.by_p[p_bin(float(p[j]))] += given
        claim = getattr(self.allocator, "last_metrics", {}).get("signal_given_up")
        if claim is not None:
            self.claimed.append(float(claim))
        self.expected += float(uniform.sum())
        self.spent += drawn[0]
        self.budget += budget
        return groups


def _allocator(method: str, problem: Any, seed: int, share: float | None) -> Any:
    """The method's allocator; ``share``: the default's share of signal given up instead of its own
    (`SavingProgressive.share`, for benchmarks/saving_share.py)."""
    allocator, _ = build_allocator(method, problem, seed, aggregation=AGGREGATION, estimator=ESTIMATOR)
    if share is not None:
        if not isinstance(allocator, SavingProgressive):
            raise ValueError(f"share: only the default has one, got method {method!r}")
        allocator.share = share
    return allocator


def one_run(cell: Cell, method: str, seed: int, lr: float, steps: int, share: float | None = None) -> dict[str, Any]:
    run = cell_run(cell, SAVING_MAP, seed, lr, steps=steps)
    ledger = SignalLedger(_allocator(method, run.problem, seed, share), run.problem)
    accuracy = train(run.problem, ledger, run.config)["accuracy"]
    return {**_shares(ledger), "final": final_level(accuracy)}


def _shares(ledger: SignalLedger) -> dict[str, Any]:
    """A run's ledger as shares of Uniform's expected signal (and of the budget, for spent)."""
    return {
        "spent": ledger.spent / ledger.budget,
        "kept": ledger.kept / ledger.expected,
        "lost": ledger.lost / ledger.expected,
        "given": ledger.given / ledger.expected,
        "skipped": ledger.skipped / ledger.expected,
        "claimed": float(np.mean(ledger.claimed)) if ledger.claimed else None,
        "by_p": (ledger.by_p / ledger.expected).tolist(),
    }


class StaticPool:
    """A recurring pool whose p does not move: ``extreme`` of the prompts at p near 0 or 1 (half each,
    within 0.02 of the end), the rest uniform on [0.1, 0.9] (a frontier). No policy view: what a
    trainer that gives no hidden states gets (the history has to find the flat prompts)."""

    EDGE = 0.02  # an extreme prompt's p lies within this of 0 or 1
    FRONTIER = (0.1, 0.9)  # the others' p, uniform on this range

    def __init__(self, size: int, extreme: float, seed: int):
        rng = np.random.default_rng(seed)
        self.extreme = extreme
        kind = rng.random(size)
        low, high = rng.uniform(0.0, self.EDGE, size), rng.uniform(1.0 - self.EDGE, 1.0, size)
        frontier = rng.uniform(*self.FRONTIER, size)
        self.p = np.where(kind < extreme / 2, low, np.where(kind < extreme, high, frontier))
        self.rng = np.random.default_rng([seed, 1])

    def success(self, idx: np.ndarray) -> np.ndarray:
        return self.p[np.asarray(idx, dtype=np.int64)]

    def density(self, grid: np.ndarray) -> np.ndarray:
        """The population density of p at the points of ``grid`` (what the pool draws its p from)."""
        g, (lo, hi) = np.asarray(grid, dtype=float), self.FRONTIER
        ends = ((g <= self.EDGE) | (g >= 1.0 - self.EDGE)) * (self.extreme / 2) / self.EDGE
        return ends + ((g >= lo) & (g <= hi)) * (1.0 - self.extreme) / (hi - lo)

    def sampler(self, prompts: list) -> Any:
        def sample(indices: Any, counts: Any) -> list:
            return [(self.rng.random(int(c)) < self.p[prompts[i]]).astype(float) for i, c in zip(indices, counts)]

        return sample


POOL = {"size": 200, "extreme": 0.8, "batch": 32, "steps": 60}


def pool_run(method: str, seed: int, per_prompt: int, share: float | None = None, belief: Any = None) -> dict[str, Any]:
    """One run on the recurring `StaticPool` (``POOL``) at ``per_prompt`` rollouts per prompt;
    ``belief(pool)``: a belief put in place of the default's own (benchmarks/pool_beliefs.py)."""
    pool = StaticPool(POOL["size"], POOL["extreme"], seed)
    problem: Any = _PoolProblem(pool)
    allocator = _allocator(method, problem, seed, share)
    if belief is not None:
        if not isinstance(allocator, SavingProgressive):
            raise ValueError(f"belief: only the default reads one, got method {method!r}")
        allocator.belief = belief(pool)
    ledger = SignalLedger(allocator, pool)
    order = np.random.default_rng([seed, 2])
    for _ in range(POOL["steps"]):
        prompts = [int(q) for q in order.choice(POOL["size"], POOL["batch"], replace=False)]
        ledger.run(prompts, POOL["batch"] * per_prompt, pool.sampler(prompts))
    return _shares(ledger)


class _PoolProblem:
    """What `build_allocator` reads of a problem, for the static pool (features: none useful)."""

    def __init__(self, pool: StaticPool):
        self.pool, self.n_prompts = pool, pool.p.size
        self.features = np.zeros((pool.p.size, 1))

    def success(self, idx: Any = None) -> np.ndarray:
        return self.pool.p if idx is None else self.pool.success(idx)

    def reward_variance(self, idx: Any = None) -> np.ndarray:
        p = self.success(idx)
        return p * (1.0 - p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.4)
    ap.add_argument("--cells", default="", help="comma list of saving-map cells or regimes (default: its own rows)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--pool", action="store_true", help="also the recurring pool with 80%% of p near 0 or 1 (n = 4, 8)")
    args = ap.parse_args()
    cells = select_cells(SAVING_MAP.cells, args.cells.split(",")) if args.cells else SAVING_MAP.cells[:12]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bar = progress_bar(len(cells) * len(methods) * args.seeds, not args.no_progress)
    rows = []
    for cell in cells:
        for method in methods:
            runs = []
            for seed in range(args.seeds):
                runs.append(one_run(cell, method, seed, args.lr, args.steps))
                bar.update(1)
            row: dict[str, Any] = {"cell": cell.key, "method": method}
            for key in ("spent", "kept", "lost", "given", "skipped", "claimed", "final"):
                if any(r[key] is None for r in runs):  # claimed: a method that states no share given up
                    row[key] = row[f"{key}_sd"] = None
                    continue
                values = np.array([r[key] for r in runs])
                row[key], row[f"{key}_sd"] = float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0
            row["by_p"] = np.mean([r["by_p"] for r in runs], axis=0).tolist()
            rows.append(row)
            print(
                f"{cell.key:34s} {method:16s} spent {row['spent']:.2f} kept {row['kept']:.2f} lost {row['lost']:.2f}"
                f" given {row['given']:.3f} claimed {row['claimed'] if row['claimed'] is None else round(row['claimed'], 3)}"
            )
    pool_rows = []
    for per_prompt in (4, 8) if args.pool else ():
        for method in [m for m in methods if m in ("uniform", "oracle-skip") or m.startswith("default")]:
            runs = [pool_run(method, seed, per_prompt) for seed in range(args.seeds)]
            row = {"n": per_prompt, "method": method}
            for key in ("spent", "kept", "lost", "given", "skipped", "claimed"):
                row[key] = None if any(r[key] is None for r in runs) else float(np.mean([r[key] for r in runs]))
            pool_rows.append(row)
            print(f"pool n={per_prompt} {method:16s} spent {row['spent']:.2f} kept {row['kept']:.2f}", flush=True)
    bar.close()
    settings = {
        "seeds": args.seeds,
        "steps": args.steps,
        "lr": args.lr,
        "estimator": ESTIMATOR,
        "aggregation": AGGREGATION,
        "cells": [c.key for c in cells],
        "methods": methods,
        "pool": POOL if args.pool else None,
        "p_bins": list(P_BINS),
    }
    path = write_result(
        args.out,
        {"rows": rows, "pool_rows": pool_rows, **settings, "load_average": os.getloadavg()[0]},
        settings=settings,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Predictor benchmark: next-step quality on synthetic traces with known truth, and cost vs pool size.

    .venv/bin/python benchmarks/predictors.py            # default run, < 3 min on 2 cores
    .venv/bin/python benchmarks/predictors.py --full     # adds the 1M-prompt pool and more seeds
    .venv/bin/python benchmarks/predictors.py --recurring  # only the next-visit check on simulator traces

Quality: every predictor predicts each step's batch before seeing its rewards (then updates);
log-loss (per rollout, E[p] clipped to [1e-3, 1 - 1e-3]), Brier score and MAE against the true p,
printed as ratios to PaperGP (< 1 is better). Cost: CPU and wall ms per step (predict + update of 512
prompts; CPU time is the fair number on a shared machine)
and memory of the predictor's state after every prompt of the pool was seen once (tracemalloc),
for pools of 1k, 10k, 100k (and 1M with --full). BLAS runs single-threaded (set before numpy loads)
so timings do not depend on how busy the other cores are.

Writes everything it prints to ``--out`` (default ``results/predictors/predictors.json``, with
``--full`` ``predictors-full.json``, with ``--recurring`` ``recurring.json``); ``make docs`` renders
docs/predictors.md, docs/benchmark.md and README.md from those files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from adaptive_rollouts.embeddings import FeatureTable  # noqa: E402
from adaptive_rollouts.experiments.results import git_commit, write_result  # noqa: E402
from adaptive_rollouts.predictors import (  # noqa: E402
    CumulativeMean,
    DiscountedBeta,
    GaussianProcess,
    PaperGP,
    Ridge,
    WindowedMean,
)
from adaptive_rollouts.predictors.history_blend import LastVisitBlend  # noqa: E402
from adaptive_rollouts.predictors.synthetic import evaluate, synthetic_trace  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results" / "predictors"

FACTORIES = {
    "PaperGP": lambda table: PaperGP(table),
    "GaussianProcess": lambda table: GaussianProcess(table),
    "DiscountedBeta": lambda table: DiscountedBeta(),
    "WindowedMean": lambda table: WindowedMean(),
    "Ridge": lambda table: Ridge(table),
    "CumulativeMean": lambda table: CumulativeMean(),
}

# quality only (the cost of an option is the default's): settings the docs compare against
GP_OPTIONS = {
    "GP, log-loss blend": lambda table: GaussianProcess(table, blend_criterion="log-loss"),
    "GP, residual_var 9": lambda table: GaussianProcess(table, residual_var=9.0),
}

SCENARIOS = {
    # name: synthetic_trace kwargs
    "default (2k prompts, 64/step, 200 steps)": {},
    "revisited often (500 prompts)": {"n_prompts": 500},
    "rarely revisited (20k prompts)": {"n_prompts": 20000},
    "fast drift (wander half-life 20)": {"wander_half_life": 20.0, "wander_scale": 0.8},
    "many rollouts (16-32 each)": {"count_choices": (16, 32), "count_probs": (0.5, 0.5)},
}


def quality(seeds: list[int]) -> list[dict]:
    """Per scenario: the PaperGP absolute values and every predictor's ratio to them."""
    out = []
    print("\n== next-step quality, ratio to PaperGP (lower is better; absolute PaperGP value in brackets)")
    for scenario, kwargs in SCENARIOS.items():
        makers = {**FACTORIES, **GP_OPTIONS}
        totals = {name: np.zeros(3) for name in makers}
        for seed in seeds:
            trace = synthetic_trace(seed=seed, **kwargs)
            table = trace.table
            for name, make in makers.items():
                r = evaluate(make(table), trace)
                totals[name] += [r["log_loss"], r["brier"], r["mae"]]
        base = totals["PaperGP"]
        print(
            f"\n{scenario}  [PaperGP log-loss {base[0] / len(seeds):.3f}, Brier {base[1] / len(seeds):.3f}, "
            f"MAE {base[2] / len(seeds):.3f}]"
        )
        print(f"  {'predictor':<18} {'log-loss':>9} {'Brier':>7} {'MAE':>7}")
        ratios = {}
        for name, tot in totals.items():
            ratio = tot / base
            ratios[name] = {"log_loss": ratio[0], "brier": ratio[1], "mae": ratio[2]}
            print(f"  {name:<18} {ratio[0]:9.3f} {ratio[1]:7.3f} {ratio[2]:7.3f}", flush=True)
        gp, beta = totals["GaussianProcess"], totals["DiscountedBeta"]
        print(
            f"  GaussianProcess vs PaperGP log-loss: {100 * (1 - gp[0] / base[0]):+.1f}% lower; "
            f"vs DiscountedBeta: {100 * (1 - gp[0] / beta[0]):+.1f}% lower"
        )
        paper = dict(zip(("log_loss", "brier", "mae"), base / len(seeds)))
        out.append({"scenario": scenario, "paper_gp": paper, "ratio_to_paper_gp": ratios})
    return out


def cost(pool_sizes: list[int], batch: int = 512, dim: int = 32, steps: int = 10) -> list[dict]:
    """Per pool size and predictor: CPU and wall ms per step, state MB (None: skipped)."""
    out: list[dict] = []
    print(f"\n== cost per step (predict + update, {batch} prompts, {dim}-d features, 1 BLAS thread)")
    print(f"  {'predictor':<16} {'pool':>9} {'cpu ms':>9} {'wall ms':>9} {'state MB':>9}")
    rng = np.random.default_rng(0)
    for n in pool_sizes:
        x = rng.standard_normal((n, dim)).astype(np.float32)
        keys = [f"q{i}" for i in range(n)]
        table = FeatureTable(keys, x)
        for name, make in FACTORIES.items():
            if name == "PaperGP" and n > 100_000:
                print(f"  {name:<16} {n:>9} {'skipped':>9}   (O(N B d) per step, ~10 s at 1M)")
                out.append({"predictor": name, "pool": n, "cpu_ms": None, "wall_ms": None, "state_mb": None})
                continue
            tracemalloc.start()
            pred = make(table)
            fill = 16384
            if name != "PaperGP":  # see every prompt once, so per-prompt state covers the pool
                for start in range(0, n, fill):
                    chunk = keys[start : start + fill]
                    pred.update(chunk, [np.ones(4) * (i % 2) for i in range(len(chunk))])
            mem = tracemalloc.get_traced_memory()[0] / 2**20
            tracemalloc.stop()
            n_steps = 3 if name == "PaperGP" and n >= 100_000 else steps
            batches = [[keys[i] for i in rng.choice(n, batch, replace=False)] for _ in range(n_steps)]
            rewards = [[rng.integers(0, 2, 8).astype(float) for _ in range(batch)] for _ in range(n_steps)]
            wall, cpu = time.perf_counter(), time.process_time()
            for chunk, rew in zip(batches, rewards):
                pred.predict(chunk)
                pred.update(chunk, rew)
            wall = 1000 * (time.perf_counter() - wall) / n_steps
            cpu = 1000 * (time.process_time() - cpu) / n_steps
            print(f"  {name:<16} {n:>9} {cpu:9.1f} {wall:9.1f} {mem:9.1f}")
            out.append({"predictor": name, "pool": n, "cpu_ms": cpu, "wall_ms": wall, "state_mb": mem})
        del table, x, keys
    return out


RECURRING_CELLS = (
    ("hard-heavy", 16, 32),
    ("bimodal", 128, 16),
    ("pareto", 128, 16),
)


def _with_blend(gp: GaussianProcess, blend: LastVisitBlend) -> GaussianProcess:
    gp.blend = blend
    return gp


def recurring(seeds: list[int]) -> list[dict]:
    """Next-visit quality once a prompt has history, on simulator training traces whose 200
    prompts recur every 6-13 steps (Uniform, AdamW lr 0.2, 150 steps, 8 rollouts per prompt)."""
    from adaptive_rollouts.sim.regimes import Cell
    from adaptive_rollouts.sim.traces import training_trace

    makers = {
        "GaussianProcess": lambda t: GaussianProcess(t.table),
        "GP, one strength": lambda t: _with_blend(GaussianProcess(t.table), LastVisitBlend(split_unanimous=False)),
        "GP, log-loss blend": lambda t: GaussianProcess(t.table, blend_criterion="log-loss"),
        "GP, no blend": lambda t: GaussianProcess(t.table, history_blend=False),
        "GP, residual_var 9": lambda t: GaussianProcess(t.table, residual_var=9.0),
        "last visit": lambda t: WindowedMean(1),
        "WindowedMean(4)": lambda t: WindowedMean(4),
        "DiscountedBeta": lambda t: DiscountedBeta(),
        "CumulativeMean": lambda t: CumulativeMean(),
    }
    out = []
    print("\n== next-visit quality on simulator traces (prompts with history only; lower is better)")
    for scenario, dim, q in RECURRING_CELLS:
        cell = Cell(scenario, dim=dim, batch_prompts=q, n_prompts=200)
        traces = [training_trace(cell, seed=s, steps=150, lr=0.2) for s in seeds]
        print(
            f"\n{cell.key} ({len(seeds)} seeds)\n  {'predictor':<18} {'log-loss':>9} {'MAE':>7} {'E[p(1-p)] MAE':>14}"
        )
        scores = {}
        for name, make in makers.items():
            r = [evaluate(make(t), t, revisits_only=True) for t in traces]
            means = [float(np.mean([x[k] for x in r])) for k in ("log_loss", "mae", "variance_mae")]
            scores[name] = dict(zip(("log_loss", "mae", "variance_mae"), means))
            print(f"  {name:<18} {means[0]:9.4f} {means[1]:7.4f} {means[2]:14.4f}", flush=True)
        out.append({"cell": cell.key, "seeds": list(seeds), "predictors": scores})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="3 seeds and the 1M pool")
    parser.add_argument("--recurring", action="store_true", help="only the next-visit check on simulator traces")
    parser.add_argument("--out", help="result file (default: see the module docstring; '' to write none)")
    args = parser.parse_args()
    name = "recurring.json" if args.recurring else "predictors-full.json" if args.full else "predictors.json"
    out = str(RESULTS / name) if args.out is None else args.out
    commit, t0 = git_commit(), time.time()  # the code that runs is the one at the start
    seeds = [0, 1, 2] if args.full or args.recurring else [0]
    pools = [1000, 10_000, 100_000, 1_000_000] if args.full else [1000, 10_000, 100_000]
    data: dict = {"recurring": recurring(seeds=seeds)}
    if not args.recurring:
        data["quality"] = quality(seeds=seeds)
        data["cost"] = cost(pools)
    print(f"\ntotal {time.time() - t0:.0f} s")
    if out:
        settings = {"full": args.full, "recurring_only": args.recurring, "seeds": seeds}
        settings |= {"pools": [] if args.recurring else pools, "batch": 512, "dim": 32}
        print(f"wrote {write_result(out, data, settings=settings, commit=commit)}")


if __name__ == "__main__":
    main()

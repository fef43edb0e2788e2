"""Soak test: many simulated training steps on a large prompt pool; is memory flat, is time per step flat?

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/soak.py --steps 100000 --pool 100000

Default combination (cheap enough for the full length): VIP (exact solver, RLOO) with the
`DiscountedBeta` predictor, 64 prompts x 512 rollouts per step, on the learning simulator
(`sim.problem`, hard-heavy, 100,000 prompts): every step allocates, samples, updates the
predictor and takes a policy-gradient step. `--predictor gp` uses our GaussianProcess over the
simulator's 16-d features instead. A checkpoint (`save_state` of the allocator) is written and
re-read every `--checkpoint-every` steps to soak that path too.

Prints, per window of `--window` steps: resident memory (VmRSS), mean / max wall seconds per step
and CPU seconds per step (process time: stable on a shared, loaded machine);
then RSS at start (after set-up) and end, the growth after the first pass over the pool (when
every prompt has predictor state), and the ratio of the last window's time per step to the
first full-pool window's. `--json PATH` writes the same numbers; `--results` (default
``results/soak/soak.json``, '' for none) writes them as a result file with the command, commit and
settings, which ``make docs`` renders into docs/reliability.md and README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: threaded BLAS is 10x slower here
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from adaptive_rollouts.allocators import make_allocator  # noqa: E402
from adaptive_rollouts.embeddings import FeatureTable  # noqa: E402
from adaptive_rollouts.experiments.results import git_commit, write_result  # noqa: E402
from adaptive_rollouts.experiments.run_store import write_json  # noqa: E402
from adaptive_rollouts.predictors import DiscountedBeta, GaussianProcess  # noqa: E402
from adaptive_rollouts.sim.problem import make_problem  # noqa: E402
from adaptive_rollouts.sim.train import Simulator, TrainConfig  # noqa: E402
from adaptive_rollouts.state import load_state, save_state  # noqa: E402
from adaptive_rollouts.types import allocator_kind  # noqa: E402


def rss_mib() -> float:
    """Resident set size of this process (VmRSS), MiB."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def build(args, problem):
    if args.predictor == "beta":
        predictor = DiscountedBeta()
    else:
        table = FeatureTable(list(range(problem.n_prompts)), problem.features)
        predictor = GaussianProcess(table, n_features=args.gp_features, seed=args.seed)
    return make_allocator(args.allocator, predictor=predictor, seed=args.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--pool", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--allocator", default="vip")
    parser.add_argument("--predictor", choices=["beta", "gp"], default="beta")
    parser.add_argument("--gp-features", type=int, default=64)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--results", default=str(Path(__file__).resolve().parents[1] / "results" / "soak" / "soak.json")
    )
    args = parser.parse_args()
    commit = git_commit()  # the code that runs is the one at the start

    problem = make_problem("hard-heavy", n_prompts=args.pool, n_test=100, seed=args.seed)
    cfg = TrainConfig(
        steps=args.steps,
        batch_prompts=args.batch,
        budget=args.budget,
        estimator="rloo",
        aggregation="seq-mean",
        seed=args.seed,
        grad_var_every=0,
    )
    sim = Simulator(problem, seed=args.seed)
    alloc = build(args, problem)
    order = np.random.default_rng(args.seed + 1)
    perm, pos = order.permutation(args.pool), 0
    checkpoint = Path(tempfile.mkdtemp()) / "soak.safetensors"
    first_pass = -(-args.pool // args.batch)  # steps until every prompt has been seen once

    rss_start = rss_mib()
    windows, times, cpu = [], [], []
    print(
        f"soak: {args.allocator} + {args.predictor}, pool {args.pool}, batch {args.batch} x budget "
        f"{args.budget}, {args.steps} steps; RSS at start {rss_start:.1f} MiB",
        flush=True,
    )
    for step in range(args.steps):
        if pos + args.batch > args.pool:
            perm, pos = order.permutation(args.pool), 0
        prompts = [int(i) for i in perm[pos : pos + args.batch]]
        pos += args.batch
        t0, c0 = time.perf_counter(), time.process_time()
        returned = alloc.run(prompts, args.budget, sim.sampler(prompts))
        q, answers, rewards, _ = sim.drain()
        spent = sum(len(r) for r in returned)
        if spent != q.size or spent > args.budget or (allocator_kind(alloc) == "fill" and spent != args.budget):
            raise AssertionError(f"step {step}: spent {spent} of budget {args.budget} ({allocator_kind(alloc)})")
        problem.set_parameters(problem.parameters() + args.lr * sim.batch_gradient(q, answers, rewards, cfg))
        if args.checkpoint_every and (step + 1) % args.checkpoint_every == 0:
            save_state(checkpoint, alloc.state_dict())
            alloc.load_state_dict(load_state(checkpoint))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)  # CPU time: insensitive to other processes on a shared machine
        if (step + 1) % args.window == 0 or step + 1 == args.steps:
            w = np.array(times)
            windows.append(
                {
                    "end_step": step + 1,
                    "rss_mib": round(rss_mib(), 1),
                    "ms_per_step": round(1e3 * float(w.mean()), 3),
                    "max_ms": round(1e3 * float(w.max()), 3),
                    "cpu_ms_per_step": round(1e3 * float(np.mean(cpu)), 3),
                }
            )
            times, cpu = [], []
            print(
                f"  steps {step + 1 - len(w):6d}-{step + 1:6d}: RSS {windows[-1]['rss_mib']:8.1f} MiB, "
                f"{windows[-1]['ms_per_step']:7.3f} ms/step (max {windows[-1]['max_ms']:.1f}), "
                f"CPU {windows[-1]['cpu_ms_per_step']:.3f} ms/step",
                flush=True,
            )
    rss_end = rss_mib()
    warm = [w for w in windows if w["end_step"] > first_pass + args.window] or windows
    result = {
        "allocator": args.allocator,
        "predictor": args.predictor,
        "pool": args.pool,
        "batch": args.batch,
        "budget": args.budget,
        "steps": args.steps,
        "rss_start_mib": round(rss_start, 1),
        "rss_end_mib": round(rss_end, 1),
        "rss_growth_after_first_pass_mib": round(rss_end - warm[0]["rss_mib"], 1),
        "ms_per_step_first_full_pool_window": warm[0]["ms_per_step"],
        "ms_per_step_last_window": windows[-1]["ms_per_step"],
        "time_ratio_last_to_first": round(windows[-1]["ms_per_step"] / warm[0]["ms_per_step"], 3),
        "cpu_ms_per_step_first_full_pool_window": warm[0]["cpu_ms_per_step"],
        "cpu_ms_per_step_last_window": windows[-1]["cpu_ms_per_step"],
        "train_success": round(float(problem.success().mean()), 4),
        "windows": windows,
    }
    print(
        f"RSS start {rss_start:.1f} MiB, end {rss_end:.1f} MiB "
        f"(growth after the first pass over the pool: {result['rss_growth_after_first_pass_mib']} MiB); "
        f"ms/step first full-pool window {warm[0]['ms_per_step']}, last {windows[-1]['ms_per_step']} "
        f"(ratio {result['time_ratio_last_to_first']}); CPU ms/step {warm[0]['cpu_ms_per_step']} -> "
        f"{windows[-1]['cpu_ms_per_step']}; mean train success {result['train_success']}"
    )
    if args.json:
        write_json(args.json, result, indent=1)
    if args.results:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "results")}
        print(f"wrote {write_result(args.results, result, settings=settings, commit=commit)}")


if __name__ == "__main__":
    main()

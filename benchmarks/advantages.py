"""Speed of group_advantages on CPU: 100k rewards in ragged groups, target <= 20 ms.

For scale it also times a per-group Python loop (how verl's stock estimators work) on 10k rewards.
Run: .venv/bin/python benchmarks/advantages.py [--n 100000] [--repeats 20] [--out results/advantages/advantages.json]
(the result file is rendered into README.md by ``make docs``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from adaptive_rollouts.advantages import group_advantages, group_ids_from_counts
from adaptive_rollouts.experiments.results import git_commit, write_result

TARGET_MS = 20.0
OUT = Path(__file__).resolve().parents[1] / "results" / "advantages" / "advantages.json"


def ragged_batch(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """VIGOR-like group sizes (2/6/14/30 and singletons), shuffled, binary rewards."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 6, 14, 30], size=n, p=[0.1, 0.4, 0.25, 0.15, 0.1])
    sizes = sizes[np.cumsum(sizes) <= n]
    sizes = np.append(sizes, n - sizes.sum()) if sizes.sum() < n else sizes
    ids = group_ids_from_counts(torch.as_tensor(sizes))
    ids = ids[torch.as_tensor(rng.permutation(n))]
    rewards = torch.as_tensor(rng.integers(0, 2, n), dtype=torch.float32)
    return rewards, ids


def per_group_loop(rewards: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(rewards)
    for gid in torch.unique(ids):
        mask = ids == gid
        vals = rewards[mask]
        if vals.numel() >= 2 and vals.std() > 1e-6:
            out[mask] = (vals - vals.mean()) / (vals.std() + 1e-6)
    return out


def best_ms(fn, repeats: int) -> float:
    """Least CPU (process) time of ``repeats`` calls after a warm-up, in ms: robust to other jobs on a
    shared machine (torch runs on ``--threads`` threads, 1 by default, so CPU time is its run time)."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return 1e3 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CI: 1)")
    ap.add_argument("--out", default=str(OUT), help="result file ('' to write none)")
    args = ap.parse_args()
    commit, load = git_commit(), os.getloadavg()[0]  # the code that runs; how busy the machine was
    torch.set_num_threads(args.threads)
    rewards, ids = ragged_batch(args.n)
    n_groups = int(torch.unique(ids).numel())
    print(f"N={args.n} rewards in {n_groups} groups, torch {torch.__version__}, {args.threads} thread(s)")
    timings = {}
    for est in ("grpo", "drgrpo", "rloo"):
        ms = timings[est] = best_ms(lambda: group_advantages(rewards, ids, est), args.repeats)
        status = "OK" if ms <= TARGET_MS else "SLOW"
        print(f"  {est:7s} {ms:7.2f} ms  (target {TARGET_MS:.0f} ms, ratio {ms / TARGET_MS:.2f}) {status}")
    small = 10_000
    loop_ms = best_ms(lambda: per_group_loop(rewards[:small], ids[:small]), 1)
    vec_ms = best_ms(lambda: group_advantages(rewards[:small], ids[:small], "grpo"), args.repeats)
    print(
        f"  N={small}: per-group Python loop {loop_ms:.1f} ms vs vectorised {vec_ms:.2f} ms ({loop_ms / vec_ms:.0f}x)"
    )
    if args.out:
        data = {"n": args.n, "groups": n_groups, "ms": timings, "target_ms": TARGET_MS}
        data |= {
            "load_average": load,
            "loop_n": small,
            "loop_ms": loop_ms,
            "vectorised_ms": vec_ms,
            "torch": torch.__version__,
        }
        settings = {
            "n": args.n,
            "repeats": args.repeats,
            "threads": args.threads,
            "timing": "least CPU (process) time of repeats",
        }
        print(f"wrote {write_result(args.out, data, settings=settings, commit=commit)}")


if __name__ == "__main__":
    main()

"""Scale benchmark: `allocate` at Q = 100,000 for every objective and bound, a budget of 10^9 over 4
prompts, and 1M prompts through `Allocator.run` (Uniform, VIP with the Beta predictor).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scale.py [--quick] [--out runs/scale.md]

Each case runs in a fresh process (so one case's memory does not inflate the next), reports CPU
seconds (process time: what the case costs, also on a loaded machine), wall seconds, and peak
resident memory (VmHWM). Targets: every `allocate` case at Q = 100,000 in <= 1 s; 1M prompts
through `run` in <= 10 s (a step after the first; the first also imports the predictor and
registers every prompt, and its time is shown too). The time of `run` includes the benchmark's
own `sample` (one vectorised Bernoulli draw split into 1M groups), shown separately. Results go to stdout as a Markdown table (and to --out),
and to the result file ``--results`` (default ``results/scale/scale.json``, with --quick
``scale-quick.json``) that ``make docs`` renders into docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from adaptive_rollouts.experiments.results import git_commit, write_result  # noqa: E402


def _peak_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_allocate(objective: str, q: int, per_prompt: int, lower: int, upper: int | None, skip: bool) -> dict:
    import numpy as np

    from adaptive_rollouts.solvers import allocate

    rng = np.random.default_rng(0)
    p = rng.beta(0.5, 0.5, q)
    w = np.ones(q) if objective == "grpo" else p * (1 - p)
    kwargs = {"success_prob": p} if objective == "grpo" else {}
    if skip:
        kwargs.update(allow_skip=True, skip_cost=0.3)
    cpu, wall = time.process_time(), time.perf_counter()
    counts = allocate(w, per_prompt * q, lower, upper, objective, **kwargs)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert counts.sum() == per_prompt * q
    return {"cpu_s": cpu, "wall_s": wall}


def run_allocator(name: str, q: int, per_prompt: int, steps: int) -> dict:
    import numpy as np

    from adaptive_rollouts.allocators import make_allocator

    alloc = make_allocator("uniform") if name == "uniform" else make_allocator("vip", predictor="beta")
    prompts = [f"prompt-{i}" for i in range(q)]
    rng = np.random.default_rng(0)
    p = rng.beta(0.5, 0.5, q)

    def sample(indices, counts):  # one vectorised draw, split into the groups
        draws = (rng.random(int(np.sum(counts))) < np.repeat(p[indices], counts)).astype(np.float64)
        return np.split(draws, np.cumsum(counts)[:-1])

    times = []
    for _ in range(steps):
        cpu, wall = time.process_time(), time.perf_counter()
        alloc.run(prompts, per_prompt * q, sample)
        times.append((time.process_time() - cpu, time.perf_counter() - wall))
    sample_cpu = time.process_time()
    sample(np.arange(q), np.full(q, per_prompt))
    sample_cpu = time.process_time() - sample_cpu
    return {  # the first step also imports the predictor and registers every prompt
        "first_cpu_s": times[0][0],
        "cpu_s": times[-1][0],
        "wall_s": times[-1][1],
        "sample_cpu_s": sample_cpu,
        "steps": steps,
    }


def allocate_cases(quick: bool) -> list[dict]:
    cases = []
    q = 20_000 if quick else 100_000
    for objective in ("rloo", "drgrpo", "grpo"):
        for lower, upper, skip in ((1, None, False), (2, None, False), (2, 32, False), (4, 32, False), (2, 32, True)):
            cases.append(
                {"kind": "allocate", "objective": objective, "q": q, "per_prompt": 8, "lower": lower, "upper": upper}
                | {"skip": skip}
            )
        for budget_case in ((4, 250_000_000, 2, None), (4, 4, 2, 10**9)):
            qq, per, lower, upper = budget_case
            cases.append(
                {"kind": "allocate", "objective": objective, "q": qq, "per_prompt": per, "lower": lower}
                | {"upper": upper, "skip": False}
            )
    return cases


def allocator_cases(quick: bool) -> list[dict]:
    q = 100_000 if quick else 1_000_000
    return [{"kind": "run", "name": name, "q": q, "per_prompt": 8, "steps": 2} for name in ("uniform", "vip-beta")]


def child(case: dict) -> None:
    if case["kind"] == "allocate":
        args = [case[k] for k in ("objective", "q", "per_prompt", "lower", "upper", "skip")]
        out = run_allocate(*args)
    else:
        out = run_allocator(case["name"], case["q"], case["per_prompt"], case["steps"])
    out["peak_mib"] = _peak_mib()
    print(json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Q = 20,000 and 100,000 prompts through run")
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    parser.add_argument("--results", help="result file (default: see the module docstring; '' to write none)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    commit, load = git_commit(), os.getloadavg()[0]  # the code that runs; how busy the machine was
    rows = []
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    lines = [
        "| case | Q | budget | lower | upper | CPU s | wall s | peak MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in allocate_cases(args.quick) + allocator_cases(args.quick):
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(case)], capture_output=True, text=True, env=env
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if case["kind"] == "allocate":
            label = f"allocate {case['objective']}" + (" skip" if case["skip"] else "")
            bounds = (case["lower"], case["upper"])
        else:
            label = (
                f"run {case['name']} (first step {out['first_cpu_s']:.2f} s CPU; "
                f"of which sample() {out['sample_cpu_s']:.2f} s)"
            )
            bounds = ("-", "-")
        budget = case["q"] * case["per_prompt"]
        row = f"| {label} | {case['q']:,} | {budget:,} | {bounds[0]} | {bounds[1]} "
        row += f"| {out['cpu_s']:.3f} | {out['wall_s']:.3f} | {out['peak_mib']:.0f} |"
        lines.append(row)
        rows.append({"case": case, "label": label, "budget": budget, **out})
        print(row, flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    name = "scale-quick.json" if args.quick else "scale.json"
    results = str(ROOT / "results" / "scale" / name) if args.results is None else args.results
    if results:
        data = {"rows": rows, "load_average": load}
        print(f"wrote {write_result(results, data, settings={'quick': args.quick}, commit=commit)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

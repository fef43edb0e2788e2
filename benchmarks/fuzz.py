"""Soak target for the invariant fuzzing: the properties of tests/test_reliability_fuzz.py and
tests/test_reliability_fuzz_io.py run for many cases (default 100,000) instead of CI's few hundred.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fuzz.py --cases 100000

Cases are split 25% `solve_table` (against a brute-force DP), 15% `allocate` (against the DP on the
priced cost table; lower 1 to 3, with and without skipping), 10% outside input (the checkpoint
loader on truncated, flipped and random files; `load_state_dict` on perturbed states; the embedding
cache with a damaged chunk; the `allocate` command line with random arguments), 50% allocators
(equal shares over the registry and a few non-default configurations: skipping, caps, group sizes).
Prints executed cases, violations (the first failing case of each target, shrunk by hypothesis)
and the rate; exit status 1 on any violation. Writes the per-target counts to ``--results``
(default ``results/fuzz/fuzz.json``; '' for none), which ``make docs`` renders into
docs/reliability.md and README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: threaded BLAS is slower on tiny problems
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from conftest import REGISTRY, VARIANTS  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from test_reliability_fuzz import (  # noqa: E402
    allocate_problems,
    allocator_cases,
    check_allocate_problem,
    check_allocator_case,
    check_table_problem,
    table_problems,
)
from test_reliability_fuzz_io import (  # noqa: E402
    cache_cases,
    check_cache_case,
    check_cli_case,
    check_loader_case,
    check_state_dict_case,
    cli_cases,
    loader_cases,
    state_dict_cases,
)

from adaptive_rollouts.experiments.results import git_commit, write_result  # noqa: E402


def run_target(name: str, strategy, check, cases: int, seed: int) -> tuple[int, str | None, float]:
    """Run `check` on `cases` hypothesis examples; returns (executed, first violation or None, seconds)."""
    executed = 0

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def prop(case):
        nonlocal executed
        executed += 1
        check(case)

    prop = seed_property(prop, seed)
    start = time.perf_counter()
    try:
        prop()
        failure = None
    except Exception as err:  # a violated invariant: report it, keep going with the other targets
        failure = f"{type(err).__name__}: {err}"
    return executed, failure, time.perf_counter() - start


def seed_property(prop, seed: int):
    from hypothesis import seed as hypothesis_seed

    return hypothesis_seed(seed)(prop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", default=str(ROOT / "results" / "fuzz" / "fuzz.json"), help="result file")
    args = parser.parse_args()
    commit, load = git_commit(), os.getloadavg()[0]  # the code that runs; how busy the machine was
    rows = []
    names = REGISTRY + sorted(VARIANTS)
    per_alloc = max(1, args.cases // 2 // len(names))
    targets = [
        ("solve_table", table_problems(), check_table_problem, max(1, args.cases // 4)),
        ("allocate", allocate_problems(), check_allocate_problem, max(1, args.cases * 3 // 20)),
        ("load_state", loader_cases(), check_loader_case, max(1, args.cases * 3 // 100)),
        ("load_state_dict", state_dict_cases(), check_state_dict_case, max(1, args.cases * 3 // 100)),
        ("embedding_cache", cache_cases(), check_cache_case, max(1, args.cases // 100)),
        ("cli", cli_cases(), check_cli_case, max(1, args.cases * 3 // 100)),
    ]
    targets += [
        (f"allocator:{name}", allocator_cases(names=(name,)), check_allocator_case, per_alloc) for name in names
    ]
    total, violations, seconds = 0, 0, 0.0
    for i, (name, strategy, check, cases) in enumerate(targets):
        executed, failure, took = run_target(name, strategy, check, cases, args.seed + i)
        total, seconds = total + executed, seconds + took
        violations += failure is not None
        status = "ok" if failure is None else f"VIOLATION {failure[:2000]}"
        rows.append({"target": name, "cases": executed, "seconds": took, "violation": failure and failure[:2000]})
        print(f"{name:32s} {executed:7d} cases {took:7.1f} s  {executed / took:7.0f}/s  {status}", flush=True)
    print(
        f"total: {total} cases in {seconds:.1f} s ({total / seconds:.0f} cases/s), {violations} targets with violations"
    )
    if args.results:
        data = {"targets": rows, "total": total, "seconds": seconds, "load_average": load}
        settings_ = {"cases": args.cases, "seed": args.seed}
        print(f"wrote {write_result(args.results, data, settings=settings_, commit=commit)}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

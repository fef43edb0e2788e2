"""Speed and quality of the budget solvers.

For Q in {64, 256, 1024, 4096}, budget C = 8Q, weights a_q = p_q (1 - p_q) with p_q ~ Beta(0.5, 0.5):

* ``allocate`` (exact integer optimum),
* ``solve_kkt`` (the VIP paper: continuous KKT + bisection + greedy rounding),
* scipy SLSQP on the continuous relaxation + the same greedy rounding (what VIP's code does).

Prints CPU time per call (process time, median of repeats: robust to other jobs on a shared
machine; the wall-clock median goes to the result file too), the speed ratios, and the objective gap of each method
relative to ``allocate`` (>= 0 means allocate is at least as good). Targets: Q = 1024 in <= 5 ms,
>= 100x faster than SLSQP, objective never worse. Writes the rows to ``--out`` (default
``results/solver/solver.json``, rendered into docs/objectives.md and README.md by ``make docs``).

    .venv/bin/python benchmarks/solver.py [--quick] [--slsqp-max-q 256] [--out results/solver/solver.json]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from adaptive_rollouts.experiments.results import git_commit, write_result
from adaptive_rollouts.solvers import allocate, objective_function, solve_kkt

OUT = Path(__file__).resolve().parents[1] / "results" / "solver" / "solver.json"


def greedy_round(a: np.ndarray, n_cont: np.ndarray, budget: int, lower: int, upper: int, f) -> np.ndarray:
    """VIP Alg. 2: floor, then +1 to the largest a (f(n) - f(n+1)) below upper."""
    counts = np.clip(np.floor(n_cont + 1e-9), lower, upper).astype(np.int64)
    while counts.sum() > budget:
        loss = np.where(counts > lower, a * (f(counts - 1) - f(counts)), np.inf)
        counts[int(np.argmin(loss))] -= 1
    while counts.sum() < budget:
        gain = np.where(counts < upper, a * (f(counts) - f(counts + 1)), -np.inf)
        counts[int(np.argmax(gain))] += 1
    return counts


def slsqp(a: np.ndarray, budget: int, lower: int, upper: int, objective: str) -> np.ndarray:
    """Continuous relaxation with scipy SLSQP (analytic gradient), then greedy rounding."""
    if objective == "rloo":
        fun = lambda n: float(np.sum(a / (n - 1.0)))  # noqa: E731
        jac = lambda n: -a / (n - 1.0) ** 2  # noqa: E731
    else:
        fun = lambda n: float(np.sum(a * (n - 1.0) / n**2))  # noqa: E731
        jac = lambda n: a * (2.0 - n) / n**3  # noqa: E731
    q = a.size
    x0 = np.full(q, budget / q)
    res = minimize(
        fun,
        x0,
        jac=jac,
        method="SLSQP",
        bounds=[(lower, upper)] * q,
        constraints=[{"type": "eq", "fun": lambda n: n.sum() - budget, "jac": lambda n: np.ones_like(n)}],
        options={"maxiter": 500, "ftol": 1e-12},
    )
    return greedy_round(a, res.x, budget, lower, upper, objective_function(objective))


def timed(fn, repeats: int) -> tuple[float, np.ndarray, float]:
    """(median CPU seconds, the result, median wall seconds) over ``repeats`` calls after a warm-up."""
    out = fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return float(np.median(cpu)), out, float(np.median(wall))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Q in {64, 256} only, fewer repeats")
    parser.add_argument(
        "--slsqp-max-q",
        type=int,
        default=256,
        help="skip SLSQP above this Q (dense QP: ~45 s at Q = 256 on 2 cores, ~O(Q^3))",
    )
    parser.add_argument("--lower", type=int, default=2)
    parser.add_argument("--upper", type=int, default=32)
    parser.add_argument("--out", default=str(OUT), help="result file ('' to write none)")
    args = parser.parse_args()
    commit, load = git_commit(), os.getloadavg()[0]  # the code that runs; how busy the machine was
    sizes = [64, 256] if args.quick else [64, 256, 1024, 4096]
    rng = np.random.default_rng(0)
    lower, upper = args.lower, args.upper
    print(f"budget = 8Q, lower = {lower}, upper = {upper}, a = p(1-p), p ~ Beta(0.5, 0.5)")
    header = (
        f"{'objective':9} {'Q':>5} {'allocate ms':>11} {'kkt ms':>8} {'slsqp ms':>9} "
        f"{'kkt/alloc':>9} {'slsqp/alloc':>11} {'gap kkt':>10} {'gap slsqp':>10}"
    )
    print(header)
    rows = []
    for objective in ("rloo", "drgrpo"):
        f = objective_function(objective)
        for q in sizes:
            p = rng.beta(0.5, 0.5, q)
            a = p * (1 - p)
            budget = 8 * q
            reps = 3 if args.quick else (20 if q <= 1024 else 5)
            t_alloc, n_alloc, w_alloc = timed(lambda: allocate(a, budget, lower, upper, objective), reps)
            t_kkt, n_kkt, _ = timed(lambda: solve_kkt(a, budget, lower, upper, objective), max(3, reps // 4))
            best = float(np.sum(a * f(n_alloc)))
            gap_kkt = float(np.sum(a * f(n_kkt))) - best
            t_sl = gap_sl = None
            if q <= args.slsqp_max_q:
                t_sl, n_sl, _ = timed(lambda: slsqp(a, budget, lower, upper, objective), 1)
                gap_sl = float(np.sum(a * f(n_sl))) - best
                sl_cols = f"{t_sl * 1e3:9.1f} {'':>9}"
                ratio_sl = f"{t_sl / t_alloc:11.0f}"
                gap_sl_s = f"{gap_sl:10.2e}"
            else:
                sl_cols, ratio_sl, gap_sl_s = f"{'skipped':>9} {'':>9}", f"{'-':>11}", f"{'-':>10}"
            print(
                f"{objective:9} {q:5d} {t_alloc * 1e3:11.2f} {t_kkt * 1e3:8.1f} {sl_cols.split()[0]:>9} "
                f"{t_kkt / t_alloc:9.1f} {ratio_sl} {gap_kkt:10.2e} {gap_sl_s}"
            )
            rows.append(
                {
                    "objective": objective,
                    "q": q,
                    "allocate_ms": t_alloc * 1e3,
                    "allocate_wall_ms": w_alloc * 1e3,
                    "kkt_ms": t_kkt * 1e3,
                    "slsqp_ms": None if t_sl is None else t_sl * 1e3,
                    "gap_kkt": gap_kkt,
                    "gap_slsqp": gap_sl,
                }
            )
    print("gap = objective(method) - objective(allocate); >= 0 means allocate is at least as good")
    if args.out:
        settings = {"sizes": sizes, "lower": lower, "upper": upper, "slsqp_max_q": args.slsqp_max_q}
        settings |= {
            "budget_per_prompt": 8,
            "weights": "p(1-p), p ~ Beta(0.5, 0.5), seed 0",
            "timing": "median CPU (process) time",
        }
        print(f"wrote {write_result(args.out, {'rows': rows, 'load_average': load}, settings=settings, commit=commit)}")


if __name__ == "__main__":
    main()

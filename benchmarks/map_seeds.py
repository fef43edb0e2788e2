"""What one cell of the saving map costs, in one process and in ``--jobs`` processes, and what the
policy view's calibration (the default's and the null control's largest per-run overhead) costs
per run, written the earlier way (`scipy.stats.norm.cdf` on matrices built at every call) and
the present way (`sim.policy_view`: pair matrices built once, `scipy.special.ndtr` into one buffer;
the same sigma to the bit).

The cell runs as the map runs it (`run_map` with the saving map's settings on one cell: Uniform
tuned on the tune seeds, then the null control, the replicate and the default at Uniform's rate on
the paired seeds) into a fresh folder per mode, and the two maps are checked equal run for run.
The ratio printed is the measured wall-clock speedup of ``--jobs`` processes over one, on this
machine at its load at the time (the load average is recorded beside it).

Run: .venv/bin/python benchmarks/map_seeds.py [--cell hard-heavy/d16-Q32] [--seeds 32] [--jobs 2]
(writes results/map_seeds/map_seeds.json).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per process: the processes are the parallelism
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import dataclasses
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.special import logit
from scipy.stats import norm

from adaptive_rollouts.experiments.regime_map import SAVING_MAP, run_map
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.sim.policy_view import PolicyView
from adaptive_rollouts.sim.regimes import select_cells

OUT = Path(__file__).resolve().parents[1] / "results" / "map_seeds" / "map_seeds.json"
METHODS = ("uniform", "uniform-rounds", "uniform-replicate", "default")


def calibration_the_earlier_way(p: np.ndarray, auroc: float) -> float:
    """sigma as the policy view computed it before: every call of the AUROC builds its matrices anew
    and goes through `scipy.stats.norm.cdf` (the reference the present code is timed against)."""

    def view_auroc(sigma: float) -> float:
        lg = logit(np.clip(p, 1e-6, 1 - 1e-6))
        diff = lg[:, None] - lg[None, :]
        win = (
            np.where(diff > 0, 1.0, np.where(diff < 0, 0.0, 0.5))
            if sigma == 0
            else norm.cdf(diff / (sigma * np.sqrt(2)))
        )
        np.fill_diagonal(win, 0.5)
        pairs = p[:, None] * (1.0 - p)[None, :]
        return float((pairs * win).sum() / (p.sum() * (1.0 - p).sum()))

    if view_auroc(0.0) <= auroc:
        return 0.0
    return float(brentq(lambda s: view_auroc(s) - auroc, 1e-6, 1e3, xtol=1e-6))


def time_calibration(cell, seeds: int) -> dict:
    """Seconds per calibration, earlier way and present way, over ``seeds`` problem instances; and
    that both find the same sigma."""
    earlier, present, same = [], [], True
    for seed in range(seeds):
        problem = cell.problem(seed, SAVING_MAP.n_test)
        t0 = time.perf_counter()
        view = PolicyView(problem, auroc=0.8, seed=seed)
        present.append(time.perf_counter() - t0)
        rng = np.random.default_rng([seed, 7])  # the view's own sample of at most 800 prompts
        p0 = problem.success()
        pool = p0 if p0.size <= 800 else p0[rng.choice(p0.size, 800, replace=False)]
        t0 = time.perf_counter()
        sigma = calibration_the_earlier_way(pool, 0.8)
        earlier.append(time.perf_counter() - t0)
        same &= sigma == view.sigma
    return {"earlier_s": float(np.mean(earlier)), "present_s": float(np.mean(present)), "same_sigma": bool(same)}


def _cpu_seconds() -> float:
    # this process's and its finished workers' CPU time (a busy machine stretches wall time, not this)
    return sum(
        u.ru_utime + u.ru_stime
        for u in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def time_cell(cell, seeds: int, jobs: int, folder: Path) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, map) of the cell run into ``folder``."""
    cfg = dataclasses.replace(SAVING_MAP, cells=[cell], methods=METHODS, paired_seeds=tuple(range(seeds)))
    t0, c0 = time.perf_counter(), _cpu_seconds()
    result = run_map(cfg, folder, progress=False, jobs=jobs)
    return time.perf_counter() - t0, _cpu_seconds() - c0, result


def _runs(folder: Path) -> list[str]:
    # every field but the seconds a run took, as JSON text (NaN reads equal to NaN there)
    return [
        json.dumps({k: v for k, v in json.loads(x).items() if k != "seconds"}, sort_keys=True)
        for x in (folder / "runs.jsonl").open()
    ]


def _differences(one: list[str], many: list[str]) -> list[str]:
    out = [f"{len(one)} runs in one process, {len(many)} in several"] if len(one) != len(many) else []
    for a, b in zip(one, many):
        if a != b:
            x, y = json.loads(a), json.loads(b)
            keys = [k for k in x if x[k] != y.get(k)]
            out.append(f"{x['method']} seed {x['seed']} rate {x['lr']:g}: {keys}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", default="hard-heavy/d16-Q32")
    parser.add_argument("--seeds", type=int, default=32, help="paired seeds of the cell (default: 32)")
    parser.add_argument("--jobs", type=int, default=2, help="processes of the parallel run (default: 2)")
    parser.add_argument("--calibrations", type=int, default=6, help="problem instances to time the calibration on")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--work", help="folder for the two maps' runs (default: a temporary one)")
    args = parser.parse_args()
    (cell,) = select_cells(SAVING_MAP.cells, [args.cell])
    calibration = time_calibration(cell, args.calibrations)
    print(
        f"policy view calibration: {calibration['earlier_s']:.3f} s the earlier way, "
        f"{calibration['present_s']:.3f} s now (same sigma: {calibration['same_sigma']})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        if (work / "one").exists() or (work / "many").exists():
            raise SystemExit(f"--work {work}: holds a map already (one/ or many/); give an empty folder")
        one_s, one_cpu, one = time_cell(cell, args.seeds, 1, work / "one")
        print(f"{args.cell}, {args.seeds} paired seeds, {len(METHODS)} arms, 1 process: {one_s:.1f} s", flush=True)
        many_s, many_cpu, many = time_cell(cell, args.seeds, args.jobs, work / "many")
        print(f"{args.cell}, {args.seeds} paired seeds, {len(METHODS)} arms, {args.jobs} processes: {many_s:.1f} s")
        differences = _differences(_runs(work / "one"), _runs(work / "many"))
        same = not differences and one["lr"] == many["lr"]
        runs = len(one["runs"])
    ratio = one_s / many_s
    print(f"speedup of {args.jobs} processes over 1: {ratio:.2f}x (same runs: {same})")
    print(f"CPU seconds: {one_cpu:.0f} in one process, {many_cpu:.0f} in {args.jobs}")
    for line in differences[:20]:
        print("  differs:", line)
    settings = {"cell": args.cell, "seeds": args.seeds, "jobs": args.jobs, "methods": list(METHODS)}
    data = {
        **settings,
        "runs": runs,
        "one_process_s": one_s,
        "processes_s": many_s,
        "speedup": ratio,
        "one_process_cpu_s": one_cpu,
        "processes_cpu_s": many_cpu,
        "same_runs": same,
        "differences": differences,
        "calibration": calibration,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }
    print(f"wrote {write_result(args.out, data, settings=settings)}")


if __name__ == "__main__":
    main()

"""Loss-aggregation benchmark: allocator overhead, and speedups per loss aggregation with true / predicted p.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/aggregation.py timing --out results/aggregation
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/aggregation.py gp --out runs/aggregation
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/aggregation.py tune --out runs/aggregation
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/aggregation.py sim --out runs/aggregation

Every mode writes a result file (`experiments.results`: command, commit, settings) to ``--out``:
``timing.json``, ``gp.json``, ``tune.json`` or ``sim.json``; docs/objectives.md renders
``results/aggregation/timing.json``.

`timing` prints wall times (ms) of the pieces of PosteriorProgressive: `improvement_table` (GRPO), one
`PosteriorProgressive` step at the tiny demo's shape (16 prompts, 128 rollouts) and at the
simulator's (64, 512), and `GaussianProcess.update`.

`gp` measures how robust the GaussianProcess defaults are: next-step MAE and log-loss on traces of
Uniform runs in every scenario, for the defaults and one-at-a-time changes (x1/4, x4), at two pool
sizes (how often a prompt comes back).

`tune` picks the improvement objective's (lr_noise, noise_ratio) for PosteriorProgressive with the true
p on the TUNE seeds (10, 11) and a subset of scenarios; `sim` runs every method on the TEST seeds
(0, 1, 2), never used for tuning, and prints the speedup table (rollouts to 90% of Uniform's final
gain, Uniform's / the method's, each method at its best learning rate of base x {1/3, 1, 3}
chosen on the first seed of the set; `--lr-select all` averages the choice over seeds).

Methods (all with the trainer's GRPO advantages and the run's aggregation):
  uniform            n = C / Q
  posterior-progressive, posterior-progressive-skip
                     PosteriorProgressive, improvement objective for the run's aggregation,
                     GaussianProcess predictor (-skip: a prompt may get 0 rollouts)
  ...@true-p         the same with the true p as the prediction (var 0)
  oracle-fill        32 rollouts to the prompts of largest true p(1-p), skip the rest
  vip@true-p         VIP's variance objective (GRPO estimator) with the true p
  vip-paper          VIP as published (PaperGP, RLOO objective, plug-in)
  vigor              VIGOR, defaults
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.results import git_commit, write_result
from adaptive_rollouts.solvers import equal_split

TUNE_SEEDS = (10, 11)
TEST_SEEDS = (0, 1, 2)
AGGREGATIONS = ("prompt-mean", "seq-mean", "token-mean", "constant")
SCENARIOS = ("easy-heavy", "hard-heavy", "bimodal", "pareto", "graded")
DEFAULT_METHODS = (
    "uniform",
    "posterior-progressive",
    "posterior-progressive-skip",
    "posterior-progressive@true-p",
    "posterior-progressive-skip@true-p",
    "oracle-fill",
    "vip@true-p",
    "vip-paper",
    "vigor",
)


# ----------------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------------
def _best_ms(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return float(np.median(out) * 1e3)


def timing() -> list[dict]:
    """Median wall ms of the pieces of PosteriorProgressive (see the module docstring)."""
    from adaptive_rollouts.allocators import PosteriorProgressive
    from adaptive_rollouts.embeddings import FeatureTable
    from adaptive_rollouts.objectives import improvement_table
    from adaptive_rollouts.predictors import GaussianProcess
    from adaptive_rollouts.types import Prediction

    rng = np.random.default_rng(0)
    rows: list[dict] = []
    print(f"threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    for q, upper in [(16, 32), (64, 32), (1024, 64)]:
        m = rng.uniform(0, 1, q)
        pred = Prediction(m, m * (1 - m) * rng.uniform(0, 0.5, q))
        ms = _best_ms(lambda: improvement_table(pred, upper, estimator="grpo", aggregation="seq-mean"), 7)
        print(f"improvement_table grpo  Q={q:5d} upper={upper:3d}: {ms:8.2f} ms")
        rows.append({"piece": "improvement_table grpo", "q": q, "upper": upper, "ms": ms})
    n_pool = 4000
    tab = FeatureTable(list(range(n_pool)), rng.standard_normal((n_pool, 384)))
    p_true = rng.uniform(0, 1, n_pool)
    for q, budget in [(16, 128), (64, 512)]:
        alloc = PosteriorProgressive("gp", features=tab, aggregation="seq-mean", seed=0)
        times = []
        for _ in range(40):
            prompts = rng.choice(n_pool, q, replace=False).tolist()
            sampled = [0.0]

            def sample(idx, counts, prompts=prompts, sampled=sampled):
                t = time.perf_counter()
                out = [(rng.random(c) < p_true[prompts[i]]).astype(float) for i, c in zip(idx, counts)]
                sampled[0] += time.perf_counter() - t
                return out

            t = time.perf_counter()
            alloc.run(prompts, budget, sample)
            times.append(time.perf_counter() - t - sampled[0])
        print(
            f"PosteriorProgressive step Q={q:3d} C={budget:4d} (GP, 384-d, 3 rounds): "
            f"{np.median(times[5:]) * 1e3:8.2f} ms (median of 35)"
        )
        rows.append({"piece": "PosteriorProgressive step", "q": q, "budget": budget, "ms": np.median(times[5:]) * 1e3})
    for b, d in [(6, 256), (16, 128), (512, 128)]:
        gp = GaussianProcess(tab, n_features=d, seed=0)
        times = []
        for _ in range(20):
            idx = rng.choice(n_pool, b, replace=False).tolist()
            rw = [(rng.random(8) < p_true[i]).astype(float) for i in idx]
            t = time.perf_counter()
            gp.update(idx, rw)
            times.append(time.perf_counter() - t)
        print(f"GaussianProcess.update B={b:3d} D={d:3d}: {np.median(times) * 1e3:8.2f} ms")
        rows.append({"piece": "GaussianProcess.update", "q": b, "features": d, "ms": np.median(times) * 1e3})
    return rows


# ----------------------------------------------------------------------------------------------
# simulator
# ----------------------------------------------------------------------------------------------
def build(method: str, problem, seed: int, aggregation: str, options: dict):
    from adaptive_rollouts.allocators import VIGOR, VIP, PosteriorProgressive, Uniform
    from adaptive_rollouts.embeddings import FeatureTable
    from adaptive_rollouts.sim.oracle import OracleAllocator, TruePredictor, problem_truth

    truth = problem_truth(problem)
    base, _, variant = method.partition("@")
    table = FeatureTable(list(range(problem.n_prompts)), problem.features)
    predictor = TruePredictor(truth) if variant == "true-p" else "gp"
    if base == "uniform":
        return Uniform(seed=seed)
    if base in ("posterior-progressive", "posterior-progressive-skip"):
        options = dict(options)
        extra = {"max_prior_strength": options.pop("max_prior_strength")} if "max_prior_strength" in options else {}
        return PosteriorProgressive(
            predictor,
            features=table,
            objective="improvement",
            estimator="grpo",
            aggregation=aggregation,
            allow_skip=base == "posterior-progressive-skip",
            improvement_options=options,
            seed=seed,
            **extra,
        )
    if base == "oracle-fill":
        return OracleAllocator(truth, mode="fill")
    if base == "vip":
        return VIP(predictor, features=table, estimator="grpo", variance="expected", seed=seed)
    if base == "vip-paper":
        return VIP("paper-gp", features=table, estimator="rloo", variance="plugin", seed=seed)
    if base == "vigor":
        return VIGOR(seed=seed)
    raise ValueError(f"unknown method {method!r}")


def one_run(job: dict) -> dict:
    from adaptive_rollouts.experiments.bench import run_summary
    from adaptive_rollouts.sim.problem import make_problem
    from adaptive_rollouts.sim.train import TrainConfig, train

    problem = make_problem(job["scenario"], n_prompts=job["n_prompts"], n_test=job["n_test"], seed=job["seed"])
    alloc = build(job["method"], problem, job["seed"], job["aggregation"], job["options"])
    predictor = getattr(alloc, "predictor", None)
    if predictor is not None and not hasattr(predictor, "predict"):
        predictor = None
    cfg = TrainConfig(
        steps=job["steps"],
        batch_prompts=job["batch_prompts"],
        budget=job["budget"],
        lr=job["lr"],
        optimizer="sgd",  # this study's rate grids are SGD rates; the regime map (bench --map) uses AdamW
        estimator="grpo",
        aggregation=job["aggregation"],
        seed=job["seed"],
        grad_var_every=0,
    )
    t0 = time.perf_counter()
    tr = train(problem, alloc, cfg, predictor=predictor)
    s = run_summary(tr)
    for k in ("alloc_p", "alloc_n"):
        s.pop(k, None)
    s.update(
        {k: job[k] for k in ("scenario", "seed", "aggregation", "method", "lr", "tag")},
        seconds=time.perf_counter() - t0,
    )
    return s


def run_grid(seeds, scenarios, aggregations, methods, args, tag_options) -> list[dict]:
    """Two passes: the lr grid on seeds[0], then the other seeds at that best rate."""
    from adaptive_rollouts.experiments.bench import BASE_LR, LR_MULTIPLIERS

    common = dict(
        n_prompts=args.prompts, n_test=args.test, steps=args.steps, batch_prompts=args.batch, budget=args.budget
    )
    runs: list[dict] = []

    def jobs(seed_list, lr_of):
        out = []
        for sc in scenarios:
            for agg in aggregations:
                for m in methods:
                    for tag, opts in tag_options(m):
                        for seed in seed_list:
                            for lr in lr_of(sc, agg, m, tag):
                                out.append(
                                    dict(
                                        common,
                                        scenario=sc,
                                        aggregation=agg,
                                        method=m,
                                        seed=seed,
                                        lr=lr,
                                        tag=tag,
                                        options=opts,
                                    )
                                )
        return out

    first = seeds[:1] if args.lr_select == "first-seed" else seeds
    grid = jobs(first, lambda sc, agg, m, tag: [BASE_LR[agg] * x for x in LR_MULTIPLIERS])
    runs += _execute(grid, args.workers)
    rest = [s for s in seeds if s not in first]
    if rest:
        best = best_lr(runs, first)
        runs += _execute(jobs(rest, lambda sc, agg, m, tag: [best[(sc, agg, m, tag)]]), args.workers)
    return runs


def _execute(jobs: list[dict], workers: int) -> list[dict]:
    t0 = time.perf_counter()
    out = []
    if workers <= 1:
        for i, j in enumerate(jobs):
            out.append(one_run(j))
            _progress(i + 1, len(jobs), t0)
    else:
        with ProcessPoolExecutor(workers) as ex:
            for i, r in enumerate(ex.map(one_run, jobs, chunksize=2)):
                out.append(r)
                _progress(i + 1, len(jobs), t0)
    print(file=sys.stderr)
    return out


def _progress(i: int, n: int, t0: float) -> None:
    if i % 20 and i != n:
        return
    print(f"\r{i}/{n} runs, {time.perf_counter() - t0:6.0f} s", end="", file=sys.stderr, flush=True)


def best_lr(runs: list[dict], select_seeds=None) -> dict:
    """Best rate per (scenario, aggregation, method, tag): highest mean AUC over `select_seeds` (the
    seeds that ran the whole grid; None = all)."""
    by: dict = {}
    for r in runs:
        if select_seeds is not None and r["seed"] not in select_seeds:
            continue
        by.setdefault((r["scenario"], r["aggregation"], r["method"], r["tag"]), {}).setdefault(r["lr"], []).append(
            r["auc"]
        )
    return {k: max(v, key=lambda lr: np.mean(v[lr])) for k, v in by.items()}


def speedups(runs: list[dict], target_frac: float = 0.9, select_seeds=None) -> dict:
    """(scenario, aggregation, method, tag) -> per-seed speedups at the best rate (chosen on
    `select_seeds`, the seeds that ran the whole grid), vs Uniform at its own best rate."""
    from adaptive_rollouts.experiments.bench import rollouts_to_target

    best = best_lr(runs, select_seeds)
    at_best: dict = {}
    for r in runs:
        key = (r["scenario"], r["aggregation"], r["method"], r["tag"])
        if r["lr"] == best[key]:
            at_best.setdefault(key, {})[r["seed"]] = r
    out = {}
    for key, by_seed in at_best.items():
        uni = at_best.get((key[0], key[1], "uniform", ""))
        if uni is None:
            continue
        sp, final = [], []
        for seed, r in sorted(by_seed.items()):
            u = uni.get(seed)
            if u is None:
                continue
            target = u["accuracy0"] + target_frac * (u["final"] - u["accuracy0"])
            ru = rollouts_to_target(u["rollouts"], u["accuracy"], target)
            rm = rollouts_to_target(r["rollouts"], r["accuracy"], target)
            sp.append(ru / rm if np.isfinite(rm) else 0.0)
            final.append(r["final"])
        calib = (
            np.mean(
                np.abs(
                    np.concatenate(
                        [np.asarray(r["calib_pred"]) - np.asarray(r["calib_true"]) for r in by_seed.values()]
                    )
                )
            )
            if any(len(r["calib_pred"]) for r in by_seed.values())
            else float("nan")
        )
        out[key] = {
            "speedup": sp,
            "final": float(np.mean(final)) if final else float("nan"),
            "lr": best[key],
            "skipped": float(np.mean([r["skipped_frac"] for r in by_seed.values()])),
            "zero_variance_fraction": float(np.mean([r["zero_variance_fraction"] for r in by_seed.values()])),
            "allocator_seconds": float(np.median([r["allocator_seconds"] for r in by_seed.values()])),
            "calib_mae": float(calib),
        }
    return out


# ----------------------------------------------------------------------------------------------
# predictor hyperparameters: robustness of GaussianProcess defaults on simulator traces
# ----------------------------------------------------------------------------------------------
GP_VARIANTS = {
    "default": {},
    "signal_var=0.25": {"signal_var": 0.25},
    "signal_var=4": {"signal_var": 4.0},
    "residual_var=0.25": {"residual_var": 0.25},
    "residual_var=4": {"residual_var": 4.0},
    "half-lives/4": {"shared_half_life": 12.5, "residual_half_life": 50.0},
    "half-lives*4": {"shared_half_life": 200.0, "residual_half_life": 800.0},
    "bandwidth*0.5": {"bandwidth_scale": 0.5},
    "bandwidth*2": {"bandwidth_scale": 2.0},
    "n_features=256": {"n_features": 256},
}


def trace(scenario: str, seed: int, n_prompts: int, steps: int, batch: int, budget: int, lr: float):
    """(prompts, rewards, true p) per step of a Uniform run (8 rollouts per prompt)."""
    from adaptive_rollouts.sim.problem import make_problem
    from adaptive_rollouts.sim.train import TrainConfig, train

    problem = make_problem(scenario, n_prompts=n_prompts, n_test=200, seed=seed)
    log = []

    class Recorder:
        def run(self, prompts, budget_, sample):
            idx = np.asarray(prompts, dtype=np.int64)
            counts = equal_split(budget_, len(prompts))
            rewards = sample(np.arange(len(prompts)), counts)
            log.append((list(prompts), rewards, problem.success(idx)))
            return rewards

    train(
        problem,
        Recorder(),
        TrainConfig(
            steps=steps,
            batch_prompts=batch,
            budget=budget,
            lr=lr,
            optimizer="sgd",
            aggregation="seq-mean",
            seed=seed,
            grad_var_every=0,
        ),
    )
    return problem, log


def gp_robustness(args) -> dict:
    from adaptive_rollouts.embeddings import FeatureTable
    from adaptive_rollouts.predictors import GaussianProcess
    from adaptive_rollouts.predictors.paper_gp import median_heuristic

    seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else TUNE_SEEDS
    scenarios = args.scenarios.split(",") if args.scenarios else SCENARIOS
    result: dict = {}
    for pool in (args.prompts, 4 * args.prompts):
        for sc in scenarios:
            for seed in seeds:
                problem, log = trace(sc, seed, pool, args.steps, args.batch, args.budget, 600.0)
                table = FeatureTable(list(range(problem.n_prompts)), problem.features)
                h0 = median_heuristic(problem.features, seed=0)
                for name, opts in GP_VARIANTS.items():
                    opts = dict(opts)
                    h = h0 * opts.pop("bandwidth_scale", 1.0)
                    gp = GaussianProcess(table, bandwidth=h, seed=seed, **opts)
                    mae, ll = [], []
                    for step, (prompts, rewards, p) in enumerate(log):
                        if step >= 5:  # next-step prediction, after a short warm-up
                            pred = gp.predict(prompts)
                            m = np.clip(pred.mean, 1e-4, 1 - 1e-4)
                            mae.append(np.abs(m - p))
                            k = np.array([r.sum() for r in rewards])
                            n = np.array([r.size for r in rewards])
                            ll.append(-(k * np.log(m) + (n - k) * np.log1p(-m)) / n)
                        gp.update(prompts, rewards)
                    key = (pool, sc, name)
                    result.setdefault(key, []).append(
                        (float(np.mean(np.concatenate(mae))), float(np.mean(np.concatenate(ll))))
                    )
    print(
        f"GaussianProcess on Uniform-run traces: next-step MAE of E[p] vs the true p, and log-loss per "
        f"rollout; seeds {seeds}, {args.steps} steps x {args.batch} prompts; pool {args.prompts} "
        f"(an epoch every {args.prompts / args.batch:.0f} steps) and {4 * args.prompts}"
    )
    names_ = list(GP_VARIANTS)
    for pool in (args.prompts, 4 * args.prompts):
        print(f"pool {pool}: MAE / log-loss")
        print("| scenario | " + " | ".join(names_) + " |")
        for sc in scenarios:
            cells = [result[(pool, sc, n)] for n in names_]
            print(
                f"| {sc} | "
                + " | ".join(f"{np.mean([c[0] for c in v]):.3f} / {np.mean([c[1] for c in v]):.3f}" for v in cells)
                + " |"
            )
    return {f"{k[0]}|{k[1]}|{k[2]}": v for k, v in result.items()}


def _select(seeds, args):
    return seeds[:1] if args.lr_select == "first-seed" else seeds


def fmt(sp: list[float]) -> str:
    if not sp:
        return "-"
    return f"{np.mean(sp):.2f} [{min(sp):.2f}-{max(sp):.2f}]"


def tune_options(grid: list[dict]):
    def tag_options(method: str):
        if method == "uniform":
            return [("", {})]
        return [(json.dumps(o, sort_keys=True), o) for o in grid]

    return tag_options


TUNE_GRID = [{"lr_noise": a, "noise_ratio": b} for a in (0.001, 0.01, 0.1) for b in (0.25, 4.0)]
# how much PosteriorProgressive trusts a learned predictor (pseudo-rollouts of its Beta prior), `--grid strength`
STRENGTH_GRID = [{"max_prior_strength": s} for s in (2.0, 8.0, 64.0)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("timing", "tune", "sim", "gp"))
    ap.add_argument("--out", default="runs/aggregation")
    ap.add_argument("--scenarios", default=None)
    ap.add_argument("--aggregations", default=",".join(AGGREGATIONS))
    ap.add_argument("--methods", default=None)
    ap.add_argument("--seeds", default=None)
    ap.add_argument("--prompts", type=int, default=1000, help="train pool; 64/step -> an epoch every ~16 steps")
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--grid",
        choices=("objective", "strength"),
        default="objective",
        help="tune: improvement options (objective) or max_prior_strength (strength)",
    )
    ap.add_argument("--lr-select", choices=("first-seed", "all"), default="first-seed")
    ap.add_argument(
        "--options", default=None, help='JSON improvement options for PosteriorProgressive, e.g. {"lr_noise": 0.01}'
    )
    args = ap.parse_args(argv)
    commit, settings = git_commit(), {k: v for k, v in vars(args).items() if k not in ("out", "workers")}
    out = Path(args.out)
    if args.mode == "timing":
        data = {"rows": timing(), "load_average": os.getloadavg()[0]}
        print(f"wrote {write_result(out / 'timing.json', data, settings=settings, commit=commit)}")
        return 0
    if args.mode == "gp":
        write_result(out / "gp.json", gp_robustness(args), settings=settings, commit=commit)
        return 0
    aggs = args.aggregations.split(",")
    t0 = time.perf_counter()
    if args.mode == "tune":
        scenarios = args.scenarios.split(",") if args.scenarios else ("hard-heavy", "pareto", "graded")
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else TUNE_SEEDS
        if set(seeds) & set(TEST_SEEDS):
            raise SystemExit(f"tune seeds {seeds} overlap the test seeds {TEST_SEEDS}")
        methods = args.methods.split(",") if args.methods else ("uniform", "posterior-progressive@true-p")
        base = json.loads(args.options) if args.options else {}
        grid = [{**base, **o} for o in (STRENGTH_GRID if args.grid == "strength" else TUNE_GRID)]
        runs = run_grid(seeds, scenarios, aggs, methods, args, tune_options(grid))
        table = speedups(runs, select_seeds=_select(seeds, args))
        print(f"\ntune: seeds {seeds}, scenarios {scenarios}; mean speedup over cells per option")
        for m in methods:
            if m == "uniform":
                continue
            scores = {}
            for (_, _, mm, tag), v in table.items():
                if mm == m:
                    scores.setdefault(tag, []).append(np.mean(v["speedup"]))
            for tag, s in sorted(scores.items(), key=lambda kv: -np.mean(np.log(np.maximum(kv[1], 1e-2)))):
                print(
                    f"  {m:33s} {tag:45s} geo-mean {np.exp(np.mean(np.log(np.maximum(s, 1e-2)))):.3f} "
                    f"mean {np.mean(s):.3f} min {np.min(s):.2f}"
                )
    else:
        scenarios = args.scenarios.split(",") if args.scenarios else SCENARIOS
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else TEST_SEEDS
        methods = args.methods.split(",") if args.methods else DEFAULT_METHODS
        options = json.loads(args.options) if args.options else {}
        runs = run_grid(seeds, scenarios, aggs, methods, args, lambda m: [("", options)])
        table = speedups(runs, select_seeds=_select(seeds, args))
        print(
            f"\nsim: seeds {seeds}, pool {args.prompts}, {args.steps} steps x {args.batch} prompts x "
            f"{args.budget} rollouts; options {options}"
        )
        print("speedup vs Uniform: mean [min-max] over seeds (final accuracy, calib MAE, alloc ms)")
        for sc in scenarios:
            for m in methods:
                cells = []
                for agg in aggs:
                    v = table.get((sc, agg, m, ""))
                    cells.append(f"{fmt(v['speedup']) if v else '-':>18s}")
                extra = [table.get((sc, agg, m, "")) for agg in aggs]
                mae = np.nanmean([v["calib_mae"] for v in extra if v]) if any(extra) else float("nan")
                ms = 1e3 * np.nanmedian([v["allocator_seconds"] for v in extra if v]) if any(extra) else float("nan")
                print(f"| {sc:10s} | {m:33s} | " + " | ".join(cells) + f" | {mae:.2f} | {ms:.1f} |")
    payload = {
        "mode": args.mode,
        "args": vars(args),
        "seconds": time.perf_counter() - t0,
        "runs": runs,
        "table": [dict(zip(("scenario", "aggregation", "method", "tag"), k), **v) for k, v in table.items()],
    }
    write_result(out / f"{args.mode}.json", payload, settings=settings, commit=commit)
    print(f"wrote {out / (args.mode + '.json')} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

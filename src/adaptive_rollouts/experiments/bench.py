"""Benchmark harness: allocators x scenarios x seeds x aggregations at equal rollout budget.

Every method runs at each learning rate of a small published grid (``LR_MULTIPLIERS`` times the
aggregation's base rate ``BASE_LR``); the best rate per (scenario, aggregation, method) is the one
with the highest mean held-out accuracy over the run (area under the learning curve, averaged
over seeds), and all reported numbers come from that rate. Uniform is run the same way.

Speedup = rollouts Uniform needs to reach ``target_frac`` (90%) of its final gain / rollouts the
method needs, per seed (same problem instance and sampling seed for every method).

Method names: any name of ``adaptive_rollouts.allocators.make_allocator``, plus the simulator's
references ``oracle-vip`` (VIP objective, true p), ``oracle-fill`` (fill the largest p(1-p) to 32,
skip the rest) and ``oracle-skip`` (the known-p skip rule: Uniform's group size, no rollouts
where the group would be all-equal with probability > 0.9), ``optimum@true-p`` (the exact optimum of the library's expected-improvement objective
for the run's estimator and aggregation, with the true p: `VIP(aggregation=...)`); ``NAME@true-p``
runs a predictor-based allocator with the true p as its prediction; ``uniform-rounds`` is a null
control (the default with saving off: Uniform's counts, drawn in the default's rounds, so only the
sampling noise differs from Uniform's); ``uniform-replicate`` is Uniform itself (the map runs it on the
same problem instances with other sampling seeds, a Uniform-vs-Uniform replicate).
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import ALLOCATORS, VIP, make_allocator, registry_key, takes_keyword
from adaptive_rollouts.bridge import build_allocator as build_allocator_from
from adaptive_rollouts.checks.validation import check_choice
from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.experiments.bench_summary import summarize
from adaptive_rollouts.experiments.speedup import rollouts_to_target
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.oracle import OracleAllocator, SkipOracle, TruePredictor, problem_truth
from adaptive_rollouts.sim.problem import Problem, make_problem
from adaptive_rollouts.sim.realdata import reasoning_gym_features
from adaptive_rollouts.sim.train import TrainConfig, train

__all__ = [
    "BASE_LR",
    "LR_MULTIPLIERS",
    "BenchConfig",
    "QUICK",
    "FULL",
    "build_allocator",
    "null_control",
    "run_benchmark",
    "run_summary",
    "rollouts_to_target",
    "summarize",
]

# AdamW rates (the update is scale-free, so one base serves every aggregation); the regime map
# (`experiments.regime_map`) extends its grid by itself when the best rate is at an edge.
BASE_LR = {"prompt-mean": 0.03, "seq-mean": 0.03, "token-mean": 0.03, "constant": 0.03}
LR_MULTIPLIERS = (1 / 3, 1.0, 3.0)


@dataclass
class BenchConfig:
    scenarios: Sequence[str] = ("easy-heavy", "hard-heavy", "bimodal", "pareto", "graded")
    methods: Sequence[str] = (
        "uniform",
        "vip",
        "vip-paper",
        "vigor",
        "posterior-progressive",
        "oracle-vip",
        "oracle-fill",
    )
    aggregations: Sequence[str] = ("prompt-mean", "seq-mean")
    seeds: Sequence[int] = (0, 1)
    lr_multipliers: Sequence[float] = LR_MULTIPLIERS
    estimator: str = "grpo"
    steps: int = 120
    batch_prompts: int = 64
    budget: int = 512  # rollouts per step, over the batch's prompts
    n_prompts: int = 4000
    n_test: int = 1000  # held-out prompts, for the accuracy
    target_frac: float = 0.9  # of Uniform's final gain: the speedup's target
    grad_var_every: int = 10
    features: str = "synthetic"  # or "minilm"
    # "all": the lr grid runs on every seed; "first-seed": the grid runs on the first seed and the
    # other seeds run only at that seed's best rate (cheaper; used by --quick).
    lr_select: str = "all"
    base_lr: dict = field(default_factory=lambda: dict(BASE_LR))


QUICK = BenchConfig(
    scenarios=("hard-heavy", "bimodal", "pareto"),
    n_prompts=1000,
    n_test=500,
    steps=40,
    batch_prompts=32,
    budget=256,
    seeds=(0, 1),
    lr_select="first-seed",
)
# Every registered allocator by its own name (the default runs under both its names in the regime map).
REGISTERED = tuple(name for name in ALLOCATORS if name not in ("default", "saving-progressive"))
FULL = BenchConfig(
    methods=(
        *REGISTERED,
        "vip@true-p",
        "posterior-progressive@true-p",
        "oracle-vip",
        "oracle-fill",
    ),
    aggregations=("prompt-mean", "seq-mean", "token-mean", "constant"),
    seeds=(0, 1, 2),
    steps=150,
)


def method_options(name: str) -> tuple[str, dict[str, Any]]:
    """Split "name[key=value;key=value]" into the name and constructor options (values are Python
    literals), so the bench can run a variant of an allocator under its own label.

    >>> method_options("default[trust_scale=4;round_fractions=(0.5,0.5)]")
    ('default', {'trust_scale': 4, 'round_fractions': (0.5, 0.5)})
    >>> method_options("vigor")
    ('vigor', {})
    """
    if not name.endswith("]") or "[" not in name:
        if "[" in name or "]" in name:
            raise ValueError(f"method options go in one trailing [key=value;...], got {name!r}")
        return name, {}
    base, _, body = name[:-1].partition("[")
    options: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in body.split(";"))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ValueError(f"method option {item!r} in {name!r} is not key=value")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as err:
            raise ValueError(f"method option {item!r} in {name!r}: the value is not a Python literal") from err
    return base, options


def null_control(seed: int) -> Any:
    """The null control (``uniform-rounds``): the default allocator with saving off, so it gives
    Uniform's counts, drawn in the default's rounds; only the sampling noise differs from Uniform's.
    Used by the regime map and the demo protocol."""
    return make_allocator("default", saving=False, seed=seed)


def build_allocator(
    name: str, problem: Problem, seed: int, aggregation: str | None = None, estimator: str | None = None
) -> tuple[Any, Any]:
    """(allocator, predictor or None) for a method name (see the module docstring).

    ``aggregation`` goes to the allocators whose objective is derived per loss aggregation
    (their class says ``aggregation_aware``); VIP keeps the paper's variance objective (passing it
    would switch VIP to the improvement objective). ``estimator`` (the trainer's advantage
    estimator) goes to every allocator that takes one."""
    truth = problem_truth(problem)
    if name == "optimum@true-p":  # the true-p optimum of the expected-improvement objective (the probe's)
        return VIP(TruePredictor(truth), estimator=estimator or "grpo", aggregation=aggregation or "seq-mean"), None
    if name == "uniform-rounds":
        return null_control(seed), None
    if name == "uniform-replicate":
        name = "uniform"
    if name == "oracle-skip":  # the known-p skip rule (not a bound: learned rules can beat it)
        return SkipOracle(truth), TruePredictor(truth)
    if name == "oracle-vip":
        return OracleAllocator(truth, mode="vip"), TruePredictor(truth)
    if name == "oracle-fill":
        return OracleAllocator(truth, mode="fill"), TruePredictor(truth)
    head, _, variant = name.partition("@")
    base, options = method_options(head)
    base = registry_key(base)
    if base not in ALLOCATORS:
        raise ValueError(
            f"unknown method {name!r}; known: {', '.join(ALLOCATORS)}, oracle-vip, oracle-fill, oracle-skip, "
            "optimum@true-p"
        )
    if variant not in ("", "true-p"):
        raise ValueError(f"unknown method variant {variant!r} in {name!r} (only '@true-p')")
    if variant == "true-p" and not takes_keyword(ALLOCATORS[base], "predictor"):
        raise ValueError(f"method {base!r} has no predictor to replace with the true p ({name!r})")
    # the method's options win; the run's values go where the constructor takes them
    alloc = build_allocator_from(
        base,
        options,
        what="method",
        options_name="its method options",
        seed=seed,
        features=FeatureTable(list(range(problem.n_prompts)), problem.features),
        predictor=TruePredictor(truth) if variant == "true-p" else None,
        aggregation=aggregation if getattr(ALLOCATORS[base], "aggregation_aware", False) else None,
        estimator=estimator if base != "vip-paper" else None,
    )
    predictor = getattr(alloc, "predictor", None)
    if predictor is not None and not hasattr(predictor, "predict"):
        predictor = None
    return alloc, predictor


def run_summary(tr: dict[str, Any]) -> dict[str, Any]:
    pv, po = np.asarray(tr["probe_var"]), np.asarray(tr["probe_oracle_var"])
    ps, pso = np.asarray(tr["probe_signal"]), np.asarray(tr["probe_oracle_signal"])
    with np.errstate(divide="ignore", invalid="ignore"):
        nsr = np.mean(pv / np.maximum(ps, 1e-300)) / np.mean(po / np.maximum(pso, 1e-300)) if pv.size else float("nan")
    acc = np.asarray(tr["accuracy"])
    return {
        "rollouts": tr["rollouts"],
        "accuracy": tr["accuracy"],
        "accuracy0": tr["accuracy0"],
        "auc": float(acc.mean()),
        "final": float(acc[-5:].mean()),
        "zero_variance_fraction": float(np.mean(tr["zero_variance_fraction"])),
        "wasted_frac": float(np.mean(tr["wasted_frac"])),
        "skipped_frac": float(np.mean(tr["skipped_frac"])),
        "allocator_seconds": float(np.median(tr["allocator_seconds"])),  # median over steps
        "grad_var_ratio": float(np.mean(pv) / np.mean(po)) if pv.size and np.mean(po) > 0 else float("nan"),
        "noise_to_signal_ratio": float(nsr),
        "calib_pred": tr["calib_pred"],
        "calib_true": tr["calib_true"],
        "alloc_p": tr["alloc_p"],
        "alloc_n": tr["alloc_n"],
    }


def run_benchmark(cfg: BenchConfig, progress: bool = True, problem_factory: Callable | None = None) -> dict[str, Any]:
    """Run the grid; return {"config", "runs": [...], "summary": {...}}."""
    check_choice("lr_select", cfg.lr_select, ("all", "first-seed"))
    jobs = [(sc, seed) for sc in cfg.scenarios for seed in cfg.seeds]
    per_cell = len(cfg.aggregations) * len(cfg.methods)
    if cfg.lr_select == "all":
        n_runs = len(jobs) * per_cell * len(cfg.lr_multipliers)
    else:
        n_runs = len(cfg.scenarios) * per_cell * (len(cfg.lr_multipliers) + len(cfg.seeds) - 1)
    bar = progress_bar(n_runs, progress)
    runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    t_start = time.perf_counter()
    if problem_factory is None and cfg.features == "minilm":
        problem_factory = _minilm_factory(cfg)
    base = TrainConfig(
        steps=cfg.steps,
        batch_prompts=cfg.batch_prompts,
        budget=cfg.budget,
        estimator=cfg.estimator,
        grad_var_every=cfg.grad_var_every,
    )
    for sc, seed in jobs:
        if problem_factory is not None:
            problem = problem_factory(sc, seed)
        else:
            problem = make_problem(sc, n_prompts=cfg.n_prompts, n_test=cfg.n_test, seed=seed)
        for agg in cfg.aggregations:
            for method in cfg.methods:
                grid = [cfg.base_lr[agg] * m for m in cfg.lr_multipliers]
                if cfg.lr_select == "first-seed" and seed != cfg.seeds[0]:
                    first = [
                        r
                        for r in runs
                        if (r["scenario"], r["aggregation"], r["method"], r["seed"]) == (sc, agg, method, cfg.seeds[0])
                    ]
                    if first:
                        grid = [max(first, key=lambda r: r["auc"])["lr"]]
                for lr in grid:
                    tcfg = replace(base, lr=lr, aggregation=agg, seed=seed)
                    try:
                        alloc, predictor = build_allocator(method, problem, seed, aggregation=agg)
                    except (ImportError, AttributeError, ValueError, TypeError) as err:
                        # Reported in the report's "methods not run" list, never silently dropped.
                        errors.setdefault(method, f"{type(err).__name__}: {err}")
                        bar.update(1)
                        continue
                    t0 = time.perf_counter()
                    tr = train(problem, alloc, tcfg, predictor=predictor)
                    s = run_summary(tr)
                    s.update(
                        scenario=sc, seed=seed, aggregation=agg, method=method, lr=lr, seconds=time.perf_counter() - t0
                    )
                    runs.append(s)
                    bar.set_postfix_str(f"{sc} {agg} {method}", refresh=False)
                    bar.update(1)
    bar.close()
    out = {"config": asdict(cfg), "runs": runs, "errors": errors, "seconds": time.perf_counter() - t_start}
    out["summary"] = summarize(runs, cfg)
    return out


def _minilm_factory(cfg: BenchConfig) -> Callable:
    """Problems on real MiniLM embeddings of reasoning-gym questions (computed once per seed)."""
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def factory(scenario: str, seed: int) -> Problem:
        if seed not in cache:
            x, xt, _ = reasoning_gym_features(cfg.n_prompts, cfg.n_test, seed=seed)
            cache[seed] = (x, xt)
        x, xt = cache[seed]
        return make_problem(scenario, n_prompts=x.shape[0], n_test=xt.shape[0], seed=seed, features=x, test_features=xt)

    return factory

"""Running the demo's (method, seed) runs: problem sets, one thread, progress, resume, workers.

Each finished run is written to ``<out>/runs/<method>-<seed>.json`` with the configuration it
ran under; a later call with the same configuration loads it instead of running it again, so an
interrupted demo or benchmark resumes where it stopped (runs are deterministic on one thread).
"""

from __future__ import annotations

import json
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, replace
from pathlib import Path

import scipy.linalg  # noqa: F401  scipy ships its own OpenBLAS: load it so the limit below covers it

from adaptive_rollouts.embeddings import FeatureTable, default_encoder
from adaptive_rollouts.experiments.run_store import read_json, write_json
from adaptive_rollouts.progress import progress_bar, progress_write

from .allocation import arm_of
from .run import DemoConfig, RunResult, config_dict, run_one
from .tasks import make_problems


def problem_sets(cfg: DemoConfig):
    """The RL pool and the held-out problems; ValueError if they share a prompt (they cannot: the
    splits are fixed by a hash of the prompt, `tasks.split_of`)."""

    pool = make_problems(cfg.pool_size, "pool", task=cfg.task)
    held_out = make_problems(cfg.held_out, "held_out", task=cfg.task)
    shared = {p.prompt for p in pool} & {p.prompt for p in held_out}
    if shared:
        raise ValueError(f"RL pool and held-out share {len(shared)} prompts, e.g. {sorted(shared)[:3]}")
    return pool, held_out


@contextmanager
def one_thread():
    """One torch thread and one BLAS thread (numpy/scipy in the allocators): the model is tiny, runs
    are reproducible bit for bit, and extra threads only spin on a shared CPU."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its default threads
        limits = nullcontext()
    else:
        limits = threadpool_limits(1)
    try:
        with limits:
            yield
    finally:
        torch.set_num_threads(saved)


def _run_config(cfg: DemoConfig, method: str, seed: int) -> dict:
    """What a saved run must match to be reused: everything but the method/seed lists and other rates."""
    out = config_dict(replace(cfg, methods=(method,), seeds=(seed,)))
    out["learning_rates"] = {method: cfg.learning_rate(method)}
    out["arm"] = asdict(arm_of(method))
    return out


def load_run(path: Path, expected: dict) -> RunResult | None:
    saved = read_json(path)  # None when missing, or (with a warning) when cut by a crash: rerun
    if not isinstance(saved, dict) or saved.get("config") != json.loads(json.dumps(expected)):
        return None
    return RunResult(**saved["result"])


def _job(args, on_step=None) -> RunResult:
    cfg, method, seed, features, pool, held_out, out_dir = args
    with one_thread():
        return run_one(method, seed, cfg, features, pool, held_out, out_dir, on_step=on_step)


def run_all(cfg: DemoConfig, out_dir: Path, log=None, encoder=None, workers: int = 1) -> list[RunResult]:
    """Every (method, seed) run of ``cfg``, reusing finished runs saved under ``out_dir/runs``; one
    line per finished run goes to ``log`` (default: written above the progress bar)."""
    log = progress_write if log is None else log

    pool, held_out = problem_sets(cfg)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(method, seed) for seed in cfg.seeds for method in cfg.methods]
    done: dict[tuple[str, int], RunResult] = {}
    for method, seed in jobs:
        saved = load_run(runs_dir / f"{method}-{seed}.json", _run_config(cfg, method, seed))
        if saved is not None:
            done[method, seed] = saved
    todo = [j for j in jobs if j not in done]
    features = None
    if any(m == "vip-paper" for m, _ in todo):
        encoder = default_encoder() if encoder is None else encoder
        prompts = [p.prompt for p in pool]
        features = FeatureTable(prompts, encoder.encode(prompts))  # embed the pool once, shared by all runs

    def finish(res: RunResult) -> None:
        done[res.method, res.seed] = res
        path = runs_dir / f"{res.method}-{res.seed}.json"
        write_json(path, {"config": _run_config(cfg, res.method, res.seed), "result": asdict(res)})
        log(
            f"{res.method:8s} seed {res.seed}: held-out greedy {res.held_out[0]:.3f} -> {res.held_out[-1]:.3f}, "
            f"mean@8 {res.sampled_start.get('mean@8', float('nan')):.3f} -> "
            f"{res.sampled_final.get('mean@8', float('nan')):.3f}, {res.rollouts[-1]} rollouts "
            f"(lr {res.learning_rate:g}, {res.train_seconds:.0f}s, "
            f"allocator {100 * res.allocator_seconds / max(res.train_seconds, 1e-9):.2f}%)"
        )

    args = [(cfg, m, s, features, pool, held_out, out_dir) for m, s in todo]
    if workers <= 1:  # one bar over every training step of every run
        bar = progress_bar(len(jobs) * cfg.steps, desc="demo", unit="step", initial=(len(jobs) - len(todo)) * cfg.steps)
        for a in args:
            bar.set_postfix_str(f"{a[1]} seed {a[2]}")
            finish(_job(a, on_step=bar.update))
    else:  # one bar over runs
        bar = progress_bar(len(jobs), desc="demo runs", unit="run", initial=len(jobs) - len(todo))

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            for fut in as_completed([ex.submit(_job, a) for a in args]):
                finish(fut.result())
                bar.update()
    bar.close()
    return [done[j] for j in jobs]

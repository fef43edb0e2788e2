"""The demo job: RLVR on the tiny warm-started LM, one run per (method, seed), equal budgets.

Accuracy is greedy accuracy on the RL pool (the prompts RL trains on: how fast a method learns
them is what allocation changes); greedy accuracy on held-out problems is reported beside it. It
falls under RL (0.288 -> ~0.23): the held-out problems are mostly arithmetic facts the tiny warm
start memorised, and any training on the pool - even supervised, with the right answers - makes
it forget them (docs/demo.md, "Why held-out accuracy falls"), so the pool is the yardstick.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

RL_POOL_SEED, HELD_OUT_SEED = 1, 2
METHODS = ("uniform", "vip", "vigor", "ours")
EXTRA_METHODS = ("ours-skip",)  # ours allowed to give a prompt zero rollouts (issue 9 item 4)


@dataclass
class DemoConfig:
    methods: tuple[str, ...] = METHODS
    seeds: tuple[int, ...] = (0,)
    steps: int = 100
    prompts_per_step: int = 16
    mean_rollouts: int = 8
    pool_size: int = 512
    held_out: int = 256
    eval_every: int = 20
    learning_rate: float = 1e-4
    loss_type: str = "grpo"
    max_completion_length: int = 6
    model_dir: str | None = None  # None: the shipped warm start in demo/assets


@dataclass
class RunResult:
    method: str
    seed: int
    rollouts: list[int] = field(default_factory=list)  # rollouts consumed at each evaluation
    accuracy: list[float] = field(default_factory=list)  # greedy accuracy on the RL pool there
    held_out: list[float] = field(default_factory=list)  # greedy accuracy on the held-out problems there
    counts: list[list[int]] = field(default_factory=list)  # rollouts per prompt, every step
    train_seconds: float = 0.0  # trainer.train() wall time minus the evaluations
    allocator_seconds: float = 0.0
    distinct_prompts_per_step: float = 0.0


def make_allocator_for(method: str, aggregation: str, features, seed: int):
    """The four demo methods. VIP as published (paper GP on MiniLM features of the pool, RLOO
    objective, plug-in p(1-p)); VIGOR as published; ours: posterior-informed progressive rounds
    (`PosteriorProgressive`, our GP) with the loss-matched ``aggregation``. ``features``: a
    `FeatureTable` of the RL pool (PaperGP lives on a known pool)."""
    from adaptive_rollouts.allocators import VIGOR, VIP, PosteriorProgressive, Uniform

    if method == "uniform":
        return Uniform(seed=seed)
    if method == "vip":
        return VIP("paper-gp", features=features, estimator="rloo", variance="plugin", lower=2, seed=seed)
    if method == "vigor":
        return VIGOR(seed=seed)
    if method == "ours":
        return PosteriorProgressive("gp", features=features, aggregation=aggregation, seed=seed)
    if method == "ours-skip":
        from adaptive_rollouts import objectives

        if not hasattr(objectives, "improvement_table"):
            raise ValueError("method 'ours-skip' needs objectives.improvement_table (it prices a skipped prompt)")
        return PosteriorProgressive("gp", features=features, aggregation=aggregation, allow_skip=True, seed=seed)
    raise ValueError(f"method must be one of {METHODS + EXTRA_METHODS}, got {method!r}")


def run_one(method: str, seed: int, cfg: DemoConfig, features, problems, held_out, out_dir: Path) -> RunResult:
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer, aggregation_for_loss_type

    from .evaluate import greedy_accuracy
    from .model import load_warm_start
    from .tasks import Verifier
    from .tokenizer import build_tokenizer

    set_seed(seed)
    tokenizer = build_tokenizer()
    model = load_warm_start(tokenizer) if cfg.model_dir is None else load_warm_start(tokenizer, Path(cfg.model_dir))
    verifier = Verifier(problems + held_out)
    result = RunResult(method, seed)
    budget = cfg.prompts_per_step * cfg.mean_rollouts

    eval_seconds = [0.0]

    def evaluate(step: int) -> None:
        start = time.perf_counter()
        result.rollouts.append(step * budget)
        result.accuracy.append(greedy_accuracy(model, tokenizer, problems, verifier))
        result.held_out.append(greedy_accuracy(model, tokenizer, held_out, verifier))
        eval_seconds[0] += time.perf_counter() - start

    class Eval(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % cfg.eval_every == 0 or state.global_step == cfg.steps:
                evaluate(state.global_step)

    args = GRPOConfig(
        output_dir=str(out_dir / "trainer" / f"{method}-{seed}"),
        per_device_train_batch_size=budget,
        num_generations=cfg.mean_rollouts,
        max_completion_length=cfg.max_completion_length,
        max_steps=cfg.steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant",
        loss_type=cfg.loss_type,
        beta=0.0,
        temperature=1.0,
        logging_steps=max(1, cfg.steps),
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    allocator = make_allocator_for(method, aggregation_for_loss_type(cfg.loss_type), features, seed)
    trainer = AdaptiveGRPOTrainer(
        model=model,
        reward_funcs=verifier,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in problems]}),
        processing_class=tokenizer,
        allocator=allocator,
        callbacks=[Eval()],
    )
    evaluate(0)
    first_eval = eval_seconds[0]
    start = time.perf_counter()
    trainer.train()
    result.train_seconds = time.perf_counter() - start - (eval_seconds[0] - first_eval)
    result.allocator_seconds = trainer.allocator_seconds
    result.counts = [c.tolist() for c in trainer.allocation_history]
    result.distinct_prompts_per_step = float(np.mean([np.count_nonzero(c) for c in trainer.allocation_history]))
    return result


@contextmanager
def _one_thread():
    """One BLAS thread (numpy/scipy in the allocators) and one torch thread: the model is tiny, and
    extra threads only spin on a shared CPU (measured on a loaded 2-core machine: 10x slower torch
    steps, and 20-40x slower GP updates in the allocator with two OpenBLAS threads)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    import scipy.linalg  # noqa: F401  scipy ships its own OpenBLAS: load it so the limit below covers it

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


def run_all(cfg: DemoConfig, out_dir: Path, log=print, encoder=None) -> list[RunResult]:
    from adaptive_rollouts.embeddings import FeatureTable, default_encoder

    from .tasks import make_problems

    problems = make_problems(cfg.pool_size, seed=RL_POOL_SEED)
    held_out = make_problems(cfg.held_out, seed=HELD_OUT_SEED, exclude={p.prompt for p in problems})
    encoder = default_encoder() if encoder is None else encoder
    pool = [p.prompt for p in problems]
    features = FeatureTable(pool, encoder.encode(pool))  # embed the pool once, shared by all runs
    results = []
    with _one_thread():
        for seed in cfg.seeds:
            for method in cfg.methods:
                res = run_one(method, seed, cfg, features, problems, held_out, out_dir)
                log(
                    f"{method:9s} seed {seed}: pool acc {res.accuracy[0]:.3f} -> {res.accuracy[-1]:.3f}, held-out "
                    f"{res.held_out[0]:.3f} -> {res.held_out[-1]:.3f} "
                    f"({res.train_seconds:.0f}s, allocator {100 * res.allocator_seconds / max(res.train_seconds, 1e-9):.2f}%)"
                )
                results.append(res)
    return results


def config_dict(cfg: DemoConfig) -> dict:
    return asdict(cfg)

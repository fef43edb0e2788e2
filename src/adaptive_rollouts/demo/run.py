"""The demo job: RLVR on the tiny warm-started LM, one run per (method, seed), equal budgets.

Each run trains the shipped warm start with `AdaptiveGRPOTrainer` (TRL's GRPO, AdamW) on the RL
pool and measures greedy accuracy on held-out problems (never trained on, disjoint from the
pool and the SFT set) every ``eval_every`` steps, plus pass@k / mean@k from sampled completions
at the start and the end. Every reward of every rollout is recorded per step (prompt, rollouts,
successes) for the regime fingerprints.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .allocation import LEARNING_RATES, METHODS, make_allocator_for


@dataclass
class DemoConfig:
    methods: tuple[str, ...] = METHODS
    seeds: tuple[int, ...] = (0,)
    steps: int = 30
    prompts_per_step: int = 16
    mean_rollouts: int = 8
    pool_size: int = 512
    held_out: int = 512
    sampled_problems: int = 256  # held-out problems (the first ones) scored by pass@k / mean@k
    eval_every: int = 10
    samples: int = 8  # sampled completions per held-out problem for pass@k / mean@k
    learning_rates: dict[str, float] | None = None  # None: the tuned LEARNING_RATES
    loss_type: str = "grpo"
    max_completion_length: int = 9
    model_dir: str | None = None  # None: the shipped warm start in demo/assets

    def learning_rate(self, method: str) -> float:
        rates = LEARNING_RATES if self.learning_rates is None else self.learning_rates
        if method not in rates:
            raise ValueError(f"no learning rate for method {method!r} (have {sorted(rates)})")
        return float(rates[method])


@dataclass
class RunResult:
    method: str
    seed: int
    learning_rate: float = 0.0
    rollouts: list[int] = field(default_factory=list)  # rollouts consumed at each evaluation
    held_out: list[float] = field(default_factory=list)  # held-out greedy accuracy there
    pool: list[float] = field(default_factory=list)  # greedy accuracy on the RL pool at the start and the end
    sampled_start: dict[str, float] = field(default_factory=dict)  # held-out pass@k / mean@k at step 0
    sampled_final: dict[str, float] = field(default_factory=dict)  # ... after the last step
    counts: list[list[int]] = field(default_factory=list)  # rollouts per prompt, every step
    groups: list[list[list[int]]] = field(default_factory=list)  # per step: [pool index, rollouts, successes]
    train_seconds: float = 0.0  # trainer.train() wall time minus the evaluations
    allocator_seconds: float = 0.0
    distinct_prompts_per_step: float = 0.0


class RecordingVerifier:
    """The task's reward function, which also tallies rollouts and successes per prompt for the step."""

    __name__ = "verifier"

    def __init__(self, index: dict[str, int]):
        from .tasks import Verifier

        self.verifier, self.index = Verifier(), index
        self.tally: dict[str, tuple[int, int]] = {}

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        scores = self.verifier(prompts, completions)
        for prompt, score in zip(prompts, scores, strict=True):
            n, s = self.tally.get(prompt, (0, 0))
            self.tally[prompt] = (n + 1, s + int(score))
        return scores

    def flush(self) -> list[list[int]]:
        out = [[self.index[p], n, s] for p, (n, s) in self.tally.items()]
        self.tally = {}
        return out


def run_one(
    method: str,
    seed: int,
    cfg: DemoConfig,
    features,
    pool,
    held_out,
    out_dir: Path,
    save_models: Path | None = None,
    on_step=None,
) -> RunResult:
    """One training run; ``save_models``: a folder that gets the weights at every evaluation
    (``step-<k>.safetensors``, for the gradient fingerprints); ``on_step()``: called after each step."""
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer, aggregation_for_loss_type

    from .evaluate import greedy_scores, sampled_metrics, sampled_scores
    from .model import load_warm_start
    from .tokenizer import build_tokenizer

    set_seed(seed)
    tokenizer = build_tokenizer()
    model = load_warm_start(tokenizer) if cfg.model_dir is None else load_warm_start(tokenizer, Path(cfg.model_dir))
    verifier = RecordingVerifier({p.prompt: i for i, p in enumerate(pool)})
    lr = cfg.learning_rate(method)
    result = RunResult(method, seed, lr)
    budget = cfg.prompts_per_step * cfg.mean_rollouts
    eval_seconds = [0.0]

    def evaluate(step: int) -> None:
        start = time.perf_counter()
        if save_models is not None:
            from safetensors.torch import save_file

            save_models.mkdir(parents=True, exist_ok=True)
            state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
            save_file(state, str(save_models / f"step-{step}.safetensors"))
        result.rollouts.append(step * budget)
        result.held_out.append(float(greedy_scores(model, tokenizer, held_out).mean()))
        if step in (0, cfg.steps):
            result.pool.append(float(greedy_scores(model, tokenizer, pool).mean()))
            subset = held_out[: cfg.sampled_problems]
            metrics = sampled_metrics(sampled_scores(model, tokenizer, subset, cfg.samples, seed=10_000 + seed))
            setattr(result, "sampled_start" if step == 0 else "sampled_final", metrics)
        eval_seconds[0] += time.perf_counter() - start

    class Record(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            result.groups.append(verifier.flush())
            if on_step is not None:
                on_step()
            if state.global_step % cfg.eval_every == 0 or state.global_step == cfg.steps:
                evaluate(state.global_step)

    args = GRPOConfig(
        output_dir=str(out_dir / "trainer" / f"{method}-{seed}"),
        per_device_train_batch_size=budget,
        num_generations=cfg.mean_rollouts,
        max_completion_length=cfg.max_completion_length,
        max_steps=cfg.steps,
        learning_rate=lr,
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
        gradient_checkpointing=False,  # a tiny model: recomputing activations only costs time
    )
    allocator = make_allocator_for(method, aggregation_for_loss_type(cfg.loss_type), features, seed, cfg.mean_rollouts)
    trainer = AdaptiveGRPOTrainer(
        model=model,
        reward_funcs=verifier,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in pool]}),
        processing_class=tokenizer,
        allocator=allocator,
        callbacks=[Record()],
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


def config_dict(cfg: DemoConfig) -> dict:
    out = asdict(cfg)
    out["learning_rates"] = {m: cfg.learning_rate(m) for m in cfg.methods}
    return out

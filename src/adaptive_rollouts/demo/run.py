"""The demo job: RLVR on the tiny warm-started LM, one run per (arm, seed), equal budgets.

Each run trains the shipped warm start with `AdaptiveGRPOTrainer` (TRL's GRPO, AdamW) on the RL
pool and measures greedy accuracy on held-out problems (never trained on, disjoint from the
pool and the SFT set) every ``eval_every`` steps, plus (``eval_sampled``) pass@k / mean@k from
sampled completions at the start and the end. Every generated rollout is counted (the reward
function sees each one): the rollouts and completion tokens consumed up to each evaluation, per
step every prompt's (rollouts, successes) for the regime fingerprints, and per step the longest
completion and the tokens of each generation call (what `sim.step_time` models a step's time from). With ``probe_every``,
Uniform runs also measure the regime map's gradient probes (`regime.step_probe`) at those steps.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .allocation import LEARNING_RATES, arm_of, make_arm_allocator, objective_of, uses_oracle
from .evaluate import greedy_scores, sampled_metrics, sampled_scores
from .model import assets_of, load_warm_start
from .oracle import SampledSuccess
from .regime import step_probe
from .tasks import Verifier, task_of
from .tokenizer import build_tokenizer


@dataclass
class DemoConfig:
    methods: tuple[str, ...] = ("uniform", "default+view")  # the default as the trainer gives it: with the view
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
    max_completion_length: int | None = None  # None: the task's longest answer + <eos>
    model_dir: str | None = None  # None: the task's shipped warm start (`model.assets_of`)
    loss_type: str | None = None  # None: each arm's own (`allocation.arm_of`)
    eval_sampled: bool = True  # pass@k / mean@k and pool greedy accuracy at the start and the end
    oracle_samples: int = 16  # completions per prompt behind the oracle arms' p (not charged to the budget)
    probe_every: int = 0  # Uniform's gradient probes every this many steps (0: none)
    probe_resamples: int = 6
    task: str = "sort"  # `tasks.TASKS`: the digit-sorting task, or the difficulty ladder
    policy_features: bool = False  # the trainer's policy-features pass (`AdaptiveGRPOTrainer`), for arms that read it

    def completion_length(self) -> int:
        """TRL's ``max_completion_length``: ``max_completion_length``, or the task's longest answer + <eos>;
        ValueError if it is too short to hold the task's longest answer and its <eos>."""
        need = task_of(self.task).max_new_tokens
        if self.max_completion_length is None:
            return need
        if self.max_completion_length < need:
            raise ValueError(
                f"max_completion_length must be >= {need} for task {self.task!r}, got {self.max_completion_length}"
            )
        return int(self.max_completion_length)

    def learning_rate(self, method: str) -> float:
        rates = LEARNING_RATES if self.learning_rates is None else self.learning_rates
        if method not in rates:
            raise ValueError(f"no learning rate for method {method!r} (have {sorted(rates)}); pass --lr")
        return float(rates[method])


@dataclass
class RunResult:
    method: str
    seed: int
    learning_rate: float = 0.0
    rollouts: list[int] = field(default_factory=list)  # rollouts generated up to each evaluation
    tokens: list[int] = field(default_factory=list)  # completion tokens generated up to each evaluation
    held_out: list[float] = field(default_factory=list)  # held-out greedy accuracy there
    pool: list[float] = field(default_factory=list)  # greedy accuracy on the RL pool at the start and the end
    sampled_start: dict[str, float] = field(default_factory=dict)  # held-out pass@k / mean@k at step 0
    sampled_final: dict[str, float] = field(default_factory=dict)  # ... after the last step
    counts: list[list[int]] = field(default_factory=list)  # rollouts per prompt, every step
    groups: list[list[list[int]]] = field(default_factory=list)  # per step: [pool index, rollouts, successes]
    train_seconds: float = 0.0  # trainer.train() wall time minus the evaluations
    allocator_seconds: float = 0.0
    distinct_prompts_per_step: float = 0.0
    objective: str = ""  # what the allocator optimised, as the trainer configured it
    loss_type: str = ""
    scale_rewards: str = ""
    extra_rollouts: int = 0  # the oracle's samples, never charged to the budget
    probes: dict[str, list[float]] = field(default_factory=dict)  # probe_step / probe_var / probe_signal / nsr_rollout
    step_seconds: list[float] = field(default_factory=list)  # wall time of each optimizer step (evaluations out)
    policy_seconds: list[float] = field(default_factory=list)  # the policy-features pass in each step (when it ran)
    policy_share: list[float] = field(default_factory=list)  # its logged share (`bridge.StepResult`) of each step
    # Per step, per generation call (TRL scores each call once): its longest completion and its tokens,
    # named as the simulator's runs name them, so `sim.step_time` engines price the demo's steps too.
    round_max_tokens: list[list[int]] = field(default_factory=list)
    round_tokens: list[list[int]] = field(default_factory=list)
    evaluated_at: list[int] = field(default_factory=list)  # the step of each evaluation (0: before training)


class RecordingVerifier:
    """The task's reward function, which also tallies rollouts and successes per prompt for the step."""

    __name__ = "verifier"

    def __init__(self, index: dict[str, int]):

        self.verifier, self.index = Verifier(), index
        self.tally: dict[str, tuple[int, int]] = {}
        self.rollouts = 0  # every rollout generated so far
        self.tokens = 0  # and its completion tokens
        self.calls: list[tuple[int, int]] = []  # this step's generation calls: (longest completion, tokens)

    def __call__(self, prompts, completions, completion_ids=None, **kwargs) -> list[float]:
        scores = self.verifier(prompts, completions)
        for prompt, score in zip(prompts, scores, strict=True):
            n, s = self.tally.get(prompt, (0, 0))
            self.tally[prompt] = (n + 1, s + int(score))
        self.rollouts += len(scores)
        if completion_ids is not None:
            lengths = [len(ids) for ids in completion_ids]
            self.tokens += sum(lengths)
            if lengths:
                self.calls.append((max(lengths), sum(lengths)))
        return scores

    def flush_calls(self) -> tuple[list[int], list[int]]:
        """This step's generation calls as (longest completion of each, tokens of each); then forgets them."""
        longest, tokens = [c[0] for c in self.calls], [c[1] for c in self.calls]
        self.calls = []
        return longest, tokens

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
    learning_rate: float | None = None,
    allocator=None,
) -> RunResult:
    """One training run of arm ``method``; ``save_models``: a folder that gets the weights at every
    evaluation (``step-<k>.safetensors``, for the gradient fingerprints); ``on_step()``: called after
    each step; ``learning_rate``: overrides ``cfg.learning_rate(method)``; ``allocator``: an object
    that replaces the arm's (the arm still sets the loss), e.g. a `traces.TraceRecorder`."""
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback, set_seed
    from trl import GRPOConfig

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    arm = arm_of(method)
    if cfg.loss_type is not None:
        arm = replace(arm, loss_type=cfg.loss_type)
    set_seed(seed)
    tokenizer = build_tokenizer()
    model = load_warm_start(tokenizer, assets_of(cfg.task) if cfg.model_dir is None else Path(cfg.model_dir))
    verifier = RecordingVerifier({p.prompt: i for i, p in enumerate(pool)})
    lr = cfg.learning_rate(method) if learning_rate is None else float(learning_rate)
    result = RunResult(method, seed, lr, loss_type=arm.loss_type, scale_rewards=arm.scale_rewards)
    eval_seconds = [0.0]
    probing = cfg.probe_every > 0 and method == "uniform"

    def evaluate(step: int) -> None:
        start = time.perf_counter()
        if save_models is not None:
            from safetensors.torch import save_file

            save_models.mkdir(parents=True, exist_ok=True)
            state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
            save_file(state, str(save_models / f"step-{step}.safetensors"))
        result.evaluated_at.append(step)
        result.rollouts.append(verifier.rollouts)
        result.tokens.append(verifier.tokens)
        result.held_out.append(float(greedy_scores(model, tokenizer, held_out).mean()))
        if cfg.eval_sampled and step in (0, cfg.steps):
            result.pool.append(float(greedy_scores(model, tokenizer, pool).mean()))
            subset = held_out[: cfg.sampled_problems]
            metrics = sampled_metrics(sampled_scores(model, tokenizer, subset, cfg.samples, seed=10_000 + seed))
            setattr(result, "sampled_start" if step == 0 else "sampled_final", metrics)
        if probing and step % cfg.probe_every == 0 and step < cfg.steps:
            rng = np.random.default_rng([seed, step])
            batch = [pool[i].prompt for i in rng.choice(len(pool), cfg.prompts_per_step, replace=False)]
            was_training = model.training
            probe = step_probe(model, tokenizer, batch, cfg.mean_rollouts, cfg.probe_resamples, 20_000 + 100 * step)
            model.train(was_training)
            result.probes.setdefault("probe_step", []).append(step)
            for key, value in probe.items():
                result.probes.setdefault(key, []).append(value)
        eval_seconds[0] += time.perf_counter() - start

    began = [0.0]

    class Record(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            began[0] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            result.step_seconds.append(time.perf_counter() - began[0])
            step = trainer.last_step
            if step is not None and step.policy_seconds is not None:
                result.policy_seconds.append(step.policy_seconds)
                result.policy_share.append(float(step.values["policy_share"]))
            result.groups.append(verifier.flush())
            longest, tokens = verifier.flush_calls()
            result.round_max_tokens.append(longest)
            result.round_tokens.append(tokens)
            if on_step is not None:
                on_step()
            if state.global_step % cfg.eval_every == 0 or state.global_step == cfg.steps:
                evaluate(state.global_step)

    budget = cfg.prompts_per_step * cfg.mean_rollouts
    args = GRPOConfig(
        output_dir=str(out_dir / "trainer" / f"{method}-{seed}"),
        per_device_train_batch_size=budget,
        num_generations=cfg.mean_rollouts,
        max_completion_length=cfg.completion_length(),
        max_steps=cfg.steps,
        learning_rate=lr,
        lr_scheduler_type="constant",
        loss_type=arm.loss_type,
        scale_rewards=arm.scale_rewards,
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
    oracle = None
    if uses_oracle(method):
        oracle = SampledSuccess(
            model, tokenizer, [p.prompt for p in pool], cfg.oracle_samples, seed=30_000 + 1000 * seed
        )
    if allocator is None:
        allocator = make_arm_allocator(method, seed, cfg.mean_rollouts, features=features, oracle=oracle)
    trainer = AdaptiveGRPOTrainer(
        model=model,
        reward_funcs=verifier,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in pool]}),
        processing_class=tokenizer,
        allocator=allocator,
        callbacks=[Record()],
        policy_features=cfg.policy_features or arm.policy_features,
        time_rounds=arm.round_clock or False,
    )
    trainer.remove_callback(PrinterCallback)  # the trainer's log dicts are not printed between progress updates
    result.objective = objective_of(trainer.allocator)
    evaluate(0)
    first_eval = eval_seconds[0]
    start = time.perf_counter()
    trainer.train()
    result.train_seconds = time.perf_counter() - start - (eval_seconds[0] - first_eval)
    result.allocator_seconds = trainer.allocator_seconds
    result.counts = [c.tolist() for c in trainer.allocation_history]
    result.distinct_prompts_per_step = float(np.mean([np.count_nonzero(c) for c in trainer.allocation_history]))
    result.extra_rollouts = 0 if oracle is None else oracle.extra_rollouts
    return result


def config_dict(cfg: DemoConfig) -> dict:
    out = asdict(cfg)
    out["max_completion_length"] = cfg.completion_length()
    out["learning_rates"] = {m: cfg.learning_rate(m) for m in cfg.methods}
    return out

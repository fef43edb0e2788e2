"""Shared helpers for the TRL tests: a tiny randomly initialised model (CPU), trainers built alike for
stock ``GRPOTrainer`` and ``AdaptiveGRPOTrainer``, test allocators, and what a step produced."""

from __future__ import annotations

import string

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

SPECIAL = ["<pad>", "<|im_end|>", "<|im_start|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TOOL_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>'


def chat_tokenizer():
    """A character-level tokenizer with Qwen3's chat template (tool calling), built in code."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    vocab = {t: i for i, t in enumerate(SPECIAL + sorted(set(string.printable)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<|im_end|>", unk_token="?")
    tok.add_special_tokens({"additional_special_tokens": SPECIAL[2:]})
    tok.chat_template = qwen3_chat_template
    return tok


PROMPTS = ["1+2=", "3*4=", "9-5=", "7+7=", "2*3=", "8-1="]


def reward_has_digit_one(prompts, completions, **kwargs):
    return [float("1" in c) for c in completions]


def reward_length(prompts, completions, **kwargs):
    return [len(c) / 6.0 for c in completions]


def tiny_model(tok, seed=0, **overrides):
    from adaptive_rollouts.demo.model import build_model

    torch.manual_seed(seed)
    settings = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2)
    return build_model(tok, seed=seed, **{**settings, "num_hidden_layers": 1, **overrides})


def make_config(tmp_path, seed=0, **overrides):
    from trl import GRPOConfig

    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=12,
        num_generations=4,
        max_completion_length=5,
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=seed,
        loss_type="grpo",
        beta=0.0,
        temperature=1.0,
        scale_rewards="group",
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def make_trainer(cls, tmp_path, seed=0, reward=reward_has_digit_one, dataset=None, tok=None, config=None, **kwargs):
    """A trainer of ``cls`` on the tiny model; GRPOConfig fields go in ``config``, trainer options in kwargs."""
    from datasets import Dataset

    from adaptive_rollouts.demo.tokenizer import build_tokenizer

    tok = tok or build_tokenizer()
    args = make_config(tmp_path, seed=seed, **(config or {}))
    return cls(
        model=tiny_model(tok, seed),
        reward_funcs=reward,
        args=args,
        train_dataset=dataset if dataset is not None else Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tok,
        **kwargs,
    )


class Capture:
    """Records what each generation step of a trainer returned."""

    def __init__(self, trainer):
        self.outputs = []
        self.rewards = []  # per step: reward function name -> the step's rewards, as logged
        original = trainer._generate_and_score_completions

        def wrapped(inputs):
            out = original(inputs)
            self.outputs.append({k: v.detach().clone() for k, v in out.items() if isinstance(v, torch.Tensor)})
            n = len(out["advantages"]) * trainer.accelerator.num_processes
            self.rewards.append({k: list(v)[-n:] for k, v in trainer._logs["rewards"].items()})
            return out

        trainer._generate_and_score_completions = wrapped

    @property
    def advantages(self):
        return [o["advantages"] for o in self.outputs]


class Skewed:
    """Two rounds: 1 rollout per prompt, then the rest: budget - Q - 1 more to prompt 0 and 1 to prompt 1."""

    def __init__(self):
        self.calls = []
        self.answers = []
        self.last_metrics = {"rounds": 2.0, "num_prompts": 0.0}

    def run(self, prompts, budget, sample):
        q = len(prompts)
        first = sample(np.arange(q), np.ones(q, dtype=int))
        second = sample(np.array([0, 1]), np.array([budget - q - 1, 1]))
        self.calls.append((list(prompts), [len(r) for r in first], [len(r) for r in second]))
        self.answers.append((first, second))
        self.last_metrics = {"rounds": 2.0, "num_prompts": float(q)}
        return [np.concatenate([first[i], second[i]]) if i < 2 else first[i] for i in range(q)]


class Recorder:
    """Wraps an allocator and records the rewards it was given per prompt."""

    def __init__(self, inner):
        self.inner = inner
        self.seen: list[list[np.ndarray]] = []

    @property
    def last_metrics(self):
        return self.inner.last_metrics

    def run(self, prompts, budget, sample):
        got: dict[int, list] = {}

        def recording(indices, counts):
            answer = sample(indices, counts)
            for i, r in zip(np.asarray(indices).tolist(), answer):
                got.setdefault(i, []).append(np.asarray(r, dtype=float))
            return answer

        out = self.inner.run(prompts, budget, recording)
        self.seen.append([np.concatenate(got.get(i, [np.zeros(0)])) for i in range(len(prompts))])
        return out


def logged(trainer, name):
    """Values of one logged metric, one per logging step."""
    return [h[name] for h in trainer.state.log_history if name in h]


def test_support_helpers_build_a_trainer(tmp_path):
    from trl import GRPOTrainer

    trainer = make_trainer(GRPOTrainer, tmp_path)
    assert trainer.num_generations == 4 and trainer.args.generation_batch_size == 12


class Saver:
    """A saving allocator (kind "save") for the tests: step k spends ``plans[k % len(plans)][i]``
    rollouts on the batch's i-th prompt (0: skipped), in two rounds (one rollout to each prompt it
    keeps, then the rest). Its step counter is its state, saved with checkpoints."""

    kind = "save"

    def __init__(self, plans):
        self.plans = [list(p) for p in plans]
        self.step = 0
        self.last_metrics: dict = {}

    def run(self, prompts, budget, sample):
        plan = np.array(self.plans[self.step % len(self.plans)][: len(prompts)], dtype=int)
        self.step += 1
        got = [np.zeros(0) for _ in prompts]
        kept = np.flatnonzero(plan > 0)
        if kept.size:
            for i, r in zip(kept, sample(kept, np.ones(kept.size, dtype=int))):
                got[i] = np.asarray(r, dtype=float)
            more = kept[plan[kept] > 1]
            if more.size:
                for i, r in zip(more, sample(more, plan[more] - 1)):
                    got[i] = np.concatenate([got[i], np.asarray(r, dtype=float)])
        self.last_metrics = {"num_prompts": float(len(prompts))}
        return got

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = int(state["step"])

"""Multi-turn tool use (TRL's ``tools=``), ``rollout_func``, and what is refused at construction."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import (  # noqa: E402
    TOOL_CALL,
    Capture,
    Recorder,
    Skewed,
    chat_tokenizer,
    logged,
    make_config,
    tiny_model,
)

from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402


def test_tools_multi_turn_rollouts_one_reward_each(tmp_path):
    from datasets import Dataset

    calls = []

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        calls.append((a, b))
        return a + b

    def reward_used_the_tool(prompts, completions, **kwargs):
        return [float(any(m["role"] == "tool" and m["content"] == "5" for m in c)) for c in completions]

    tok = chat_tokenizer()
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"{i}+3="}] for i in range(3)]})
    alloc = Recorder(Skewed())
    trainer = AdaptiveGRPOTrainer(
        model=tiny_model(tok, max_position_embeddings=2048),  # the tool schema makes ~650-token prompts
        reward_funcs=reward_used_the_tool,
        args=make_config(tmp_path, max_completion_length=128),
        train_dataset=dataset,
        processing_class=tok,
        tools=[add],
        allocator=alloc,
    )
    tool_call_ids = tok(TOOL_CALL, add_special_tokens=False)["input_ids"]
    original = trainer._generate_single_turn

    def first_turn_calls_the_tool(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=None):
        if has_tool_images is None:  # the first turn (TRL's tool loop passes has_tool_images)
            return [list(tool_call_ids) for _ in prompt_ids], None
        return original(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images)

    trainer._generate_single_turn = first_turn_calls_the_tool
    cap = Capture(trainer)
    trainer.train()
    assert calls == [(2, 3)] * 24  # every rollout of both steps ran the tool once
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]] * 2
    assert all(np.array_equal(np.concatenate(seen), np.ones(12)) for seen in alloc.seen)  # one reward each
    for out in cap.outputs:  # tool result tokens are masked out of the loss, as in stock TRL
        assert (out["tool_mask"] == 0).any() and (out["tool_mask"] == 1).any()
    assert logged(trainer, "tools/call_frequency") == [1.0, 1.0]
    assert logged(trainer, "tools/failure_frequency") == [0.0, 0.0]


def test_rollout_func_rows_and_extra_fields_reach_the_rewards(tmp_path):
    from datasets import Dataset

    from adaptive_rollouts.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    rng = np.random.default_rng(0)
    calls = []

    def rollout_func(prompts, trainer):
        calls.append((len(prompts), trainer.num_generations))
        ids = tok(prompts)["input_ids"]
        completions = [rng.integers(3, len(tok), size=int(rng.integers(1, 5))).tolist() for _ in prompts]
        return {
            "prompt_ids": ids,
            "completion_ids": completions,
            "logprobs": [[-1.0] * len(c) for c in completions],
            "length_tag": [len(c) for c in completions],
        }

    def reward_from_tag(prompts, completions, length_tag, **kwargs):
        return [t / 4.0 for t in length_tag]

    trainer = AdaptiveGRPOTrainer(
        model=tiny_model(tok),
        reward_funcs=reward_from_tag,
        args=make_config(tmp_path),
        train_dataset=Dataset.from_dict({"prompt": ["1+2=", "3*4=", "9-5=", "7+7=", "2*3=", "8-1="]}),
        processing_class=tok,
        rollout_func=rollout_func,
        allocator=Skewed(),
    )
    cap = Capture(trainer)
    trainer.train()
    assert calls == [(3, 1), (9, 1)] * 2  # one call per round, one row per rollout
    for out, rewards in zip(cap.outputs, cap.rewards):
        lengths = out["completion_mask"].sum(dim=1).float()
        assert rewards["reward_from_tag"] == (lengths / 4.0).tolist()  # each row scored with its own field


def test_images_are_refused_at_construction(tmp_path):
    from datasets import Dataset

    from adaptive_rollouts.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    common = dict(model=tiny_model(tok), reward_funcs=lambda completions, **kw: [0.0] * len(completions))
    with pytest.raises(ValueError, match="image column"):
        AdaptiveGRPOTrainer(
            **common,
            args=make_config(tmp_path),
            train_dataset=Dataset.from_dict({"prompt": ["1+2="] * 6, "image": [None] * 6}),
            processing_class=tok,
            allocator="uniform",
        )

"""TRL environments (``environment_factory``) under AdaptiveGRPOTrainer: one environment instance per
rollout, reset with its row's columns, in every generation round; environment-owned rewards and data,
several environments, mixed with ``reward_funcs``; TRL's own errors come through unchanged."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, Recorder, Saver, Skewed, chat_tokenizer, logged, make_config, tiny_model  # noqa: E402

from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402


def call(name: str, **arguments) -> str:
    import json

    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call><|im_end|>"


class Calculator:
    """A calculator environment: ``add`` is its tool; it owns the reward (1 when the last sum hit the
    row's target). Every instance records its resets."""

    resets: list[dict] = []

    def reset(self, **kwargs):
        Calculator.resets.append(dict(kwargs))
        self.target = kwargs.get("target", 5)
        self.total = None
        return " Use the calculator."

    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.total = a + b
        return self.total

    def get_reward(self) -> float:
        return float(self.total == self.target)


class Echo:
    """An environment without its own reward; its tool is ``shout``."""

    def reset(self, **kwargs):
        return None

    def shout(self, text: str) -> str:
        """Shout the text.

        Args:
            text: What to shout.
        """
        return text.upper()


def environment_trainer(tmp_path, environment_factory, dataset=None, reward_funcs=None, config=None, **kwargs):
    """A trainer whose first turn calls a tool: ``add(2, 3)`` on even rows and ``add(1, 1)`` on odd rows of
    a call (so a group's rewards differ), ``shout`` where only Echo's tools are in the prompt."""
    tok = chat_tokenizer()
    settings = {"max_completion_length": 96, **(config or {})}
    trainer = AdaptiveGRPOTrainer(
        model=tiny_model(tok, max_position_embeddings=2048),
        reward_funcs=reward_funcs,
        args=make_config(tmp_path, **settings),
        train_dataset=dataset,
        processing_class=tok,
        environment_factory=environment_factory,
        **kwargs,
    )
    calls = {
        "five": tok(call("add", a=2, b=3), add_special_tokens=False)["input_ids"],
        "two": tok(call("add", a=1, b=1), add_special_tokens=False)["input_ids"],
        "shout": tok(call("shout", text="hi"), add_special_tokens=False)["input_ids"],
    }
    original = trainer._generate_single_turn
    rows_per_call = []

    def first_turn_calls_a_tool(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=None):
        if has_tool_images is not None:  # later turns: the model
            return original(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images)
        rows_per_call.append(len(prompt_ids))
        out = []
        for i, ids in enumerate(prompt_ids):
            text = tok.decode(ids)
            name = "shout" if '"shout"' in text and '"add"' not in text else ("five" if i % 2 == 0 else "two")
            out.append(list(calls[name]))
        return out, None

    trainer._generate_single_turn = first_turn_calls_a_tool
    return trainer, rows_per_call


def dataset_of(**columns):
    from datasets import Dataset

    return Dataset.from_dict(columns)


def prompts(n):
    return [[{"role": "user", "content": f"{i}+3="}] for i in range(n)]


def test_one_environment_per_rollout_in_every_round_with_unequal_counts(tmp_path):
    Calculator.resets = []
    alloc = Recorder(Skewed())
    trainer, rows_per_call = environment_trainer(
        tmp_path, Calculator, dataset_of(prompt=prompts(3), target=[5, 5, 4]), allocator=alloc
    )
    assert trainer.reward_func_names == ["Calculator"]
    cap = Capture(trainer)
    trainer.train()
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]] * 2  # progressive, unequal
    assert rows_per_call == [3, 9] * 2  # one generation call per round, one row per rollout
    # every rollout had its own environment, reset once with its row's columns (and nothing else)
    assert len(Calculator.resets) == 24
    assert all(set(kw) == {"prompt", "target"} for kw in Calculator.resets)
    assert len(trainer._environment_pool[None]) == 9  # the largest call's rows, reused across calls
    # the environment owns the reward, from its own row's target: add(2, 3) hits 5, add(1, 1) never does
    targets = {kw["prompt"][0]["content"]: kw["target"] for kw in Calculator.resets}
    assert targets == {"0+3=": 5, "1+3=": 5, "2+3=": 4}
    seen = alloc.seen[-1]
    assert {float(x) for x in seen[0]} <= {0.0, 1.0} and len(seen[0]) == 9
    rewards = cap.rewards[-1]["Calculator"]
    assert len(rewards) == 12 and 0 < sum(rewards) < 12
    assert any(a.abs().sum() > 0 for a in cap.advantages)
    assert logged(trainer, "tools/call_frequency") == [1.0, 1.0]
    # the observation of reset reached the prompt, as in TRL
    assert all(p[-1]["content"].endswith(" Use the calculator.") for p in list(trainer._logs["prompt"]))
    assert trainer.environments is not None and len(trainer.environments) == 9  # the step's last call


def test_several_environments_route_rows_and_tools(tmp_path):
    Calculator.resets = []
    data = dataset_of(prompt=prompts(3), environment=["calc", "echo", "calc"])
    trainer, _ = environment_trainer(
        tmp_path,
        {"calc": Calculator, "echo": Echo},
        data,
        reward_funcs=lambda completions, **kw: [0.5] * len(completions),
        allocator=Skewed(),
        config={"shuffle_dataset": False, "max_steps": 1},
    )
    assert trainer.reward_func_names == ["<lambda>", "Calculator"]
    cap = Capture(trainer)
    trainer.train()
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]]
    assert all("environment" not in kw for kw in Calculator.resets) and len(Calculator.resets) == 10
    # echo rows get no Calculator reward (NaN), calculator rows get one
    calc = torch.tensor(cap.rewards[-1]["Calculator"])
    assert int(torch.isnan(calc).sum()) == 2 and int((~torch.isnan(calc)).sum()) == 10
    assert logged(trainer, "tools/failure_frequency") == [0.0]  # each row called a tool its environment has


def test_environment_owned_data_without_a_dataset(tmp_path):
    class Task:
        def reset(self, **kwargs):
            return "Add 2 and 3."

        def add(self, a: int, b: int) -> int:
            """Add two integers.

            Args:
                a: The first integer.
                b: The second integer.
            """
            self.total = a + b
            return self.total

        def get_reward(self) -> float:
            return float(getattr(self, "total", None) == 5)

    trainer, rows_per_call = environment_trainer(tmp_path, Task, allocator=Skewed())
    assert trainer.train_dataset.column_names == ["prompt"]  # TRL's placeholder rows
    trainer.train()
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]] * 2
    assert logged(trainer, "rewards/Task/mean") == [pytest.approx(7 / 12)] * 2  # add(2, 3) on even rows of each call
    with pytest.raises(ValueError, match="max_steps"):  # TRL's own check, unchanged
        environment_trainer(tmp_path, Task, config={"max_steps": -1})


def test_environment_reward_mixed_with_reward_funcs_and_plain_environments(tmp_path):
    def fmt(completions, **kwargs):
        return [1.0 for _ in completions]

    data = dataset_of(prompt=prompts(3), environment=["calc", "plain", "calc"])
    alloc = Recorder(Skewed())
    trainer, _ = environment_trainer(
        tmp_path,
        {"calc": Calculator, "calc2": Calculator, "plain": Echo},
        data,
        reward_funcs=fmt,
        allocator=alloc,
        reward_range=(0.0, 1.5),
        config={"reward_weights": [0.5], "max_steps": 1},
    )
    assert trainer.reward_func_names == ["fmt", "Calculator"] and trainer.reward_weights.tolist() == [0.5, 1.0]
    cap = Capture(trainer)
    trainer.train()
    rewards = cap.rewards[-1]
    total = [(0.5 * f + (0.0 if np.isnan(c) else c)) / 1.5 for f, c in zip(rewards["fmt"], rewards["Calculator"])]
    assert any(np.isnan(c) for c in rewards["Calculator"]) and max(total) == 1.0
    assert sorted(np.concatenate(alloc.seen[-1]).tolist()) == pytest.approx(sorted(total))


def test_trl_errors_for_bad_environment_settings_come_through(tmp_path):
    data = dataset_of(prompt=prompts(3), environment=["calc", "nope", "calc"])
    trainer, _ = environment_trainer(tmp_path, {"calc": Calculator}, data, allocator=Skewed())
    with pytest.raises(ValueError, match="not among the environments"):
        trainer.train()
    with pytest.raises(ValueError, match="requires a `train_dataset`"):
        environment_trainer(tmp_path, {"a": Calculator, "b": Echo}, allocator="uniform")


def test_saving_allocator_resets_environments_only_for_rollouts_it_spends(tmp_path):
    Calculator.resets = []
    trainer, rows_per_call = environment_trainer(
        tmp_path, Calculator, dataset_of(prompt=prompts(3), target=[5, 2, 7]), allocator=Saver([[0, 3, 2]])
    )
    cap = Capture(trainer)
    trainer.train()
    assert rows_per_call == [2, 3] * 2 and len(Calculator.resets) == 10
    assert all(len(out["advantages"]) == 5 for out in cap.outputs)
    assert logged(trainer, "adaptive/skipped") == [1, 1]

"""AdaptiveGRPOTrainer on a tiny randomly initialised model (CPU, a few steps)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from adaptive_rollouts.demo.model import build_model  # noqa: E402
from adaptive_rollouts.demo.tokenizer import build_tokenizer  # noqa: E402
from adaptive_rollouts.integrations.trl import (  # noqa: E402
    aggregation_for_loss_type,
    assign_groups_to_ranks,
    check_trl_version,
    estimator_for_scale_rewards,
)

PROMPTS = ["1+2=", "3*4=", "9-5=", "7+7=", "2*3=", "8-1="]


def reward_has_digit_one(prompts, completions, **kwargs):
    return [float("1" in c) for c in completions]


def reward_length(prompts, completions, **kwargs):
    return [len(c) / 6.0 for c in completions]


def make_trainer(cls, tmp_path, seed=0, reward=reward_has_digit_one, **kwargs):
    from datasets import Dataset
    from trl import GRPOConfig

    tok = build_tokenizer()
    torch.manual_seed(seed)
    model = build_model(
        tok,
        seed=seed,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
    )
    args = GRPOConfig(
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
        loss_type=kwargs.pop("loss_type", "grpo"),
        beta=0.0,
        temperature=1.0,
        scale_rewards=kwargs.pop("scale_rewards", "group"),
        dataloader_num_workers=0,
    )
    return cls(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tok,
        **kwargs,
    )


class Capture:
    """Records the advantages each step produced."""

    def __init__(self, trainer):
        self.advantages = []
        original = trainer._generate_and_score_completions

        def wrapped(inputs):
            out = original(inputs)
            self.advantages.append(out["advantages"].detach().clone())
            return out

        trainer._generate_and_score_completions = wrapped


@pytest.mark.parametrize("scale_rewards", ["group", "batch"])
def test_uniform_matches_stock_grpo(tmp_path, scale_rewards):
    from trl import GRPOTrainer

    from adaptive_rollouts.allocators.uniform import Uniform
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    stock = make_trainer(GRPOTrainer, tmp_path / "a", scale_rewards=scale_rewards)
    ours = make_trainer(AdaptiveGRPOTrainer, tmp_path / "b", scale_rewards=scale_rewards, allocator=Uniform())
    caps = [Capture(stock), Capture(ours)]
    from transformers import set_seed

    set_seed(0)
    stock.train()
    set_seed(0)
    ours.train()
    for a, b in zip(caps[0].advantages, caps[1].advantages, strict=True):
        assert a.abs().sum() > 0  # the check is not vacuous
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    losses = [[h["loss"] for h in t.state.log_history if "loss" in h] for t in (stock, ours)]
    assert len(losses[0]) == 2 and np.allclose(losses[0], losses[1], atol=1e-6)
    for p, q in zip(stock.model.parameters(), ours.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-6)
    assert [c.tolist() for c in ours.allocation_history] == [[2, 2, 2, 2, 2, 2]] * 2 or all(
        c.sum() == 12 for c in ours.allocation_history
    )


class Skewed:
    """Test allocator: two rounds, first 1 rollout each to prompts, then the rest to prompt 0."""

    def __init__(self):
        self.calls = []
        self.last_metrics = {"rounds": 2.0}

    def run(self, prompts, budget, sample):
        q = len(prompts)
        first = sample(np.arange(q), np.ones(q, dtype=int))
        second = sample(np.array([0, 1]), np.array([budget - q - 1, 1]))
        self.calls.append((list(prompts), [len(r) for r in first], [len(r) for r in second]))
        return [np.concatenate([first[i], second[i]]) if i < 2 else first[i] for i in range(q)]


def test_variable_groups_two_rounds(tmp_path):
    from adaptive_rollouts.advantages import group_advantages
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    alloc = Skewed()
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=alloc)
    cap = Capture(trainer)
    trainer.train()
    assert len(alloc.calls) == 2
    prompts, first, second = alloc.calls[0]
    assert first == [1] * 3 and second == [8, 1]  # 12 rows = 3 prompts x 4; rounds of 3 and 9
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]] * 2
    # advantages equal group_advantages on the true groups (prompt-major layout, singleton -> 0)
    rewards = torch.tensor(list(trainer._logs["rewards"]["reward_length"]))[-12:]
    expected = group_advantages(rewards, torch.tensor([0] * 9 + [1] * 2 + [2]), "grpo", eps=1e-4)
    torch.testing.assert_close(cap.advantages[-1], expected, atol=1e-5, rtol=1e-5)
    assert cap.advantages[-1][-1] == 0
    assert any("adaptive/rounds" in h for h in trainer.state.log_history)


def test_rejects_overspending_allocator(tmp_path):
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    class Greedy:
        def run(self, prompts, budget, sample):
            return sample(np.arange(len(prompts)), np.full(len(prompts), budget))

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Greedy())
    with pytest.raises(ValueError, match="budget"):
        trainer.train()


def test_loss_settings_map():
    assert aggregation_for_loss_type("grpo") == "seq-mean"
    assert aggregation_for_loss_type("dapo") == "token-mean"
    assert aggregation_for_loss_type("dr_grpo") == "constant"
    assert estimator_for_scale_rewards("none") == "drgrpo"
    with pytest.raises(ValueError, match="loss_type"):
        aggregation_for_loss_type("nope")
    with pytest.raises(ImportError, match="1.17"):
        check_trl_version("1.17.0")
    assert check_trl_version("1.16.0") == "1.16.0"


def test_assign_groups_equal_rows_whole_groups_when_possible():
    pieces = assign_groups_to_ranks([6, 2, 2, 2, 2, 2], 2)
    assert [sum(n for _, n in p) for p in pieces] == [8, 8]
    assert sorted(g for p in pieces for g, _ in p) == [0, 1, 2, 3, 4, 5]  # no group split
    split = assign_groups_to_ranks([5, 3], 2)  # 4 + 4: the 5-group must be split
    assert [sum(n for _, n in p) for p in split] == [4, 4]
    assert sum(n for p in split for g, n in p if g == 0) == 5
    with pytest.raises(ValueError, match="divisible"):
        assign_groups_to_ranks([3], 2)


def test_assign_groups_finds_whole_group_layout_whenever_one_exists():
    import itertools

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        world = int(rng.integers(2, 4))
        sizes = rng.integers(0, 7, size=int(rng.integers(1, 7)))
        if sizes.sum() == 0 or sizes.sum() % world:
            continue
        cap = sizes.sum() // world
        exists = any(
            all(sum(s for s, r in zip(sizes, owners) if r == k) == cap for k in range(world))
            for owners in itertools.product(range(world), repeat=len(sizes))
        )
        pieces = assign_groups_to_ranks(sizes.tolist(), world)
        assert [sum(n for _, n in p) for p in pieces] == [cap] * world
        totals = np.zeros(len(sizes), dtype=int)
        for p in pieces:
            for g, n in p:
                totals[g] += n
        assert totals.tolist() == sizes.tolist()
        split = len([g for p in pieces for g, _ in p]) > np.count_nonzero(sizes)
        assert split != exists, (sizes.tolist(), world, pieces)
        checked += 1
    assert checked > 50


def test_allocator_seconds_exclude_generation(tmp_path):
    import time

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    class Slow:
        """Sleeps 0.2 s outside sample() each step; generation time must not be counted."""

        def run(self, prompts, budget, sample):
            time.sleep(0.2)
            q = len(prompts)
            return sample(np.arange(q), np.full(q, budget // q))

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Slow())
    generation = [0.0]
    original = trainer._generation_round

    def timed(rows, store):
        start = time.perf_counter()
        time.sleep(0.3)  # generation made visibly slow
        out = original(rows, store)
        generation[0] += time.perf_counter() - start
        return out

    trainer._generation_round = timed
    trainer.train()
    assert generation[0] >= 0.6
    assert 0.4 <= trainer.allocator_seconds < 0.4 + 0.25


def test_rewards_for_allocator_rescale_and_errors():
    from types import SimpleNamespace

    from adaptive_rollouts.integrations.trl.trainer import AdaptiveGRPOTrainer

    fake = SimpleNamespace(reward_range=(-1.0, 1.0))
    split = AdaptiveGRPOTrainer._rewards_for_allocator
    out = split(fake, np.array([-1.0, 1.0, 0.0]), np.array([2, 1]), ["a", "b"])
    assert [o.tolist() for o in out] == [[0.0, 1.0], [0.5]]
    with pytest.raises(ValueError, match=r"'b'.*reward_range"):
        split(fake, np.array([0.0, 2.0]), np.array([1, 1]), ["a", "b"])
    with pytest.raises(ValueError, match=r"'a'.*no reward"):
        split(fake, np.array([np.nan, 0.0]), np.array([1, 1]), ["a", "b"])


def test_allocator_by_name_gets_aggregation_only_if_it_models_it():
    from adaptive_rollouts.integrations.trl.trainer import _make_allocator

    assert _make_allocator("posterior-progressive", "token-mean").aggregation == "token-mean"
    assert type(_make_allocator("vigor", "token-mean")).__name__ == "VIGOR"
    with pytest.raises(ValueError, match="unknown allocator"):
        _make_allocator("no-such-method", "seq-mean")

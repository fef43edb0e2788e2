"""AdaptiveGRPOTrainer on a tiny randomly initialised model (CPU, a few steps): parity with stock
GRPOTrainer under Uniform, variable groups over rounds, the rank layout."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import (  # noqa: E402
    Capture,
    Skewed,
    make_trainer,
    reward_has_digit_one,
    reward_length,
)

from adaptive_rollouts.integrations.trl import assign_groups_to_ranks, check_trl_version  # noqa: E402

_TIMING = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos"}


def assert_logs_equal_stock(stock, ours):
    """Every metric stock TRL logs is logged with the same value; ours adds adaptive/* and regime/* only."""
    assert len(stock.state.log_history) == len(ours.state.log_history)
    for a, b in zip(stock.state.log_history, ours.state.log_history, strict=True):
        extra = set(b) - set(a)
        assert all(k.startswith(("adaptive/", "regime/")) for k in extra), extra
        for key in set(a) - _TIMING:
            assert key in b, key
            if a[key] is None or b[key] is None:
                assert a[key] is b[key], key
            else:
                assert np.isclose(a[key], b[key], rtol=1e-5, atol=1e-6), (key, a[key], b[key])


def run_pair(tmp_path, config=None, **kwargs):
    from transformers import set_seed
    from trl import GRPOTrainer

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    stock = make_trainer(GRPOTrainer, tmp_path / "a", config=config, **kwargs)
    ours = make_trainer(AdaptiveGRPOTrainer, tmp_path / "b", config=config, allocator="uniform", **kwargs)
    caps = [Capture(stock), Capture(ours)]
    set_seed(0)
    stock.train()
    set_seed(0)
    ours.train()
    assert len(caps[0].advantages) == len(caps[1].advantages) > 0
    for a, b in zip(caps[0].advantages, caps[1].advantages, strict=True):
        assert a.abs().sum() > 0  # the check is not vacuous
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # float32 sums in another order differ by ~1e-7 per step; Adam divides by sqrt(v), which turns
    # that into up to ~1e-5 on a weight whose gradient is small (seen: 1.4e-5 after two steps)
    for p, q in zip(stock.model.parameters(), ours.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=5e-5, rtol=1e-4)
    assert_logs_equal_stock(stock, ours)
    return stock, ours


@pytest.mark.parametrize(
    "config",
    [
        {"scale_rewards": "group"},
        {"scale_rewards": "batch"},
        {"scale_rewards": "none", "loss_type": "dr_grpo"},
        {"multi_objective_aggregation": "normalize_then_sum"},
    ],
    ids=["group", "batch", "none-dr_grpo", "normalize_then_sum"],
)
def test_uniform_matches_stock_grpo(tmp_path, config):
    rewards = [reward_has_digit_one, reward_length]
    _, ours = run_pair(tmp_path, config={**config, "reward_weights": [1.0, 0.5]}, reward=rewards)
    assert [c.tolist() for c in ours.allocation_history] == [[4, 4, 4]] * 2
    losses = [h["loss"] for h in ours.state.log_history if "loss" in h]
    assert len(losses) == 2


def test_uniform_parity_weighted_rewards_iterations_accumulation(tmp_path):
    """Two weighted reward functions, num_iterations=2, gradient_accumulation_steps=2 (so
    steps_per_generation=2: one generation batch of 24 rows = 6 prompts serves 2 optimizer steps).
    SGD: our advantages (float64) differ from TRL's (float32) by ~1e-7, which Adam turns into +-lr
    moves of parameters whose gradient is ~0 after a few steps; SGD keeps the comparison exact."""
    config = {
        "optim": "sgd",
        "reward_weights": [0.7, 0.3],
        "num_iterations": 2,
        "gradient_accumulation_steps": 2,
        "max_steps": 4,
    }
    _, ours = run_pair(tmp_path, config=config, reward=[reward_has_digit_one, reward_length])
    assert [c.tolist() for c in ours.allocation_history] == [[4] * 6] * 2


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


def test_equal_prompt_weight_scales_advantages_per_group(tmp_path):
    from adaptive_rollouts.advantages import equal_prompt_weights, group_advantages
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    alloc = Skewed()
    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=alloc, equal_prompt_weight=True
    )
    assert trainer.aggregation == "prompt-mean"
    cap = Capture(trainer)
    trainer.train()
    rewards = torch.tensor(list(trainer._logs["rewards"]["reward_length"]))[-12:]
    ids = torch.tensor([0] * 9 + [1] * 2 + [2])
    plain = group_advantages(rewards, ids, "grpo", eps=1e-4)
    weights = torch.tensor([12 / (3 * 9)] * 9 + [12 / (3 * 2)] * 2 + [12 / 3])  # N / (Q' n_q)
    assert plain.abs().sum() > 0
    torch.testing.assert_close(cap.advantages[-1], plain * weights, atol=1e-5, rtol=1e-5)
    # every prompt's group carries the same total weight in the loss
    sums = torch.zeros(3).index_add_(0, ids, equal_prompt_weights(ids))
    torch.testing.assert_close(sums, torch.full((3,), 4.0))
    # the logs keep the estimator's advantages
    logged = torch.tensor(list(trainer._logs["advantages"])[-12:])
    torch.testing.assert_close(logged, plain, atol=1e-5, rtol=1e-5)


def test_equal_prompt_weight_refuses_token_level_losses(tmp_path):
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    with pytest.raises(ValueError, match="equal_prompt_weight"):
        make_trainer(
            AdaptiveGRPOTrainer, tmp_path, config={"loss_type": "dapo"}, allocator="uniform", equal_prompt_weight=True
        )


def test_rejects_overspending_allocator(tmp_path):
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    class Greedy:
        def run(self, prompts, budget, sample):
            return sample(np.arange(len(prompts)), np.full(len(prompts), budget))

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Greedy())
    with pytest.raises(ValueError, match="budget"):
        trainer.train()


def test_trl_version_range():
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
    original = trainer._generate_call

    def timed(rows, n):
        start = time.perf_counter()
        time.sleep(0.3)  # generation made visibly slow
        out = original(rows, n)
        generation[0] += time.perf_counter() - start
        return out

    trainer._generate_call = timed
    trainer.train()
    assert generation[0] >= 0.6
    assert 0.4 <= trainer.allocator_seconds < 0.4 + 0.25


@pytest.mark.parametrize("name", ["layout", "settings", "scoring"])
def test_trl_docstring_examples_run(name):
    import doctest
    import importlib

    module = importlib.import_module(f"adaptive_rollouts.integrations.trl.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0

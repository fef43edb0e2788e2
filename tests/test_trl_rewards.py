"""What the allocator is told: unscored rollouts, rewards of any range, one prompt per dataset row,
the trainer's estimator and aggregation."""

from __future__ import annotations

import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, Recorder, Skewed, logged, make_trainer, reward_has_digit_one  # noqa: E402

from adaptive_rollouts.allocators import VIGOR, VIP, PosteriorProgressive, Uniform  # noqa: E402
from adaptive_rollouts.integrations.trl import (  # noqa: E402
    AdaptiveGRPOTrainer,
    aggregation_for_loss_type,
    estimator_for,
)
from adaptive_rollouts.types import Draw  # noqa: E402


def reward_none_on_even_length(prompts, completions, **kwargs):
    """Scores odd-length completions only (None: this rollout cannot be scored)."""
    return [None if len(c) % 2 == 0 else float("1" in c) for c in completions]


# ---------------------------------------------------------------- unscored rollouts
@pytest.mark.parametrize("inner", [Uniform, VIGOR], ids=["uniform", "vigor"])
def test_none_reward_gives_zero_advantage_and_the_allocator_only_scored_rewards(tmp_path, caplog, inner):
    alloc = Recorder(inner())
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_none_on_even_length, allocator=alloc)
    cap = Capture(trainer)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert "All reward functions returned None" in caplog.text  # TRL's own warning, as in stock
    rewards = torch.tensor([r for step in cap.rewards for r in step["reward_none_on_even_length"]])
    advantages = torch.cat(cap.advantages)
    unscored = torch.isnan(rewards)
    assert 0 < int(unscored.sum()) < 24  # not vacuous
    assert (advantages[unscored] == 0).all()
    assert torch.isfinite(advantages).all()
    for step, seen in enumerate(alloc.seen):  # the allocator got the scored rewards only, no made-up 0
        counts = trainer.allocation_history[step]
        assert sum(s.size for s in seen) == int(counts.sum()) - int(unscored[step * 12 : (step + 1) * 12].sum())
        assert all(np.isin(s, [0.0, 1.0]).all() for s in seen)
    assert logged(trainer, "adaptive/unscored") == [float(unscored[:12].sum()), float(unscored[12:].sum())]
    # the unscored rollouts' tokens are spent and trained on (advantage 0): the batch's completion tokens
    assert logged(trainer, "adaptive/tokens_spent") == [float(out["completion_mask"].sum()) for out in cap.outputs]


def test_none_reward_advantages_use_the_scored_rollouts_of_the_group(tmp_path):
    from adaptive_rollouts.advantages import group_advantages

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_none_on_even_length, allocator="uniform")
    rewards_per_func = torch.tensor([[1.0], [0.0], [float("nan")], [1.0], [float("nan")], [0.0]])
    ids = torch.tensor([0, 0, 0, 0, 1, 1])
    got = trainer._advantages(rewards_per_func, ids)
    scored = group_advantages(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 0, 0]), "grpo", eps=1e-4)
    torch.testing.assert_close(got[[0, 1, 3]], scored)
    assert got[2] == 0 and got[4] == 0 and got[5] == 0  # group 1 has one scored rollout: no baseline


def test_rollout_collector_takes_fewer_rewards_only_from_a_draw_that_says_so():
    from adaptive_rollouts.allocators.base import RolloutCollector
    from adaptive_rollouts.types import Draw

    def sample(indices, counts):
        return [np.ones(int(c) - 1) for c in counts]  # one rollout of each prompt unscored

    with pytest.raises(ValueError, match="expected 3"):
        RolloutCollector(["a", "b"], sample).draw(np.array([3, 3]))

    def draw(indices, counts):
        return Draw([np.ones(int(c) - 1) for c in counts], np.ones(len(counts), dtype=np.int64))

    collector = RolloutCollector(["a", "b"], draw)
    collector.draw(np.array([3, 2]))
    assert collector.counts.tolist() == [3, 2] and collector.scored.tolist() == [2, 1]
    assert collector.unscored.tolist() == [1, 1]

    def too_many(indices, counts):
        return Draw([np.ones(int(c) + 1) for c in counts], np.zeros(len(counts), dtype=np.int64))

    with pytest.raises(ValueError, match="expected 2"):
        RolloutCollector(["a"], too_many).draw(np.array([2]))

    def over_unscored(indices, counts):
        return Draw([np.ones(0) for c in counts], np.array([int(c) + 1 for c in counts]))

    with pytest.raises(ValueError, match=r"unscored=3 is outside \[0, 2\]"):
        RolloutCollector(["a"], over_unscored).draw(np.array([2]))


@pytest.mark.parametrize("make", [VIGOR, lambda: PosteriorProgressive("beta"), lambda: VIP("beta")])
def test_allocators_spend_the_budget_and_learn_from_scored_rewards_only(make):
    rng = np.random.default_rng(0)

    def sample(indices, counts):  # a third of the rollouts unscored
        out = []
        for c in counts:
            r = (rng.random(int(c)) < 0.5).astype(float)
            out.append(r[rng.random(int(c)) > 1 / 3])
        return Draw(out, np.asarray(counts) - np.array([r.size for r in out]))

    alloc = make()
    prompts = [f"train#{i}" for i in range(6)]
    rewards = alloc.run(prompts, 36, sample)
    assert sum(r.size for r in rewards) < 36  # unscored rollouts are not in the rewards
    m = alloc.last_metrics
    assert m["rollouts_spent"] == 36 and m["unscored"] == 36 - sum(r.size for r in rewards)


# ---------------------------------------------------------------- rewards of any range
def reward_negative_length(prompts, completions, **kwargs):
    return [-3.0 * len(c) for c in completions]  # unbounded below, never in [0, 1]


@pytest.mark.parametrize(
    "reward,weights",
    [
        ([reward_has_digit_one, reward_has_digit_one], [1.0, 0.67]),  # sum up to 1.67
        ([reward_negative_length], None),
        ([reward_has_digit_one] * 10, [0.1] * 10),  # float32 sum overshoots 1.0
    ],
    ids=["two-in-0-1", "negative", "ten-weights"],
)
def test_rewards_of_any_range_train_by_default(tmp_path, reward, weights):
    alloc = Recorder(VIGOR())
    config = {} if weights is None else {"reward_weights": weights}
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward, config=config, allocator=alloc)
    trainer.train()
    assert len(trainer.allocation_history) == 2
    flat = np.concatenate([s for seen in alloc.seen for s in seen])
    assert flat.size == 24 and flat.min() >= 0.0 and flat.max() <= 1.0


def test_threshold_and_success_fn_define_success(tmp_path):
    alloc = Recorder(Uniform())
    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path / "t", reward=reward_negative_length, allocator=alloc, reward_threshold=-9.0
    )
    trainer.train()
    raw = np.array(list(trainer._logs["rewards"]["reward_negative_length"]))[-12:]
    assert sorted(np.concatenate(alloc.seen[-1]).tolist()) == sorted((raw >= -9.0).astype(float).tolist())
    alloc = Recorder(Uniform())
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path / "f",
        reward=reward_negative_length,
        allocator=alloc,
        success_fn=lambda r: min(1.0, -r / 15.0),
    )
    trainer.train()
    raw = np.array(list(trainer._logs["rewards"]["reward_negative_length"]))[-12:]
    assert sorted(np.concatenate(alloc.seen[-1]).tolist()) == pytest.approx(sorted(np.minimum(1, -raw / 15)))
    with pytest.raises(ValueError, match="at most one"):
        make_trainer(
            AdaptiveGRPOTrainer, tmp_path / "x", reward_range=(0, 1), reward_threshold=0.5, allocator="uniform"
        )


def test_reward_range_still_checks_its_bounds(tmp_path):
    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path, reward=reward_negative_length, reward_range=(0, 1), allocator="uniform"
    )
    with pytest.raises(ValueError, match=r"train#\d.*outside reward_range"):
        trainer.train()


# ---------------------------------------------------------------- one prompt per dataset row
def test_rows_with_the_same_text_stay_two_prompts_with_their_own_columns(tmp_path):
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": ["1+1=", "1+1=", "2+2="], "answer": ["x", "y", "z"]})

    def reward_answer_is_x(prompts, completions, answer, **kwargs):
        return [float(a == "x") for a in answer]

    alloc = Recorder(Uniform())
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        reward=reward_answer_is_x,
        dataset=dataset,
        allocator=alloc,
        config={"max_steps": 1},
    )
    trainer.train()
    assert trainer.allocation_history[0].tolist() == [4, 4, 4]
    means = sorted(float(s.mean()) for s in alloc.seen[0])
    assert means == [0.0, 0.0, 1.0]  # the row with answer "x" is scored against its own answer


def test_user_code_sees_the_dataset_rows_unchanged(tmp_path):
    """No column is added: the dataset, the rows given to training_step, and the reward functions'
    keyword arguments are stock TRL's; rows with the same text still are two prompts."""
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": ["1+1=", "1+1=", "2+2="], "answer": ["x", "y", "z"]})
    seen_kwargs: list[set] = []

    def reward_answer_is_x(prompts, completions, answer, **kwargs):
        seen_kwargs.append(set(kwargs))
        return [float(a == "x") for a in answer]

    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        reward=reward_answer_is_x,
        dataset=dataset,
        allocator="uniform",
        config={"max_steps": 1},
    )
    assert trainer.train_dataset.column_names == ["prompt", "answer"]
    batches = []
    original = trainer.training_step

    def recording(model, inputs, num_items_in_batch=None):
        batches.append(inputs)
        return original(model, inputs, num_items_in_batch)

    trainer.training_step = recording
    trainer.train()
    rows = batches[0]
    assert len(rows) == 12 and all(set(row) == {"prompt", "answer"} for row in rows)
    assert sorted({(r["prompt"], r["answer"]) for r in rows}) == [("1+1=", "x"), ("1+1=", "y"), ("2+2=", "z")]
    stock_kwargs = {"completion_ids", "trainer_state", "log_extra", "log_metric"}  # what TRL 1.16 passes
    assert seen_kwargs and all(k == stock_kwargs for k in seen_kwargs)
    assert trainer.allocation_history[0].tolist() == [4, 4, 4]  # three prompts, not two


def test_the_same_row_twice_in_one_batch_is_an_error():
    from adaptive_rollouts.integrations.trl.layout import KeyedRow, group_batch, key_of_row

    keys = [key_of_row(KeyedRow({"prompt": "1+1="}, i)) for i in (0, 0, 1, 1)]
    assert group_batch(keys, 2) == (["train#0", "train#1"], [0, 2])
    with pytest.raises(ValueError, match="train#0.*x4"):
        group_batch(keys[:2] * 2, 2)
    assert key_of_row({"prompt": "a", "answer": 1}) != key_of_row({"prompt": "a", "answer": 2})  # no position


# ---------------------------------------------------------------- estimator and aggregation
def test_estimator_and_aggregation_follow_the_config():
    assert estimator_for("group") == "grpo" and estimator_for("none") == "drgrpo"
    assert estimator_for("batch") == "drgrpo" and estimator_for(True) == "grpo"
    assert estimator_for("none", "rloo") == "rloo" and estimator_for("batch", "rloo") == "rloo"
    assert estimator_for("batch", None, "normalize_then_sum") == "grpo"
    with pytest.raises(ValueError, match="scale_rewards='none'.*'batch'"):
        estimator_for("group", "rloo")
    with pytest.raises(ValueError, match="advantage_estimator"):
        estimator_for("group", "ppo")
    assert aggregation_for_loss_type("luspo") == "constant" and aggregation_for_loss_type("dapo") == "token-mean"
    with pytest.raises(ValueError, match="loss_type"):
        aggregation_for_loss_type("nope")


@pytest.mark.parametrize(
    "config,extra,estimator,aggregation",
    [
        ({"scale_rewards": "none", "loss_type": "dr_grpo"}, {}, "drgrpo", "constant"),
        ({"loss_type": "luspo", "importance_sampling_level": "sequence"}, {}, "grpo", "constant"),
        ({"scale_rewards": "batch", "loss_type": "dapo"}, {"advantage_estimator": "rloo"}, "rloo", "token-mean"),
    ],
    ids=["drgrpo", "luspo", "rloo-batch"],
)
def test_named_allocator_gets_estimator_and_aggregation(tmp_path, config, extra, estimator, aggregation):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, config=config, allocator="posterior-progressive", **extra)
    assert (trainer.allocator.estimator, trainer.allocator.aggregation) == (estimator, aggregation)


def test_allocator_object_is_configured_from_the_trainer(tmp_path, caplog):
    alloc = VIP("beta", estimator="rloo", aggregation="token-mean")
    with caplog.at_level(logging.WARNING):
        trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=alloc, config={"scale_rewards": "none"})
    assert trainer.allocator is alloc and (alloc.estimator, alloc.aggregation) == ("drgrpo", "seq-mean")
    assert "estimator='rloo'" in caplog.text and "aggregation='token-mean'" in caplog.text
    paper = VIP("beta", estimator="drgrpo")  # aggregation None: VIP's own variance objective, kept
    make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=paper, config={"scale_rewards": "none"})
    assert paper.aggregation is None


def test_rloo_with_group_scaling_is_refused_and_batch_scaling_applied(tmp_path):
    with pytest.raises(ValueError, match="scale_rewards='group'"):
        make_trainer(AdaptiveGRPOTrainer, tmp_path, advantage_estimator="rloo", allocator="uniform")
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        advantage_estimator="rloo",
        config={"scale_rewards": "batch"},
        allocator="uniform",
    )
    rewards = torch.tensor([[1.0], [0.0], [1.0], [0.0], [0.0], [1.0]])
    ids = torch.tensor([0, 0, 0, 1, 1, 1])
    r = rewards[:, 0]
    rloo = torch.tensor([0.5, -1.0, 0.5, -0.5, -0.5, 1.0])
    torch.testing.assert_close(trainer._advantages(rewards, ids), rloo / (r.std() + 1e-4))


def test_skewed_allocator_gets_success_signal_per_round(tmp_path):
    alloc = Skewed()
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=alloc)
    trainer.train()
    first, second = alloc.answers[0]
    assert [len(r) for r in first] == [1, 1, 1] and [len(r) for r in second] == [8, 1]


def test_default_allocator_is_the_recommended_one_built_with_the_trainer_settings(tmp_path):
    from adaptive_rollouts.allocators import make_allocator

    config = {"scale_rewards": "none", "loss_type": "dapo"}
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, config=config)  # allocator=None
    assert type(trainer.allocator) is type(make_allocator())
    assert (trainer.allocator.estimator, trainer.allocator.aggregation) == ("drgrpo", "token-mean")
    trainer.train()
    spent = [int(c.sum()) for c in trainer.allocation_history]  # the default saves: at most the budget
    assert trainer.kind == type(make_allocator()).kind and len(spent) == 2 and all(0 <= n <= 12 for n in spent)
    assert logged(trainer, "adaptive/rollouts_spent") == spent
    assert logged(trainer, "adaptive/rollouts_saved") == [12 - n for n in spent]


@pytest.mark.parametrize("predictor", ["gp", "paper-gp"])
def test_text_predictors_see_prompt_texts_under_row_keys(tmp_path, predictor):
    from test_trl_support import PROMPTS

    from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts

    table = FeatureTable(PROMPTS, np.random.default_rng(0).normal(size=(len(PROMPTS), 4)))  # keyed by text
    alloc = VIP(predictor, features=table, estimator="grpo", aggregation="seq-mean")
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=alloc, config={"max_steps": 4})
    trainer.train()
    assert [int(c.sum()) for c in trainer.allocation_history] == [12] * 4
    gp = alloc.predictor
    if predictor == "gp":  # texts registered per batch under the row keys
        assert isinstance(gp.features, KeyedTexts) and gp.features._texts["train#0"] == PROMPTS[0]
    else:  # the pool is the dataset's rows, keyed as the trainer keys them
        assert sorted(gp.features.keys) == sorted(f"train#{i}" for i in range(len(PROMPTS)))
        np.testing.assert_allclose(gp.features.encode(["train#3"]), table.encode([PROMPTS[3]]))

"""The real AdaptiveRolloutTrainer, built from adaptive_ppo.yaml, trained by verl's fit() on CPU
(see harness.py for what is real and what is faked)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")
torch = pytest.importorskip("torch")

import harness as H  # noqa: E402
import harness_plugins as plugins  # noqa: E402
from harness import rows_by_uid, step_metrics  # noqa: E402


def test_single_shot_vip_on_row_keys_with_this_steps_metrics(run):
    trainer, manager, logged = run(
        3, **{"adaptive.allocator": "vip", "adaptive.encoder": "harness_plugins:HashEncoder"}
    )
    assert type(trainer.allocator).__name__ == "VIP" and trainer.single_shot
    # keys are training-set rows, texts only features
    from adaptive_rollouts.integrations.verl.rows import dataset_source

    source = dataset_source(list(trainer.config.data.train_files))
    assert set(trainer.texts._texts) == {f"{source}#{i}" for i in range(8)}
    assert trainer.texts._texts[f"{source}#3"] == "question q3"
    for step, update in enumerate(trainer.actor_rollout_wg.updates, start=1):
        groups = rows_by_uid(update)
        assert sum(len(g) for g in groups.values()) == trainer.budget == 16
        m = step_metrics(logged, step)
        scores = [r["score"] for g in groups.values() for r in g]
        # the logged allocation metrics are this step's (not the previous plan's mixed in)
        assert m["adaptive/rollouts_spent"] == 16 and m["adaptive/effective_rollouts"] <= 16
        assert m["adaptive/mean_reward"] == pytest.approx(np.mean(scores))
        assert m["adaptive/count_max"] == max(len(g) for g in groups.values())
        assert "regime/zero_variance_fraction" in m
        # every rollout's completion tokens (its response mask): here each answer is 3 tokens
        assert m["adaptive/tokens_spent"] == sum(r["loss_tokens"] for g in groups.values() for r in g) == 48
        assert m["adaptive/tokens_saved"] == 0.0  # a "fill" allocator on equal lengths saves none
        assert m["adaptive/tokens_spent_total"] == 48 * step
    # after one epoch VIP knows q0 (p=0) never succeeds: by step 3 counts are uneven
    assert len({len(g) for g in rows_by_uid(trainer.actor_rollout_wg.updates[2]).values()}) > 1


def test_progressive_vigor_rounds_become_one_group_per_prompt(run):
    from verl.trainer.ppo import core_algos

    trainer, manager, logged = run(2, **{"adaptive.allocator": "vigor"})
    assert not trainer.single_shot
    assert len(manager.dispatched) >= 2 * 4  # VIGOR's 4 rounds per step, each a dispatch
    for update in trainer.actor_rollout_wg.updates:
        groups = rows_by_uid(update)
        assert len(groups) == 4  # one advantage group per prompt, whatever the rounds
        assert sum(len(g) for g in groups.values()) == 16
        rows = [r for g in groups.values() for r in g]
        index = np.array([r["uid"] for r in rows], dtype=object)
        rewards = torch.zeros(len(rows), 2)
        rewards[:, -1] = torch.tensor([r["score"] for r in rows])
        ref, _ = core_algos.compute_grpo_outcome_advantage(rewards, torch.ones(len(rows), 2), index)
        np.testing.assert_allclose([r["advantage"] for r in rows], ref[:, 0].numpy(), atol=1e-5)


def test_zero_rollout_prompt_is_reported_and_untrained(run):
    trainer, manager, logged = run(1, **{"adaptive.allocator": "harness_plugins:SkipLast"})
    alloc = trainer.allocator
    prompts, rewards = alloc.observed[0]
    assert [len(r) for r in rewards] == [8, 4, 4, 0]
    assert step_metrics(logged, 1)["adaptive/skipped"] == 1
    assert len(rows_by_uid(trainer.actor_rollout_wg.updates[0])) == 3


def test_failed_session_single_shot_trains_the_rest_and_pads(run):
    llm = H.FakeLLM(H.P)
    llm.fail = {(1, 2, 0)}  # step 1, question q2, its first call crashes
    trainer, manager, logged = run(1, llm=llm, **{"adaptive.allocator": "harness_plugins:SkipLast"})
    prompts, rewards = trainer.allocator.observed[0]
    assert [len(r) for r in rewards] == [8, 4, 3, 0]  # the scored rollouts only, nothing made up
    m = step_metrics(logged, 1)
    assert m["adaptive/missing_rollouts"] == 1 and m["adaptive/failed_sessions"] == 1
    update = trainer.actor_rollout_wg.updates[0]
    real = [r for r in update["rows"] if not r["padding"]]
    pad = [r for r in update["rows"] if r["padding"]]
    assert len(real) == 15 and len(pad) == 1  # verl pads to its batch multiple
    assert pad[0]["advantage"] == 0.0
    assert m["adaptive/tokens_spent"] == sum(r["loss_tokens"] for r in real) == 45  # the failed session: 0 tokens
    # against Uniform's 4 each: q0's 4 extra rollouts cost 3 tokens each, the skipped q3's 4 are
    # priced at the step's mean, 45 / 16 (q1 and q2 got Uniform's count)
    assert m["adaptive/tokens_saved"] == pytest.approx(-4 * 3 + 4 * 45 / 16)


def test_failed_session_progressive_is_redispatched(run):
    llm = H.FakeLLM(H.P)
    llm.fail = {(1, 1, 0)}
    trainer, manager, logged = run(1, llm=llm, **{"adaptive.allocator": "vigor"})
    m = step_metrics(logged, 1)
    assert m["adaptive/failed_sessions"] == 1 and m["adaptive/redispatched_rollouts"] == 1
    assert m["adaptive/missing_rollouts"] == 0 and m["adaptive/incomplete_step"] == 0
    update = trainer.actor_rollout_wg.updates[0]
    assert sum(len(g) for g in rows_by_uid(update).values()) == 16


def test_persistently_failing_prompt_trains_what_exists(run):
    llm = H.FakeLLM(H.P)
    llm.fail = {(1, 3, c) for c in range(64)}  # q3 never answers
    trainer, manager, logged = run(1, llm=llm, **{"adaptive.allocator": "vigor", "adaptive.session_retries": 1})
    m = step_metrics(logged, 1)
    assert m["adaptive/incomplete_step"] == 1 and m["adaptive/missing_rollouts"] > 0
    assert "adaptive/effective_rollouts" not in m  # the allocator did not finish: no stale allocation metrics
    prompts = {r["prompt"] for r in trainer.actor_rollout_wg.updates[0]["rows"] if not r["padding"]}
    assert "question q3" not in prompts and "question q0" in prompts


def test_multi_turn_tool_agent_one_reward_per_session(run):
    from verl.trainer.ppo import core_algos

    llm = H.FakeLLM(H.P, tool_first=True)
    trainer, manager, logged = run(
        1,
        llm=llm,
        **{"adaptive.allocator": "vigor", "actor_rollout_ref.rollout.agent.default_agent_loop": "retrieval_agent"},
    )
    assert llm.tool_calls == 16  # every session called the tool once
    update = trainer.actor_rollout_wg.updates[0]
    rows = [r for r in update["rows"] if not r["padding"]]
    assert len(rows) == 32  # two outputs (turns) per session, 16 sessions
    m = step_metrics(logged, 1)
    assert m["adaptive/rollouts_spent"] == 16
    # a session's completion tokens: the model's tokens of both its outputs (the tool result masked out)
    assert m["adaptive/tokens_spent"] == sum(r["loss_tokens"] for r in rows) == 16 * 6
    sessions = {}
    for r in rows:
        round_uid, s, _ = r["key"].rsplit("_", 2)  # a round's uid; r["uid"] is the prompt's
        sessions.setdefault((round_uid, s), []).append(r)
    assert len(sessions) == 16 and all(len(v) == 2 for v in sessions.values())
    # a session's rows share one advantage, grouped over sessions (not rows) of the prompt
    finals = [max(v, key=lambda r: int(r["key"].rsplit("_", 1)[1])) for v in sessions.values()]
    index = np.array([r["uid"] for r in finals], dtype=object)
    rewards = torch.zeros(len(finals), 2)
    rewards[:, -1] = torch.tensor([r["score"] for r in finals])
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards, torch.ones(len(finals), 2), index)
    for session, expected in zip(sessions.values(), ref[:, 0].tolist()):
        assert [r["advantage"] for r in session] == pytest.approx([expected, expected], abs=1e-5)


def test_two_datasets_with_colliding_indices_are_distinct_prompts(run, tmp_path):
    a = H.write_dataset(str(tmp_path / "a.parquet"), [0, 1, 2, 3])
    b = H.write_dataset(str(tmp_path / "b.parquet"), [4, 5, 6, 7])  # extra_info.index 0..3 again
    trainer, manager, logged = run(1, files=[a, b], **{"adaptive.allocator": "uniform", "data.train_batch_size": 8})
    keys = list(trainer.regime._last)
    assert len(keys) == 8 and len(set(keys)) == 8
    assert all(k.startswith(f"{tmp_path.name}/a.parquet+{tmp_path.name}/b.parquet#") for k in keys)


def test_prompt_key_index_collides_across_datasets(run, tmp_path):
    a = H.write_dataset(str(tmp_path / "a.parquet"), [0, 1, 2, 3])
    b = H.write_dataset(str(tmp_path / "b.parquet"), [4, 5, 6, 7])
    with pytest.raises(ValueError, match="duplicates"):
        run(
            1,
            files=[a, b],
            **{"adaptive.allocator": "uniform", "adaptive.prompt_key": "index", "data.train_batch_size": 8},
        )


@pytest.mark.parametrize("mode", ["token-sum", "seq-mean-token-sum"])
def test_token_sum_losses_map_to_constant(run, mode):
    trainer, manager, logged = run(
        1,
        **{
            "adaptive.allocator": "vip",
            "adaptive.encoder": "harness_plugins:HashEncoder",
            "actor_rollout_ref.actor.loss_agg_mode": mode,
        },
    )
    assert trainer.allocator.aggregation == "constant"
    assert len(trainer.actor_rollout_wg.updates) == 1


def test_plus_minus_one_rewards(run, tmp_path):
    f = H.write_dataset(str(tmp_path / "pm.parquet"), list(range(8)), data_source="pm1")
    trainer, manager, logged = run(
        2, files=[f], **{"adaptive.allocator": "vip", "adaptive.encoder": "harness_plugins:HashEncoder"}
    )
    scores = {r["score"] for r in trainer.actor_rollout_wg.updates[0]["rows"] if not r["padding"]}
    assert scores <= {-1.0, 1.0} and -1.0 in scores
    m = step_metrics(logged, 1)
    assert 0.0 <= m["adaptive/mean_reward"] <= 1.0  # the allocator sees successes in [0, 1]
    assert trainer.signal.state_dict()["seen_low"] == -1.0


def test_plus_minus_one_rewards_outside_a_declared_range_raise(run, tmp_path):
    f = H.write_dataset(str(tmp_path / "pm.parquet"), list(range(8)), data_source="pm1")
    with pytest.raises(ValueError, match="reward_range"):
        run(1, files=[f], **{"adaptive.allocator": "uniform", "adaptive.reward_range": "[0,1]"})


@pytest.mark.parametrize(
    "allocator",
    [
        {"adaptive.allocator": "vip", "adaptive.encoder": "harness_plugins:HashEncoder"},
        {"adaptive.allocator": "harness_plugins:SaveSingleShot"},  # saving: skips, fewer rollouts
        {"adaptive.allocator": "harness_plugins:SaveProgressive"},
    ],
    ids=["vip", "saving-single-shot", "saving-progressive"],
)
def test_save_resume_matches_uninterrupted_and_state_precedes_completion(run, tmp_path, allocator):
    plugins.StateCheck.seen.clear()
    common = {
        **allocator,
        "trainer.save_freq": 2,
        "trainer.checkpoint_callback_class": "harness_plugins.StateCheck",
    }
    full, _, full_log = run(4, root=str(tmp_path / "full"), **common)
    run(2, root=str(tmp_path / "resumed"), **common)
    assert plugins.StateCheck.seen[-1] == {
        "step": 2,
        "async_save": False,
        "allocator_state": True,
        "latest_marker": True,
    }
    shutil.copytree(tmp_path / "resumed", tmp_path / "stateless")
    os.remove(tmp_path / "stateless" / "ckpt" / "global_step_2" / "adaptive_allocator.safetensors")
    resume = {**common, "trainer.resume_mode": "auto"}
    resumed, _, resumed_log = run(4, root=str(tmp_path / "resumed"), **resume)
    assert resumed.actor_rollout_wg.loaded  # verl's own resume ran
    assert len(resumed.actor_rollout_wg.updates) == 2  # steps 3 and 4
    assert H.trained_counts(full.actor_rollout_wg)[2:] == H.trained_counts(resumed.actor_rollout_wg)
    spending = ["rollouts_spent", "rollouts_saved", "skipped", "trained_rows", "padding_rows", "response_tokens"]
    spending += ["tokens_spent", "tokens_saved", "tokens_spent_total", "tokens_saved_total", "rollouts_spent_total"]
    for step in (3, 4):  # what the resumed steps spent, saved, skipped and padded is the uninterrupted run's
        expected, got = step_metrics(full_log, step), step_metrics(resumed_log, step)
        assert [got["adaptive/" + k] for k in spending] == [expected["adaptive/" + k] for k in spending]
        if "Save" in allocator["adaptive.allocator"]:  # the resumed steps did skip and save
            assert got["adaptive/skipped"] >= 1 and got["adaptive/rollouts_saved"] > 0
    # the same resume without the allocator's state allocates differently: the check bites
    stateless, _, _ = run(4, root=str(tmp_path / "stateless"), **resume)
    assert H.trained_counts(full.actor_rollout_wg)[2:] != H.trained_counts(stateless.actor_rollout_wg)


def test_async_save_still_has_allocator_state_at_on_save(run, tmp_path):
    plugins.StateCheck.seen.clear()
    run(
        1,
        **{
            "adaptive.allocator": "uniform",
            "trainer.save_freq": 1,
            "trainer.checkpoint_callback_class": "harness_plugins.StateCheck",
            "actor_rollout_ref.actor.checkpoint.async_save": "true",
        },
    )
    assert plugins.StateCheck.seen == [{"step": 1, "async_save": True, "allocator_state": True, "latest_marker": False}]


def test_vip_paper_gp_lives_on_the_training_set_pool(run):
    trainer, manager, logged = run(
        2, **{"adaptive.allocator": "vip-paper", "adaptive.encoder": "harness_plugins:HashEncoder"}
    )
    predictor = trainer.allocator.predictor
    assert type(predictor).__name__ == "PaperGP" and len(predictor._keys) == 8  # every training row
    assert trainer.allocator.estimator == "grpo"  # the trainer's advantage estimator (adaptive_grpo) reaches it
    assert [sum(len(g) for g in rows_by_uid(u).values()) for u in trainer.actor_rollout_wg.updates] == [16, 16]


def test_the_yaml_default_is_the_recommended_allocator(run):
    from adaptive_rollouts.allocators import make_allocator

    trainer, manager, logged = run(2)  # adaptive.allocator: null in adaptive_ppo.yaml
    assert type(trainer.allocator) is type(make_allocator())
    assert (trainer.allocator.estimator, trainer.allocator.aggregation) == ("grpo", "token-mean")
    assert not trainer.single_shot and trainer.kind == "save"  # the default spends at most the budget
    for step, update in enumerate(trainer.actor_rollout_wg.updates, start=1):
        m = step_metrics(logged, step)
        groups = rows_by_uid(update)
        # one group per prompt that got rollouts; every rollout it spent is trained on, once
        assert len(groups) == 4 - m["adaptive/skipped"]
        assert sum(len(g) for g in groups.values()) == m["adaptive/rollouts_spent"] == 16 - m["adaptive/rollouts_saved"]
        assert m["adaptive/rollouts_spent"] <= 16 and m["adaptive/padding_rows"] == 16 - m["adaptive/rollouts_spent"]

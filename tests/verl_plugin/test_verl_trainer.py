"""The plug-in's pieces on their own: settings, allocator construction, row keys, session grouping,
feedback, TransferQueue waiting, registration. The trainer as a whole: test_verl_harness.py."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")
tu = pytest.importorskip("verl.utils.tensordict_utils")

from adaptive_rollouts.bridge import scored_draw, step_log, step_values  # noqa: E402
from adaptive_rollouts.fingerprints import RegimeTracker  # noqa: E402
from adaptive_rollouts.integrations.verl import config as C  # noqa: E402
from adaptive_rollouts.integrations.verl import rollouts as R  # noqa: E402
from adaptive_rollouts.integrations.verl import rows as W  # noqa: E402
from adaptive_rollouts.integrations.verl import steps as S  # noqa: E402
from adaptive_rollouts.success import SuccessSignal  # noqa: E402


def test_check_counts_and_assign_errors():
    assert S.check_counts([3, 5], 2, 8).tolist() == [3, 5]
    with pytest.raises(ValueError, match="sum to 7, budget is 8"):
        S.check_counts([3, 4], 2, 8)
    with pytest.raises(ValueError, match="negative"):
        S.check_counts([9, -1], 2, 8)
    with pytest.raises(ValueError, match="shape"):
        S.check_counts([8], 2, 8)
    with pytest.raises(ValueError, match="non-integer"):
        S.check_counts([4.5, 3.5], 2, 8)
    # a saving allocator spends at most the budget: fewer is fine, zeros are skipped prompts, more is not
    assert S.check_counts([0, 5], 2, 8, "save").tolist() == [0, 5]
    assert S.check_counts([0, 0], 2, 8, "save").tolist() == [0, 0]
    assert S.check_counts([3, 5], 2, 8, "save").tolist() == [3, 5]
    with pytest.raises(ValueError, match="sum to 9, budget is 8.*'save'"):
        S.check_counts([4, 5], 2, 8, "save")
    with pytest.raises(ValueError, match="negative"):
        S.check_counts([-1, 5], 2, 8, "save")
    with pytest.raises(ValueError, match="sum to 5, budget is 8.*'fill'"):
        S.check_counts([0, 5], 2, 8)
    batch = tu.get_tensordict({"uid": np.array(["a", "b"], dtype=object), "x": torch.zeros(2, 1)})
    with pytest.raises(ValueError, match="counts has shape"):
        S.assign_rollout_counts(batch, [1, 2, 3])
    assert S.assign_rollout_counts(batch, [0, 5])["__rollout_n__"].tolist() == [0, 5]


def test_allocator_kind_is_declared_or_fill():
    class Saver:
        kind = "save"

    class Odd:
        kind = "maybe"

    from adaptive_rollouts.types import allocator_kind  # what the trainer reads

    assert allocator_kind(object()) == "fill" and allocator_kind(Saver()) == "save"
    with pytest.raises(ValueError, match="Odd.kind must be 'fill' or 'save', got 'maybe'"):
        allocator_kind(Odd())


def test_batch_metrics_count_padding_apart_from_trajectories():
    tags = [{"response_len": 3}, {"response_len": 7}, {"is_padding": True, "response_len": 1}] + [{"is_padding": True}]
    m = S.batch_metrics(tags)
    assert m == {"adaptive/trained_rows": 2.0, "adaptive/response_tokens": 10.0, "adaptive/padding_rows": 2.0}
    assert S.batch_metrics([])["adaptive/trained_rows"] == 0.0


def test_every_verl_loss_agg_mode_has_an_aggregation():
    from verl.trainer.ppo.core_algos import agg_loss

    mat, mask = torch.ones(2, 3), torch.ones(2, 3)
    for mode, agg in C.AGGREGATION_FROM_LOSS_AGG_MODE.items():
        agg_loss(loss_mat=mat, loss_mask=mask, loss_agg_mode=mode)  # a mode verl knows
        assert C.aggregation_for(mode) == agg
    assert C.aggregation_for("token-sum") == C.aggregation_for("seq-mean-token-sum") == "constant"
    assert C.aggregation_for("token-mean", None) is None and C.aggregation_for("x", "seq-mean") == "seq-mean"
    with pytest.raises(ValueError, match="loss_agg_mode 'weird'"):
        C.aggregation_for("weird")
    with pytest.raises(ValueError, match="adaptive.aggregation must be one of"):
        C.aggregation_for("token-mean", "per-token")
    from adaptive_rollouts.checks.validation import AGGREGATIONS, ESTIMATORS

    assert set(C.AGGREGATION_FROM_LOSS_AGG_MODE.values()) <= set(AGGREGATIONS)
    assert set(C.ESTIMATOR_FROM_ADV_ESTIMATOR.values()) <= set(ESTIMATORS)


def test_estimator_follows_the_advantage_estimator():
    assert C.estimator_for("adaptive_rloo") == C.estimator_for("rloo_vectorized") == "rloo"
    assert C.estimator_for("adaptive_grpo") == "grpo" and C.estimator_for("grpo", norm_by_std=False) == "drgrpo"
    assert C.estimator_for("adaptive_drgrpo") == "drgrpo" and C.estimator_for("gae") is None
    assert C.estimator_for("adaptive_grpo", override="rloo") == "rloo"
    with pytest.raises(ValueError, match="adaptive.estimator must be one of"):
        C.estimator_for("adaptive_grpo", override="ppo")


def test_build_allocator_passes_estimator_and_aggregation_where_accepted():
    vip = C.build_allocator("vip", {"lower": 3}, aggregation="constant", estimator="drgrpo")
    assert (vip.aggregation, vip.estimator, vip.lower) == ("constant", "drgrpo", 3)
    explicit = C.build_allocator("vip", {"estimator": "grpo"}, estimator="rloo")
    assert explicit.estimator == "grpo"  # the user's allocator_kwargs win
    uniform = C.build_allocator("Uniform", {}, aggregation="token-mean", estimator="rloo")
    assert type(uniform).__name__ == "Uniform"
    assert type(C.build_allocator("VIGOR")).__name__ == "VIGOR"
    assert C.build_allocator("harness_plugins:SkipLast").plan(["a", "b"], 4).tolist() == [4, 0]
    with pytest.raises(ValueError, match="unknown allocator"):
        C.allocator_factory("NoSuchAllocator")
    with pytest.raises(ValueError, match="rejects adaptive.allocator_kwargs"):
        C.build_allocator("vigor", {"lower": 2})


def test_settings_parse_and_reject_bad_values():
    s = C.settings_from_config({"allocator": "default", "allocator_kwargs": None, "reward_range": [-1, 1]})
    assert s.allocator is None and s.allocator_kwargs == {} and s.reward_range == (-1.0, 1.0)
    assert s.time_rounds is False and C.settings_from_config({"time_rounds": True}).time_rounds is True
    assert C.settings_from_config({"time_rounds": "synchronous"}).time_rounds == "synchronous"  # an engine's model
    for bad, match in [
        ({"budget": 0}, "budget"),
        ({"reward_range": [1]}, "reward_range"),
        ({"session_retries": -1}, "session_retries"),
        ({"round_poll_max_s": 0}, "round_poll_max_s"),
        ({"allocator_kwargs": [1]}, "allocator_kwargs"),
        ({"nonsense": 1}, "unknown option"),
        ({"time_rounds": "yes"}, "adaptive.time_rounds must be one of"),
        ({"time_rounds": 1}, "adaptive.time_rounds must be true, false, an engine"),
    ]:
        with pytest.raises(ValueError, match=match):
            C.settings_from_config(bad)
    assert C.needs_pool("vip-paper", {}) and C.needs_pool("vip", {"predictor": "paper-gp"})
    assert not C.needs_pool("vip-paper", {"predictor": "gp"})


def test_row_keys_are_unique_per_training_row_and_leave_the_batch():
    rows = [{"raw_prompt": [{"role": "user", "content": "same text"}], "index": 0} for _ in range(3)]
    ds = W.RowKeyedDataset(rows, W.dataset_source(["/d/a/train.parquet", "/d/b/train.parquet"]))
    keys = [ds[i][W.KEY_FIELD] for i in range(3)]
    assert keys == [f"a/train.parquet+b/train.parquet#{i}" for i in range(3)]  # same text, index 0: 3 prompts
    prompts = np.empty(3, dtype=object)
    prompts[:] = [r["raw_prompt"] for r in rows]
    batch = tu.get_tensordict(
        {W.KEY_FIELD: np.array(keys, dtype=object), "index": np.array([0, 0, 0], dtype=object), "raw_prompt": prompts}
    )
    assert W.batch_texts(batch) == ["same text"] * 3
    assert W.batch_keys(batch, None) == keys and W.KEY_FIELD not in batch.keys()
    assert W.batch_keys(batch, "index") == [0, 0, 0]
    with pytest.raises(KeyError, match="prompt_key 'nope'"):
        W.batch_keys(batch, "nope")
    assert (
        W.prompt_text(
            [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "t"}]}]
        )
        == "s\nt"
    )
    assert W.dataset_source([f"/x/f{i}.parquet" for i in range(6)]).startswith("x/f0.parquet+5-more-")


def test_sessions_take_the_final_output_of_multi_output_agent_loops():
    keys = ["u1_0_0", "u1_0_1", "u1_1_0", "u2_0_0", "u2_2_0"]
    scores = [0.0, 1.0, 0.0, 0.5, float("nan")]
    got = R.group_sessions(keys, scores)
    assert got.of("u1").tolist() == [1.0, 0.0]  # session 0's final (index 1) output, then session 1
    np.testing.assert_array_equal(got.of("u2"), [0.5, np.nan])
    assert got.of("missing").size == 0
    with pytest.raises(ValueError, match="uid"):
        R.parse_key("nokey")
    with pytest.raises(ValueError, match="uid"):
        R.parse_key("a_b_c")


def test_feedback_passes_scored_rewards_and_counts_what_is_missing():
    fb = S.StepFeedback(["a", "b"], [4, 2], SuccessSignal(), budget=8)
    fb.add([0], [np.array([-1.0, 1.0, np.nan])], [4])  # one failed session, one unscored
    fb.add([1], [np.array([0.0, 1.0])], [2])
    # auto mapping: the range seen so far, [-1, 1] after prompt a, so b's 0 is a half success
    assert [s.tolist() for s in fb.successes()] == [[0.0, 1.0], [0.5, 1.0]]
    m = fb.metrics()
    assert m["adaptive/missing_rollouts"] == 2 and m["adaptive/failed_sessions"] == 1
    assert m["adaptive/unscored_rollouts"] == 1 and m["adaptive/prompts_with_missing_rollouts"] == 1
    # spent = what was asked (failed and unscored rollouts included), saved = budget - spent: logged
    # once, by the bridge's step_values (as the trainer's _step_metrics does)
    m = step_log(step_values(fb.prompts, fb.requested, fb.successes(), None, fb.budget), RegimeTracker(), [], [])
    assert (m["adaptive/rollouts_spent"], m["adaptive/rollouts_saved"], m["adaptive/skipped"]) == (6, 2, 0)
    fb.redispatched = 1
    assert fb.metrics()["adaptive/generated_rollouts"] == 7
    skip = S.StepFeedback(["a", "b", "c"], [0, 5, 0], SuccessSignal(), budget=8)
    skip = step_log(step_values(skip.prompts, skip.requested, skip.successes(), None, 8), RegimeTracker(), [], [])
    assert (skip["adaptive/skipped"], skip["adaptive/rollouts_saved"]) == (2, 3)


def test_feedback_maps_a_round_at_once_as_every_trainer_does():
    """One round's rewards share one auto range (`bridge.scored_draw`), whatever the prompts' order;
    spent / saved / skipped are not logged by the feedback (step_values logs them once)."""
    raws = [np.array([0.0, 1.0]), np.array([2.0, np.nan])]
    fb = S.StepFeedback(["a", "b"], [2, 2], SuccessSignal(), budget=4)
    got = fb.add([0, 1], raws, [2, 2])
    want = scored_draw(SuccessSignal(), raws, ["a", "b"])
    assert [g.tolist() for g in got] == [w.tolist() for w in want] == [[0.0, 0.5], [1.0]]
    assert [s.tolist() for s in fb.successes()] == [[0.0, 0.5], [1.0]] and fb.unscored == 1
    assert not {"adaptive/rollouts_spent", "adaptive/rollouts_saved", "adaptive/skipped"} & set(fb.metrics())


def test_waiting_backs_off_and_returns_promptly():
    done_at = time.monotonic() + 0.3
    calls = []

    def list_fn(partition):
        calls.append(time.monotonic())
        status = "finished" if time.monotonic() >= done_at else "running"
        return {partition: {"u1": {"status": status}, "u2": {"status": "failure"}}}

    start = time.monotonic()
    assert R.wait_for_groups(["u1", "u2"], max_poll_s=0.05, list_fn=list_fn) == {"u1": "finished", "u2": "failure"}
    late = time.monotonic() - done_at
    assert late < 0.05 + 0.05  # seen within one poll interval (plus scheduling slack)
    assert len(calls) < 20  # ~log2(50 ms / 1 ms) + 300 ms / 50 ms listings, not a busy loop
    assert time.monotonic() - start >= 0.3
    with pytest.raises(TimeoutError, match="round_timeout_s"):
        R.wait_for_groups(["u1"], timeout_s=0.01, list_fn=lambda p: {p: {}})


def test_listing_transfer_queue_is_cheap(clean_queue):
    """What one poll costs: kv_list over a step's worth of trajectory tags (2048)."""
    tq = clean_queue
    keys = [f"{uuid.uuid4().hex}_{s}_0" for s in range(2048)]
    tq.kv_batch_put(keys=keys, partition_id="train", tags=[{"status": "success", "global_steps": 1}] * len(keys))
    start = time.perf_counter()
    for _ in range(10):
        tq.kv_list("train")
    per_call = (time.perf_counter() - start) / 10
    print(f"kv_list with 2048 tags: {per_call * 1e3:.1f} ms")
    assert per_call < 0.5


def test_session_keys_make_estimators_group_sessions_not_rows():
    from verl.trainer.ppo import core_algos

    from adaptive_rollouts.integrations.verl import advantage

    advantage.register()
    keys = ["a_0_0", "a_0_1", "a_1_0", "b_0_0", "b_1_0", "b_1_1", "b_1_2"]
    index = np.array(["A", "A", "A", "B", "B", "B", "B"], dtype=object)
    scores = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    rewards, mask = torch.zeros(7, 3), torch.ones(7, 3)
    rewards[:, -1] = scores
    fn = core_algos.get_adv_estimator_fn("adaptive_grpo")
    with advantage.session_keys(keys):
        adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index)
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards[[1, 2, 3, 6]], mask[[1, 2, 3, 6]], index[[1, 2, 3, 6]])
    session_of = [0, 0, 1, 2, 3, 3, 3]
    torch.testing.assert_close(adv[:, 0], ref[session_of, 0], atol=1e-5, rtol=1e-5)
    plain, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index)  # no keys: rows are members
    assert not torch.allclose(plain, adv)


def test_trainer_and_estimators_register():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls

    from adaptive_rollouts.integrations.verl import register

    register()
    register()  # idempotent
    cls = get_trainer_cls("adaptive")
    assert cls.__name__ == "AdaptiveRolloutTrainer" and issubclass(cls, PPOTrainerSync)
    assert get_adv_estimator_fn("adaptive_rloo").__name__ == "compute_adaptive_rloo_outcome_advantage"


def test_rekeyed_loader_keeps_verls_order_and_works_with_worker_processes():
    import pickle

    from torchdata.stateful_dataloader import StatefulDataLoader
    from torchdata.stateful_dataloader.sampler import RandomSampler
    from verl.utils.dataset.rl_dataset import collate_fn

    rows = [{"raw_prompt": [{"role": "user", "content": f"q{i}"}], "index": 0} for i in range(8)]

    def verl_loader():  # as verl's _init_dataloader builds it (shuffle, seed 1, 1 worker)
        gen = torch.Generator()
        gen.manual_seed(1)
        sampler = RandomSampler(rows, generator=gen)
        return StatefulDataLoader(
            rows, batch_size=4, num_workers=1, drop_last=True, collate_fn=collate_fn, sampler=sampler
        )

    expected = [[m[0]["content"] for m in b["raw_prompt"]] for b in verl_loader()]
    dataset, loader = W.rekey_dataloader(verl_loader(), "toy.parquet")
    batches = list(loader)
    assert [[m[0]["content"] for m in b["raw_prompt"]] for b in batches] == expected  # verl's order
    keys = [k for b in batches for k in b[W.KEY_FIELD]]
    assert sorted(keys) == sorted(f"toy.parquet#{i}" for i in range(8))
    assert pickle.loads(pickle.dumps(dataset))[2][W.KEY_FIELD] == "toy.parquet#2"


def test_session_lengths_sum_each_sessions_outputs_and_check_each_output():
    keys = ["u1_0_0", "u1_0_1", "u1_1_0", "u2_0_0"]
    got = R.group_sessions(keys, [0.0, 1.0, 0.0, 0.5], [3, 4, 5, 16])
    assert got.lengths_of("u1") == [7, 5] and got.output_lengths("u1") == [3, 4, 5]
    assert R.session_lengths(got, ["u1", "u2", "none"], ["a", "b", "c"], maximum=16) == [[7, 5], [16], []]
    with pytest.raises(ValueError, match=r"lengths of prompt 1 \('b'\) must be <= the configured maximum 15, got 16"):
        R.session_lengths(got, ["u1", "u2"], ["a", "b"], maximum=15)
    assert R.group_sessions(keys, [0.0, 1.0, 0.0, 0.5]).lengths_of("u1") is None  # not read: rollouts counted

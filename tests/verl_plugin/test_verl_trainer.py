"""Batch preparation on real verl TensorDict batches, config, registry, checkpoint state, and a
Ray local-cluster test of the TransferQueue part of the loop (no rollout server)."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")
tu = pytest.importorskip("verl.utils.tensordict_utils")

from adaptive_rollouts.integrations.verl import trainer as T  # noqa: E402


def verl_batch(n: int):
    """A batch shaped like PPOTrainer._fetch_one_gen_batch's output."""
    batch_dict = {
        "raw_prompt": np.array([[{"role": "user", "content": f"q{i}"}] for i in range(n)], dtype=object),
        "index": np.array(list(range(100, 100 + n)), dtype=object),  # as collate_fn builds it
        "data_source": np.array(["toy"] * n, dtype=object),
        "uid": np.array([str(uuid.uuid4()) for _ in range(n)], dtype=object),
    }
    return tu.get_tensordict(batch_dict)


class FakeSingleShot:
    """Gives prompt i exactly i rollouts (mod) - distinct counts make mix-ups visible."""

    def __init__(self, aggregation=None):
        self.aggregation = aggregation
        self.seen = []

    def plan(self, prompts, budget):
        counts = np.zeros(len(prompts), dtype=int)
        counts[: budget % len(prompts)] += 1
        counts += budget // len(prompts)
        counts[0], counts[-1] = counts[0] + counts[-1], 0  # skip the last prompt
        return counts

    def observe(self, prompts, rewards):
        self.seen.append((list(prompts), [r.tolist() for r in rewards]))

    def run(self, prompts, budget, sample):  # pragma: no cover - protocol completeness
        raise NotImplementedError

    def state_dict(self):
        return {"seen": len(self.seen)}

    def load_state_dict(self, state):
        pass


def test_rollout_counts_written_where_the_agent_loop_reads_them():
    batch = verl_batch(4)
    prompts = T.prompt_keys(batch, "index")
    assert prompts == [100, 101, 102, 103]
    counts = T.check_counts(FakeSingleShot().plan(prompts, 16), 4, 16)
    T.assign_rollout_counts(batch, counts)
    # what AgentLoopWorkerTQ.generate_sequences does per prompt, then _run_prompt's pop
    per_prompt = []
    for i in range(len(batch)):
        prompt = {k: v[i] for k, v in batch.items() if isinstance(v, torch.Tensor)}
        per_prompt.append(len(range(prompt.pop("__rollout_n__"))))
    assert per_prompt == [8, 4, 4, 0] and sum(per_prompt) == 16


def test_round_sub_batch_keeps_prompt_fields_and_gets_fresh_uids():
    batch = verl_batch(5)
    sub = tu.index_select_tensor_dict(batch, torch.tensor([3, 1]))
    new = [uuid.uuid4().hex, uuid.uuid4().hex]
    tu.assign_non_tensor_stack(sub, "uid", new)
    T.assign_rollout_counts(sub, [2, 6])
    assert T.prompt_keys(sub, "index") == [103, 101]
    assert T.prompt_keys(sub, "uid") == new and all("_" not in u for u in new)
    assert sub["__rollout_n__"].tolist() == [2, 6]
    assert T.prompt_keys(batch, "uid")[3] != new[0]  # the original batch is untouched


def test_check_counts_and_prompt_key_errors():
    with pytest.raises(ValueError, match="sum to 7, budget is 8"):
        T.check_counts([3, 4], 2, 8)
    with pytest.raises(ValueError, match="negative"):
        T.check_counts([9, -1], 2, 8)
    with pytest.raises(ValueError, match="shape"):
        T.check_counts([8], 2, 8)
    with pytest.raises(ValueError, match="non-integer"):
        T.check_counts([4.5, 3.5], 2, 8)
    with pytest.raises(KeyError, match="prompt_key 'nope'"):
        T.prompt_keys(verl_batch(2), "nope")
    with pytest.raises(ValueError, match="counts has shape"):
        T.assign_rollout_counts(verl_batch(2), [1, 2, 3])


def test_group_scores_rescale_reward_range_and_reject_outside():
    got = T.group_scores(["a", "a", "b"], [-1.0, 1.0, 0.0], ["a", "b"], reward_range=(-1, 1))
    assert [g.tolist() for g in got] == [[0.0, 1.0], [0.5]]
    with pytest.raises(ValueError, match="outside adaptive.reward_range"):
        T.group_scores(["a"], [2.0], ["a"])


def test_group_scores_in_dispatch_order_with_skipped_prompts():
    got = T.group_scores(["b", "a", "b", "a", "a"], [1, 0, 0, 1, 1], ["a", "b", "c"])
    assert [g.tolist() for g in got] == [[0.0, 1.0, 1.0], [1.0, 0.0], []]
    with pytest.raises(KeyError, match="'z' was not dispatched"):
        T.group_scores(["z"], [1.0], ["a"])


def test_aggregation_from_loss_agg_mode_reaches_allocators_that_accept_it():
    assert T.aggregation_for("token-mean") == "token-mean"
    assert T.aggregation_for("seq-mean-token-sum-norm") == "constant"
    assert T.aggregation_for("token-mean", "seq-mean") == "seq-mean"
    with pytest.raises(ValueError, match="loss_agg_mode 'weird'"):
        T.aggregation_for("weird")
    alloc = T.build_allocator(f"{__name__}:FakeSingleShot", {}, "token-mean")
    assert alloc.aggregation == "token-mean"
    uniform = T.build_allocator("uniform", {}, "token-mean")  # Uniform takes no aggregation
    assert type(uniform).__name__ == "Uniform"
    assert T.check_counts(uniform.plan([1, 2, 3], 9), 3, 9).tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="not found"):
        T.load_allocator_class("NoSuchAllocator")


def test_trainer_and_estimators_register_and_config_composes():
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.v1 import get_trainer_cls

    from adaptive_rollouts.integrations.verl import main, register

    register()
    register()  # idempotent
    cls = get_trainer_cls("adaptive")
    assert cls.__name__ == "AdaptiveRolloutTrainer"
    from verl.trainer.ppo.v1 import PPOTrainerSync

    assert issubclass(cls, PPOTrainerSync)
    assert get_adv_estimator_fn("adaptive_rloo").__name__ == "compute_adaptive_rloo_outcome_advantage"
    with initialize_config_dir(config_dir=main.CONFIG_DIR, version_base=None):
        cfg = compose("adaptive_ppo", overrides=["adaptive.allocator=vigor"])
    assert cfg.trainer.v1.trainer_mode == "adaptive"
    assert cfg.algorithm.adv_estimator == "adaptive_grpo"
    assert cfg.adaptive.allocator == "vigor" and cfg.adaptive.prompt_key == "index"
    assert cfg.actor_rollout_ref.actor.loss_agg_mode == "token-mean"  # verl's default, still there


def test_allocator_state_round_trips_through_state_files(tmp_path):
    from adaptive_rollouts.state import load_state, save_state

    alloc = T.build_allocator("VIGOR", {})
    rng = np.random.default_rng(0)
    alloc.run(list(range(8)), 64, lambda idx, cnt: [rng.integers(0, 2, c).astype(float) for c in cnt])
    path = os.path.join(tmp_path, T.ALLOCATOR_STATE_FILE)
    save_state(path, alloc.state_dict())
    fresh = T.build_allocator("VIGOR", {})
    fresh.load_state_dict(load_state(path))
    a = alloc.run(list(range(8)), 64, lambda idx, cnt: [np.arange(c) % 2.0 for c in cnt])
    b = fresh.run(list(range(8)), 64, lambda idx, cnt: [np.arange(c) % 2.0 for c in cnt])
    assert [x.size for x in a] == [x.size for x in b]


@pytest.fixture(scope="module")
def transfer_queue():
    ray = pytest.importorskip("ray")
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf

    # TransferQueue's controller and storage unit ask for one logical CPU each.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(
        OmegaConf.create(
            {
                "enable": True,
                "metrics": {"enabled": False, "port": 0},
                "backend": {
                    "storage_backend": "SimpleStorage",
                    "SimpleStorage": {"total_storage_size": 1000, "num_data_storage_units": 1},
                },
            }
        )
    )
    yield tq
    tq.close()
    ray.shutdown()


def fake_agent_loop(tq, batch, success):
    """What AgentLoopWorkerTQ does for each prompt, minus the LLM: n trajectories with scores."""
    keys, fields, tags = [], [], []
    for i in range(len(batch)):
        uid = T.prompt_keys(batch, "uid")[i]
        n = int(batch["__rollout_n__"][i])
        for s in range(n):
            keys.append(f"{uid}_{s}_0")
            score = torch.zeros(3)
            score[-1] = float(success(T.prompt_keys(batch, "index")[i], s))
            fields.append({"uid": uid, "rm_scores": score})
            tags.append({"status": "success", "seq_len": 3, "global_steps": 1})
        tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})
    if keys:
        td = tu.get_tensordict(
            {
                "uid": np.array([f["uid"] for f in fields], dtype=object),
                "rm_scores": torch.nested.as_nested_tensor([f["rm_scores"] for f in fields], layout=torch.jagged),
            }
        )
        tq.kv_batch_put(keys=keys, partition_id="train", fields=td, tags=tags)


def test_progressive_rounds_through_transfer_queue(transfer_queue):
    """VIGOR's rounds on a local Ray cluster: dispatch, wait, read scores, relabel, sample."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    tq = transfer_queue
    batch = verl_batch(6)
    prompts = T.prompt_keys(batch, "index")
    base_uids = T.prompt_keys(batch, "uid")
    round_uids = {}

    def success(prompt, session):  # prompts 100, 101 always fail; the rest alternate
        return 0.0 if prompt < 102 else float(session % 2)

    def sample(indices, counts):
        live = counts > 0
        sub = tu.index_select_tensor_dict(batch, torch.as_tensor(indices[live]))
        new = [uuid.uuid4().hex for _ in range(int(live.sum()))]
        tu.assign_non_tensor_stack(sub, "uid", new)
        T.assign_rollout_counts(sub, counts[live])
        for u, i in zip(new, indices[live]):
            round_uids[u] = base_uids[int(i)]
        fake_agent_loop(tq, sub, success)
        T.wait_for_groups(new, "train", poll_s=0.05, timeout_s=30)
        uids, scores = T.read_scores(T.trajectory_keys(new, "train"), "train")
        out = [np.zeros(0) for _ in indices]
        for slot, g in zip(np.flatnonzero(live), T.group_scores(uids, scores, new)):
            out[slot] = g
        return out

    alloc = T.build_allocator("VIGOR", {})
    budget = 6 * 8
    rewards = alloc.run(prompts, budget, sample)
    assert sum(r.size for r in rewards) == budget
    assert len(round_uids) > len(prompts)  # several rounds were dispatched
    keys = T.trajectory_keys(list(round_uids), "train")
    assert len(keys) == budget
    T.relabel_uids(keys, [round_uids[k.split("_", 1)[0]] for k in keys], "train")

    rb = ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        poll_interval=0.05,
        train_batch_size=6,
        gen_batch_size=6,
    )
    meta, _ = rb.sample(global_steps=1, partition_id="train", batch_size=len(round_uids))
    assert len(meta.keys) == budget
    uids, scores = T.read_scores(meta.keys, "train")
    grouped = T.group_scores(uids, scores, base_uids)  # one group per prompt after relabelling
    assert [g.size for g in grouped] == [r.size for r in rewards]
    assert [sorted(g.tolist()) for g in grouped] == [sorted(r.tolist()) for r in rewards]
    tq.kv_clear(keys=meta.keys, partition_id="train")

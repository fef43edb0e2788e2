"""CPU harness: the real ``AdaptiveRolloutTrainer`` built from ``adaptive_ppo.yaml`` and trained by
verl's own ``fit()`` loop - replay buffer, batch balancing and padding, advantage code, metrics,
checkpoint files, TransferQueue (a local Ray cluster), and the real agent-loop worker
``AgentLoopWorkerTQ`` (``generate_sequences`` / ``_run_prompt`` / post-processing) with verl's
reward loop worker and reward manager scoring through a rule-based reward function.

Faked, and only these: the LLM server (`FakeLLM`: answers "right" or "wrong" with a known success
probability per prompt), and the GPU worker RPCs (`FakeWorkerGroup`: log-probs, actor update,
checkpoint shards) plus weight sync / resource-pool bookkeeping that only moves GPU state; verl's
experiment tracker is replaced by `RecordingTracker`, which keeps the logged metrics.
The agent-loop worker runs in this process on one event loop and each dispatch runs to completion
(in verl it is a Ray actor that returns at once); the trainer waits on TransferQueue either way.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import harness_plugins  # noqa: F401  (registers the test agent loop with verl)
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORDS = ["<pad>", "<eos>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>", "<|tool|>"]
WORDS += [f"q{i}" for i in range(64)] + ["right", "wrong", "answer", "question", "search", "result", "call"]
P = {k: [0.0, 0.25, 0.5, 0.9][k % 4] for k in range(64)}  # the scenarios' success probability of q<k>


def make_tiny_model(root: str) -> tuple[str, str]:
    """A model folder (config.json of a tiny Llama, no weights: workers are faked) and a tokenizer
    folder (word-level tokenizer with a chat template), written offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model_dir, tok_dir = os.path.join(root, "model"), os.path.join(root, "tokenizer")
    if os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        return model_dir, tok_dir
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <eos> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    fast.save_pretrained(tok_dir)
    os.makedirs(model_dir, exist_ok=True)
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": len(WORDS),
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 256,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "bos_token_id": 1,
    }
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f)
    return model_dir, tok_dir


def write_dataset(path: str, questions: list[int], data_source: str = "toy", with_index: bool = True) -> str:
    """A verl RL parquet: prompt "question q<k>", ground truth "right", extra_info.index = row."""
    import pandas as pd

    rows = []
    for i, q in enumerate(questions):
        extra = {"index": i, "split": "train"} if with_index else {"split": "train"}
        rows.append(
            {
                "data_source": data_source,
                "prompt": [{"role": "user", "content": f"question q{q}"}],
                "ability": "toy",
                "reward_model": {"style": "rule", "ground_truth": "right"},
                "extra_info": extra,
            }
        )
    pd.DataFrame(rows).to_parquet(path)
    return path


def question_of(token_ids: list[int]) -> int:
    """The k of the first "q<k>" token."""
    for t in token_ids:
        w = WORDS[t]
        if w.startswith("q") and w[1:].isdigit():
            return int(w[1:])
    raise ValueError(f"no question token in {token_ids}")


class FakeLLM:
    """The LLM server: question q<k> is answered "right" with probability ``p[k]``.

    The answers of one step are a fixed multiset per question (drawn from a generator seeded by
    (seed, step, k)), handed out in call order, so a run's rewards depend only on which prompts get
    how many rollouts - not on the order concurrent sessions reach the server. ``fail`` holds
    (step, k, call) triples that raise, as a crashed session does. A prompt ending in a tool result
    ("result") is the tool agent's second turn; with ``tool_first`` the first turn calls the tool.
    """

    def __init__(self, p: dict[int, float], seed: int = 0, tool_first: bool = False):
        self.p, self.seed, self.tool_first = dict(p), seed, tool_first
        self.step = 0
        self.calls: dict[tuple[int, int], int] = defaultdict(int)
        self.fail: set[tuple[int, int, int]] = set()
        self.tool_calls = 0

    def _answer(self, k: int) -> bool:
        n = self.calls[(self.step, k)]
        self.calls[(self.step, k)] += 1
        if (self.step, k, n) in self.fail:
            raise RuntimeError(f"injected failure: step {self.step}, question q{k}, call {n}")
        rng = np.random.default_rng([self.seed, self.step, k])
        draws = rng.random(256) < self.p[k]
        return bool(draws[n % 256])

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        words = [WORDS[t] for t in prompt_ids]
        if self.tool_first and "result" not in words:  # first turn of the tool agent: call the tool
            self.tool_calls += 1
            ids = [WORDS.index("search"), WORDS.index("call"), 1]
        else:
            ok = self._answer(question_of(prompt_ids))
            ids = [WORDS.index("answer"), WORDS.index("right" if ok else "wrong"), 1]
        version = self.step - 1  # weights of the previous update, as LLMServerClient reports them
        extra = {"global_steps": version, "min_global_steps": version, "max_global_steps": version}
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), extra_fields=extra)


class _Remote:
    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


class LocalRewardHandle:
    """verl's RewardLoopWorker (rule-based reward manager), called in-process instead of via Ray."""

    def __init__(self, config):
        from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

        self.worker = RewardLoopWorker(config)
        self.compute_score = _Remote(self.worker.compute_score)


class FakeWorkerGroup:
    """The actor worker group's RPCs: what a GPU worker would write to TransferQueue, minus the
    model (log-probs and entropy are zeros); ``updates`` records every trained row."""

    def __init__(self, dp_size: int = 2):
        self._dispatch_info = {"actor": list(range(dp_size))}
        self.updates: list[dict] = []
        self.saved: list[str] = []
        self.loaded: list[str] = []

    def compute_log_prob(self, batch):
        import transfer_queue as tq
        from tensordict import TensorDict

        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
        mask = data["response_mask"]
        zeros = [torch.zeros(int(n), dtype=torch.float32) for n in mask.offsets().diff().tolist()]
        fields = {
            "log_probs": torch.nested.as_nested_tensor(zeros, layout=torch.jagged),
            "entropy": torch.nested.as_nested_tensor([z.clone() for z in zeros], layout=torch.jagged),
        }
        tq.kv_batch_put(
            keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(fields, batch_size=len(batch))
        )
        return batch

    compute_ref_log_prob = compute_log_prob

    def update_actor(self, batch):
        import transfer_queue as tq

        fields = ["uid", "raw_prompt", "rm_scores", "advantages", "response_mask", "loss_mask"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        rows = []
        for i, (key, tag) in enumerate(zip(batch.keys, batch.tags)):
            mask = data["response_mask"][i]
            adv = data["advantages"][i]
            rows.append(
                {
                    "key": key,
                    "padding": bool(tag.get("is_padding", False)),
                    "uid": str(data["uid"][i]),
                    "prompt": str(list(data["raw_prompt"][i])[0]["content"]) if not tag.get("is_padding") else "",
                    "score": float(data["rm_scores"][i].sum()),
                    "advantage": float(adv[mask.bool()][0]) if mask.any() else 0.0,
                    "loss_tokens": int(data["loss_mask"][i].sum()),  # verl's loss weights every token by it
                    "abs_advantage_sum": float(adv.abs().sum()),
                }
            )
        self.updates.append({"rows": rows, "mini_batch": batch.extra_info.get("mini_batch_size")})
        return {"metrics": {"mfu": [0.0], "pg_loss": [0.0]}}

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "weights.txt"), "w") as f:
            f.write(str(global_step))
        self.saved.append(local_path)

    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False):
        self.loaded.append(local_path)


class InProcessAgentLoopManager:
    """verl's AgentLoopWorkerTQ (the real class, not a Ray actor) behind the manager interface."""

    def __init__(self, config, llm: FakeLLM):
        self.loop = asyncio.new_event_loop()
        self.reward_handle, self.worker = self.loop.run_until_complete(self._make(config, llm))
        self.dispatched: list[dict] = []

    @staticmethod
    async def _make(config, llm):  # built on the loop they will run on (they keep a handle to it)
        from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

        handle = LocalRewardHandle(config)
        return handle, AgentLoopWorkerTQ.__ray_actor_class__(config, llm, None, [handle])

    def generate_sequences(self, batch) -> None:
        counts = batch["__rollout_n__"].tolist() if "__rollout_n__" in batch.keys() else None
        self.dispatched.append({"uids": list(batch["uid"]), "counts": counts})
        self.loop.run_until_complete(self.worker.generate_sequences(batch))
        pending = list(self.worker.background_tasks)
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


class RecordingTracker:
    """Stands in for verl's Tracking (console / wandb): keeps every step's logged metrics."""

    runs: list[list[tuple[int, dict]]] = []

    def __init__(self, *args, **kwargs):
        self.logged: list[tuple[int, dict]] = []
        RecordingTracker.runs.append(self.logged)

    def log(self, data, step, **kwargs):
        self.logged.append((int(step), dict(data)))


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from adaptive_rollouts.integrations.verl import main

    with initialize_config_dir(config_dir=main.CONFIG_DIR, version_base=None):
        return hydra_compose("adaptive_ppo", overrides=overrides)


def base_overrides(root: str, train_files: list[str], steps: int, **extra: Any) -> list[str]:
    model_dir, tok_dir = make_tiny_model(os.path.join(os.path.dirname(root), "tiny"))
    files = "[" + ",".join(train_files) + "]"
    out = [
        f"data.train_files={files}",
        f"data.val_files={files}",
        "data.train_batch_size=4",
        "data.max_prompt_length=32",
        "data.max_response_length=16",
        "data.dataloader_num_workers=0",
        "data.shuffle=false",
        f"actor_rollout_ref.model.path={model_dir}",
        f"+actor_rollout_ref.model.tokenizer_path={tok_dir}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.prompt_length=32",
        "actor_rollout_ref.rollout.response_length=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=2",
        "trainer.nnodes=1",
        "trainer.device=cpu",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=-1",
        f"trainer.default_local_dir={root}/ckpt",
        "trainer.logger=[console]",
        f"reward.custom_reward_function.path={os.path.join(HERE, 'harness_reward.py')}",
        "reward.custom_reward_function.name=compute_score",
        "reward.num_workers=1",
    ]
    return out + [f"{k}={v}" for k, v in extra.items()]


def build_trainer(config, llm: FakeLLM, dp_size: int = 2, load: bool = True):
    """``AdaptiveRolloutTrainer(config)`` and what ``PPOTrainer._setup`` would give it, with the GPU
    worker groups, LLM servers and weight sync replaced (see the module docstring). ``load=False``
    stops before the checkpoint load (``_load_checkpoint``) and ``on_init_end``."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    from adaptive_rollouts.integrations.verl import register

    register()
    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer._init_dump_executor()
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: dp_size)
    trainer.ref_in_actor = False
    trainer.actor_rollout_wg = FakeWorkerGroup(dp_size)
    manager = InProcessAgentLoopManager(config, llm)
    trainer.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=[manager.reward_handle])
    trainer.teacher_model_manager = None
    trainer.distillation_config = None
    trainer.checkpoint_manager = SimpleNamespace(update_weights=lambda *a, **k: None, sleep_replicas=lambda: None)
    if not load:
        return trainer, manager
    trainer._load_checkpoint()
    trainer.on_init_end()
    return trainer, manager


def train(config, llm: FakeLLM, dp_size: int = 2):
    """Build the trainer and run verl's ``fit()``; returns (trainer, manager, logged metrics)."""
    trainer, manager = build_trainer(config, llm, dp_size)
    start = len(RecordingTracker.runs)
    llm.step = trainer.global_steps + 1

    original_step = trainer.step

    def step(metrics, timing_raw):  # tell the fake LLM which step it serves (draws are per step)
        llm.step = trainer.global_steps
        return original_step(metrics, timing_raw)

    trainer.step = step
    trainer.fit(manager)
    logged = RecordingTracker.runs[start] if len(RecordingTracker.runs) > start else []
    return trainer, manager, logged


def trained_counts(worker_group: FakeWorkerGroup) -> list[dict[str, int]]:
    """Per actor update: trained rows per prompt text (padding excluded)."""
    out = []
    for update in worker_group.updates:
        counts: dict[str, int] = defaultdict(int)
        for row in update["rows"]:
            if not row["padding"]:
                counts[row["prompt"]] += 1
        out.append(dict(counts))
    return out


def rows_by_uid(update: dict) -> dict[str, list[dict]]:
    """An actor update's trajectory rows (padding excluded) per advantage group."""
    out: dict[str, list[dict]] = {}
    for row in update["rows"]:
        if not row["padding"]:
            out.setdefault(row["uid"], []).append(row)
    return out


def step_metrics(logged: list[tuple[int, dict]], step: int) -> dict:
    """The metrics logged at ``step``."""
    return next(m for s, m in logged if s == step)

"""AdaptiveGRPOTrainer on 2 CPU processes (torchrun + gloo): one allocation for the whole batch,
whole groups per rank, and both ranks agree. Slow (two processes start TRL): `pytest -m slow`.

`accelerate launch --num_processes 2 --cpu` starts ONE process (accelerate's simple launcher), so
the test uses torchrun, which accelerate picks up from the environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

SCRIPT = r"""
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from datasets import Dataset
from transformers import set_seed
from trl import GRPOConfig, GRPOTrainer
from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.demo.model import build_model
from adaptive_rollouts.demo.tokenizer import build_tokenizer
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

out_dir, mode = sys.argv[1], sys.argv[2]

class Skewed:
    # Rounds of 4, 7, 3 and 2 rows: on 2 processes the 7- and 3-row rounds are padded by one rollout
    # each (of prompts 0 and 2), and the last round is served from that padding: nothing generated.
    def run(self, prompts, budget, sample):
        q = len(prompts)
        sample(np.arange(q), np.ones(q, dtype=int))
        sample(np.array([0, 1]), np.array([4, 3]))
        sample(np.array([1, 2]), np.array([1, 2]))
        return sample(np.array([0, 2]), np.array([1, budget - q - 11]))

class Saving:
    # kind "save": 7 of 32 rollouts, 4 of 8 prompts skipped; rounds of 4 and 3 rows (the second padded
    # by one generated rollout that no later round uses)
    kind = "save"
    def run(self, prompts, budget, sample):
        plan = np.array([0, 3, 2, 0, 1, 0, 0, 1])
        kept = np.flatnonzero(plan)
        sample(kept, np.ones(kept.size, dtype=int))
        more = kept[plan[kept] > 1]
        sample(more, plan[more] - 1)
        return []

class PolicyReader(Uniform):
    # Uniform, recording the policy features it is given before it plans
    def __init__(self):
        super().__init__()
        self.seen = []
    def observe_policy(self, prompts, features):
        self.seen.append((list(prompts), np.asarray(features).tolist()))

def reward(prompts, completions, **kw):
    return [len(c) / 5.0 for c in completions]

def reward_one(prompts, completions, **kw):
    return [float("1" in c) for c in completions]

def trainer_of(cls, **kw):
    set_seed(0)
    tok = build_tokenizer()
    model = build_model(tok, seed=0, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                        num_key_value_heads=2, num_hidden_layers=1)
    prepare = kw.pop("prepare", None)
    per_device = kw.pop("per_device_train_batch_size", 8)
    args = GRPOConfig(output_dir=out_dir + "/" + cls.__name__, per_device_train_batch_size=per_device, num_generations=4,
                      max_completion_length=5, max_steps=kw.pop("max_steps", 1), learning_rate=1e-2, logging_steps=1,
                      report_to=[], save_strategy="no", use_cpu=True, beta=0.0, disable_tqdm=True, seed=0,
                      reward_weights=kw.pop("reward_weights", None), num_iterations=kw.pop("num_iterations", 1),
                      gradient_accumulation_steps=kw.pop("gradient_accumulation_steps", 1),
                      optim=kw.pop("optim", "adamw_torch"))
    prompts = ["1+2=", "3*4=", "9-5=", "7+7=", "2*3=", "8-1=", "5+5=", "6*6="]
    t = cls(model=model, reward_funcs=kw.pop("reward_funcs", reward), args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tok, **kw)
    seen = {"advantages": [], "prompt_ids": [], "masked": []}
    original = t._generate_and_score_completions
    def wrapped(inputs):
        out = original(inputs)
        seen["advantages"].append(out["advantages"].tolist())
        seen["prompt_ids"].append(out["prompt_ids"].tolist())
        seen["masked"].append((out["completion_mask"].sum(1) == 0).tolist())
        return out
    t._generate_and_score_completions = wrapped
    if prepare is not None:
        prepare(t)
    set_seed(0)
    t.train()
    return t, tok, seen

if mode == "skewed":
    t, tok, seen = trainer_of(AdaptiveGRPOTrainer, allocator=Skewed())
    rank = t.accelerator.process_index
    logs = [h for h in t.state.log_history if "adaptive/rounds" in h]
    result = dict(rank=rank, world=t.accelerator.num_processes, advantages=seen["advantages"][0],
                  prompts=[tok.decode([i for i in row if i != tok.pad_token_id]) for row in seen["prompt_ids"][0]],
                  counts=[c.tolist() for c in t.allocation_history], logs=logs)
elif mode == "saving":
    t, tok, seen = trainer_of(AdaptiveGRPOTrainer, allocator=Saving(), gradient_accumulation_steps=2)
    rank = t.accelerator.process_index
    logs = [h for h in t.state.log_history if "adaptive/rounds" in h]
    result = dict(rank=rank, world=t.accelerator.num_processes, advantages=seen["advantages"][0],
                  masked=seen["masked"][0], counts=[c.tolist() for c in t.allocation_history], logs=logs,
                  losses=[h["loss"] for h in t.state.log_history if "loss" in h],
                  table=len(t._logs["prompt"]))
elif mode == "policy":
    # 6 rows a process, 4 rollouts a prompt: 3 prompts a step, the middle one's rows on both processes
    from adaptive_rollouts.integrations.trl.layout import key_of_row
    from adaptive_rollouts.integrations.trl.policy import last_token_hidden_states
    reader, computed, alone = PolicyReader(), [], {}
    def prepare(t):
        # each prompt's features read alone by this process before the first update (the step reads
        # them), in the training step's precision (the prepared model runs under accelerate's autocast)
        model = t.accelerator.unwrap_model(t.model)
        for i, prompt in enumerate(t.train_dataset["prompt"]):
            ids = torch.tensor(t._tokenize_prompts([prompt])[0])
            with t.accelerator.autocast():
                alone[f"train#{i}"] = last_token_hidden_states(model, ids, torch.ones_like(ids))[0].tolist()
        features = t._policy_features
        def recording(rows):
            computed.append([key_of_row(row) for row in rows])
            return features(rows)
        t._policy_features = recording
    t, tok, seen = trainer_of(AdaptiveGRPOTrainer, allocator=reader, policy_features=True,
                              per_device_train_batch_size=6, prepare=prepare)
    rank = t.accelerator.process_index
    result = dict(rank=rank, world=t.accelerator.num_processes, seen=reader.seen, computed=computed, alone=alone,
                  counts=[c.tolist() for c in t.allocation_history])
else:  # parity: Uniform vs stock GRPOTrainer, two weighted rewards, num_iterations=2, gradient accumulation 2
    kw = dict(reward_funcs=[reward_one, reward], reward_weights=[0.7, 0.3], num_iterations=2,
              gradient_accumulation_steps=2, max_steps=4, optim="sgd")
    stock, _, seen_stock = trainer_of(GRPOTrainer, **dict(kw))
    ours, _, seen_ours = trainer_of(AdaptiveGRPOTrainer, allocator="uniform", **dict(kw))
    rank = ours.accelerator.process_index
    params = [float((p - q).abs().max()) for p, q in zip(stock.model.parameters(), ours.model.parameters())]
    result = dict(rank=rank, world=ours.accelerator.num_processes, stock=seen_stock["advantages"],
                  ours=seen_ours["advantages"], param_diff=max(params),
                  counts=[c.tolist() for c in ours.allocation_history],
                  losses=[[h.get("loss") for h in t.state.log_history if "loss" in h] for t in (stock, ours)])
open(f"{out_dir}/{mode}-rank{rank}.json", "w").write(json.dumps(result))
"""


def run_two_processes(tmp_path, request, mode, port):
    if os.environ.get("SLOW") != "1" and "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("slow (two processes): SLOW=1 or -m slow")
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [torchrun, "--nproc_per_node", "2", "--master_port", str(port), str(script), str(tmp_path), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((tmp_path / f"{mode}-rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.slow
def test_two_processes_allocate_once_keep_groups_whole_and_use_padding(tmp_path, request):
    ranks = run_two_processes(tmp_path, request, "skewed", 29533)
    assert [r["world"] for r in ranks] == [2, 2]
    # 16 rows = 4 prompts x 4; the allocator ran once on rank 0: 1+4+1, 1+3+1, 1+2+1, 1
    assert ranks[0]["counts"] == [[6, 5, 4, 1]] and ranks[1]["counts"] == []
    rows = [p for r in ranks for p in r["prompts"]]
    assert len(rows) == 16 and sorted(rows.count(p) for p in set(rows)) == [1, 4, 5, 6]
    for r in ranks:  # each rank holds 8 rows; the singleton gets advantage 0
        assert len(r["prompts"]) == 8
        for i, p in enumerate(r["prompts"]):
            if rows.count(p) == 1:
                assert r["advantages"][i] == 0.0
    logs = ranks[0]["logs"][0]
    assert logs["adaptive/rounds"] == 4.0 and logs["adaptive/rollouts_spent"] == 16.0
    # both padding rollouts were served to the last round: 16 generated for a budget of 16
    assert logs["adaptive/padding_unused"] == 0.0
    assert ranks[1]["logs"][0]["adaptive/rounds"] == 4.0  # every rank logs the same


@pytest.mark.slow
def test_two_processes_policy_pass_gives_every_prompt_its_own_row_once(tmp_path, request):
    """policy_features=True on 2 processes, 6 rows each, 4 rollouts a prompt: process 0 holds all of
    the step's first prompt and half of the second, process 1 the other half and the third. The
    allocator (main process) gets one row per prompt, in the step's prompt order, equal to the
    prompt's hidden state read alone; each process read each of its own prompts once."""
    ranks = run_two_processes(tmp_path, request, "policy", 29536)
    main, other = ranks
    assert [r["world"] for r in ranks] == [2, 2] and other["seen"] == []
    ((keys, features),) = main["seen"]  # once, before the step's single plan
    assert len(keys) == 3 and len(set(keys)) == 3 and main["counts"] == [[4, 4, 4]]
    np.testing.assert_allclose(features, [main["alone"][k] for k in keys], rtol=1e-4, atol=1e-5)
    assert main["computed"] == [keys[:2]] and other["computed"] == [keys[1:]]


@pytest.mark.slow
def test_two_processes_uniform_matches_stock(tmp_path, request):
    ranks = run_two_processes(tmp_path, request, "parity", 29534)
    for r in ranks:
        assert r["world"] == 2 and len(r["stock"]) == len(r["ours"]) == 2
        for a, b in zip(r["stock"], r["ours"]):
            assert np.allclose(a, b, atol=1e-5) and np.abs(a).sum() > 0
        assert r["param_diff"] < 1e-5
        assert np.allclose(r["losses"][0], r["losses"][1], atol=1e-6)
    assert ranks[0]["counts"] == [[4] * 8] * 2  # 2 ranks x 8 rows x 2 steps = 32 rows = 8 prompts


@pytest.mark.slow
def test_two_processes_saving_allocator_uneven_shares_zero_weight_padding(tmp_path, request):
    ranks = run_two_processes(tmp_path, request, "saving", 29535)
    # 32 rows = 8 prompts x 4 (2 processes x 8 rows x steps_per_generation 2); 7 spent: shares 4 and 3,
    # each rank holds 4 rows (2 micro-batches of 2); rank 1's 4th row is a copy with no loss weight
    assert ranks[0]["counts"] == [[0, 3, 2, 0, 1, 0, 0, 1]]
    assert [len(r["advantages"]) for r in ranks] == [4, 4]
    assert ranks[0]["masked"] == [False] * 4 and sum(ranks[1]["masked"]) == 1
    assert ranks[1]["advantages"][ranks[1]["masked"].index(True)] == 0.0
    logs = ranks[0]["logs"][0]
    assert (
        logs["adaptive/rollouts_spent"] == 7 and logs["adaptive/rollouts_saved"] == 25 and logs["adaptive/skipped"] == 4
    )
    assert logs["adaptive/padding_rows"] == 1
    assert logs["adaptive/padding_unused"] == 1  # generated to even out the second round's call, not trained
    for r in ranks:
        assert r["table"] == 7 and all(np.isfinite(r["losses"]))

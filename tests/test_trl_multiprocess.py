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

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

SCRIPT = r'''
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from datasets import Dataset
from trl import GRPOConfig
from adaptive_rollouts.demo.model import build_model
from adaptive_rollouts.demo.tokenizer import build_tokenizer
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

class Skewed:
    """First round 1 rollout per prompt, then the rest: 7 more to prompt 0 and 1 and 5 to prompt 2."""
    def run(self, prompts, budget, sample):
        q = len(prompts)
        first = sample(np.arange(q), np.ones(q, dtype=int))
        second = sample(np.array([0, 1, 2]), np.array([6, 6, budget - q - 12]))
        return [np.concatenate([first[i], second[i]]) if i < 3 else first[i] for i in range(q)]

def reward(prompts, completions, **kw):
    return [len(c) / 5.0 for c in completions]

tok = build_tokenizer()
model = build_model(tok, seed=0, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                    num_key_value_heads=2, num_hidden_layers=1)
args = GRPOConfig(output_dir=sys.argv[1], per_device_train_batch_size=8, num_generations=4, max_completion_length=5,
                  max_steps=1, learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no", use_cpu=True,
                  beta=0.0, disable_tqdm=True, seed=0)
prompts = ["1+2=", "3*4=", "9-5=", "7+7=", "2*3=", "8-1=", "5+5=", "6*6="]
t = AdaptiveGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}),
                        processing_class=tok, allocator=Skewed())
seen = {}
original = t._generate_and_score_completions
def wrapped(inputs):
    out = original(inputs)
    seen["advantages"] = out["advantages"].tolist()
    seen["prompt_ids"] = out["prompt_ids"].tolist()
    return out
t._generate_and_score_completions = wrapped
t.train()
rank = t.accelerator.process_index
result = dict(rank=rank, world=t.accelerator.num_processes, advantages=seen["advantages"],
              prompts=[tok.decode([i for i in row if i != tok.pad_token_id]) for row in seen["prompt_ids"]],
              counts=[c.tolist() for c in t.allocation_history])
open(f"{sys.argv[1]}/rank{rank}.json", "w").write(json.dumps(result))
'''


@pytest.mark.slow
def test_two_processes_allocate_once_and_keep_groups_whole(tmp_path, request):
    if os.environ.get("SLOW") != "1" and "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("slow (two processes, ~40 s): SLOW=1 or -m slow")
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [torchrun, "--nproc_per_node", "2", "--master_port", "29533", str(script), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    # 16 rows = 4 prompts x 4; the allocator ran once on rank 0: counts 7, 7, 1, 1
    assert [sorted(c) for c in ranks[0]["counts"]] == [[1, 1, 7, 7]] and ranks[1]["counts"] == []
    rows = [p for r in ranks for p in r["prompts"]]
    assert len(rows) == 16 and sorted(rows.count(p) for p in set(rows)) == [1, 1, 7, 7]
    for r in ranks:  # each rank: one group of 7 and a singleton, nothing split
        assert sorted(r["prompts"].count(p) for p in set(r["prompts"])) == [1, 7]
        singleton = next(i for i, p in enumerate(r["prompts"]) if r["prompts"].count(p) == 1)
        assert r["advantages"][singleton] == 0.0

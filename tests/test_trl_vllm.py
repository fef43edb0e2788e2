"""vLLM paths without vLLM: TRL's own ``VLLMGeneration`` (sync, sleep, server requests) drives a fake
engine / server, and we count weight pushes, sleeps and requests. Padding of rounds on several
processes, with the process count faked."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Skewed, make_trainer, reward_length  # noqa: E402

from adaptive_rollouts.allocators import VIGOR  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer, plan_calls  # noqa: E402
from adaptive_rollouts.integrations.trl.layout import Call  # noqa: E402
from adaptive_rollouts.integrations.trl.rounds import Rollout, RoundsMixin  # noqa: E402


def _completion(rng, eos, vocab):
    n = int(rng.integers(1, 6))
    ids = rng.integers(3, vocab, size=n).tolist()
    return ids[:-1] + [eos] if rng.random() < 0.5 else ids


class FakeLLM:
    """The slice of ``vllm.LLM`` TRL's colocate mode calls, recording what happens."""

    def __init__(self, eos, vocab):
        self.events = []
        self.rng = np.random.default_rng(0)
        self.eos, self.vocab = eos, vocab
        model = SimpleNamespace(load_weights=lambda weights: None)
        runner = SimpleNamespace(model_runner=SimpleNamespace(model=model))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=runner), model_config=SimpleNamespace(max_model_len=64)
        )

    def wake_up(self, tags):
        self.events.append(("wake", tuple(tags)))

    def sleep(self, level):
        self.events.append(("sleep", level))

    def reset_prefix_cache(self):
        pass

    def generate(self, prompts, sampling_params, use_tqdm):
        self.events.append(("generate", len(prompts)))
        out = []
        for p in prompts:
            ids = _completion(self.rng, self.eos, self.vocab)
            logprobs = [{t: SimpleNamespace(logprob=-1.0, rank=1)} for t in ids]
            out.append(
                SimpleNamespace(
                    prompt_token_ids=p["prompt_token_ids"], outputs=[SimpleNamespace(token_ids=ids, logprobs=logprobs)]
                )
            )
        return out


class FakeClient:
    """The slice of TRL's ``VLLMClient`` server mode calls."""

    def __init__(self, eos, vocab):
        self.requests = []
        self.rng = np.random.default_rng(0)
        self.eos, self.vocab = eos, vocab

    def generate(self, prompts, features=None, n=1, **kwargs):
        self.requests.append((len(prompts), n))
        completions = [_completion(self.rng, self.eos, self.vocab) for _ in range(len(prompts) * n)]
        return {
            "prompt_ids": prompts,
            "completion_ids": completions,
            "logprobs": [[[-1.0] for _ in c] for c in completions],
            "logprob_token_ids": [[[t] for t in c] for c in completions],
        }

    def update_named_params(self, metadata, params):
        for _ in params:
            pass

    def reset_prefix_cache(self):
        pass


def with_fake_vllm(trainer, monkeypatch, mode, sleep=False):
    from trl.generation import vllm_generation

    class FakeGeneration(vllm_generation.VLLMGeneration):
        pushes = 0

        def _init_vllm(self):
            tok = self.processing_class
            if self.mode == "colocate":
                self.llm = FakeLLM(tok.eos_token_id, len(tok))
                if self.enable_sleep_mode:
                    self.llm.sleep(level=2)
                self._llm_weights_sleeping = self.enable_sleep_mode
            else:
                self.vllm_client = FakeClient(tok.eos_token_id, len(tok))

        def sync_weights(self):
            type(self).pushes += 1
            super().sync_weights()

    monkeypatch.setattr(vllm_generation, "SamplingParams", lambda **kw: kw, raising=False)
    generation = FakeGeneration(
        model=trainer.model,
        accelerator=trainer.accelerator,
        processing_class=trainer.processing_class,
        mode=mode,
        enable_sleep_mode=sleep,
        max_completion_length=trainer.max_completion_length,
        logprobs=0,
    )
    trainer.use_vllm, trainer.vllm_mode, trainer.vllm_generation = True, mode, generation
    trainer._last_loaded_step = -1
    return generation


def test_colocate_sleep_mode_pushes_weights_once_per_step(tmp_path, monkeypatch):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=VIGOR(m0=1, rounds=3))
    generation = with_fake_vllm(trainer, monkeypatch, "colocate", sleep=True)
    trainer.train()
    rounds = [h["adaptive/rounds"] for h in trainer.state.log_history if "adaptive/rounds" in h]
    events = generation.llm.events
    assert sum(rounds) == sum(e[0] == "generate" for e in events) > 2  # several rounds per step
    assert type(generation).pushes == 2  # one push per step (stock TRL: one per generate call)
    assert [e for e in events if e[0] == "sleep"] == [("sleep", 2)] * 3  # at start, then after each step
    step_events = events[1:]
    first_sleep = step_events.index(("sleep", 2))
    assert [e[0] for e in step_events[:first_sleep]].count("generate") == rounds[0]  # awake across rounds


def test_server_mode_requests_n_completions_per_prompt(tmp_path, monkeypatch):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator="uniform")
    generation = with_fake_vllm(trainer, monkeypatch, "server")
    trainer.train()
    assert generation.vllm_client.requests == [(3, 4)] * 2  # as stock TRL: 3 prompts, n=4 each

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=Skewed())
    generation = with_fake_vllm(trainer, monkeypatch, "server")
    trainer.train()
    # round 1: one rollout per prompt; round 2: 8 more of prompt 0 (n=8) and 1 of prompt 1
    assert generation.vllm_client.requests == [(3, 1), (1, 8), (1, 1)] * 2
    assert [c.tolist() for c in trainer.allocation_history] == [[9, 2, 1]] * 2


# ---------------------------------------------------------------- padding over processes
def test_plan_calls_pads_single_rows_only_to_the_process_count():
    assert plan_calls({0: 3, 1: 1}, 1, grouped=False) == [Call(1, [0, 0, 0, 1], [])]
    assert plan_calls({0: 3, 1: 1}, 4, grouped=False) == [Call(1, [0, 0, 0, 1], [])]
    assert plan_calls({0: 3, 1: 2}, 4, grouped=False) == [Call(1, [0, 0, 0, 1, 1], [0, 1, 0])]
    # grouped (vLLM server): a count shared by prompts whose rows split evenly is one n=c request
    assert plan_calls({0: 4, 1: 4, 2: 1}, 2, grouped=True) == [Call(4, [0, 1], []), Call(1, [2], [2])]
    assert plan_calls({0: 3, 1: 1}, 2, grouped=True) == [Call(1, [0, 0, 0, 1], [])]
    assert plan_calls({0: 0}, 2, grouped=True) == []
    with pytest.raises(ValueError, match="non-negative"):
        plan_calls({0: -1}, 2, grouped=False)


class FakeRounds(RoundsMixin):
    """RoundsMixin on a fake world of ``world`` processes whose generation records what it makes."""

    def __init__(self, world):
        self.accelerator = SimpleNamespace(num_processes=world)
        self.use_vllm = False
        self.generated: list[int] = []

    def _generate_call(self, rows, n):
        assert len(rows) % self.accelerator.num_processes == 0
        self.generated.extend(r["id"] for r in rows)
        return [Rollout([], [len(self.generated) + i], "", None, None, torch.zeros(1), 0.0) for i in range(len(rows))]


def test_padding_rollouts_are_kept_and_served_to_later_rounds():
    rounds = FakeRounds(world=4)
    rows = [{"id": i} for i in range(3)]
    bank: dict = {}
    got = rounds.run_round(rows, {0: 2, 1: 3}, bank)  # 5 rows -> 3 padding rows, kept
    assert [len(got[0]), len(got[1])] == [2, 3] and sum(len(v) for v in bank.values()) == 3
    got = rounds.run_round(rows, {0: 1, 1: 2, 2: 1}, bank)  # 0 and 1 served from the padding
    assert [len(got[i]) for i in range(3)] == [1, 2, 1]
    assert len(rounds.generated) == 12 and sum(len(v) for v in bank.values()) == 12 - 9
    ids = [r.completion_ids[0] for i in range(3) for r in got[i]]
    assert len(set(ids)) == len(ids)  # every rollout served once

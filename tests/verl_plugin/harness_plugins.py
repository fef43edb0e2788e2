"""Plug-ins the verl harness scenarios name in their configs: a text encoder, allocators that skip
prompts (a fill-kind single-shot one, and saving ones: single-shot and progressive), a checkpoint
callback, and a multi-output tool agent loop."""

from __future__ import annotations

import os

import numpy as np
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

from adaptive_rollouts.types import Plan


class HashEncoder:
    """A tiny text encoder (adaptive.encoder=harness_plugins:HashEncoder): 16 hashed word features."""

    dim = 16

    def encode(self, texts):
        import hashlib

        out = np.zeros((len(texts), self.dim))
        for i, text in enumerate(texts):
            for word in str(text).split():
                h = int(hashlib.sha256(word.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class SkipLast:
    """A single-shot allocator (adaptive.allocator=harness_plugins:SkipLast): the last prompt of each batch
    gets 0 rollouts, the first gets its share too; records what it observes."""

    instances: list = []

    def __init__(self, seed: int = 0):
        self.observed: list = []
        self.last_metrics = None
        SkipLast.instances.append(self)

    def plan(self, prompts, budget):
        q = len(prompts)
        counts = np.full(q, budget // q)
        counts[: budget % q] += 1
        counts[0] += counts[-1]
        counts[-1] = 0
        return counts

    def observe(self, prompts, rewards):
        self.observed.append((list(prompts), [np.asarray(r).tolist() for r in rewards]))
        self.last_metrics = {"rollouts": sum(len(r) for r in rewards), "skipped": sum(len(r) == 0 for r in rewards)}

    def state_dict(self):
        return {"allocator": "SkipLast", "observed": len(self.observed)}

    def load_state_dict(self, state):
        pass


def _draw_parts(answer, asked):
    """(rewards, unscored) of a ``sample`` answer: a list of arrays, or a `Draw` (a list with ``unscored``)."""
    unscored = getattr(answer, "unscored", np.zeros(len(asked), dtype=np.int64))
    return [np.asarray(r, dtype=float) for r in answer], np.asarray(unscored, dtype=np.int64)


class SaveSingleShot:
    """A saving single-shot allocator (``kind = "save"``): a prompt seen for the first time gets 3
    rollouts, one whose last group varied 4, one whose last group was all-equal 0 (skipped, and
    forgotten: next time it is new again); the last prompt of every batch is skipped. Steps listed
    in ``empty_steps`` skip every prompt. ``plan`` returns a `Plan`, as the library's allocators do.
    Its state is what it remembers."""

    kind = "save"

    def __init__(self, empty_steps=()):
        self.empty_steps = [int(s) for s in empty_steps]
        self.last: dict = {}
        self.steps = 0
        self.observed: list = []
        self.last_metrics = None

    def plan(self, prompts, budget):
        self.steps += 1
        counts = np.array([{None: 3, "varied": 4, "flat": 0}[self.last.get(p)] for p in prompts], dtype=np.int64)
        counts[-1] = 0
        if self.steps in self.empty_steps:
            counts[:] = 0
        return Plan(list(prompts), counts, budget)

    def observe(self, plan, rewards):
        assert isinstance(plan, Plan)  # the trainer gives the plan back
        prompts = plan.prompts
        self.observed.append((list(prompts), [np.asarray(r).tolist() for r in rewards]))
        for p, r in zip(prompts, rewards):
            r = np.asarray(r)
            if r.size:
                self.last[p] = "varied" if np.unique(r).size > 1 else "flat"
            else:
                self.last.pop(p, None)
        self.last_metrics = {"rollouts_spent": sum(len(r) for r in rewards)}

    def state_dict(self):
        return {"steps": self.steps, "last": {str(k): v for k, v in self.last.items()}}

    def load_state_dict(self, state):
        self.steps, self.last = int(state["steps"]), dict(state["last"])


class SaveProgressive:
    """A saving progressive allocator (``run`` only, ``kind = "save"``): round 1 is a pilot of 2
    rollouts per prompt (1 for prompts whose last pilot was all-equal; the last prompt of the batch
    is skipped); round 2 gives half of what is left of the budget (all of it with ``greedy``) to the
    first prompt whose pilot varied. Rollouts a ``sample`` answer leaves unscored are spent. Steps
    listed in ``empty_steps`` skip every prompt. Records every answer's unscored counts."""

    kind = "save"

    def __init__(self, empty_steps=(), greedy=False):
        self.empty_steps = [int(s) for s in empty_steps]
        self.greedy = bool(greedy)
        self.flat: set = set()
        self.steps = 0
        self.unscored: list = []
        self.last_metrics = None

    def _sample(self, sample, rewards, indices, counts):
        got, unscored = _draw_parts(sample(indices, counts), counts)
        self.unscored.append(unscored.tolist())
        for i, r, u, c in zip(indices, got, unscored, counts):
            assert r.size + u == c
            rewards[i].extend(r.tolist())
        return int(counts.sum())

    def run(self, prompts, budget, sample):
        self.steps += 1
        q = len(prompts)
        rewards: list = [[] for _ in range(q)]
        spent = 0
        if self.steps not in self.empty_steps:
            pilot = np.array([1 if p in self.flat else 2 for p in prompts], dtype=np.int64)
            pilot[-1] = 0
            live = np.flatnonzero(pilot)
            spent += self._sample(sample, rewards, live, pilot[live])
            varied = [i for i in live if np.unique(rewards[i]).size > 1]
            self.flat = (self.flat | {prompts[i] for i in live if i not in varied}) - {prompts[i] for i in varied}
            rest = budget - spent
            extra = rest if self.greedy else rest // 2
            if varied and extra > 0:
                spent += self._sample(sample, rewards, np.array([varied[0]]), np.array([extra]))
        out = [np.asarray(r, dtype=float) for r in rewards]
        self.last_metrics = {"rollouts_spent": spent, "skipped": sum(r.size == 0 for r in out)}
        return out

    def state_dict(self):
        return {"steps": self.steps, "flat": sorted(str(p) for p in self.flat)}

    def load_state_dict(self, state):
        self.steps, self.flat = int(state["steps"]), set(state["flat"])


class StateCheck:
    """trainer.checkpoint_callback_class=harness_plugins.StateCheck: records, at each on_save, whether the
    allocator state and verl's completion marker are on disk."""

    seen: list = []

    def __init__(self, config=None):
        self.config = config

    def on_save(self, trainer, global_step, checkpoint_dir, async_save=False, **kwargs):
        root = os.path.dirname(checkpoint_dir)
        StateCheck.seen.append(
            {
                "step": global_step,
                "async_save": async_save,
                "allocator_state": os.path.exists(os.path.join(checkpoint_dir, "adaptive_allocator.safetensors")),
                "latest_marker": os.path.exists(os.path.join(root, "latest_checkpointed_iteration.txt")),
            }
        )


def search_tool(query: str) -> str:
    return "result"


@register_agent_loop("retrieval_agent")
class RetrievalAgentLoop(AgentLoopBase):
    """Multi-turn tool agent, one output per assistant turn (a multi-output agent loop): the model
    calls a search tool, gets its result, then answers (rollout.agent.default_agent_loop=retrieval_agent)."""

    async def run(self, sampling_params, **kwargs):
        from uuid import uuid4

        messages = list(kwargs["raw_prompt"])
        outputs = []
        for turn in range(3):
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
            out = await self.server_manager.generate(uuid4().hex, prompt_ids=ids, sampling_params=sampling_params)
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            outputs.append(
                AgentLoopOutput(
                    prompt_ids=ids,
                    response_ids=out.token_ids,
                    response_mask=[1] * len(out.token_ids),
                    response_logprobs=out.log_probs,
                    num_turns=2 * turn + 2,
                    metrics=AgentLoopMetrics(),
                    extra_fields=dict(out.extra_fields),
                )
            )
            if "call" not in text.split():
                break
            messages += [{"role": "assistant", "content": text}, {"role": "tool", "content": search_tool(text)}]
        return outputs

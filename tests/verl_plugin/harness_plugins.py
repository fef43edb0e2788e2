"""Plug-ins the verl harness scenarios name in their configs: a text encoder, a single-shot
allocator that skips a prompt, a checkpoint callback, and a multi-output tool agent loop."""

from __future__ import annotations

import os

import numpy as np
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.experimental.agent_loop.agent_loop import register as register_agent_loop


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

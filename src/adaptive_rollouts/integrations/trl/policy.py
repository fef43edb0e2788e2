"""The policy's own view of each prompt, for an allocator that reads it (`types.PolicyAware`).

`last_token_hidden_states`: one no-grad forward pass of the model over left-padded prompt token ids
(as TRL pads prompts), ``output_hidden_states=True``, and the last layer's hidden state at each
prompt's last real token, as float32 numpy ``[B, hidden]``. `policy_features_for` turns the
trainer's ``policy_features`` argument into the callable `AdaptiveGRPOTrainer` runs on each
process's own rows (TRL's own prompt tokenisation, `GRPOTrainer._tokenize_prompts`; the trainer's
own model, also when vLLM generates). The bridge (`bridge.TrainerStep`) checks the result (one
finite row per prompt, one width for the run) and times the pass.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from adaptive_rollouts.types import reads_policy

__all__ = ["last_token_hidden_states", "policy_features_for"]

logger = logging.getLogger(__name__)


def last_token_hidden_states(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> np.ndarray:
    """The last layer's hidden state at each row's last real token (mask 1), as float32 numpy.

    Works for left padding (TRL's: the last real token is the last position) and right padding alike.
    Raises ValueError naming ``policy_features`` when the model returns no hidden states.
    """
    if input_ids.ndim != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(f"policy_features: input_ids {tuple(input_ids.shape)} and mask must be [batch, tokens]")
    if not bool((attention_mask.sum(dim=1) > 0).all()):
        raise ValueError("policy_features: a prompt has no tokens")
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    hidden = out.get("hidden_states") if hasattr(out, "get") else getattr(out, "hidden_states", None)
    if not hidden:
        raise ValueError(
            f"policy_features: the model ({type(model).__name__}) returned no hidden states for "
            "output_hidden_states=True; pass policy_features=<callable> of your own, or policy_features=False"
        )
    last = hidden[-1]
    width = int(attention_mask.shape[1])
    # position of each row's last 1 in the mask: the first 1 from the right
    position = width - 1 - torch.argmax(attention_mask.flip(dims=[1]).to(torch.int64), dim=1)
    rows = last[torch.arange(last.shape[0], device=last.device), position.to(last.device)]
    return rows.detach().float().cpu().numpy()


def _left_pad(ids: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        if len(x):
            input_ids[i, width - len(x) :] = torch.as_tensor(list(x), dtype=torch.long)
            mask[i, width - len(x) :] = 1
    return input_ids.to(device), mask.to(device)


def policy_features_for(trainer: Any, spec: Any) -> Callable[[list[dict]], np.ndarray] | None:
    """The trainer's ``policy_features`` argument as ``rows -> [len(rows), width]``: False: none;
    True: `last_token_hidden_states` of the trainer's model over TRL's tokenisation of the rows'
    prompts; a callable: itself; None (the default): as True where the trainer can give it (its
    allocator reads the view, `types.reads_policy`, its model's forward takes ``output_hidden_states``
    and no ``environment_factory`` renders the prompts), else none, said once in the log when the
    allocator would have read it. Anything else raises ValueError naming the argument."""
    if spec is None:
        if not reads_policy(trainer.allocator):
            return None
        reason = _why_no_view(trainer)
        if reason is not None:
            logger.warning("policy_features: the allocator gets no policy view (%s); its belief uses the rest", reason)
            return None
        spec = True
    if spec is False:
        return None
    if callable(spec):
        return spec
    if spec is not True:
        raise ValueError(f"policy_features must be True, False, None or a callable rows -> array, got {spec!r}")
    if getattr(trainer, "environment_factories", None) is not None:
        raise ValueError("policy_features=True does not support environment_factory (prompts render per environment)")

    def hidden_states(rows: list[dict]) -> np.ndarray:
        prompt_ids, _, _ = trainer._tokenize_prompts([row["prompt"] for row in rows])
        pad_id = trainer._tokenizer.pad_token_id
        input_ids, mask = _left_pad(prompt_ids, 0 if pad_id is None else pad_id, trainer.accelerator.device)
        model = trainer.accelerator.unwrap_model(trainer.model)
        return last_token_hidden_states(model, input_ids, mask)

    return hidden_states


def _why_no_view(trainer: Any) -> str | None:
    """Why the default (``policy_features=None``) gives an allocator that reads it no view; None
    when it gives one."""
    if getattr(trainer, "environment_factories", None) is not None:
        return "environment_factory renders prompts per environment"
    forward = getattr(trainer.accelerator.unwrap_model(trainer.model), "forward", None)
    try:
        params = inspect.signature(forward).parameters if forward is not None else {}
    except (TypeError, ValueError):
        params = {}
    takes = "output_hidden_states" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return None if takes else "the model's forward takes no output_hidden_states"

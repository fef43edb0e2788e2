"""Prompt identity and text between a trainer and an allocator.

A prompt's *key* is its dataset row (`keys.row_key`): two rows with the same text are two prompts.
Its *text* is only a feature, for predictors that embed it:

- `prompt_text`: the text of a dataset prompt (a string, or a chat conversation);
- `TEXT_PREDICTORS`, `needs_text`, `needs_pool`: which allocator settings predict from text, and
  which live on a known pool of prompts (VIP's published GP), decided from the settings alone, so a
  trainer can check its encoder at start-up;
- `text_features`: the `KeyedTexts` into which the trainer registers each batch's texts under the
  row keys, wired into the allocator's predictor.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import registry_key
from adaptive_rollouts.allocators.predictive import TEXT_PREDICTORS
from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts, default_encoder
from adaptive_rollouts.predictors import PaperGP
from adaptive_rollouts.types import Allocator, Encoder

from .build import allocator_factory

__all__ = ["TEXT_PREDICTORS", "needs_pool", "needs_text", "prompt_text", "text_features"]

PoolFn = Callable[[], tuple[list, list[str]]]
"""Returns the training set's row keys and prompt texts (asked only by a pool-based predictor)."""


def _message_text(message: Any) -> str:
    """A chat message's text: its string content, or the text of its content blocks."""
    content = message.get("content") if isinstance(message, Mapping) else message
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple, np.ndarray)):  # content blocks: keep the text pieces
        return " ".join(
            str(b["text"])
            for b in content
            if isinstance(b, Mapping) and "text" in b and b.get("type", "text") == "text"
        )
    return ""


def prompt_text(prompt: Any) -> str:
    """The text of a dataset prompt, for embedding: the string, or the messages' texts one per line
    (empty messages left out); anything else as JSON.

    >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2="}])
    'Be brief.\\n2+2='
    >>> prompt_text([{"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}]}])
    't'
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple, np.ndarray)) and all(isinstance(m, (Mapping, str)) for m in prompt):
        return "\n".join(text for text in map(_message_text, prompt) if text)
    return json.dumps(prompt, ensure_ascii=False, default=str)


def needs_pool(spec: str | None, options: Mapping[str, Any]) -> bool:
    """Whether the allocator's predictor is VIP's published GP, which lives on a known prompt pool.

    >>> needs_pool("vip_paper", {}), needs_pool("vip", {"predictor": "paper-gp"}), needs_pool("vip", {})
    (True, True, False)
    """
    predictor = options.get("predictor")
    if predictor is not None:
        return predictor == "paper-gp"
    return spec is not None and registry_key(spec) == "vip-paper"


def needs_text(spec: str | None, options: Mapping[str, Any]) -> bool:
    """Whether the allocator's predictor embeds prompt text: its ``predictor`` option (given, or the
    constructor's default) is one of `TEXT_PREDICTORS`, and the options bring no ``features``.

    >>> needs_text("vip", {}), needs_text("vip", {"predictor": "beta"}), needs_text("vigor", {})
    (True, False, False)
    """
    if "features" in options:
        return False
    predictor = options.get("predictor")
    if predictor is None:
        if needs_pool(spec, options):
            return True
        try:
            param = inspect.signature(allocator_factory(spec)).parameters.get("predictor")
        except (TypeError, ValueError):
            return False
        predictor = None if param is None else param.default
    return isinstance(predictor, str) and predictor in TEXT_PREDICTORS


def text_features(
    allocator: Allocator, pool: PoolFn | None = None, encoder: Encoder | None = None
) -> KeyedTexts | None:
    """The `KeyedTexts` through which the allocator's predictor reads prompt texts, or None.

    The trainer's prompts are row keys, so a predictor that embeds text needs the key -> text map.
    A predictor named ``"gp"`` or ``"ridge"`` gets its features (None: ``encoder``, or the default
    encoder; an encoder, or a `FeatureTable` keyed by prompt text) wrapped in a `KeyedTexts`, into
    which the trainer registers each batch's texts; so does a predictor object with ``features``
    (except a `PaperGP` object, which must be built on row keys). ``"paper-gp"`` lives on a known
    pool: it gets a `FeatureTable` over ``pool()`` (the dataset's row keys and texts), embedded once
    with its features (or ``encoder``, or the default encoder); an unknown pool raises.
    """
    slot = getattr(allocator, "slot", None)
    if slot is None:
        return None
    built = getattr(slot, "_predictor", None)
    if built is not None:
        if getattr(built, "features", None) is None or isinstance(built, PaperGP):
            return None
        if not isinstance(built.features, KeyedTexts):
            built.features = KeyedTexts(built.features)
        return built.features
    if not (isinstance(slot.spec, str) and slot.spec in TEXT_PREDICTORS):
        return None
    own = slot.features if slot.features is not None else encoder
    if slot.spec == "paper-gp":
        if pool is None:
            raise ValueError(
                "predictor 'paper-gp' lives on a known prompt pool: give the trainer a map-style training set "
                "keyed by row (its rows are the pool), or use predictor 'gp'"
            )
        keys, texts = pool()
        slot.features = FeatureTable(keys, (own if own is not None else default_encoder()).encode(texts))
        return None
    if not isinstance(own, KeyedTexts):
        own = KeyedTexts(own)
    slot.features = own
    return own

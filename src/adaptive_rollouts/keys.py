"""Prompt identity: one rule for the core, TRL and verl.

A prompt is a *key* unique per dataset row; its text (or any feature) is used only to predict.
Statistics are pooled by key, so two rows with the same text are two prompts, and the same key twice
in one batch is an error (the allocators check it). Integrations build keys with `row_key`:

- a row with a position that is unique within its dataset -> ``"<source>#<index>"``;
- otherwise -> ``"sha256:<hex>"`` of the row's canonical JSON (every column, sorted keys), so rows
  that differ in any column (e.g. the reference answer) get different keys.

>>> row_key({"prompt": "2+2=", "answer": "4"}, source="train", index=7)
'train#7'
>>> row_key({"prompt": "2+2=", "answer": "4"}) == row_key({"answer": "4", "prompt": "2+2="})
True
>>> row_key({"prompt": "2+2=", "answer": "4"}) == row_key({"prompt": "2+2=", "answer": "5"})
False
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["row_key"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "tolist"):  # torch tensors and the like, without importing torch
        return value.tolist()
    return repr(value)


def row_key(row: Mapping[str, Any] | None = None, *, source: str | None = None, index: int | None = None) -> str:
    """The key of one dataset row: ``source#index`` when ``index`` is given, else a content hash.

    ``source`` names the dataset (file, split or data source) so that indices of two datasets never
    collide; it is required with ``index``.
    """
    if index is not None:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ValueError(f"index must be a non-negative integer row position, got {index!r}")
        if not source:
            raise ValueError("source must name the dataset when index is given (indices of two datasets collide)")
        return f"{source}#{int(index)}"
    if row is None:
        raise ValueError("row_key needs a row (content hash) or source and index")
    if not isinstance(row, Mapping):
        raise ValueError(f"row must be a mapping of column -> value, got {type(row).__name__}")
    blob = json.dumps(dict(row), sort_keys=True, default=_jsonable, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]

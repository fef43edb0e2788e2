"""Prompt identity in verl: one key per training-set row, unique by construction.

verl's ``index`` batch field is ``extra_info.index`` of the row, 0 when the row has none, so two
``data.train_files`` (or a file without indices) give colliding values. The default key is instead
`adaptive_rollouts.keys.row_key` of the row's *position* in verl's training set (the files
concatenated, after ``train_max_samples`` and the overlong-prompt filter), with the files' names
as the source: ``"train.parquet+math.parquet#1234"``. The training dataloader is rebuilt around
`RowKeyedDataset` with verl's own sampler, batch size, workers and collate function, so the order of
prompts and verl's dataloader checkpoint are unchanged. The key field is taken off the batch
before generation: agent loops never see it.

Resuming with the same ``data.train_files`` (what verl's dataloader checkpoint needs anyway) gives
the same keys; other files give other keys, so beliefs never attach to the wrong rows.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from adaptive_rollouts.bridge import prompt_text
from adaptive_rollouts.keys import row_key

__all__ = [
    "KEY_FIELD",
    "RowKeyedDataset",
    "batch_keys",
    "batch_texts",
    "dataset_source",
    "prompt_text",
    "rekey_dataloader",
]

KEY_FIELD = "adaptive_prompt_key"


def dataset_source(files: Any) -> str:
    """The training set's name in keys: its files' base names joined by '+' (long lists: hashed).

    >>> dataset_source(["/data/gsm8k/train.parquet", "/data/math/train.parquet"])
    'gsm8k/train.parquet+math/train.parquet'
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    names = [os.path.join(os.path.basename(os.path.dirname(str(f))), os.path.basename(str(f))) for f in files]
    if not names:
        raise ValueError("data.train_files is empty")
    if len(names) <= 4:
        return "+".join(names)
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:12]
    return f"{names[0]}+{len(names) - 1}-more-{digest}"


class RowKeyedDataset:
    """verl's training dataset with each row's key added as the field ``KEY_FIELD``."""

    def __init__(self, dataset: Any, source: str):
        self.dataset, self.source = dataset, source

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item: int) -> dict:
        row = self.dataset[item]
        row[KEY_FIELD] = row_key(source=self.source, index=int(item))
        return row

    def __getattr__(self, name: str) -> Any:
        if name in ("dataset", "source"):  # not set yet (unpickling in a dataloader worker)
            raise AttributeError(name)
        return getattr(self.dataset, name)


def rekey_dataloader(loader: Any, source: str) -> tuple[RowKeyedDataset, Any]:
    """A StatefulDataLoader like ``loader`` (same sampler, batch size, workers, collate, drop_last)
    over the dataset with row keys."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    dataset = RowKeyedDataset(loader.dataset, source)
    new = StatefulDataLoader(
        dataset=dataset,
        batch_size=loader.batch_size,
        num_workers=loader.num_workers,
        drop_last=loader.drop_last,
        collate_fn=loader.collate_fn,
        sampler=loader.sampler,
    )
    return dataset, new


def _values(batch: Any, name: str) -> list:
    values = batch[name]
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    out = []
    for v in values:
        v = getattr(v, "data", v)
        out.append(v.item() if hasattr(v, "item") else v)
    return out


def batch_keys(batch: Any, field: str | None) -> list:
    """The prompt keys of a verl TensorDict batch: the row keys (``field`` None; the field is removed
    from the batch), or the values of the batch field ``field`` (strings, numbers: used as given)."""
    name = KEY_FIELD if field is None else field
    if name not in batch.keys():
        if field is None:
            raise KeyError(f"the batch has no {KEY_FIELD!r}: the training dataloader was not rebuilt with row keys")
        raise KeyError(f"adaptive.prompt_key {field!r} is not a field of the batch; fields: {sorted(batch.keys())}")
    keys = [v if isinstance(v, (str, int)) else str(v) for v in _values(batch, name)]
    if field is None:
        del batch[KEY_FIELD]
    return keys


def batch_texts(batch: Any) -> list[str]:
    """`bridge.prompt_text` of every row's ``raw_prompt``."""
    return [prompt_text(m) for m in _values(batch, "raw_prompt")]

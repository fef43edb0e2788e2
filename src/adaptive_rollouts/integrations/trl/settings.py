"""What a TRL ``GRPOConfig`` means for the allocator (no TRL or torch): the TRL names of the bridge's
settings maps (`adaptive_rollouts.bridge.settings`), and the one input TRL gives that the trainer
refuses: image prompts."""

from __future__ import annotations

from typing import Any

from adaptive_rollouts.bridge.settings import LOSS_TYPE_AGGREGATION, MULTI_OBJECTIVE, SCALE_REWARDS, loss_rows_for
from adaptive_rollouts.bridge.settings import normalize_scale_rewards as normalize_scale_rewards
from adaptive_rollouts.bridge.settings import trl_aggregation as aggregation_for_loss_type
from adaptive_rollouts.bridge.settings import trl_estimator as estimator_for
from adaptive_rollouts.bridge.settings import trl_loss_rows_scale as loss_rows_scale

__all__ = [
    "IMAGE_COLUMNS",
    "LOSS_TYPE_AGGREGATION",
    "MULTI_OBJECTIVE",
    "SCALE_REWARDS",
    "aggregation_for_loss_type",
    "estimator_for",
    "loss_rows_for",
    "loss_rows_scale",
    "normalize_scale_rewards",
    "refuse_images",
]

IMAGE_COLUMNS = ("image", "images")


def refuse_images(dataset: Any) -> None:
    """Image prompts are not supported (docs/trl.md, 'Not supported'): refuse a dataset with image columns.

    >>> class Rows: column_names = ["prompt", "image"]
    >>> refuse_images(Rows())
    Traceback (most recent call last):
    ...
    ValueError: AdaptiveGRPOTrainer supports text prompts only: train_dataset has image column(s) ['image'] ...
    """
    columns = getattr(dataset, "column_names", None) or []
    found = [c for c in IMAGE_COLUMNS if c in columns]
    if found:
        raise ValueError(
            f"AdaptiveGRPOTrainer supports text prompts only: train_dataset has image column(s) {found} "
            "(see docs/trl.md, 'Not supported')"
        )

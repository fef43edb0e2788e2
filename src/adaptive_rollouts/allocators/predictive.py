"""Allocators driven by a success-probability predictor: the predictor given as an object or by
name (built on first use), updated from each step's rewards."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import predictors
from ..checks.validation import check_choice
from ..embeddings import default_encoder
from ..types import Prediction, StateDict
from .base import SingleShotAllocator

__all__ = ["PREDICTORS", "TEXT_PREDICTORS", "PredictiveAllocator", "PredictorSlot"]

PREDICTORS: dict[str, str] = {
    "gp": "GaussianProcess",
    "paper-gp": "PaperGP",
    "ridge": "Ridge",
    "beta": "DiscountedBeta",
    "windowed": "WindowedMean",
    "cumulative": "CumulativeMean",
}
"""Predictor names an allocator takes -> the class of `adaptive_rollouts.predictors` they build."""

TEXT_PREDICTORS: tuple[str, ...] = ("gp", "paper-gp", "ridge")
"""The names in `PREDICTORS` whose predictor embeds prompt text (built with features; the one list,
re-exported by `bridge.prompts`)."""


class PredictorSlot:
    """A predictor given as an object, or by name and built lazily on first use.

    Names: "gp" (our `GaussianProcess`), "paper-gp" (`PaperGP`), "ridge" (`Ridge`) - these need
    features: `features` (an `Encoder` or `FeatureTable`), or the default offline MiniLM encoder when
    None, so that prompt texts work with no set-up; "beta" (`DiscountedBeta`), "windowed"
    (`WindowedMean`), "cumulative" (`CumulativeMean`) need none.
    """

    def __init__(self, predictor: Any = "gp", features: Any = None):
        if isinstance(predictor, str):
            check_choice("predictor", predictor, tuple(PREDICTORS))
        elif not all(hasattr(predictor, m) for m in ("predict", "update", "state_dict", "load_state_dict")):
            raise ValueError(
                f"predictor must be a name or have predict/update/state_dict/load_state_dict, "
                f"got {type(predictor).__name__}"
            )
        self.spec = predictor
        self.features = features
        self._predictor = None if isinstance(predictor, str) else predictor

    @property
    def predictor(self) -> Any:
        if self._predictor is None:
            self._predictor = self._build(self.spec)
        return self._predictor

    def _build(self, name: str) -> Any:
        cls = getattr(predictors, PREDICTORS[name])
        if name not in TEXT_PREDICTORS:
            return cls()
        return cls(default_encoder() if self.features is None else self.features)

    def state_dict(self) -> StateDict:
        return self.predictor.state_dict()

    def load_state_dict(self, state: StateDict) -> None:
        self.predictor.load_state_dict(state)


class PredictiveAllocator(SingleShotAllocator):
    """A single-shot allocator driven by a success-probability predictor, updated in `observe`."""

    def __init__(self, predictor: Any = "gp", features: Any = None, seed: int | None = 0):
        super().__init__(seed)
        self.slot = PredictorSlot(predictor, features)

    @property
    def predictor(self) -> Any:
        return self.slot.predictor

    def _predict(self, prompts: list) -> Prediction:
        return self.predictor.predict(prompts)

    def _observe(self, prompts: list, rewards: list[np.ndarray]) -> None:
        sizes = np.fromiter(map(len, rewards), dtype=np.int64, count=len(rewards))
        if sizes.all():  # every prompt rolled out (the usual case): no copies
            self.predictor.update(prompts, rewards)
            return
        seen = np.flatnonzero(sizes).tolist()
        if seen:
            self.predictor.update([prompts[i] for i in seen], [rewards[i] for i in seen])

    def _extra_state(self) -> StateDict:
        return {"predictor": self.slot.state_dict()}

    def _load_extra_state(self, state: StateDict) -> None:
        self.slot.load_state_dict(state["predictor"])

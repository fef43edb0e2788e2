"""Known-p references for the demo: p estimated from extra samples of the current policy.

`SampledSuccess` is a Predictor whose prediction for a prompt is its success rate over ``samples``
completions of the *current* model at temperature 1. Those completions are generated outside the
trainer's rounds, so they are not charged to the step's budget (they are counted separately in
``extra_rollouts``), and under a forked torch RNG, so the training stream is untouched.
`KnownPSkip` is the known-p skip bound: it skips every prompt whose group would very likely be
all-equal and gives the others the mean group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.allocators.base import SingleShotAllocator
from adaptive_rollouts.objectives.variance import mixed_probability
from adaptive_rollouts.types import Prediction

SKIP_ABOVE = 0.9  # skip a prompt when P(its group is all equal) exceeds this


def row_index(key: str) -> int:
    """The pool position of a trainer row key ``"train#17"`` (ValueError naming a malformed key).

    >>> row_index("train#17")
    17
    """
    head, sep, tail = str(key).rpartition("#")
    if not sep or not head or not tail.isdigit():
        raise ValueError(f"prompt key must look like 'train#<row>', got {key!r}")
    return int(tail)


class SampledSuccess:
    """Predictor protocol: Prediction(mean = success rate of ``samples`` fresh completions of the
    current policy, var = 0) for each prompt key ``"train#<row>"`` (``texts[row]`` is its prompt).

    Each call samples under torch seed ``seed + call``, so a run is reproducible; the samples are
    counted in ``extra_rollouts`` and never in the trainer's budget. ``update`` learns nothing.
    """

    def __init__(self, model: Any, tokenizer: Any, texts: Sequence[str], samples: int = 16, seed: int = 0):
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        self.model, self.tokenizer, self.texts = model, tokenizer, list(texts)
        self.samples, self.seed = int(samples), int(seed)
        self.calls = 0
        self.extra_rollouts = 0

    def predict(self, prompts: Sequence[Any]) -> Prediction:
        from .evaluate import sampled_scores
        from .tasks import Problem, answer_of

        rows = [row_index(k) for k in prompts]
        bad = [r for r in rows if r >= len(self.texts)]
        if bad:
            raise ValueError(f"prompt rows {bad} are outside the pool of {len(self.texts)} prompts")
        problems = [Problem(self.texts[r], answer_of(self.texts[r])) for r in rows]
        scores = sampled_scores(self.model, self.tokenizer, problems, self.samples, seed=self.seed + self.calls)
        self.calls += 1
        self.extra_rollouts += scores.size
        return Prediction(mean=scores.mean(axis=1), var=np.zeros(len(rows)))

    def update(self, prompts: Sequence[Any], rewards: Sequence[np.ndarray]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "extra_rollouts": self.extra_rollouts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls, self.extra_rollouts = int(state["calls"]), int(state["extra_rollouts"])


def skip_counts(p: np.ndarray, group: int, threshold: float = SKIP_ABOVE) -> np.ndarray:
    """``group`` rollouts for every prompt whose group of that size is all-equal with probability
    ``p^n + (1-p)^n <= threshold``, 0 for the rest; if that skips every prompt, the one least likely
    to be all-equal keeps its group (a step needs rollouts to train on).

    >>> skip_counts(np.array([0.0, 0.5, 0.99, 0.8]), 8).tolist()
    [0, 8, 0, 8]
    >>> skip_counts(np.array([1.0, 0.99]), 8).tolist()
    [0, 8]
    """
    if group < 2:
        raise ValueError(f"group must be >= 2, got {group}")
    all_equal = 1.0 - mixed_probability(np.asarray(p, dtype=float), group)
    counts = np.where(all_equal <= threshold, group, 0).astype(np.int64)
    if not counts.any():
        counts[int(np.argmin(all_equal))] = group
    return counts


class KnownPSkip(SingleShotAllocator):
    """Known-p skip bound (a saving allocator): with p from ``predictor`` (the truth, or its estimate),

        n_q = G  if p_q^G + (1 - p_q)^G <= 0.9,  else 0   (G = ``group``, the mean rollouts),

    so groups that would very likely teach nothing (all-equal rewards: zero gradient under GRPO,
    Dr. GRPO and RLOO) are not generated; it spends at most the budget (`skip_counts`).

    >>> class Known:
    ...     def predict(self, prompts): return Prediction(np.array([0.0, 0.5, 1.0]), np.zeros(3))
    >>> KnownPSkip(Known(), group=4)._plan(["a", "b", "c"], 12).tolist()
    [0, 4, 0]
    """

    name = "known-p-skip"
    kind = "save"
    lower, upper, allow_skip = 2, None, True

    def __init__(self, predictor: Any, group: int = 8, threshold: float = SKIP_ABOVE, seed: int | None = 0):
        super().__init__(seed)
        self.predictor, self.group, self.threshold = predictor, int(group), float(threshold)

    def _plan(self, prompts: list, budget: int) -> np.ndarray:
        counts = skip_counts(self.predictor.predict(prompts).mean, self.group, self.threshold)
        if counts.sum() > budget:
            raise ValueError(f"budget {budget} is below {counts.sum()} ({self.group} per kept prompt)")
        return counts

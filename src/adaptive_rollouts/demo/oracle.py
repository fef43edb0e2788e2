"""Known-p references for the demo: p estimated from extra samples of the current policy.

`SampledSuccess` is a Predictor whose prediction for a prompt is its success rate over ``samples``
completions of the *current* model at temperature 1. Those completions are generated outside the
trainer's rounds, so they are not charged to the step's budget (they are counted separately in
``extra_rollouts``), and under a forked torch RNG, so the training stream is untouched. `truth_of`
hands the same p to the simulator's known-p references (`sim.oracle.SkipOracle`, the skip bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptive_rollouts.types import Prediction

from .evaluate import sampled_scores
from .tasks import Problem, answer_of


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
    counted in ``extra_rollouts`` and never in the trainer's budget. ``update`` learns nothing. A
    prompt asked for again before the policy has changed (an allocator that reads p both when it
    allocates and when it learns from the groups) gets the same p, not fresh samples.
    """

    def __init__(self, model: Any, tokenizer: Any, texts: Sequence[str], samples: int = 16, seed: int = 0):
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        self.model, self.tokenizer, self.texts = model, tokenizer, list(texts)
        self.samples, self.seed = int(samples), int(seed)
        self.calls = 0
        self.extra_rollouts = 0
        self._known: dict[int, float] = {}  # row -> p sampled from the policy as it is now
        self._policy_version: int | None = None

    def policy_version(self) -> int:
        """A number that changes whenever a parameter of the model is written in place (an optimizer
        step): the sum of torch's version counters of the parameters."""
        return sum(int(p._version) for p in self.model.parameters())

    def predict(self, prompts: Sequence[Any]) -> Prediction:

        rows = [row_index(k) for k in prompts]
        bad = [r for r in rows if r >= len(self.texts)]
        if bad:
            raise ValueError(f"prompt rows {bad} are outside the pool of {len(self.texts)} prompts")
        version = self.policy_version()
        if version != self._policy_version:
            self._known, self._policy_version = {}, version
        new = [r for r in dict.fromkeys(rows) if r not in self._known]
        if new:
            problems = [Problem(self.texts[r], answer_of(self.texts[r])) for r in new]
            scores = sampled_scores(self.model, self.tokenizer, problems, self.samples, seed=self.seed + self.calls)
            self.calls += 1
            self.extra_rollouts += scores.size
            self._known.update(zip(new, scores.mean(axis=1).tolist()))
        return Prediction(mean=np.array([self._known[r] for r in rows]), var=np.zeros(len(rows)))

    def update(self, prompts: Sequence[Any], rewards: Sequence[np.ndarray]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "extra_rollouts": self.extra_rollouts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls, self.extra_rollouts = int(state["calls"]), int(state["extra_rollouts"])


def truth_of(predictor: SampledSuccess):
    """The ``truth(prompts) -> (p, p (1 - p))`` function of the simulator's known-p references
    (`sim.oracle.SkipOracle`), backed by the sampled p."""

    def truth(prompts: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        p = predictor.predict(prompts).mean
        return p, p * (1.0 - p)

    return truth

"""examples/third_trainer.py: a trainer written only against the bridge trains on what was generated,
spends the budget as its allocator's kind says, and counts failed verifications as unscored."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "examples" / "third_trainer.py"
_SPEC = importlib.util.spec_from_file_location("third_trainer", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
third_trainer = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(third_trainer)


def _task(seed: int = 0):
    rng = np.random.default_rng(seed)
    p = {q: [0.0, 0.05, 0.5, 1.0][q % 4] for q in range(32)}

    def generate(prompt, n):
        return list(rng.random(n) < p[prompt])

    def reward(prompt, completion):
        return 1.0 if completion else -1.0

    return generate, reward


@pytest.mark.parametrize("name", ["uniform", "vigor"])
def test_a_fill_allocator_spends_exactly_the_budget(name):
    generate, reward = _task()
    step = third_trainer.BridgeStep(name)
    completions, rewards, log = step(list(range(16)), 128, generate, reward)
    assert sum(map(len, completions)) == 128 == log["rollouts_spent"]
    assert [len(r) for r in rewards] == [len(c) for c in completions]
    assert log["rollouts_saved"] == 0


def test_the_saving_default_spends_at_most_the_budget_and_says_what_it_saved():
    generate, reward = _task()
    step = third_trainer.BridgeStep("default")
    logs = [step(list(range(16)), 128, generate, reward)[2] for _ in range(4)]
    for log in logs:
        assert log["rollouts_spent"] <= 128 and log["rollouts_saved"] == 128 - log["rollouts_spent"]
    assert any(log["rollouts_saved"] > 0 for log in logs)  # half the prompts are always or never solved


def test_a_failed_verification_is_counted_unscored_not_as_a_reward():
    generate, _ = _task()
    step = third_trainer.BridgeStep("uniform")
    _, rewards, log = step(list(range(4)), 16, generate, lambda prompt, c: None if prompt == 0 else float(c))
    assert rewards[0] == [None] * 4 and log["unscored"] == 4 and log["rollouts_spent"] == 16

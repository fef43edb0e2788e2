"""A third trainer on the bridge: what a plug-in for another RL framework (OpenRLHF, a home-made
loop) has to write. The framework's own parts are two callables:

- ``generate(prompt, n)``: n completions of one prompt (an inference engine, vLLM, ...);
- ``reward(prompt, completion)``: a verifier's score in any range (None when it failed).

Everything else (the allocator's rounds, the budget guard, rewards -> success in [0, 1], unscored
rollouts, the allocator clock, metrics, regime fingerprints, running totals) is
`adaptive_rollouts.bridge.TrainerStep`; `bridge.PerPrompt` turns the two callables into its rounds.

Run: python examples/third_trainer.py (a toy task: the "model" answers prompt q right with a
probability of its own, so every step logs what the default spent, saved and skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts import bridge
from adaptive_rollouts.success import SuccessSignal


def BridgeStep(allocator: Any = "default", signal: SuccessSignal | None = None, **options: Any) -> Callable:
    """One training step's rollouts: ``step(prompts, budget, generate, reward)`` -> the completions
    to train on, their raw rewards (per prompt) and the step's values to log."""
    step = bridge.TrainerStep(bridge.build_allocator(allocator, options or None), signal)

    def one_step(prompts: Sequence[Hashable], budget: int, generate: Callable, reward: Callable) -> tuple:
        rounds = bridge.PerPrompt(prompts, generate, reward)
        result = step.run(prompts, budget, rounds)
        return rounds.completions, rounds.rewards, {**result.values, **result.totals}

    return one_step


def main() -> None:
    rng = np.random.default_rng(0)
    p = {q: float(x) for q, x in enumerate(rng.choice([0.0, 0.05, 0.5, 1.0], size=64))}

    def generate(prompt: Hashable, n: int) -> list:
        return list(rng.random(n) < p[int(prompt)])  # a completion is "right" or not

    def reward(prompt: Hashable, completion: Any) -> float:
        return 1.0 if completion else -1.0  # a verifier in [-1, 1]

    step = BridgeStep("default")
    for t in range(5):
        prompts = [int(q) for q in rng.choice(64, size=16, replace=False)]
        _, _, log = step(prompts, 16 * 8, generate, reward)
        print(
            f"step {t}: spent {log['rollouts_spent']} of 128 (saved {log['rollouts_saved']}, skipped "
            f"{log['skipped']}); since the start: saved {log['rollouts_saved_total']}, "
            f"{log['budget_share_total']:.0%} of the budget spent"
        )


if __name__ == "__main__":
    main()

"""A third trainer on the bridge: what a plug-in for another RL framework (OpenRLHF, a home-made
loop) has to write. Everything between its hooks and the allocator comes from
`adaptive_rollouts.bridge`; the framework's own parts are two callables:

- ``generate(prompt, n)``: n completions of one prompt (an inference engine, vLLM, ...);
- ``reward(prompt, completion)``: a verifier's score in any range (None when it failed).

Run: python examples/third_trainer.py (a toy task: the "model" answers prompt q right with a
probability of its own, so every step logs what the default spent, saved and skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from adaptive_rollouts import bridge
from adaptive_rollouts.success import SuccessSignal


class BridgeStep:
    """One training step's rollouts for any trainer: the allocator decides how many completions
    each prompt gets (in rounds, for a saving allocator), the rewards reach it as success in [0, 1],
    and the step returns the completions to train on, their rewards and the metrics to log."""

    def __init__(self, allocator: Any = "default", signal: SuccessSignal | None = None, **options: Any):
        self.allocator = bridge.build_allocator(allocator, options or None)
        self.kind = bridge.allocator_kind(self.allocator)
        self.signal = signal or SuccessSignal()

    def __call__(
        self,
        prompts: Sequence[Hashable],
        budget: int,
        generate: Callable[[Hashable, int], list],
        reward: Callable[[Hashable, Any], float | None],
    ) -> tuple[list[list], list[list], dict[str, Any]]:
        completions: list[list] = [[] for _ in prompts]
        rewards: list[list] = [[] for _ in prompts]
        successes: list[list[float]] = [[] for _ in prompts]  # what the allocator saw

        def sample(indices: Any, counts: Any) -> Any:  # the allocator asks; the framework generates
            idx, cnt = bridge.check_request(indices, counts, len(prompts))
            groups = []
            for i, n in zip(idx.tolist(), cnt.tolist()):
                new = generate(prompts[i], n) if n else []
                scores = [reward(prompts[i], c) for c in new]
                completions[i] += new
                rewards[i] += scores
                groups.append(scores)
            draw = bridge.scored_draw(self.signal, groups, [prompts[i] for i in idx.tolist()])
            for i, scored in zip(idx.tolist(), draw):
                successes[i] += scored.tolist()
            return draw

        self.allocator.run(list(prompts), budget, sample)
        counts = np.array([len(c) for c in completions], dtype=np.int64)
        bridge.check_spent(counts, budget, self.kind)  # "fill": exactly the budget; "save": at most
        seen = [np.asarray(x, dtype=float) for x in successes]
        log = bridge.step_values(list(prompts), counts, seen, self.allocator.last_metrics, budget)
        return completions, rewards, log


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
            f"step {t}: spent {log['rollouts_spent']} of 128, saved {log['rollouts_saved']}, skipped {log['skipped']}"
        )


if __name__ == "__main__":
    main()

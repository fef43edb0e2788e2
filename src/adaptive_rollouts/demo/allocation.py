"""The demo's methods, their allocators and their tuned learning rates.

Learning rates: each method runs at the best rate of ``LR_GRID`` by held-out greedy accuracy
after the default run's steps, chosen on ``TUNE_SEEDS`` (never reported) with

    python benchmarks/demo_tune.py --out runs/demo_tune

and written into ``LEARNING_RATES`` (docs/demo.md gives the table it picked them from).
"""

from __future__ import annotations

from adaptive_rollouts.checks.validation import check_choice

METHODS = ("uniform", "vip", "vigor", "default")
LR_GRID = (1e-5, 3e-5, 1e-4, 3e-4)
TUNE_SEEDS = (100,)
LEARNING_RATES = {"uniform": 1e-4, "vip": 3e-5, "vigor": 1e-4, "default": 3e-5}


def vip_bounds(mean_rollouts: int) -> tuple[int, int]:
    """VIP's per-prompt bounds [L, U]: the paper's [4, 32] at its budget of 8 rollouts per prompt,
    scaled to ``mean_rollouts`` (L = mean / 2, at least 2 so every group has a baseline; U = 4 x mean).

    >>> vip_bounds(8), vip_bounds(16), vip_bounds(4)
    ((4, 32), (8, 64), (2, 16))
    """
    if mean_rollouts < 2:
        raise ValueError(f"mean_rollouts must be >= 2, got {mean_rollouts}")
    return max(2, mean_rollouts // 2), 4 * mean_rollouts


def make_allocator_for(method: str, aggregation: str, features, seed: int, mean_rollouts: int):
    """The allocator of a demo method. ``uniform``: stock GRPO groups. ``vip``: VIP as published (the
    paper's GP on MiniLM features of the pool, RLOO objective, plug-in p(1-p)) with `vip_bounds`.
    ``vigor``: VIGOR as published. ``default``: the library's recommended default,
    ``make_allocator()`` with no name, told the trainer's loss ``aggregation``. ``features``: a
    `FeatureTable` of the RL pool (VIP's GP lives on a known pool)."""
    from adaptive_rollouts.allocators import VIGOR, VIP, Uniform, make_allocator

    check_choice("method", method, METHODS)
    if method == "uniform":
        return Uniform(seed=seed)
    if method == "vip":
        lower, upper = vip_bounds(mean_rollouts)
        return VIP(
            "paper-gp", features=features, estimator="rloo", variance="plugin", lower=lower, upper=upper, seed=seed
        )
    if method == "vigor":
        return VIGOR(seed=seed)
    return make_allocator(aggregation=aggregation, seed=seed)  # "default"

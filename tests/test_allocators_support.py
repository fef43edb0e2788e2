"""Shared helpers for the allocator tests (a known-p predictor stub, a seeded Bernoulli sampler),
and the exact round solve checked against enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from adaptive_rollouts.types import Prediction


class KnownP:
    """Predictor stub: fixed success probabilities (var given or 0); records updates."""

    def __init__(self, p: dict, var: float = 0.0):
        self.p = dict(p)
        self.var = var
        self.updates: list = []

    def predict(self, prompts):
        mean = np.array([self.p.get(x, 0.5) for x in prompts], dtype=float)
        return Prediction(mean, np.full(mean.size, self.var))

    def update(self, prompts, rewards):
        self.updates.append((list(prompts), [np.asarray(r).copy() for r in rewards]))

    def state_dict(self):
        return {"n_updates": len(self.updates)}

    def load_state_dict(self, state):
        self.updates = [None] * int(state["n_updates"])


def bernoulli_sampler(p_by_index, seed: int = 0, log: list | None = None):
    rng = np.random.default_rng(seed)
    p_by_index = np.asarray(p_by_index, dtype=float)

    def sample(indices, counts):
        if log is not None:
            log.append((np.asarray(indices).copy(), np.asarray(counts).copy()))
        return [(rng.random(int(c)) < p_by_index[i]).astype(float) for i, c in zip(indices, counts)]

    return sample


# -- the round solve of PosteriorProgressive against enumeration ---------------------------------


def test_solve_increments_matches_enumeration():
    from adaptive_rollouts.allocators._objective import solve_increments

    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(60):
        q, upper, lower = 3, 7, 2
        table = rng.random((q, upper + 1))
        allow_skip = bool(trial % 2)
        current = rng.choice([0, 2, 3, 5] if allow_skip else [2, 3, 5], size=q)
        budget = int(rng.integers(0, 8))
        finals = [
            c
            for c in itertools.product(range(upper + 1), repeat=q)
            if sum(c) - current.sum() == budget
            and all(f >= k and (f == 0 or f >= lower) for f, k in zip(c, current))
            and (allow_skip or min(c) >= lower)
        ]
        got = solve_increments(table, current, budget, lower, upper, allow_skip)
        if not finals:
            assert got is None
            continue
        best = min(sum(table[i, n] for i, n in enumerate(c)) for c in finals)
        assert got is not None and got.min() >= 0 and got.sum() == budget
        assert sum(table[i, n] for i, n in enumerate(current + got)) == pytest.approx(best)
        checked += 1
    assert checked > 20

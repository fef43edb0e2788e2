"""`expected_group_signal` for large groups: against the term-by-term Beta-Binomial sum (brute
force) where that can still be computed, and in memory and time that do not grow with the group
size where it cannot (before: a dense [prompts, n + 1] table, 713 MiB at Q = 64, n = 131,072 and a
MemoryError at Q = 4, n = 2.5e8)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from scipy.stats import betabinom

from adaptive_rollouts.objectives.signal import MAX_GROUP, expected_group_signal, group_signal, signal_at

BELIEFS = [
    (0.1, 0.1, 0),
    (0.5, 7.5, 0),
    (1.0, 1.0, 2),
    (4.5, 0.5, 4),
    (50.0, 50.0, 2),
    (0.1, 3000.0, 0),
    (500, 520, 500),
]


def _brute(n, k, s, a, b, estimator, aggregation):
    t = np.arange(n - k + 1)
    return float(np.sum(betabinom.pmf(t, n - k, a, b) * group_signal(estimator, n, aggregation)[s + t]))


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
@pytest.mark.parametrize("aggregation", ["seq-mean", "prompt-mean"])
@pytest.mark.parametrize("n, k", [(5000, 4), (20000, 1000), (60000, 4)])
def test_large_groups_match_the_term_by_term_sum(estimator, aggregation, n, k):
    for a, b, s in BELIEFS:
        s = min(s, k)
        got = expected_group_signal([n], [k], [s], [a], [b], estimator=estimator, aggregation=aggregation)[0]
        assert got == pytest.approx(_brute(n, k, s, a, b, estimator, aggregation), rel=1e-7), (a, b, s)


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_signal_at_is_group_signal_at_the_integers(estimator):
    for n in (2, 3, 8, 101):
        for agg in ("seq-mean", "prompt-mean"):
            np.testing.assert_allclose(signal_at(estimator, n, np.arange(n + 1), agg), group_signal(estimator, n, agg))


@pytest.mark.parametrize("q, n", [(64, 131_072), (4, 250_000_000), (2, MAX_GROUP)])
def test_memory_and_time_do_not_grow_with_the_group_size(q, n):
    rng = np.random.default_rng(0)
    args = (np.full(q, n), np.zeros(q, int), np.zeros(q, int), rng.uniform(0.1, 5, q), rng.uniform(0.1, 5, q))
    tracemalloc.start()
    start = time.process_time()
    try:
        value = expected_group_signal(*args, estimator="grpo")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(value)) and np.all(value > 0)
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert time.process_time() - start < 0.05 * q + 1.0


def test_groups_above_the_largest_priced_are_refused_by_name():
    with pytest.raises(ValueError, match="total: groups of at most"):
        expected_group_signal([MAX_GROUP + 1], [0], [0], [1.0], [1.0], estimator="grpo")

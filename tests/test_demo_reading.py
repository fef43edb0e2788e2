"""The demo's at-a-glance reading (`demo.reading`): accuracy at equal rollouts and rollouts to shares
of Uniform's gain, against brute force, and the table that shows them."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.demo.reading import GAIN_SHARES, SPEND_SHARES, accuracy_at_spend, rollouts_to_gain
from adaptive_rollouts.demo.report import glance_table


def _brute_accuracy(x, y, at):
    """Linear interpolation written out: the segment holding ``at``."""
    for i in range(1, len(x)):
        if x[i - 1] <= at <= x[i]:
            return y[i - 1] + (y[i] - y[i - 1]) * (at - x[i - 1]) / (x[i] - x[i - 1])
    return np.nan


def test_accuracy_at_spend_matches_brute_force_and_marks_runs_that_ended_before():
    rng = np.random.default_rng(0)
    curves = [(np.cumsum(np.r_[0, rng.integers(20, 40, 6)]), rng.uniform(0, 1, 7)) for _ in range(3)]
    total = float(np.mean([c[0][-1] for c in curves]))
    got = accuracy_at_spend(curves, SPEND_SHARES, total)
    for k, share in enumerate(SPEND_SHARES):
        want = [_brute_accuracy(x, y, share * total) for x, y in curves]
        assert got[k] == pytest.approx(np.mean(want), nan_ok=True)
    short = [(np.array([0.0, 50.0]), np.array([0.1, 0.3]))]
    assert np.isnan(accuracy_at_spend(short, [1.0], 100.0)[0])


def test_rollouts_to_gain_reads_the_running_max_of_the_seed_mean():
    curves = [
        (np.array([0, 10, 20, 30]), np.array([0.1, 0.5, 0.3, 0.6])),
        (np.array([0, 10, 20, 30]), np.array([0.1, 0.3, 0.3, 0.4])),
    ]
    # seed-mean 0.1, 0.4, 0.3, 0.5; running max 0.1, 0.4, 0.4, 0.5
    got = rollouts_to_gain(curves, 0.1, 0.4, (0.5, 0.9, 1.5))
    assert got.tolist() == pytest.approx([10 * 0.2 / 0.3, 20 + 10 * (0.46 - 0.4) / 0.1, np.inf])


def test_glance_table_says_never_and_ended_before():
    rows = [
        {
            "method": "uniform",
            "accuracy_at_uniform_spend": [0.5, 0.6, 0.7],
            "rollouts_to_uniform_gain": [10.0, 20.0, 30.0],
            "speedup_to_uniform_gain": 1.0,
        },
        {
            "method": "default",
            "accuracy_at_uniform_spend": [0.55, 0.65, float("nan")],
            "rollouts_to_uniform_gain": [8.0, 15.0, float("inf")],
            "speedup_to_uniform_gain": 0.0,
        },
    ]
    text = "\n".join(glance_table(rows))
    assert "| default | 0.550 | 0.650 | ended before | 8 | 15 | never | - |" in text
    assert f"rollouts to {GAIN_SHARES[-1]:.0%} of Uniform's gain" in text

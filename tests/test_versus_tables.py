"""The default against Pilot-Commit and the known-p rule (reporting.versus_tables): the paired
head-to-head statistic and the cell readings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptive_rollouts.reporting.versus_tables import head_to_head, render_saving_versus, versus_reading

ROOT = Path(__file__).resolve().parents[1]


def _run(seed: int, slope: float, lr: float = 0.1, noise: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    acc = np.cumsum(np.full(20, slope) + noise * rng.normal(size=20)).clip(0, None)
    return {
        "seed": seed,
        "lr": lr,
        "accuracy0": 0.0,
        "rollouts": [8.0 * (t + 1) for t in range(20)],
        "accuracy": acc.tolist(),
    }


def test_head_to_head_is_antisymmetric():
    a = [_run(s, 0.01, noise=0.004) for s in range(6)]
    b = [_run(s + 100, 0.015, noise=0.004) for s in range(6)]
    for r, s in zip(b, range(6)):
        r["seed"] = s
    ab, ba = head_to_head(a, b), head_to_head(b, a)
    assert ab is not None and ba is not None
    assert ab["speedup"] * ba["speedup"] == pytest.approx(1.0)
    assert ab["low"] * ba["high"] == pytest.approx(1.0)
    assert ab["seeds"] == 6


def test_head_to_head_pairs_by_seed_and_rate():
    a = [_run(s, 0.01) for s in range(4)]
    b = [_run(s, 0.02, lr=0.2) for s in range(4)]  # another rate: nothing in common
    assert head_to_head(a, b) is None
    assert head_to_head(a, [_run(s, 0.02) for s in range(2)]) is None  # fewer than 3 common seeds


@pytest.mark.parametrize(
    ("pilot", "known", "reading"),
    [
        (None, None, "-"),
        ({"low": 0.5, "high": 0.9}, None, "default ahead"),
        ({"low": 0.9, "high": 1.3}, {"low": 2.0, "high": 3.0}, "not separated"),
        ({"low": 1.1, "high": 1.3}, {"low": 1.2, "high": 3.0}, "Pilot-Commit ahead; the known-p rule ahead of it"),
        ({"low": 1.1, "high": 1.3}, {"low": 0.7, "high": 0.9}, "Pilot-Commit ahead, also of the known-p rule"),
        (
            {"low": 1.1, "high": 1.3},
            {"low": 0.9, "high": 1.2},
            "Pilot-Commit ahead; the known-p rule not separated from it",
        ),
        ({"low": 1.1, "high": 1.3}, None, "Pilot-Commit ahead; the known-p rule not separated from it"),
    ],
)
def test_versus_reading(pilot, known, reading):
    assert versus_reading(pilot, known) == reading


def test_render_on_the_committed_maps_counts_every_cell():
    text = render_saving_versus(ROOT)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| cell")]
    counted = text.split("Readings over the ")[1]
    assert f"{len(rows)} cells" in counted
    assert "nan" not in text

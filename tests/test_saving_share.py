"""The share of signal the saving default may give up: the allocator's bound at any share, the
share study's hook (benchmarks/saving_share.py) and its docs block."""

from __future__ import annotations

import runpy

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.allocators.saving_rule import LOSS_SHARE
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.reporting.share_tables import SAVING_SHARE, render_saving_share


def _sampler(p: np.ndarray, seed: int):
    rng = np.random.default_rng(seed)
    return lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]


def test_the_shipped_share_is_the_rules_constant():
    assert SavingProgressive.share == LOSS_SHARE == 0.2


@pytest.mark.parametrize("share", [0.02, 0.1])
def test_the_signal_given_up_stays_within_the_share_and_a_larger_share_saves_more(share):
    """Per step, what the allowance gives up under the belief is at most the share of its expected
    signal, and over a run with prompts the history can tell apart, a larger share spends less (the
    rule without its bound per group, which gives up what it gives up whatever the share)."""
    p = np.r_[np.zeros(12), np.full(8, 0.05), np.full(12, 0.5)]
    spent = {}
    for s in (share, 0.5):
        alloc = SavingProgressive(seed=0, flat_chance=None)
        alloc.share = s
        total = 0
        for step in range(12):
            total += sum(r.size for r in alloc.run(list(range(32)), 256, _sampler(p, step)))
            assert alloc.last_metrics["signal_given_up"] <= s + 1e-9
        spent[s] = total
    assert spent[0.5] < 0.95 * spent[share]


def test_the_share_study_sets_the_share_of_the_default_only():
    bench = runpy.run_path("benchmarks/saving_signal.py")
    pool = bench["StaticPool"](20, 0.8, 0)
    problem = bench["_PoolProblem"](pool)
    assert bench["_allocator"]("default", problem, 0, 0.25).share == 0.25
    assert bench["_allocator"]("default", problem, 0, None).share == LOSS_SHARE
    with pytest.raises(ValueError, match="only the default"):
        bench["_allocator"]("uniform", problem, 0, 0.25)


def test_the_share_block_counts_the_cells_that_meet_the_target(tmp_path):
    ledger = [
        {"cell": c, "share": s, "spent": sp, "kept": k, "lost": 0.0}
        for c, s, sp, k in (
            ("a/d16-Q32", 0.05, 0.7, 0.96),
            ("a/d16-Q32", 0.1, 0.6, 0.9),  # on both lines: met
            ("b/d16-Q32", 0.05, 0.5, 0.95),  # met
            ("b/d16-Q32", 0.1, 0.4, 0.85),
        )
    ]
    pool = [{"n": n, "share": s, "spent": 0.5, "kept": 0.9, "lost": 0.1} for n in (4, 8) for s in (0.05, 0.1)]
    speed = [
        {
            "cell": "a/d16-Q32",
            "share": s,
            "lr": 0.8,
            "gain_speedup": g,
            "ci90": [g - 0.1, g + 0.1],
            "spend": 0.6,
            "final_gap": -0.01,
        }
        for s, g in ((0.05, 1.2), (0.1, 1.4))
    ]
    pc = {
        "a/d16-Q32": {
            "gain_speedup": 1.5,
            "gain_ci90": [1.3, 1.7],
            "spend": 0.3,
            "final_gap": -0.1,
            "seeds": list(range(16)),
        }
    }
    data = {"shares": [0.05, 0.1], "shipped": 0.1, "ledger": ledger, "pool": pool, "speed": speed, "pilot_commit": pc}
    data |= {
        "ledger_seeds": 2,
        "seeds": 32,
        "steps": 60,
        "interval": "jackknife-t",
        "rates_from": ["results/map/x.json"],
    }
    write_result(tmp_path / SAVING_SHARE, data, command="python benchmarks/saving_share.py", commit="abc1234")
    text = render_saving_share(tmp_path)
    assert "| cell | epsilon = 0.05 | epsilon = 0.1 (shipped then) |" in text  # the default has a fifth since
    assert "| a/d16-Q32 | 0.70 / 0.96 | 0.60 / 0.90 |" in text
    assert "| cells at <= 0.6 spent and >= 0.9 kept | 1 of 2 | 1 of 2 |" in text
    assert "| recurring pool, n = 8 | 0.50 / 0.90 | 0.50 / 0.90 |" in text
    assert (
        "| a/d16-Q32 | 1.20x (1.10-1.30), 0.60, -0.010 | 1.40x (1.30-1.50), 0.60, -0.010 | 1.50x (1.30-1.70), 0.30, -0.100 |"
        in text
    )
    assert "(16 seeds)" in text and "Source: `results/saving_share/saving_share.json`, commit abc1234" in text


def test_without_a_result_file_the_block_says_how_to_make_it(tmp_path):
    assert "benchmarks/saving_share.py" in render_saving_share(tmp_path)


def test_share_is_a_checked_option_of_the_default():
    from adaptive_rollouts.allocators import make_allocator

    assert make_allocator("default", share=0.3).share == 0.3
    assert make_allocator("default").share == LOSS_SHARE
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="share"):
            make_allocator("default", share=bad)

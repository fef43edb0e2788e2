"""Final accuracy at equal cost (`experiments.equal_cost`): hand computations on tiny curves, a
curve that is Uniform's shifted along the rollout axis, clipping beyond Uniform's range, the
interval (the t interval on the per-seed differences), the map summary's entry and its tables."""

import numpy as np
import pytest
from scipy.stats import t as student_t

from adaptive_rollouts.experiments.equal_cost import (
    equal_cost_entry,
    equal_cost_gaps,
    final_gap_equal_cost,
    uniform_at_cost,
)
from adaptive_rollouts.reporting.gain_report import equal_cost_lines, gap_cell


def _run(rollouts, accuracy, a0=0.0, seed=0):
    return {"seed": seed, "rollouts": list(rollouts), "accuracy": list(accuracy), "accuracy0": a0}


def test_uniform_is_read_from_its_start_and_held_beyond_its_last_step():
    u = _run([10, 20, 30], [0.3, 0.5, 0.6], a0=0.1)
    # (0, 0.1) -> (10, 0.3): 0.1 + 0.5 * 0.2 at 5; halfway to 20: 0.4; beyond 30: held at 0.6
    np.testing.assert_allclose(uniform_at_cost(u, [0, 5, 15, 30, 45]), [0.1, 0.2, 0.4, 0.6, 0.6])


def test_hand_computation_on_six_steps():
    # six steps: the last third is steps 5 and 6
    u = _run([10, 20, 30, 40, 50, 60], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    m = _run([4, 8, 12, 16, 20, 25], [0.05, 0.1, 0.2, 0.25, 0.3, 0.33])
    # Uniform at 20 rollouts: 0.2; at 25: 0.25. Method's last third: 0.3, 0.33
    expected = np.mean([0.3 - 0.2, 0.33 - 0.25])
    (d,) = equal_cost_gaps([u], [m])
    assert d == pytest.approx(expected)
    # the equal-step gap of the same runs reads the opposite way
    assert np.mean([0.3, 0.33]) - np.mean([0.5, 0.6]) < 0 < d


def test_a_curve_on_uniforms_own_curve_reads_zero_and_a_shifted_one_reads_the_shift():
    """A method that learns exactly like Uniform per rollout, only stopping earlier, reads 0 at equal
    cost; one whose curve is Uniform's shifted left by c rollouts (reaches each level c rollouts
    sooner) reads slope x c on a linear stretch."""
    slope = 0.004
    u = _run(np.arange(1, 13) * 10.0, 0.1 + slope * np.arange(1, 13) * 10.0, a0=0.1)
    cheap = np.arange(1, 13) * 4.0  # 0.4 of Uniform's rollouts
    on_curve = _run(cheap, uniform_at_cost(u, cheap))
    assert equal_cost_gaps([u], [on_curve]) == pytest.approx([0.0], abs=1e-12)
    shift = 7.0
    shifted = _run(cheap, 0.1 + slope * (cheap + shift))
    assert equal_cost_gaps([u], [shifted]) == pytest.approx([slope * shift])
    # ... while at equal steps the method that only spent less reads as far behind
    assert on_curve["accuracy"][-1] < u["accuracy"][-1] - 0.1


def test_the_interval_is_the_t_interval_on_the_per_seed_differences():
    rng = np.random.default_rng(3)
    steps = np.arange(1, 10) * 10.0
    us, ms = [], []
    for s in range(7):
        acc = np.sort(rng.uniform(0.2, 0.8, steps.size))
        us.append(_run(steps, acc, a0=0.2, seed=s))
        ms.append(_run(steps * 0.5, np.sort(rng.uniform(0.2, 0.8, steps.size)), seed=s))
    d = np.array(equal_cost_gaps(us, ms))
    out = final_gap_equal_cost(us, ms, level=0.9)
    half = student_t.ppf(0.95, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    assert out["gap"] == pytest.approx(d.mean())
    np.testing.assert_allclose(out["ci"], [d.mean() - half, d.mean() + half], rtol=1e-10)
    assert out["clipped"] == 0.0
    # fewer than three seeds: the gap, no interval
    two = final_gap_equal_cost(us[:2], ms[:2])
    assert two["gap"] == pytest.approx(d[:2].mean()) and np.isnan(two["ci"]).all()


def test_a_method_beyond_uniforms_range_is_read_at_uniforms_last_accuracy_and_counted():
    u = _run([10, 20, 30], [0.2, 0.4, 0.5])
    m = _run([12, 24, 36], [0.2, 0.4, 0.7])  # spends more than Uniform: its last step lies beyond
    out = final_gap_equal_cost([u], [m])
    assert out["gap"] == pytest.approx(0.7 - 0.5) and out["clipped"] == 1.0
    entry = equal_cost_entry([u], [m])
    assert entry["final_gap_equal_cost"] == out["gap"] and entry["equal_cost_clipped"] == 1.0


def test_bad_input_is_named():
    u = _run([10, 20, 30], [0.2, 0.4, 0.5])
    with pytest.raises(ValueError, match="paired runs"):
        equal_cost_gaps([u], [])
    with pytest.raises(ValueError, match="accuracy0"):
        equal_cost_gaps([u], [{"seed": 0, "rollouts": [1], "accuracy": [0.1]}])
    with pytest.raises(ValueError, match="cumulative"):
        equal_cost_gaps([u], [_run([10, 5, 20], [0.1, 0.2, 0.3])])
    with pytest.raises(ValueError, match="must match"):
        equal_cost_gaps([u], [_run([10, 20], [0.1, 0.2, 0.3])])


def _tiny_result(methods):
    """A map result as `regime_map.run_map` returns it: one cell, 3 paired seeds, curves by hand."""
    probe = {"probe_var": [], "probe_signal": [], "probe_oracle_var": [], "probe_oracle_signal": []}
    regime = {"regime/zero_variance_fraction_mean": 0.5, "regime/p_persistence": 0.5}
    runs = {}
    for method, curve in methods.items():
        for s, (r, a) in enumerate(curve):
            run = _run(r, a, a0=0.1, seed=s)
            run.update(cell="c", method=method, lr=0.1, final=float(np.mean(a[-1:])), probe=probe, regime=regime)
            run["nsr_rollout"] = [1.0]
            runs[("c", method, s, 0.1)] = run
    return {
        "config": {"target_at": 0.5, "methods": list(methods), "paired_seeds": [0, 1, 2], "report_seeds": [0, 1, 2]},
        "cells": {"c": {"budget": 8}},
        "lr": {"c": {m: 0.1 for m in methods}},
        "runs": runs,
        "errors": {},
    }


def test_the_map_summary_carries_both_gaps_and_the_table_shows_them():
    from adaptive_rollouts.experiments.map_summary import summarize_map

    steps = [10, 20, 30]
    uni = [(steps, [0.2, 0.4, 0.6]), (steps, [0.2, 0.3, 0.5]), (steps, [0.3, 0.4, 0.6])]
    dft = [([5, 10, 15], [0.2, 0.4, 0.5]), ([5, 10, 15], [0.2, 0.3, 0.4]), ([5, 10, 15], [0.2, 0.4, 0.45])]
    summary = summarize_map(_tiny_result({"uniform": uni, "default": dft}))
    e = summary["rows"][0]["methods"]["default"]
    # Uniform at 15 rollouts: 0.3, 0.25, 0.35 (halfway between its first two steps)
    assert e["final_gap_equal_cost"] == pytest.approx(np.mean([0.5 - 0.3, 0.4 - 0.25, 0.45 - 0.35]))
    assert e["final_gap"] == pytest.approx(np.mean([0.5, 0.4, 0.45]) - np.mean([0.6, 0.5, 0.6]))
    lo, hi = e["final_gap_equal_cost_ci90"]
    assert lo < e["final_gap_equal_cost"] < hi and e["equal_cost_clipped"] == 0.0
    data = {"config": {"methods": ["uniform", "default"]}, "rows": summary["rows"]}
    text = "\n".join(equal_cost_lines(data, 2))
    assert "at equal cost" in text and gap_cell(e) in text and gap_cell(e).startswith("+0.150 (")


def test_a_map_file_without_the_gap_renders_no_equal_cost_table():
    rows = [{"cell": "c", "methods": {"default": {"spend": 0.5, "final_gap": -0.01}}}]
    assert equal_cost_lines({"config": {"methods": ["uniform", "default"]}, "rows": rows}, 2) == []
    assert gap_cell(rows[0]["methods"]["default"]) == "-"
    nan_ci = {"final_gap_equal_cost": -0.02, "final_gap_equal_cost_ci90": [float("nan"), float("nan")]}
    assert gap_cell(nan_ci) == "-0.020"


def test_the_docs_summary_counts_cells_by_the_interval(tmp_path):
    from adaptive_rollouts.experiments.results import write_result
    from adaptive_rollouts.reporting.equal_cost_tables import render_equal_cost_summary

    def entry(gap, lo, hi, step):
        return {"final_gap": step, "final_gap_equal_cost": gap, "final_gap_equal_cost_ci90": [lo, hi], "seeds": [0, 1]}

    rows = [
        {"cell": "c1", "methods": {"pilot-commit": entry(0.03, 0.01, 0.05, -0.10)}},
        {"cell": "c2", "methods": {"pilot-commit": entry(-0.04, -0.06, -0.02, -0.12)}},
        {"cell": "c3", "methods": {"pilot-commit": entry(0.01, -0.01, 0.03, -0.07)}},
    ]
    data = {"config": {"methods": ["uniform", "pilot-commit"]}, "rows": rows}
    write_result(tmp_path / "results/map/saving-32-a.json", data, command="x", settings={}, commit="abc1234")
    old = {"config": data["config"], "rows": [{"cell": "c1", "methods": {"pilot-commit": {"final_gap": -0.1}}}]}
    write_result(tmp_path / "results/map/saving-32-b.json", old, command="y", settings={}, commit="abc1234")
    text = render_equal_cost_summary(tmp_path)
    assert "pilot-commit (2 seeds): at equal cost -0.040 to +0.030, above Uniform in 1, below in 1" in text
    assert "covering 0 in 1 of 3 cells; at equal steps -0.120 to -0.070." in text
    assert "summarised before the equal-cost gap existed" in text  # the older file: said, not invented

"""`bench --quick`: it runs the default and a saving baseline, shows what each method spent, brackets
every method's best learning rate (the grid grows at an edge, up to a cap) and prints finite numbers."""

import numpy as np
import pytest

import adaptive_rollouts.experiments.bench as bench
from adaptive_rollouts.allocators import DEFAULT_ALLOCATOR, make_allocator
from adaptive_rollouts.cli import build_parser
from adaptive_rollouts.experiments.bench import QUICK, BenchConfig, run_benchmark
from adaptive_rollouts.reporting.bench_report import write_report

THEORY = {
    "variance": [{"estimator": "rloo", "p": 0.3, "n": 6, "formula": 0.168, "monte_carlo": 0.1679, "se": 0.001}],
    "pareto_k": 2.0,
    "pareto_k_hill": 2.1,
    "vigor_predicted": 1.216,
    "vigor_predicted_hill": 1.2,
}


def test_quick_runs_the_default_and_a_saving_baseline():
    assert DEFAULT_ALLOCATOR in QUICK.methods and "uniform" in QUICK.methods
    saving = [m for m in QUICK.methods if m != DEFAULT_ALLOCATOR and m in bench.ALLOCATORS]
    assert any(make_allocator(m).kind == "save" for m in saving), QUICK.methods


def test_help_says_what_quick_and_map_run():
    bench_parser = build_parser()._subparsers._group_actions[0].choices["bench"]
    text = bench_parser.format_help()
    assert "per-scenario sweep" in text and "regime map" in text and "4-cell" in text
    assert "share of Uniform's rollouts" in text and DEFAULT_ALLOCATOR in text and "pilot-commit" in text


def _trace(lr, peak, rollouts_per_step=100, steps=5, signal=1.0):
    """A training trace whose mean accuracy peaks at learning rate ``peak`` (log scale)."""
    level = 0.5 - 0.05 * abs(np.log(lr / peak))
    return {
        "rollouts": [rollouts_per_step * (i + 1) for i in range(steps)],
        "accuracy": [level * (i + 1) / steps for i in range(steps)],
        "accuracy0": 0.0,
        "zero_variance_fraction": [0.5],
        "wasted_frac": [0.5],
        "skipped_frac": [0.0],
        "allocator_seconds": [0.001],
        "probe_var": [1.0, 1.0],
        "probe_signal": [-1e-9, signal],  # one probe's debiased signal below zero, as noise makes it
        "probe_oracle_var": [1.0, 1.0],
        "probe_oracle_signal": [1.0, 1.0],
        "calib_pred": [],
        "calib_true": [],
        "alloc_p": [],
        "alloc_n": [],
    }


def _fake_config(**changes):
    cfg = BenchConfig(
        scenarios=("hard-heavy",),
        methods=("uniform", "oracle-fill"),
        aggregations=("seq-mean",),
        seeds=(0, 1),
        lr_select="first-seed",
        n_prompts=50,
        n_test=20,
    )
    for key, value in changes.items():
        setattr(cfg, key, value)
    return cfg


def test_the_grid_grows_at_an_edge_until_the_best_rate_is_interior(monkeypatch):
    monkeypatch.setattr(bench, "train", lambda problem, alloc, tcfg, predictor=None: _trace(tcfg.lr, peak=0.3))
    result = run_benchmark(_fake_config(), progress=False)
    rows = {r["method"]: r for r in result["summary"]["table"]}
    for method in ("uniform", "oracle-fill"):
        tried = sorted({r["lr"] for r in result["runs"] if r["method"] == method and r["seed"] == 0})
        assert tried[0] < rows[method]["lr"] < tried[-1]  # bracketed
        assert rows[method]["lr"] == pytest.approx(0.27) and not rows[method]["lr_at_grid_edge"]
        assert max(tried) > 0.03 * 3  # beyond the grid as given
        seed1 = [r["lr"] for r in result["runs"] if r["method"] == method and r["seed"] == 1]
        assert seed1 == [rows[method]["lr"]]


def test_the_grid_stops_growing_at_the_cap_and_the_report_marks_the_edge(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "train", lambda problem, alloc, tcfg, predictor=None: _trace(tcfg.lr, peak=1e3))
    result = run_benchmark(_fake_config(max_lr_extensions=2), progress=False)
    rows = {r["method"]: r for r in result["summary"]["table"]}
    tried = sorted({r["lr"] for r in result["runs"] if r["method"] == "uniform"})
    assert len(tried) == 3 + 2 and rows["uniform"]["lr"] == tried[-1] and rows["uniform"]["lr_at_grid_edge"]
    text = write_report(result, tmp_path, theory=THEORY, plots=False).read_text()
    assert f"{rows['uniform']['lr']:g}*" in text


def test_noise_to_signal_is_a_ratio_of_sums_not_an_overflow(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "train", lambda problem, alloc, tcfg, predictor=None: _trace(tcfg.lr, peak=0.03))
    result = run_benchmark(_fake_config(), progress=False)
    for row in result["summary"]["table"]:
        # (1 + 1) / (1 - 1e-9) over the oracle's (1 + 1) / (1 + 1): about 2, where a mean of per-probe
        # ratios with the signal clamped at 1e-300 gave about 1e300
        assert row["noise_to_signal_ratio"] == pytest.approx(2.0, rel=1e-6)
    text = write_report(result, tmp_path, theory=THEORY, plots=False).read_text()
    cells = [c.strip() for line in text.splitlines() if line.startswith("|") for c in line.split("|")]
    assert cells and not any(len(c) > 20 and c.replace(".", "").isdigit() for c in cells)


def test_no_measurable_signal_prints_a_dash(monkeypatch, tmp_path):
    monkeypatch.setattr(
        bench, "train", lambda problem, alloc, tcfg, predictor=None: _trace(tcfg.lr, peak=0.03, signal=1e-12)
    )
    result = run_benchmark(_fake_config(methods=("uniform",)), progress=False)
    assert np.isnan(result["summary"]["table"][0]["noise_to_signal_ratio"])


def test_a_saving_method_shows_its_share_of_uniforms_rollouts(tmp_path):
    cfg = BenchConfig(
        scenarios=("hard-heavy",),
        methods=("uniform", DEFAULT_ALLOCATOR),
        aggregations=("seq-mean",),
        seeds=(0,),
        lr_multipliers=(1.0,),
        steps=12,
        batch_prompts=16,
        budget=128,
        n_prompts=300,
        n_test=100,
        grad_var_every=6,
    )
    result = run_benchmark(cfg, progress=False)
    rows = {r["method"]: r for r in result["summary"]["table"]}
    assert rows["uniform"]["rollouts_share"] == pytest.approx(1.0)
    runs = {r["method"]: r for r in result["runs"]}
    expected = runs[DEFAULT_ALLOCATOR]["rollouts"][-1] / runs["uniform"]["rollouts"][-1]
    assert rows[DEFAULT_ALLOCATOR]["rollouts_share"] == pytest.approx(expected) and expected < 1.0
    text = write_report(result, tmp_path, theory=THEORY, plots=False).read_text()
    assert "share of Uniform's rollouts" in text

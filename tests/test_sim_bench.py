"""A tiny benchmark run end to end: report.md, results.json and plots."""

import argparse

import pytest

from adaptive_rollouts.commands.bench import add_bench_arguments, config_from_args, run_bench
from adaptive_rollouts.experiments.bench import BenchConfig, rollouts_to_target, run_benchmark
from adaptive_rollouts.experiments.results import load_result
from adaptive_rollouts.reporting.bench_report import write_report


def test_rollouts_to_target_interpolates():
    assert rollouts_to_target([10, 20, 30], [0.1, 0.3, 0.5], 0.4) == pytest.approx(25.0)
    assert rollouts_to_target([10, 20, 30], [0.5, 0.6, 0.7], 0.4) == 10.0
    assert rollouts_to_target([10, 20], [0.1, 0.2], 0.9) == float("inf")


def _tiny(methods=("uniform", "oracle-vip", "oracle-fill")) -> BenchConfig:
    return BenchConfig(
        scenarios=("hard-heavy",),
        methods=methods,
        aggregations=("seq-mean",),
        seeds=(0,),
        lr_multipliers=(1.0, 3.0),
        steps=25,
        batch_prompts=16,
        budget=128,
        n_prompts=300,
        n_test=100,
        grad_var_every=5,
    )


def test_tiny_bench_end_to_end(tmp_path):
    result = run_benchmark(_tiny(), progress=False)
    theory = {
        "variance": [{"estimator": "rloo", "p": 0.3, "n": 6, "formula": 0.168, "monte_carlo": 0.1679, "se": 0.001}],
        "pareto_k": 2.0,
        "pareto_k_hill": 2.1,
        "vigor_predicted": 1.216,
        "vigor_predicted_hill": 1.2,
    }
    report = write_report(result, tmp_path, theory=theory)
    text = report.read_text()
    assert "| hard-heavy | oracle-fill |" in text and "Verdict" in text
    for name in ("results.json", "calibration.png", "allocation.png", "curves_seq-mean.png"):
        assert (tmp_path / name).stat().st_size > 0
    data = load_result(tmp_path / "results.json").data
    rows = {r["method"]: r for r in data["summary"]["table"]}
    assert rows["uniform"]["speedup_mean"] == pytest.approx(1.0)
    for r in data["runs"]:
        assert r["final"] > r["accuracy0"]  # every run learns
    assert rows["oracle-fill"]["zero_variance_fraction"] < rows["uniform"]["zero_variance_fraction"]
    assert len(data["runs"]) == 3 * 2


def test_cli_arguments(tmp_path):
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    args = parser.parse_args(
        [
            "--scenarios",
            "bimodal",
            "--seeds",
            "1",
            "--steps",
            "3",
            "--prompts",
            "100",
            "--methods",
            "uniform,oracle-fill",
            "--aggregations",
            "prompt-mean",
            "--lr-grid",
            "1",
            "--budget",
            "64",
            "--batch-prompts",
            "8",
            "--theory-draws",
            "1000",
            "--no-plots",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    cfg = config_from_args(args)
    assert cfg.scenarios == ["bimodal"] and cfg.seeds == (0,) and cfg.lr_multipliers == (1.0,)
    assert run_bench(args) == 0
    assert (tmp_path / "report.md").exists()
    bad = parser.parse_args(["--scenarios", "nope", "--out", str(tmp_path)])
    assert run_bench(bad) == 2


def test_first_seed_lr_selection_runs_grid_once():
    cfg = _tiny(methods=("uniform", "oracle-fill"))
    cfg.seeds, cfg.lr_select, cfg.steps = (0, 1), "first-seed", 10
    result = run_benchmark(cfg, progress=False)
    assert len(result["runs"]) == 2 * (2 + 1)
    for m in ("uniform", "oracle-fill"):
        seed1 = [r for r in result["runs"] if r["method"] == m and r["seed"] == 1]
        seed0 = [r for r in result["runs"] if r["method"] == m and r["seed"] == 0]
        assert len(seed1) == 1 and seed1[0]["lr"] == max(seed0, key=lambda r: r["auc"])["lr"]
    rows = {r["method"]: r for r in result["summary"]["table"]}
    assert len(rows["uniform"]["rollouts_to_target"]) == 2

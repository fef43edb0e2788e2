"""The targets block reads each target off its result file: met where the numbers reach it, missed
by the distance where they do not (fake result files, one part at a time)."""

from __future__ import annotations

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.reporting import targets_tables as tt
from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL


def _calibration(root, ece, brier):
    pooled = {"default": {"ece": ece, "brier": brier}, "history": {"brier": 0.4}}
    write_result(
        root / "cal.json",
        {"pooled": pooled},
        command="c",
        commit="abc1234",
        settings={"targets": {"ece": 0.05, "brier_ratio": 0.8}},
    )


def test_calibration_reads_met_only_where_both_scores_reach_their_targets(tmp_path):
    _calibration(tmp_path, 0.03, 0.2)
    assert tt._calibration(tmp_path, "cal.json", "x")[0][-1] == "met"
    _calibration(tmp_path, 0.08, 0.36)
    assert tt._calibration(tmp_path, "cal.json", "x")[0][-1] == "ECE missed by 0.03; Brier ratio missed by 0.10"


def test_signal_and_pool_rows_count_cells_and_say_by_how_much(tmp_path):
    rows = [
        {"cell": "a", "method": "default", "spent": 0.5, "kept": 0.93},
        {"cell": "b", "method": "default", "spent": 0.7, "kept": 0.95},
        {"cell": "a", "method": "uniform", "spent": 1.0, "kept": 1.0},
    ]
    pool = [
        {"n": 4, "method": "default", "spent": 0.45, "kept": 0.91},
        {"n": 8, "method": "default", "spent": 0.5, "kept": 0.8},
    ]
    write_result(tmp_path / SAVING_SIGNAL, {"rows": rows, "pool_rows": pool}, command="s", commit="abc1234")
    out, _ = tt._signal(tmp_path)
    assert out[0][2].startswith("1 of 2 cells") and out[0][3].startswith("missed in 1 cells")
    assert out[1][3] == "met"
    assert out[2][3] == "spend missed by 0.10; kept missed by 0.10"


def test_no_regret_reads_below_only_where_the_interval_lies_under_the_line_and_the_nulls():
    from types import SimpleNamespace

    def row(key, ci, null):
        return {"key": key, "methods": {"default": {"gain_ci90": ci}, "uniform-rounds": {"gain_ci90": null}}}

    rows = [
        row("a", [0.80, 0.95], [0.97, 1.05]),  # below the line and the null's interval
        row("b", [0.80, 0.95], [0.90, 1.05]),  # below the line, inside the null's noise: not called
        row("c", [1.10, 1.40], [0.95, 1.05]),
        row("d", [float("nan"), float("nan")], [0.95, 1.05]),  # no statistic: not counted
    ]
    below, cells = tt.below_no_regret(SimpleNamespace(data={"rows": rows}), "default")
    assert below == ["a"] and cells == 3

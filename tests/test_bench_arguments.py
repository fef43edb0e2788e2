"""`bench` checks its list arguments before any work: an empty list, an empty item, a repeated
name or a --results-dir that is a file is refused with one `error:` line naming the flag (exit
status 2), and nothing runs."""

import pytest

import adaptive_rollouts.commands.bench as bench_cli
from adaptive_rollouts.cli import main


def _exit_code(argv):
    try:
        return main(argv)
    except SystemExit as stop:  # argparse refuses a bad argument by exiting
        return stop.code


@pytest.fixture
def no_work(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the benchmark started before its arguments were checked")

    monkeypatch.setattr(bench_cli, "run_benchmark", refuse)
    monkeypatch.setattr(bench_cli, "run_map", refuse)


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--scenarios", ""], "--scenarios"),
        (["--scenarios", ","], "--scenarios"),
        (["--scenarios", "pareto,,bimodal"], "--scenarios"),
        (["--aggregations", ","], "--aggregations"),
        (["--map", "--methods", ""], "--methods"),
        (["--map", "--cells", ""], "--cells"),
        (["--methods", "default,default"], "--methods"),
        (["--map", "--methods", "uniform,uniform"], "--methods"),
        (["--scenarios", "pareto,pareto"], "--scenarios"),
        (["--lr-grid", ","], "--lr-grid"),
        (["--map", "--jobs", "0"], "--jobs"),
        (["--jobs", "2"], "--jobs"),  # the per-scenario sweep runs in one process
    ],
)
def test_bad_lists_are_refused_before_any_work(extra, flag, tmp_path, capsys, no_work):
    assert _exit_code(["bench", "--out", str(tmp_path / "out"), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and flag in errors[0], err
    assert "Traceback" not in err


def test_results_dir_that_is_a_file_is_refused_before_the_map_runs(tmp_path, capsys, no_work):
    target = tmp_path / "results.json"
    target.write_text("{}")
    code = _exit_code(["bench", "--map", "--quick", "--out", str(tmp_path / "map"), "--results-dir", str(target)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--results-dir" in err and "is a file" in err and "Traceback" not in err
    assert not (tmp_path / "map" / "runs.jsonl").exists()


def test_a_repeated_method_is_named(tmp_path, capsys, no_work):
    assert _exit_code(["bench", "--methods", "uniform,default,default", "--out", str(tmp_path)]) == 2
    assert "'default' given twice" in capsys.readouterr().err

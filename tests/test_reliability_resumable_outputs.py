"""Resumable outputs: a resumed regime map never reuses runs made with other settings, and a line or
file cut by a crash or a full disk is redone instead of blocking the resume."""

import dataclasses
import json
import warnings

import pytest

from adaptive_rollouts.experiments.map_store import run_settings
from adaptive_rollouts.experiments.regime_map import QUICK_MAP, run_map
from adaptive_rollouts.experiments.run_store import append_jsonl, read_jsonl
from adaptive_rollouts.sim.regimes import Cell

CELL = Cell(scenario="bimodal", dim=8, batch_prompts=6, n_prompts=60)


def _map(**changes):
    base = dict(
        cells=[CELL],
        methods=("uniform",),
        tune_seeds=(100,),
        report_seeds=(0,),
        paired_seeds=(0, 1),
        steps=3,
        n_test=30,
        grad_var_every=0,
        fingerprint_every=0,
        lr_grid=(0.1, 0.2, 0.4),
        max_extensions=6,
    )
    return dataclasses.replace(QUICK_MAP, **{**base, **changes})


@pytest.mark.parametrize(
    "change, named",
    [
        ({"steps": 4}, "steps: 3 -> 4"),
        ({"estimator": "rloo"}, "estimator: 'grpo' -> 'rloo'"),
        ({"aggregation": "token-mean"}, "aggregation: 'seq-mean' -> 'token-mean'"),
        ({"n_test": 40}, "n_test: 30 -> 40"),
        ({"grad_var_every": 2}, "grad_var_every: 0 -> 2"),
    ],
)
def test_a_rerun_with_other_settings_is_refused_naming_the_setting(tmp_path, change, named):
    run_map(_map(), tmp_path, progress=False)
    before = (tmp_path / "runs.jsonl").read_bytes()
    with pytest.raises(ValueError, match="other settings") as err:
        run_map(_map(**change), tmp_path, progress=False)
    assert named in str(err.value) and str(tmp_path / "runs.jsonl") in str(err.value)
    assert (tmp_path / "runs.jsonl").read_bytes() == before  # nothing added, nothing mixed


def test_a_stored_run_of_the_same_cell_key_with_another_budget_is_refused(tmp_path):
    """A cell of another group size has its own key (its regime marked -n4); a run stored under this key with
    other cell settings (hand-edited, or from a version that did not mark them) is still refused."""
    assert dataclasses.replace(CELL, per_prompt=4).key != CELL.key
    run_map(_map(), tmp_path, progress=False)
    path = tmp_path / "runs.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["settings"]["cell"]["per_prompt"] = 4
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ValueError, match="other settings") as err:
        run_map(_map(), tmp_path, progress=False)
    assert "'per_prompt': 4" in str(err.value)


def test_runs_of_another_default_allocator_are_refused(tmp_path):
    """ "default" names the registry's recommended allocator, which can change between versions."""
    from adaptive_rollouts.allocators import DEFAULT_ALLOCATOR

    cfg = _map(methods=("uniform", "default"))
    run = {"cell": CELL.key, "method": "default", "seed": 0, "lr": 0.1, "settings": run_settings(cfg, CELL, "default")}
    assert run["settings"]["default_allocator"] == DEFAULT_ALLOCATOR
    run["settings"]["default_allocator"] = "an-older-default"
    (tmp_path / "runs.jsonl").write_text(json.dumps(run) + "\n")
    with pytest.raises(ValueError, match=f"default_allocator: 'an-older-default' -> '{DEFAULT_ALLOCATOR}'"):
        run_map(cfg, tmp_path, progress=False)


def test_settings_that_change_no_run_number_still_resume(tmp_path):
    first = run_map(_map(), tmp_path, progress=False)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    again = run_map(_map(bootstrap=10, target_at=0.4), tmp_path, progress=False)
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines and again["lr"] == first["lr"]


def test_runs_without_recorded_settings_are_refused(tmp_path):
    run_map(_map(), tmp_path, progress=False)
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps({**r, "settings": None}) + "\n" for r in runs))
    with pytest.raises(ValueError, match="does not record the settings"):
        run_map(_map(), tmp_path, progress=False)


def _without_timing(text_or_runs):
    """Runs as JSON text without their wall-clock seconds (the only field a rerun changes)."""
    runs = text_or_runs.values() if isinstance(text_or_runs, dict) else map(json.loads, text_or_runs.splitlines())
    return [json.dumps({k: v for k, v in r.items() if k != "seconds"}) for r in runs]


def _uninterrupted(tmp_path):
    full = tmp_path / "full"
    result = run_map(_map(), full, progress=False)
    return result, (full / "runs.jsonl").read_text()


@pytest.mark.parametrize("cut", ["mid-line", "before-newline", "one-byte"])
def test_a_cut_last_line_is_dropped_with_a_warning_and_redone(tmp_path, cut):
    result, text = _uninterrupted(tmp_path)
    lines = text.splitlines(keepends=True)
    last = lines[-1]
    kept = {"mid-line": last[: len(last) // 2], "before-newline": last[:-2], "one-byte": last[:1]}[cut]
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / "runs.jsonl").write_text("".join(lines[:-1]) + kept)
    with pytest.warns(RuntimeWarning, match=r"runs.jsonl, line \d+: dropping an incomplete last line"):
        again = run_map(_map(), folder, progress=False)
    redone = (folder / "runs.jsonl").read_text()
    assert redone.endswith("\n") and _without_timing(redone) == _without_timing(text)  # redone on its own line
    assert again["lr"] == result["lr"] and _without_timing(again["runs"]) == _without_timing(result["runs"])


def test_a_complete_last_line_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    append_jsonl(path, {"a": 3})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 3}]


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", "\xff\xfe"])
def test_a_damaged_line_before_the_last_names_the_file_and_line(tmp_path, bad):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"a": 1}\n' + bad.encode("latin-1") + b'\n{"a": 2}\n')
    with pytest.raises(ValueError, match=rf"{path}, line 2: not a JSON object"):
        read_jsonl(path)


@pytest.mark.parametrize("content", ["", '{"scenario": "bim', "[]"])
def test_an_unreadable_cell_file_is_recomputed(tmp_path, content):
    result, _ = _uninterrupted(tmp_path)
    folder = tmp_path / "full"
    (cell_file,) = folder.glob("cell_*.json")
    cell_file.write_text(content)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        again = run_map(_map(), folder, progress=False)
    assert json.dumps(again["cells"]) == json.dumps(result["cells"])
    assert json.loads(cell_file.read_text())["transfer_measured"] == pytest.approx(
        result["cells"][CELL.key]["transfer_measured"], nan_ok=True
    )


def test_a_cell_file_of_other_tune_seeds_is_recomputed(tmp_path):
    run_map(_map(), tmp_path, progress=False)
    (cell_file,) = tmp_path.glob("cell_*.json")
    saved = json.loads(cell_file.read_text())
    cell_file.write_text(json.dumps({**saved, "transfer_measured": 123.0}))  # as if from other settings
    assert run_map(_map(), tmp_path, progress=False)["cells"][CELL.key]["transfer_measured"] == 123.0  # reused
    fresh = run_map(_map(tune_seeds=(100, 101)), tmp_path / "other", progress=False)
    resumed = run_map(_map(tune_seeds=(100, 101)), tmp_path, progress=False)  # runs are keyed by seed: reused
    assert json.dumps(resumed["cells"]) == json.dumps(fresh["cells"]) and resumed["lr"] == fresh["lr"]
    assert resumed["cells"][CELL.key]["transfer_measured"] != 123.0


def test_the_command_line_refuses_a_folder_of_other_settings(tmp_path, capsys):
    from adaptive_rollouts.cli import main

    saved = run_settings(dataclasses.replace(QUICK_MAP, steps=3), QUICK_MAP.cells[0], "uniform")
    run = {"cell": QUICK_MAP.cells[0].key, "method": "uniform", "seed": 0, "lr": 0.1, "settings": saved}
    (tmp_path / "runs.jsonl").write_text(json.dumps(run) + "\n")
    status = main(["bench", "--map", "--quick", "--steps", "10", "--methods", "uniform", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and "steps: 3 -> 10" in err and "Traceback" not in err
    assert (tmp_path / "runs.jsonl").read_text() == json.dumps(run) + "\n"

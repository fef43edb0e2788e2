"""The docs' numbers come from committed result files: rendered blocks match, every result file
has its header, and results of different runs never share a table silently."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from adaptive_rollouts.experiments.results import (
    HEADER_KEYS,
    MixedResultsError,
    ResultFileError,
    check_comparable,
    git_commit,
    load_result,
    provenance,
    write_result,
)
from adaptive_rollouts.reporting.map_tables import render_map
from adaptive_rollouts.reporting.render_docs import MarkerError, doc_files, render_docs, render_text
from adaptive_rollouts.reporting.tables import RENDERERS

ROOT = Path(__file__).resolve().parents[1]


def test_rendered_blocks_in_readme_and_docs_match_the_committed_results():
    stale = render_docs(ROOT, check=True)
    assert not stale, f"run `make docs`: these differ from what results/ renders: {stale}"


def test_every_committed_result_file_has_command_commit_and_settings():
    files = sorted((ROOT / "results").rglob("*.json"))
    assert files, "no result files under results/"
    for path in files:
        raw = json.loads(path.read_text())
        assert set(HEADER_KEYS) <= set(raw.get("header", {})), f"{path} lacks part of its header"
        result = load_result(path)
        assert result.command.strip() and result.commit and isinstance(result.settings, dict)


def test_every_renderer_is_used_by_a_doc_and_every_block_names_one():
    text = "\n".join(p.read_text() for p in doc_files(ROOT))
    for name in RENDERERS:
        assert f"<!-- results: {name} -->" in text, f"renderer {name} renders no block"


def _write(path: Path, data, commit="abc1234", settings=None, command="python bench.py") -> Path:
    return write_result(path, data, command=command, settings=settings or {"q": 1}, commit=commit)


@pytest.mark.parametrize("key", HEADER_KEYS)
def test_a_result_file_without_a_header_key_is_refused_naming_the_file(tmp_path, key):
    path = _write(tmp_path / "r.json", {"x": 1})
    raw = json.loads(path.read_text())
    del raw["header"][key]
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultFileError, match=rf"{path}.*lacks {key}"):
        load_result(path)


def test_malformed_result_files_are_refused_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ResultFileError, match="bad.json: not readable JSON"):
        load_result(bad)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"rows": []}))  # data without a header
    with pytest.raises(ResultFileError, match="bare.json: expected an object with 'header'"):
        load_result(bare)
    path = _write(tmp_path / "c.json", {})
    raw = json.loads(path.read_text())
    raw["header"]["commit"] = "yesterday"
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultFileError, match="c.json: header 'commit' is not a git commit"):
        load_result(path)
    with pytest.raises(ResultFileError, match="missing.json: not found"):
        load_result(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="must end in .json"):
        _write(tmp_path / "r.txt", {})


def test_results_of_two_commits_or_settings_are_refused_in_one_table_unless_allowed(tmp_path):
    a = load_result(_write(tmp_path / "a.json", {}, commit="abc1234"))
    b = load_result(_write(tmp_path / "b.json", {}, commit="def5678"))
    c = load_result(_write(tmp_path / "c.json", {}, commit="abc1234", settings={"q": 2}))
    with pytest.raises(MixedResultsError, match=r"b.json \(commit def5678\) vs .*a.json \(commit abc1234\)"):
        provenance([a, b])
    with pytest.raises(MixedResultsError, match="c.json has other settings"):
        check_comparable([a, c])
    line = provenance([a, b], allow_mixed=True)
    assert line.startswith("**Mixed runs") and "def5678" in line and "abc1234" in line
    same = load_result(_write(tmp_path / "d.json", {}, commit="abc1234"))
    assert provenance([a, same]) == (f"Source: `{a.path}`, `{same.path}`, commit abc1234, command `python bench.py`.")


def test_commit_is_head_plus_dirty_only_for_code_changes(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git not installed")

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text("{}\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == head
    (tmp_path / "results" / "r.json").write_text('{"new": 1}\n')  # rewriting a result is not a code change
    (tmp_path / "untracked.txt").write_text("scratch\n")
    assert git_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == head + "-dirty"
    assert git_commit(tmp_path / "results") == head + "-dirty"  # from a subfolder too
    assert git_commit(tmp_path.parent / "no-such-folder") == "unknown"


def test_blocks_are_replaced_and_malformed_blocks_name_file_and_line():
    renderers = {"x": lambda root: "fresh\n"}
    text = "# t\n<!-- results: x -->\nstale\nlines\n<!-- /results -->\nend"
    assert render_text(text, renderers, ROOT) == "# t\n<!-- results: x -->\nfresh\n<!-- /results -->\nend"
    indented = render_text("- item:\n  <!-- results: x -->\n  <!-- /results -->", renderers, ROOT)
    assert indented == "- item:\n  <!-- results: x -->\n  fresh\n  <!-- /results -->"
    with pytest.raises(MarkerError, match=r"doc.md:1: no renderer named 'y'"):
        render_text("<!-- results: y -->\n<!-- /results -->", renderers, ROOT, source="doc.md")
    with pytest.raises(MarkerError, match=r"doc.md:2: results block 'x' is not closed"):
        render_text("a\n<!-- results: x -->\nb", renderers, ROOT, source="doc.md")
    with pytest.raises(MarkerError, match=r"doc.md:2: '<!-- /results -->' without an opening"):
        render_text("a\n<!-- /results -->", renderers, ROOT, source="doc.md")
    with pytest.raises(MarkerError, match=r"doc.md:3: results block opened inside"):
        render_text("<!-- results: x -->\n\n<!-- results: x -->\n<!-- /results -->", renderers, ROOT, source="doc.md")


def test_render_docs_rewrites_stale_blocks_and_check_changes_nothing(tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "a.md"
    doc.write_text("<!-- results: x -->\nold\n<!-- /results -->\n")
    renderers = {"x": lambda root: "new"}
    assert render_docs(tmp_path, renderers, check=True) == [doc]
    assert "old" in doc.read_text()
    assert render_docs(tmp_path, renderers) == [doc]
    assert doc.read_text() == "<!-- results: x -->\nnew\n<!-- /results -->\n"
    assert render_docs(tmp_path, renderers) == []  # idempotent


def _tiny_map_data() -> dict:
    entry = {"speedup": 1.25, "ci90": [1.05, 1.5], "min": 0.9, "max": 1.6, "lr": 0.2, "seeds": [0, 1]}
    entry |= {"same_rate_speedup": 1.1, "same_rate_ci90": [0.9, 1.3], "batch_nsr": 4.0, "batch_nsr_true_p_optimum": 2.0}
    config = {"estimator": "grpo", "aggregation": "seq-mean", "steps": 100, "target_at": 0.5, "lr_step": 1.41}
    config |= {"tune_seeds": [100], "lr_grid": [0.1, 0.2], "report_seeds": [0], "paired_seeds": [0, 1]}
    config |= {"methods": ["uniform", "default"]}
    fingerprints = {"noise_to_signal_rollout": 400.0, "noise_to_signal_batch": 7.5, "zero_variance_fraction": 0.7}
    targets = {"noise_dominated_cells": ["pareto/d128-Q16-L64"], "learned_best_in_noise_dominated": []}
    targets |= {"learned_target_met": False, "no_regret_met": True, "no_regret_same_rate_met": True}
    targets |= {"default_vs_uniform": [{"cell": "pareto/d128-Q16-L64", **entry}], "nsr_target_met": False}
    targets |= {"default_batch_nsr_ratio": [{"cell": "pareto/d128-Q16-L64", "ratio": 2.0}]}
    row = {"cell": "pareto/d128-Q16-L64", "fingerprints": fingerprints, "methods": {"default": entry}}
    return {"config": config, "lr": {}, "rows": [row], "targets": targets, "errors": {}, "missing": []}


def test_map_block_renders_each_committed_map_with_its_source_or_says_how_to_make_one(tmp_path):
    assert "adaptive-rollouts bench --map" in render_map(tmp_path) and "No regime-map result" in render_map(tmp_path)
    write_result(
        tmp_path / "results" / "map" / "noisy.json",
        _tiny_map_data(),
        command="adaptive-rollouts bench --map",
        commit="abc1234",
    )
    text = render_map(tmp_path)
    assert "| pareto/d128-Q16-L64 | 1.25 (1.05-1.50) [0.90-1.60] (0.2) |" in text
    assert "Source: `results/map/noisy.json`, commit abc1234, command `adaptive-rollouts bench --map`." in text
    # a map whose runs ran at two commits: refused, unless it was written allowing it, then said so
    mixed = _tiny_map_data() | {"run_commits": {"abc1234": 10, "def5678": 3}}
    path = write_result(tmp_path / "results" / "map" / "mixed.json", mixed, command="adaptive-rollouts bench --map")
    with pytest.raises(MixedResultsError, match=r"results/map/mixed.json: runs of 2 commits"):
        render_map(tmp_path)
    write_result(path, mixed | {"allow_mixed_commits": True}, command="adaptive-rollouts bench --map")
    assert "**Mixed runs: this map's runs ran at 2 commits:** abc1234 (10 runs), def5678 (3 runs)." in render_map(
        tmp_path
    )


def test_bench_map_writes_its_result_file_under_the_results_folder(tmp_path):
    from adaptive_rollouts.cli import main

    args = ["bench", "--map", "--quick", "--cells", "pareto/d16-Q32", "--methods", "uniform", "--steps", "2"]
    args += ["--out", str(tmp_path / "runs" / "tiny"), "--results-dir", str(tmp_path / "results" / "map")]
    main([*args, "--no-plots", "--no-progress"])
    copy = load_result(tmp_path / "results" / "map" / "tiny.json")
    assert copy.settings["steps"] == 2 and copy.command.startswith("adaptive-rollouts ")
    assert (tmp_path / "runs" / "tiny" / "map.json").read_bytes() == (
        tmp_path / "results" / "map" / "tiny.json"
    ).read_bytes()
    assert "### Map `tiny`" in render_map(tmp_path)


def _speedup(x: float) -> dict:
    return {"speedup": x, "ci95": [x - 0.25, x + 0.5]}


def test_demo_saving_block_shows_each_summary_with_its_source_and_only_the_saving_arms(tmp_path):
    from adaptive_rollouts.reporting.saving_tables import render_demo_saving

    assert "No demo-protocol summary" in render_demo_saving(tmp_path)
    arms = [
        {"arm": name, "seeds": [0, 1, 2], "rollouts": _speedup(x), "tokens": _speedup(x - 0.01), "rollouts_per_step": r}
        for name, x, r in (("uniform", 1.0, 64.0), ("default", 1.25, 50.0))
    ]
    settings = {"regime": "single-pass", "prompts_per_step": 8, "mean_rollouts": 8}
    write_result(
        tmp_path / "results" / "demo_protocol" / "single-pass" / "summary.json",
        {"arms": arms},
        command="python benchmarks/demo_protocol.py",
        settings=settings,
        commit="abc1234",
    )
    text = render_demo_saving(tmp_path)
    assert "| default | 3 | 1.25 (95% 1.00-1.75) | 1.24 (95% 0.99-1.74) | 50.0 |" in text
    assert "| uniform |" not in text and "rollouts / step (Uniform 64)" in text
    assert "Source: `results/demo_protocol/single-pass/summary.json`, commit abc1234" in text


def test_saving_signal_block_renders_spent_kept_and_lost_per_cell_and_method(tmp_path):
    from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL, render_saving_signal

    rows = [
        {"cell": "pareto/d16-Q32", "method": m, "spent": s, "kept": k, "lost": lost}
        for m, s, k, lost in (("uniform", 1.0, 1.0, 0.0), ("oracle-skip", 0.3, 0.95, 0.05))
    ]
    data = {"rows": rows, "methods": ["uniform", "oracle-skip"], "cells": ["pareto/d16-Q32"], "seeds": 2}
    data |= {"steps": 60, "lr": 0.4, "estimator": "grpo", "aggregation": "seq-mean"}
    write_result(tmp_path / SAVING_SIGNAL, data, command="python benchmarks/saving_signal.py", commit="abc1234")
    text = render_saving_signal(tmp_path)
    assert "| pareto/d16-Q32 | 1.00 / 1.00 (0.00) | 0.30 / 0.95 (0.05) |" in text
    assert "mean of 2 seeds, 60 steps at lr 0.4" in text


def test_saving_given_block_renders_the_defaults_account_against_the_known_p(tmp_path):
    from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL, render_saving_given

    row = {"cell": "pareto/d16-Q32", "method": "default", "spent": 0.7, "kept": 0.88, "lost": 0.15}
    row |= {"given": 0.12, "skipped": 0.05, "claimed": 0.096, "by_p": [0.01, 0.02, 0.03, 0.02, 0.02, 0.01, 0.01]}
    pool = {"n": 4, "method": "default", "spent": 0.6, "kept": 0.9, "lost": 0.1, "given": 0.1, "claimed": 0.08}
    data = {"rows": [row], "pool_rows": [pool], "methods": ["default"], "cells": ["pareto/d16-Q32"], "seeds": 3}
    data |= {"steps": 60, "lr": 0.4, "estimator": "grpo", "aggregation": "seq-mean"}
    data |= {"p_bins": [0.0, 0.02, 0.1, 0.3, 0.7, 0.9, 0.98, 1.0]}
    write_result(tmp_path / SAVING_SIGNAL, data, command="python benchmarks/saving_signal.py", commit="abc1234")
    text = render_saving_given(tmp_path)
    assert "| pareto/d16-Q32 | 0.70 | 0.88 | 0.120 | 0.050 | 0.096 | 1.25x | 0.010 | 0.020 | 0.030 |" in text
    # a run that did not record what was skipped unseen (the pool row here) says so with "-"
    assert "p in [0.98, 1]" in text and "| recurring pool, n = 4 | 0.60 | 0.90 | 0.100 | - | 0.080 | 1.25x |" in text
    del data["p_bins"]
    write_result(tmp_path / SAVING_SIGNAL, data, command="python benchmarks/saving_signal.py", commit="abc1234")
    assert "no given-up ledger" in render_saving_given(tmp_path)

"""`make docs` on damaged result data: one clear error naming the file and the field, exit status
2, no traceback, and no doc file written (before: `KeyError: 'n'` and a `TypeError` naming no file,
a NaN speedup and a negative spend rendered silently into README as `speedup nan-nanx at
-3.00-0.88`, a truncated file named only inside a traceback)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from adaptive_rollouts.reporting.render_docs import main

ROOT = Path(__file__).resolve().parents[1]
SOLVER = "results/solver/solver.json"
SCALE = "results/scale/scale.json"
MAP = "results/map/saving-default-a.json"


def _edit(path: Path, change) -> None:
    raw = json.loads(path.read_text())
    change(raw["data"])
    path.write_text(json.dumps(raw))


def _pop_first_row_key(key):
    return lambda data: data["rows"][0].pop(key)


def _set_target(index, key, value):
    return lambda data: data["saving_targets"][index].__setitem__(key, value)


CASES = [
    ("missing-key", SOLVER, lambda p: _edit(p, _pop_first_row_key("objective")), "field 'objective' is missing"),
    ("missing-scale-key", SCALE, lambda p: _edit(p, _pop_first_row_key("budget")), "field 'budget' is missing"),
    ("wrong-shape", SOLVER, lambda p: _edit(p, lambda d: d.__setitem__("rows", [5, 6])), "another shape or type"),
    ("nan-speedup", MAP, lambda p: _edit(p, _set_target(0, "speedup", float("nan"))), "saving_targets/0/speedup"),
    ("negative-spend", MAP, lambda p: _edit(p, _set_target(1, "spend", -3.0)), r"saving_targets/1/spend.*>= 0"),
    ("truncated", SOLVER, lambda p: p.write_text(p.read_text()[:200]), "not readable JSON"),
]


@pytest.fixture
def repo(tmp_path):
    """A copy of the docs and results, with README's first block made stale (so a run that wrote
    anything would change it)."""
    for name in ("README.md", "docs", "results"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    start = text.index("<!-- results: solver-summary -->")
    end = text.index("<!-- /results -->", start)
    readme.write_text(text[:start] + "<!-- results: solver-summary -->\nstale\n" + text[end:])
    return tmp_path


@pytest.mark.parametrize("rel, damage, match", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_damaged_result_data_is_one_error_naming_file_and_field(repo, rel, damage, match, capsys):
    damage(repo / rel)
    docs = {p: p.read_bytes() for p in [repo / "README.md", *(repo / "docs").glob("*.md")]}
    assert main(["--root", str(repo)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 1
    assert rel in err, f"the error names the file: {err}"
    assert re.search(match, err), err
    assert all(p.read_bytes() == text for p, text in docs.items()), "a doc file was written"


def test_undamaged_data_renders_the_stale_block(repo, capsys):
    assert main(["--root", str(repo)]) == 0
    assert "stale" not in (repo / "README.md").read_text()

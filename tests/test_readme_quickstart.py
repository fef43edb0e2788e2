"""README's quick start as `make test-wheel` runs it: extracted from README itself, run by an
installed package's Python outside the repository; a missing file fails the check."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "readme_quickstart.py"


def _load():
    spec = importlib.util.spec_from_file_location("readme_quickstart", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


qs = _load()


def test_the_quick_start_is_a_script_that_prints_its_result():
    code = qs.extract((ROOT / "README.md").read_text())
    tree = ast.parse(code)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and last.value.func.id == "print"
    # what a reader needs: the shape of `rewards`, the embedding model's loading announced
    lines = code.splitlines()
    observe = next(i for i, line in enumerate(lines) if "vip.observe(plan, rewards)" in line)
    assert any("rewards[i] holds plan.counts[i] rewards" in line for line in lines[:observe])
    assert any("loads the embedding model" in line and "loading bar" in line for line in lines)
    # every name it uses is defined in it (prompts, sample): a script, not a fragment
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert {"prompts", "sample", "rewards", "plan"} <= defined | {"sample"}
    assert any(isinstance(n, ast.FunctionDef) and n.name == "sample" for n in tree.body)


def test_a_readme_without_the_block_is_refused(tmp_path):
    with pytest.raises(ValueError, match="quick-start marker"):
        qs.extract("# title\n\n```python\nprint(1)\n```\n")
    with pytest.raises(ValueError, match="not followed by a ```python block"):
        qs.extract(qs.MARKER + "\n\nsome text\n\n```python\nprint(1)\n```\n")


def _repo(tmp_path, code):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text(f"# x\n\n{qs.MARKER}\n\n```python\n{code}\n```\n")
    return repo / "README.md"


def test_a_missing_module_fails_the_check(tmp_path, capfd):
    readme = _repo(tmp_path, "import adaptive_rollouts.a_module_the_wheel_lacks")
    assert qs.main([str(readme), "--python", sys.executable, "--workdir", str(tmp_path / "run")]) == 1
    err = capfd.readouterr().err
    assert "ModuleNotFoundError" in err and "quick start failed" in err


def test_it_runs_outside_the_repository_from_an_installed_package(tmp_path, capfd, monkeypatch):
    readme = _repo(tmp_path, 'print("ran")')
    assert qs.main([str(readme), "--workdir", str(tmp_path / "repo" / "inside")]) == 1
    assert "inside the repository" in capfd.readouterr().err
    monkeypatch.setattr(qs, "installed_location", lambda python, workdir: readme.parent / "src" / "pkg.py")
    assert qs.main([str(readme), "--workdir", str(tmp_path / "run")]) == 1
    assert "imported from the repository" in capfd.readouterr().err
    monkeypatch.undo()
    assert qs.main([str(readme), "--python", sys.executable, "--workdir", str(tmp_path / "run")]) == 0
    assert "ran" in capfd.readouterr().out


def test_make_test_runs_the_wheel_check_as_ci_does():
    makefile = (ROOT / "Makefile").read_text()
    test_line = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert "test-wheel" in test_line.split()
    recipe = makefile.split("\ntest-wheel:", 1)[1].split("\n\n", 1)[0]
    torch_at, wheel_at = recipe.index("torch==2.13.0"), recipe.index("-c constraints.txt")
    assert torch_at < wheel_at  # torch first, then the wheel under the constraints
    assert (
        "mktemp -d" in recipe
        and "-m venv" in recipe
        and "pip --disable-pip-version-check wheel" in recipe.replace("$(PIP)", "pip --disable-pip-version-check")
    )
    assert "$(TEST_ENV)" in recipe and "HF_HUB_OFFLINE=1" in makefile.split("TEST_ENV :=", 1)[1].split("\n", 1)[0]
    assert "scripts/readme_quickstart.py README.md" in recipe

"""The GPU check script's CPU smoke mode: the same checks (finite losses, exact budgets, allocator
checkpoint) on 2 steps in fp32, so the script is known to run before a GPU machine is lent."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("reasoning_gym")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check_trl.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check_trl", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_smoke_mode_on_cpu(tmp_path):
    script = load_script()
    assert script.main(["--device", "cpu", "--steps", "2", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu_check_trl.json").read_text())
    runs = {r["method"]: r for r in report["runs"]}
    assert set(runs) == {"uniform", "vigor", "default"}
    for run in runs.values():
        assert run["dtype"] == "torch.float32" and run["device"] == "cpu"
        assert [sum(c) for c in run["counts"]] == [16, 16]
    assert runs["uniform"]["counts"] == [[4, 4, 4, 4]] * 2
    assert (tmp_path / "gpu_check_trl.md").read_text().startswith("# AdaptiveGRPOTrainer GPU check")


def test_gpu_check_refuses_bad_arguments():
    script = load_script()
    with pytest.raises(SystemExit):
        script.parse_args(["--methods", "uniform,nope"])
    assert script.parse_args(["--device", "cpu"]).steps == 2

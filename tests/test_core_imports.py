"""The core must import no ML framework: torch, transformers, TRL and verl live at the edge."""

import subprocess
import sys

import pytest

CORE = [
    "adaptive_rollouts",
    "adaptive_rollouts.types",
    "adaptive_rollouts.objectives",
    "adaptive_rollouts.solvers",
    "adaptive_rollouts.predictors",
    "adaptive_rollouts.allocators",
    "adaptive_rollouts.metrics",
    "adaptive_rollouts.state",
    "adaptive_rollouts.sim",
]
FRAMEWORKS = ["torch", "transformers", "trl", "verl", "ray", "sentence_transformers"]


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_no_framework(module):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        f"print(','.join(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"

"""The core must import no ML framework: torch, transformers, TRL and verl live at the edge."""

import ast
import subprocess
import sys
from pathlib import Path

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


# ---------------------------------------------------------------------------- the import graph
# Read from the source (ast), so an import inside a function or under TYPE_CHECKING counts too.

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "adaptive_rollouts"
# the core: what any trainer, the simulator and the demo build on; it imports none of them
CORE_PACKAGES = ("objectives", "solvers", "predictors", "allocators", "checks", "state")
CORE_MODULES = ("types", "metrics", "clock", "advantages", "keys", "success", "fingerprints")
EDGE = ("bridge", "integrations", "sim", "demo", "cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _target(module: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    """The package modules an import statement loads (a name imported from a package is a module
    when there is one of that name)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    return found or ([base] if base in MODULES else [])


def _imports(module: str) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of ``module`` and whether it sits inside a function."""
    tree = ast.parse(MODULES[module].read_text())
    out = []

    def walk(node: ast.AST, inner: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, inner))
            walk(child, inner or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return out


def _graph() -> dict[str, set[str]]:
    return {
        m: {t for node, _ in _imports(m) for t in _target(m, node, MODULES[m].name == "__init__.py") if t != m}
        for m in MODULES
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == f"{PACKAGE}.{p}" or module.startswith(f"{PACKAGE}.{p}.") for p in packages)


def test_the_core_imports_no_trainer_simulator_or_demo_code():
    graph = _graph()
    core = [m for m in graph if _in(m, CORE_PACKAGES + CORE_MODULES)]
    assert len(core) > 40
    wrong = {m: sorted(t for t in graph[m] if _in(t, EDGE)) for m in core}
    assert {m: t for m, t in wrong.items() if t} == {}


def optional_dependencies() -> set[str]:
    """The optional dependencies docs/architecture.md lists, one line each: ``- `name`: why``."""
    text = (SRC.parent / "docs" / "architecture.md").read_text()
    section = text.split("## Optional dependencies", 1)[1].split("\n## ", 1)[0]
    return {line.split("`")[1] for line in section.splitlines() if line.startswith("- `")}


def late_imports() -> list[tuple[str, str]]:
    """(module, what it imports) for every import inside a function anywhere in the package that is
    neither an optional dependency listed in docs/architecture.md nor a trainer plug-in module (which
    imports one)."""
    optional = optional_dependencies()
    late = []
    for module in MODULES:
        for node, inner in _imports(module):
            if not inner:
                continue
            for name in _target(module, node, MODULES[module].name == "__init__.py"):
                if not name.startswith(f"{PACKAGE}.integrations."):
                    late.append((module, name))
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = [] if node.level else [node.module or ""]
            late += [(module, n) for n in names if n.split(".")[0] not in optional and not n.startswith(PACKAGE)]
    return late


def test_imports_inside_functions_are_of_optional_dependencies_only():
    """An import inside a function hides an arrow of the graph; only an optional dependency (listed
    in docs/architecture.md) may be imported late, or a trainer plug-in module that imports one. Every
    module of the package is scanned: core, bridge, plug-ins, simulator, demo, reporting, CLI."""
    optional = optional_dependencies()
    assert {"torch", "trl", "verl", "matplotlib"} <= optional
    assert "scipy" not in optional and "numpy" not in optional  # required dependencies: imported at the top
    assert late_imports() == []


def test_the_late_import_scan_sees_every_package():
    """The scan covers the demo and the allocators too (no package is left out), and finds a late
    import of the package's own code wherever it is."""
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 1}
    assert {"demo", "allocators", "reporting", "sim", "integrations", "bridge"} <= packages
    tree = ast.parse("def f():\n    from .tasks import make_problems\n")
    node = tree.body[0].body[0]
    assert _target("adaptive_rollouts.demo.jobs", node, False) == ["adaptive_rollouts.demo.tasks"]

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
    "adaptive_rollouts.experiments",
    "adaptive_rollouts.reporting",
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
EDGE = ("bridge", "integrations", "sim", "experiments", "reporting", "demo", "cli")


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


# ---------------------------------------------------------------------------- the research wing
# Three rooms, imports one way: reporting (tables, reports) -> experiments (runs, stores, result
# files) -> sim (the simulator). The `bench` command line (`commands`) drives all three, so it sits
# above them, outside every room: no room imports it.
WING = ("reporting", "experiments", "sim")
COMMANDS = ("commands",)


def wing_back_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, what it imports) for every import from a room of the wing into a room listed before
    it in `WING` (or into the command line above the wing), and every import of the demo from the wing."""
    out = []
    for module, targets in graph.items():
        for i, room in enumerate(WING):
            if _in(module, (room,)):
                above = WING[:i]
                out += [(module, t) for t in sorted(targets) if _in(t, above + COMMANDS)]
                out += [(module, t) for t in sorted(targets) if _in(t, ("demo",))]
    return out


def test_the_research_wing_imports_one_way():
    graph = _graph()
    assert any(_in(m, ("experiments",)) for m in graph), "the experiments package is missing"
    assert wing_back_imports(graph) == []


def test_the_wing_check_finds_a_back_import():
    graph = {
        f"{PACKAGE}.sim.train": {f"{PACKAGE}.reporting.markdown"},
        f"{PACKAGE}.experiments.bench": {f"{PACKAGE}.sim.train", f"{PACKAGE}.reporting.tables"},
        f"{PACKAGE}.reporting.tables": {f"{PACKAGE}.experiments.results", f"{PACKAGE}.sim.problem"},
        f"{PACKAGE}.commands.bench": {f"{PACKAGE}.reporting.tables", f"{PACKAGE}.sim.problem"},
        f"{PACKAGE}.sim.regimes": {f"{PACKAGE}.commands.bench_checks"},
    }
    assert wing_back_imports(graph) == [
        (f"{PACKAGE}.sim.train", f"{PACKAGE}.reporting.markdown"),
        (f"{PACKAGE}.experiments.bench", f"{PACKAGE}.reporting.tables"),
        (f"{PACKAGE}.sim.regimes", f"{PACKAGE}.commands.bench_checks"),
    ]


def test_the_bench_command_sits_above_the_wing():
    """The `bench` command line lives in `commands`, none of the wing's rooms; the console entry
    point and `python -m adaptive_rollouts` reach it."""
    graph = _graph()
    assert f"{PACKAGE}.commands.bench" in graph and f"{PACKAGE}.commands.bench_checks" in graph
    assert not [m for m in graph if _in(m, WING) and m.rsplit(".", 1)[-1] in ("cli", "bench_checks")]
    assert f"{PACKAGE}.commands.bench" in graph[f"{PACKAGE}.cli"]
    out = subprocess.run(
        [sys.executable, "-m", PACKAGE, "bench", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--map" in out and "--jobs" in out


# ---------------------------------------------------------------------------- private names
# The demo, the benchmarks, the scripts and the examples use the library through its public names:
# nothing whose module path or name starts with an underscore, from another package.
OUTSIDE = [SRC / PACKAGE / "demo", SRC.parent / "benchmarks", SRC.parent / "scripts", SRC.parent / "examples"]


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def private_imports(path: Path, own: str | None) -> list[str]:
    """``module.name`` for every private name ``path`` takes from the package outside its own
    package ``own``: imported (``from a._b import c``, ``from a.b import _c``, ``import a._b``) or
    read as an attribute of an imported module (``b._c``)."""
    tree = ast.parse(path.read_text())
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith(PACKAGE):
            mod = node.module or ""
            if own and (mod == own or mod.startswith(own + ".")):
                continue
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                if _private(full):
                    found.append(full)
                if full in MODULES:
                    modules[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE) and not (own and alias.name.startswith(own + ".")):
                    if _private(alias.name):
                        found.append(alias.name)
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = ast.unparse(node.value)
            if base in modules:
                found.append(f"{modules[base]}.{node.attr}")
    return found


def test_demo_benchmarks_scripts_and_examples_use_no_private_name():
    files = [p for folder in OUTSIDE for p in sorted(folder.rglob("*.py"))]
    assert len(files) > 20
    own = {folder: f"{PACKAGE}.demo" if folder.name == "demo" else None for folder in OUTSIDE}
    wrong = {
        str(p.relative_to(SRC.parent)): names
        for folder in OUTSIDE
        for p in sorted(folder.rglob("*.py"))
        if (names := private_imports(p, own[folder]))
    }
    assert wrong == {}


def test_the_private_name_scan_finds_each_form(tmp_path):
    code = (
        "import adaptive_rollouts.experiments.bench as bench\n"
        "from adaptive_rollouts.allocators import _pilot\n"
        "from adaptive_rollouts.experiments.bench import run_summary, _hidden\n"
        "from adaptive_rollouts.demo.tasks import _mine\n"
        "x = bench._truth(1)\n"
    )
    (tmp_path / "f.py").write_text(code)
    assert private_imports(tmp_path / "f.py", f"{PACKAGE}.demo") == [
        f"{PACKAGE}.allocators._pilot",
        f"{PACKAGE}.experiments.bench._hidden",
        f"{PACKAGE}.experiments.bench._truth",
    ]


def test_one_progress_bar():
    """tqdm is imported in one module, `progress`, which every long loop of the package and the
    benchmarks calls."""
    users = []
    for path in [*sorted((SRC / PACKAGE).rglob("*.py")), *sorted((SRC.parent / "benchmarks").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n.split(".")[0] == "tqdm" for n in names):
                users.append(str(path.relative_to(SRC.parent)))
    assert sorted(set(users)) == ["src/adaptive_rollouts/progress.py"]


def documented_modules() -> set[str]:
    """The paths in the first column of docs/architecture.md's module table (``sim/``, ``cli.py``)."""
    text = (SRC.parent / "docs" / "architecture.md").read_text()
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in cell.split("`")[1::2]}


def undocumented(root: Path, documented: set[str]) -> list[str]:
    """Every package under ``root`` (``integrations/trl/``) and top-level module (``cli.py``) that
    the module table leaves out; a package counts as in when one of its sub-packages is."""
    packages = [p.parent.relative_to(root).as_posix() + "/" for p in root.rglob("__init__.py") if p.parent != root]
    modules = [p.name for p in root.glob("*.py") if p.name != "__init__.py"]
    return sorted(
        [p for p in packages if not any(d.startswith(p) for d in documented)]
        + [m for m in modules if m not in documented]
    )


def test_every_package_and_module_is_in_the_architecture_table(tmp_path):
    assert undocumented(SRC / PACKAGE, documented_modules()) == []
    (tmp_path / "newroom").mkdir()
    (tmp_path / "newroom" / "__init__.py").write_text("")
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "__init__.py").write_text("")
    (tmp_path / "tool.py").write_text("")
    assert undocumented(tmp_path, {"sim/"}) == ["newroom/", "tool.py"]

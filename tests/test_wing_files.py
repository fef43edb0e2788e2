"""Every JSON file the research wing (simulator, experiments, reporting, demo, benchmarks) writes or
reads goes through one path: `experiments.run_store.write_json` / `read_json` (run stores, resumable
state) and `experiments.results.write_result` / `load_result` (result files, which write through
`write_json`). No module writes ``json.dumps`` into a file or parses a file's text itself."""

import ast
from pathlib import Path

from adaptive_rollouts.experiments.results import load_result, write_result
from adaptive_rollouts.experiments.run_store import read_json, write_json

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "adaptive_rollouts"
WING = [PKG / "sim", PKG / "experiments", PKG / "reporting", PKG / "demo", ROOT / "benchmarks"]
THE_PATH = {"src/adaptive_rollouts/experiments/run_store.py", "src/adaptive_rollouts/experiments/results.py"}
# the tiny model's files, kept next to its weights (state, not results): its config and checkpoint step
STATE = {"src/adaptive_rollouts/demo/model.py", "src/adaptive_rollouts/demo/warm_start.py"}
WRITERS = {"write_text", "write_bytes", "atomic_write", "write", "dump"}
READERS = {"read_text", "read_bytes", "open", "load"}


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_json(call: ast.AST, names: set[str]) -> bool:
    f = getattr(call, "func", None)
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "json" and f.attr in names


def json_file_io(source: str) -> list[str]:
    """The lines that write JSON into a file or parse a file's text as JSON by hand."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        inner = [n for a in [*node.args, *(k.value for k in node.keywords)] for n in ast.walk(a)]
        if _is_json(node, {"dump", "load"}):
            found.append(f"line {node.lineno}: json.{_name(node)}")
        elif _name(node) in WRITERS and any(_is_json(n, {"dumps"}) for n in inner):
            found.append(f"line {node.lineno}: {_name(node)}(json.dumps(...))")
        elif _is_json(node, {"loads"}) and any(isinstance(n, ast.Call) and _name(n) in READERS for n in inner):
            found.append(f"line {node.lineno}: json.loads(<file>)")
    return found


def test_the_wing_reads_and_writes_json_files_through_one_path():
    files = [p for folder in WING for p in sorted(folder.rglob("*.py"))]
    assert len(files) > 40
    wrong = {}
    for path in files:
        rel = str(path.relative_to(ROOT))
        if rel in THE_PATH | STATE:
            continue
        if found := json_file_io(path.read_text()):
            wrong[rel] = found
    assert wrong == {}


def test_the_scan_finds_each_form():
    code = (
        "import json\n"
        "p.write_text(json.dumps(x) + '\\n')\n"
        "atomic_write(p, json.dumps(x).encode())\n"
        "x = json.loads(p.read_text())\n"
        "json.dump(x, fh)\n"
        "key = json.dumps(o, sort_keys=True)\n"  # not a file
        "y = json.loads(line)\n"  # not a file
    )
    assert json_file_io(code) == [
        "line 2: write_text(json.dumps(...))",
        "line 3: atomic_write(json.dumps(...))",
        "line 4: json.loads(<file>)",
        "line 5: json.dump",
    ]


def test_a_result_file_is_written_by_the_run_store_writer(tmp_path):
    """Same bytes either way: the result file is the run-store JSON of {header, data} at indent 1."""
    a = write_result(tmp_path / "a.json", {"x": [1.5]}, command="cmd", settings={"s": 1}, commit="abc1234")
    header = load_result(a).header
    write_json(tmp_path / "b.json", {"header": header, "data": {"x": [1.5]}}, indent=1)
    assert a.read_bytes() == (tmp_path / "b.json").read_bytes()
    assert read_json(a) == {"header": header, "data": {"x": [1.5]}}

"""Result files: what a benchmark measured, with the command, commit and settings that made it.

A result file is JSON with a header and the data::

    {"header": {"command": "python benchmarks/solver.py", "commit": "3f2c...e1", "settings": {...},
                "created": "2026-12-02T03:20:00+00:00"},
     "data": {...}}

`write_result` writes one atomically; `load_result` reads one and refuses a file whose header is
missing or malformed, naming the file. `check_comparable` refuses to put results of different
commits or settings into one table unless told to (``allow_mixed=True``), and `provenance` then
says so in the line printed under the table. The commit is ``git rev-parse HEAD`` of the
repository the benchmark ran in, with ``-dirty`` when tracked files outside ``results/`` differ
from it (a result file being rewritten does not make the code dirty), or ``unknown`` outside git.

>>> import json, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "results", "demo", "x.json")
>>> _ = write_result(path, {"ms": 1.5}, command="python bench.py", settings={"q": 64}, commit="abc1234")
>>> r = load_result(path)
>>> r.data, r.commit, r.settings
({'ms': 1.5}, 'abc1234', {'q': 64})
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptive_rollouts.experiments.run_store import write_json

__all__ = [
    "HEADER_KEYS",
    "Result",
    "ResultFileError",
    "ResultDataError",
    "MixedResultsError",
    "recording_reads",
    "data_number",
    "write_result",
    "load_result",
    "result_header",
    "git_commit",
    "AVX512_TAG",
    "kernel_tag",
    "sim_code_version",
    "short_commit",
    "command_line",
    "check_comparable",
    "provenance",
]

try:  # numpy >= 2.0 says which SIMD kernel each of its functions dispatches to
    from numpy.lib.introspect import opt_func_info as _opt_func_info
except ImportError:  # pragma: no cover - numpy before 2.0: no kernel tag
    _opt_func_info = None  # type: ignore[assignment]

HEADER_KEYS = ("command", "commit", "settings", "created")
_COMMIT = re.compile(r"^([0-9a-f]{7,40}(-dirty)?|unknown)$")


class ResultFileError(ValueError):
    """A result file that cannot be read or whose header is missing or malformed."""


class ResultDataError(ValueError):
    """A result file whose data lacks a field the docs render, has it in another shape, or holds a
    value they cannot show (NaN, a negative spend)."""


_reads: list[list[str]] = []  # the open `recording_reads` blocks (innermost last)


@contextlib.contextmanager
def recording_reads() -> Iterator[list[str]]:
    """The paths `load_result` reads inside the block (so an error in what a renderer does with
    the data can name the file it came from)."""
    paths: list[str] = []
    _reads.append(paths)
    try:
        yield paths
    finally:
        _reads.remove(paths)


def data_number(result: Result, field: str, value: Any, low: float | None = None, low_open: bool = False) -> float:
    """``value`` (the data's ``field``, for the message) as a finite float >= ``low`` (> with
    ``low_open``), else `ResultDataError` naming the file and the field.

    >>> r = Result("results/x.json", {}, {})
    >>> data_number(r, "targets/0/spend", -3.0, low=0.0)
    Traceback (most recent call last):
    ...
    adaptive_rollouts.experiments.results.ResultDataError: result file results/x.json: field 'targets/0/spend' must be >= 0.0, got -3.0
    """
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    if bad or not math.isfinite(value):
        raise ResultDataError(f"result file {result.path}: field {field!r} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ResultDataError(
            f"result file {result.path}: field {field!r} must be {'>' if low_open else '>='} {low}, got {value!r}"
        )
    return float(value)


class MixedResultsError(ValueError):
    """Results of different commits or settings asked to share one table."""


@dataclass(frozen=True)
class Result:
    """One loaded result file: its path (as given), header and data."""

    path: str
    header: dict[str, Any]
    data: Any

    @property
    def commit(self) -> str:
        return str(self.header["commit"])

    @property
    def command(self) -> str:
        return str(self.header["command"])

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.header["settings"])


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit(cwd: str | os.PathLike | None = None) -> str:
    """``git rev-parse HEAD`` of the repository at ``cwd`` (default: the current folder), with
    ``-dirty`` when tracked files outside ``results/`` differ from it; ``unknown`` outside git."""
    folder = Path(cwd) if cwd is not None else Path.cwd()
    head = _git(["rev-parse", "HEAD"], folder)
    if not head:
        return "unknown"
    status = _git(["status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)results"], folder)
    return head + ("-dirty" if status else "")


AVX512_TAG = "+avx512"
"""Marks a simulator run made with numpy's AVX-512 kernels: they round some results differently in
the last bits, which grow into different runs, so such runs do not pair with runs made without them
(docs/benchmark.md, "Reproducing a run"; the Makefile's ``SIM_ENV`` switches the kernels off)."""


def kernel_tag() -> str:
    """`AVX512_TAG` when numpy dispatches float64 ``exp`` to an AVX-512 kernel on this machine (as
    `numpy.lib.introspect.opt_func_info` reports), else "" (also where numpy cannot say)."""
    if _opt_func_info is None:
        return ""
    try:
        current = _opt_func_info(func_name="^exp$")["exp"]["dd"]["current"]
    except (KeyError, TypeError):  # another layout
        return ""
    return AVX512_TAG if "X86_V4" in current or "AVX512" in current else ""


def sim_code_version(cwd: str | os.PathLike | None = None) -> str:
    """What a simulator run depends on: the commit of the code (`git_commit`) and numpy's kernels
    (`kernel_tag`). Run stores record it per run, so runs of other code or kernels are not mixed."""
    return git_commit(cwd) + kernel_tag()


def short_commit(commit: str) -> str:
    """A run's commit for a table: its first ten characters and its marks.

    >>> short_commit("6083d0e4f186ccaf76ab-dirty+avx512"), short_commit("unknown")
    ('6083d0e4f1-dirty+avx512', 'unknown')
    """
    marks = "".join(m for m in ("-dirty", AVX512_TAG) if m in commit)
    return commit.replace("-dirty", "").replace(AVX512_TAG, "")[:10] + marks


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that is running, as one would type it: ``python benchmarks/solver.py --quick``
    (a script path is made relative to the current folder when it lies below it)."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        try:
            argv[0] = os.path.relpath(argv[0]) if not os.path.relpath(argv[0]).startswith("..") else argv[0]
        except ValueError:  # another drive (Windows)
            pass
        if argv[0].endswith(".py"):
            argv.insert(0, "python")
    return shlex.join(argv)


def result_header(
    command: str, settings: Mapping[str, Any], commit: str | None = None, created: str | None = None
) -> dict[str, Any]:
    """The header of a result file (see the module docstring)."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"command must be a non-empty string, got {command!r}")
    if not isinstance(settings, Mapping):
        raise ValueError(f"settings must be a mapping, got {type(settings).__name__}")
    return {
        "command": command,
        "commit": git_commit() if commit is None else commit,
        "settings": dict(settings),
        "created": created or _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def write_result(
    path: str | os.PathLike,
    payload: Any,
    command: str | None = None,
    settings: Mapping[str, Any] | None = None,
    commit: str | None = None,
) -> Path:
    """Write ``payload`` with its header (command: default `command_line()`) to ``path``
    atomically; returns the path. NaN and inf are kept (Python's JSON reads them back)."""
    path = Path(path)
    if path.suffix != ".json":
        raise ValueError(f"result file {path}: must end in .json")
    header = result_header(command_line() if command is None else command, settings or {}, commit)
    write_json(path, {"header": header, "data": payload}, indent=1)
    return path


def load_result(path: str | os.PathLike) -> Result:
    """Read a result file; `ResultFileError` naming the file when it is missing, not JSON, or its
    header lacks a key or has one of the wrong type."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ResultFileError(f"result file {path}: not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ResultFileError(f"result file {path}: not readable JSON ({err})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("header"), dict) or "data" not in raw:
        raise ResultFileError(f"result file {path}: expected an object with 'header' and 'data'")
    header = raw["header"]
    for paths in _reads:
        paths.append(os.fspath(path))
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise ResultFileError(f"result file {path}: header lacks {', '.join(missing)}")
    if not isinstance(header["command"], str) or not header["command"].strip():
        raise ResultFileError(f"result file {path}: header 'command' must be a non-empty string")
    if not isinstance(header["commit"], str) or not _COMMIT.match(header["commit"]):
        raise ResultFileError(f"result file {path}: header 'commit' is not a git commit: {header['commit']!r}")
    if not isinstance(header["settings"], dict):
        raise ResultFileError(f"result file {path}: header 'settings' must be an object")
    if not isinstance(header["created"], str):
        raise ResultFileError(f"result file {path}: header 'created' must be a string")
    return Result(os.fspath(path), header, raw["data"])


def check_comparable(results: Sequence[Result], allow_mixed: bool = False) -> bool:
    """Whether ``results`` come from one commit with equal settings. When they do not, raises
    `MixedResultsError` naming the files and what differs, unless ``allow_mixed`` (then False)."""
    if not results:
        raise ValueError("check_comparable: no results given")
    first = results[0]
    problems = [
        f"{r.path} (commit {r.commit}) vs {first.path} (commit {first.commit})"
        for r in results[1:]
        if r.commit != first.commit
    ]
    problems += [f"{r.path} has other settings than {first.path}" for r in results[1:] if r.settings != first.settings]
    if problems and not allow_mixed:
        raise MixedResultsError("results of different runs in one table: " + "; ".join(problems))
    return not problems


def provenance(results: Sequence[Result], allow_mixed: bool = False) -> str:
    """The line printed under a rendered table: source files, commit and command; for results of
    several commits or settings (only with ``allow_mixed``) it says so and lists each."""
    same = check_comparable(results, allow_mixed)
    if same:
        files = ", ".join(f"`{r.path}`" for r in results)
        commands = "; ".join(dict.fromkeys(f"`{r.command}`" for r in results))
        return f"Source: {files}, commit {_short(results[0].commit)}, command {commands}."
    parts = [f"`{r.path}` (commit {_short(r.commit)}, command `{r.command}`)" for r in results]
    return "**Mixed runs: built from results of different commits or settings:** " + "; ".join(parts) + "."


def _short(commit: str) -> str:
    head, _, dirty = commit.partition("-")
    return head[:10] + (f"-{dirty}" if dirty else "")

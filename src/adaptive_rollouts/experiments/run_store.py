"""Resumable outputs of long jobs: an append-only JSON-lines file and small JSON files.

A long job appends one line per finished unit of work and, when restarted, reads the file back to
skip what is done. Two things can go wrong, and both are handled here in one place:

- **A cut last line.** A crash or a full disk in the middle of an append leaves the last line
  incomplete. `read_jsonl` drops it with a ``RuntimeWarning`` naming the file and truncates the
  file back to its last complete line, so the resumed job appends on a fresh line and redoes only
  that unit. A damaged line anywhere else is not a cut append: it raises ``ValueError`` naming the
  file and the line.
- **Other settings.** Each line records the settings its numbers depend on; `check_settings`
  refuses to reuse a line made with other settings, naming the file, the line and every setting
  that differs, instead of mixing numbers of two configurations into one report.

Small files are replaced atomically (`write_json`, through `adaptive_rollouts.state.atomic.atomic_write`),
so they are never seen half-written; `read_json` returns None, with a warning, for one that cannot
be read, so that the job recomputes it.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "runs.jsonl")
>>> append_jsonl(path, {"seed": 0})
>>> with open(path, "a") as fh:
...     _ = fh.write('{"seed": 1, "acc')  # the job was killed mid-append
>>> import warnings
>>> with warnings.catch_warnings(record=True):
...     warnings.simplefilter("always")
...     read_jsonl(path)
[{'seed': 0}]
>>> open(path).read()
'{"seed": 0}\\n'
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptive_rollouts.state.atomic import atomic_write

__all__ = [
    "read_jsonl",
    "append_jsonl",
    "check_settings",
    "setting_differences",
    "write_json",
    "read_json",
    "jsonable",
]


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """The records of a JSON-lines file (none if it does not exist); see the module docstring."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    records: list[dict] = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        last = end < 0
        line = data[start:] if last else data[start:end]
        number = data.count(b"\n", 0, start) + 1
        if line.strip():
            try:
                record = json.loads(line.decode("utf-8"))
                if not isinstance(record, dict):
                    raise ValueError(f"a JSON {type(record).__name__}, not an object")
            except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                if not last and data[end + 1 :].strip():
                    raise ValueError(f"{path}, line {number}: not a JSON object ({err})") from None
                warnings.warn(
                    f"{path}, line {number}: dropping an incomplete last line (the job that wrote it "
                    f"was interrupted); that run is redone",
                    RuntimeWarning,
                    stacklevel=2,
                )
                _truncate(path, start)
                return records
            records.append(record)
        if last:  # a complete record without its newline: add it, so the next append starts a line
            with path.open("ab") as fh:
                fh.write(b"\n")
            break
        start = end + 1
    return records


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


def append_jsonl(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one line and fsync it, so that a finished unit survives a crash."""
    line = json.dumps(record) + "\n"
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def setting_differences(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """``name: saved -> wanted`` for every setting whose values differ (missing ones included)."""
    missing = object()
    out = []
    for name in sorted(set(saved) | set(wanted)):
        a, b = saved.get(name, missing), wanted.get(name, missing)
        if _canonical(a) != _canonical(b):
            out.append(f"{name}: {'(none)' if a is missing else a!r} -> {'(none)' if b is missing else b!r}")
    return out


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value)) if value is not None else None


def check_settings(where: str, saved: Any, wanted: Mapping[str, Any]) -> None:
    """Raise ValueError naming ``where`` and each differing setting unless ``saved`` equals ``wanted``."""
    if not isinstance(saved, Mapping):
        raise ValueError(
            f"{where} does not record the settings it was made with (written by an older version); "
            "use another output folder"
        )
    diff = setting_differences(saved, wanted)
    if diff:
        raise ValueError(
            f"{where} was made with other settings ({'; '.join(diff)}, as saved -> as asked now); "
            "use another output folder, or the saved settings to resume"
        )


def write_json(path: str | os.PathLike, value: Any, indent: int | None = None) -> None:
    """Replace ``path`` by ``value`` as JSON (numpy values as plain ones, see `jsonable`),
    atomically (never seen half-written). Every JSON file of the research wing is written here:
    run-store files and result files (`experiments.results.write_result`, ``indent=1``) alike."""
    atomic_write(Path(path), (json.dumps(value, indent=indent, default=jsonable) + "\n").encode("utf-8"))


def jsonable(x: Any) -> Any:
    """numpy scalars and arrays, sets and paths as JSON values (``json.dumps``'s ``default``)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def read_json(path: str | os.PathLike) -> Any | None:
    """The JSON value in ``path``; None if it is missing, or (with a RuntimeWarning naming it)
    if it cannot be read, so that the caller recomputes it."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        warnings.warn(f"{path}: unreadable ({err}); recomputing it", RuntimeWarning, stacklevel=2)
        return None

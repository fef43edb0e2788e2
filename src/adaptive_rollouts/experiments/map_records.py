"""A map's compact per-run record, committed beside its result file: every run the summary reads (its
learning curve) and every tuning run (its score), gzipped JSON lines, so that a map's numbers can be
recomputed from the committed files without the run folder.

Each line: cell, method, seed, rate, commit, the run's score over the last third (``final``) and, for
runs on the report seeds at the rate the map reports, ``rollouts``, ``accuracy`` and ``accuracy0``
(and, for a length cell's runs, their token accounting: ``tokens``, ``round_max_tokens``, ...).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "m.runs.jsonl.gz")
>>> result = {"lr": {"c": {"uniform": 0.1}}, "config": {"paired_seeds": [0], "report_seeds": [0]},
...           "runs": {("c", "uniform", 0, 0.1): {"cell": "c", "method": "uniform", "seed": 0, "lr": 0.1,
...                    "final": 0.5, "rollouts": [8], "accuracy": [0.5], "accuracy0": 0.2, "commit": "abc"}}}
>>> write_run_records(result, path)
1
>>> read_run_records(path)[0]["accuracy"]
[0.5]
"""

from __future__ import annotations

import gzip
import json
import os

from adaptive_rollouts.sim.train import TOKEN_TRACE
from adaptive_rollouts.state.atomic import atomic_write

__all__ = ["write_run_records", "read_run_records", "records_path"]

_KEYS = ("cell", "method", "seed", "lr", "commit", "final")
_CURVE = ("rollouts", "accuracy", "accuracy0")


def records_path(result_file: str | os.PathLike) -> str:
    """``results/map/NAME.json`` -> ``results/map/NAME.runs.jsonl.gz``."""
    text = os.fspath(result_file)
    return (text[: -len(".json")] if text.endswith(".json") else text) + ".runs.jsonl.gz"


def write_run_records(result: dict, path: str | os.PathLike) -> int:
    """Write the compact records of ``result`` (as `regime_map.run_map` returns it) to ``path``,
    atomically; returns how many runs it holds."""
    reported = {(c, m, round(lr, 12)) for c, by in result["lr"].items() for m, lr in by.items()}
    seeds = set(result["config"]["paired_seeds"]) | set(result["config"]["report_seeds"])
    lines = []
    for (cell, method, seed, lr), r in sorted(result["runs"].items(), key=lambda kv: tuple(map(str, kv[0]))):
        rec = {k: r.get(k) for k in _KEYS}
        uniform_rate = result["lr"].get(cell, {}).get("uniform")
        at_reported = (cell, method, round(lr, 12)) in reported or (
            uniform_rate is not None and abs(lr - uniform_rate) < 1e-12
        )
        if seed in seeds and at_reported:
            rec.update({k: r[k] for k in _CURVE})
            rec.update({k: r[k] for k in TOKEN_TRACE if k in r})
        lines.append(json.dumps(rec))
    atomic_write(path, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return len(lines)


def read_run_records(path: str | os.PathLike) -> list[dict]:
    """The records written by `write_run_records`."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]

"""The regime map's resumable store: ``runs.jsonl`` keyed by (cell, method, seed, rate), each run
recording every setting its numbers depend on, so that a rerun with other settings is refused,
naming them, instead of mixing two configurations in one map (file handling: `run_store`).

>>> import tempfile
>>> from pathlib import Path
>>> from adaptive_rollouts.experiments.map_presets import QUICK_MAP
>>> store = MapStore(Path(tempfile.mkdtemp()), QUICK_MAP)
>>> cell = QUICK_MAP.cells[0]
>>> store.add({"cell": cell.key, "method": "uniform", "seed": 0, "lr": 0.1,
...            "settings": run_settings(QUICK_MAP, cell, "uniform")})
>>> MapStore(store.path.parent, QUICK_MAP).get(cell.key, "uniform", 0, 0.1)["seed"]
0
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from adaptive_rollouts.allocators import DEFAULT_ALLOCATOR
from adaptive_rollouts.experiments.map_config import DEFAULT, NULL
from adaptive_rollouts.experiments.run_store import append_jsonl, check_settings, read_jsonl
from adaptive_rollouts.sim.regimes import Cell

__all__ = ["MapStore", "StoreConfig", "run_settings", "cell_settings"]


class StoreConfig(Protocol):
    """What the store reads of a map's configuration (`map_config.MapConfig` has it)."""

    cells: Sequence[Cell]
    tune_seeds: Sequence[int]
    n_test: int
    fingerprint_every: int
    extra: Any


_RUN_FIELDS = ("steps", "n_test", "estimator", "aggregation", "grad_var_every", "grad_var_resamples")


def run_settings(cfg: StoreConfig, cell: Cell | dict | None, method: str) -> dict[str, Any]:
    """Every setting a run's numbers depend on besides its cell key, method name, seed and rate:
    the map's training settings, the cell's knobs (``None``: left out, for a cell the map no longer
    has) and, for a method built from the registry's default, which allocator that is."""
    out: dict[str, Any] = {n: getattr(cfg, n) for n in _RUN_FIELDS}
    out.update(fingerprint_every=cfg.fingerprint_every, extra=cfg.extra)
    if cell is not None:
        out["cell"] = cell if isinstance(cell, dict) else cell.as_dict()
    if method.startswith(DEFAULT) or method == NULL:  # the null control is built from the default's rounds
        out["default_allocator"] = DEFAULT_ALLOCATOR
    return out


def cell_settings(cfg: StoreConfig, cell: Cell) -> dict[str, Any]:
    """What a cell's measured transfer depends on."""
    return {"cell": cell.as_dict(), "tune_seeds": list(cfg.tune_seeds), "n_test": cfg.n_test}


class MapStore:
    """runs.jsonl of one map folder (see the module docstring)."""

    def __init__(self, folder: Path, cfg: StoreConfig):
        self.path = Path(folder) / "runs.jsonl"
        self.runs: dict[tuple, dict] = {}
        cells = {c.key: c.as_dict() for c in cfg.cells}
        for number, r in enumerate(read_jsonl(self.path), 1):
            where = f"{self.path}, run {number} ({r.get('cell')} {r.get('method')} seed {r.get('seed')})"
            missing = [k for k in ("cell", "method", "seed", "lr") if k not in r]
            if missing:
                raise ValueError(f"{where}: missing {missing}")
            saved, cell = r.get("settings"), cells.get(str(r["cell"]))
            if isinstance(saved, dict) and cell is None:  # a cell this map leaves out: its knobs are not compared
                saved = {k: v for k, v in saved.items() if k != "cell"}
            check_settings(where, saved, run_settings(cfg, cell, str(r["method"])))
            self.runs[(r["cell"], r["method"], r["seed"], round(r["lr"], 12))] = r

    def get(self, cell: str, method: str, seed: int, lr: float) -> dict | None:
        return self.runs.get((cell, method, seed, round(lr, 12)))

    def add(self, run: dict) -> None:
        self.runs[(run["cell"], run["method"], run["seed"], round(run["lr"], 12))] = run
        append_jsonl(self.path, run)

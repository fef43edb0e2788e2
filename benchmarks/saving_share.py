"""The share epsilon of the saving default: what it spends, the signal it keeps and how fast it
learns when it may give up epsilon of each step's expected signal (`SavingProgressive.share`,
`allocators.saving_rule.LOSS_SHARE`; docs/saving.md argues the shipped value from these numbers).

Every share runs the same rule; only the allowance differs (the benchmark sets the allocator's
``share`` after building it from the map's method name). Two parts, seeds fixed before the run:

- ledger: the allocation ledger of ``benchmarks/saving_signal.py`` (rollouts generated over Uniform's,
  signal kept over Uniform's expected signal, known p) on the saving map's first 12 cells at lr 0.4
  and on its recurring pool at 4 and 8 rollouts per prompt, ``--ledger-seeds`` seeds;
- speed: on the development cells (``--cells``), the default at each share against Uniform, both at
  Uniform's tuned rate read from the committed saving maps (``--maps``), ``--seeds`` paired seeds,
  the map's statistic (rollouts to 50/75/90% of the gain, `gain_speedup`) with its jackknife-t 90%
  interval, the share of Uniform's rollouts and the final accuracy minus Uniform's. Pilot-Commit's
  row is read from the same map files (its own seeds there).

Every run is appended to ``runs.jsonl`` in ``--out`` as it ends, with the code it ran (commit and numpy's
kernels, `experiments.results.sim_code_version`), and reused on a rerun of the same settings and code.

Run: .venv/bin/python benchmarks/saving_share.py [--shares 0.05,0.1,0.2,0.3] [--seeds 32]
(writes results/saving_share/saving_share.json, rendered into docs/saving.md by ``make docs``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.experiments.gain_speedup import FRACTIONS, gain_interval, gain_speedup
from adaptive_rollouts.experiments.map_run import cell_run
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import load_result, sim_code_version, write_result
from adaptive_rollouts.experiments.run_store import append_jsonl, read_jsonl
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.train import train

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import saving_signal  # noqa: E402  (the ledger: one benchmark's runs, reused)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "saving_share" / "saving_share.json"
SHARES = (0.05, 0.1, 0.2, 0.3)
CELLS = "pareto/d128-Q16-L16,hard-heavy/d128-Q16,cold-start/d16-Q32,easy-heavy/d16-Q32"
MAPS = "results/map/saving-32-a.json,results/map/saving-32-b.json"


def parse_shares(text: str) -> list[float]:
    """``--shares``: a comma list of shares, each in (0, 1) (SystemExit naming the option otherwise).

    >>> parse_shares("0.05,0.1")
    [0.05, 0.1]
    """
    shares = [float(x) for x in text.split(",")]
    if any(not 0.0 < s < 1.0 for s in shares):
        raise SystemExit(f"--shares: each share must be in (0, 1), got {shares}")
    return shares


def speed_run(cell: Any, share: float | None, seed: int, lr: float) -> dict:
    """One learning run of the map's protocol: Uniform (``share`` None) or the default at ``share``."""
    run = cell_run(cell, SAVING_MAP, seed, lr)
    alloc = run.allocator("uniform" if share is None else "default")
    if share is not None:
        if not isinstance(alloc, SavingProgressive):
            raise TypeError(f"the default is {type(alloc).__name__}, not SavingProgressive")
        alloc.share = share
    tr = train(run.problem, alloc, run.config)
    acc = np.asarray(tr["accuracy"])
    return {
        "rollouts": tr["rollouts"],
        "accuracy": tr["accuracy"],
        "accuracy0": tr["accuracy0"],
        "final": final_level(acc),
    }


def map_rows(paths: list[str]) -> dict[str, dict]:
    """Per cell of the committed saving maps: Uniform's rate and Pilot-Commit's row."""
    out: dict[str, dict] = {}
    for path in paths:
        data = load_result(ROOT / path).data
        for row in data["rows"]:
            pc = row["methods"].get("pilot-commit", {})
            out[row["cell"]] = {
                "lr": data["lr"][row["cell"]]["uniform"],
                "map": path,
                "pilot_commit": {k: pc.get(k) for k in ("gain_speedup", "gain_ci90", "spend", "final_gap", "seeds")},
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shares", default=",".join(map(str, SHARES)))
    ap.add_argument("--seeds", type=int, default=32, help="paired seeds of the speed part")
    ap.add_argument("--ledger-seeds", type=int, default=2)
    ap.add_argument("--cells", default=CELLS, help="the speed part's cells")
    ap.add_argument("--maps", default=MAPS, help="committed saving maps: Uniform's rate, Pilot-Commit's row")
    ap.add_argument("--out", default="runs/saving_share")
    ap.add_argument("--result", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    shares = parse_shares(args.shares)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "runs.jsonl"
    settings = {"shares": shares, "seeds": args.seeds, "ledger_seeds": args.ledger_seeds, "cells": args.cells}
    code = sim_code_version()  # a run is reused only from the same code and numpy kernels
    done = {
        (r["part"], r["cell"], r["share"], r["seed"]): r
        for r in read_jsonl(store)
        if r.get("settings") == settings and r.get("commit") == code
    }
    maps = map_rows(args.maps.split(","))
    speed_cells = select_cells(SAVING_MAP.cells, args.cells.split(","))
    ledger_cells = SAVING_MAP.cells[:12]
    total = (
        len(shares) * (len(ledger_cells) + 2) * args.ledger_seeds + len(speed_cells) * (len(shares) + 1) * args.seeds
    )
    bar = progress_bar(total, not args.no_progress)

    def get(part: str, cell: str, share: float | None, seed: int, run: Any) -> dict:
        key = (part, cell, share, seed)
        if key not in done:
            done[key] = {"part": part, "cell": cell, "share": share, "seed": seed, "settings": settings}
            done[key].update(run(), commit=code)
            append_jsonl(store, done[key])
        bar.update(1)
        return done[key]

    ledger, pool = [], []
    for share in shares:
        for cell in ledger_cells:
            runs = [
                get(
                    "ledger",
                    cell.key,
                    share,
                    s,
                    lambda c=cell, s=s: saving_signal.one_run(c, "default", s, 0.4, 60, share),
                )
                for s in range(args.ledger_seeds)
            ]
            ledger.append(
                {
                    "cell": cell.key,
                    "share": share,
                    **{k: float(np.mean([r[k] for r in runs])) for k in ("spent", "kept", "lost")},
                }
            )
        for n in (4, 8):
            runs = [
                get("pool", f"pool-n{n}", share, s, lambda n=n, s=s: saving_signal.pool_run("default", s, n, share))
                for s in range(args.ledger_seeds)
            ]
            pool.append(
                {"n": n, "share": share, **{k: float(np.mean([r[k] for r in runs])) for k in ("spent", "kept", "lost")}}
            )
    speed = []
    for cell in speed_cells:
        lr = maps[cell.key]["lr"]
        seeds = range(args.seeds)
        uniform = [get("speed", cell.key, None, s, lambda c=cell, s=s: speed_run(c, None, s, lr)) for s in seeds]
        for share in shares:
            arm = [get("speed", cell.key, share, s, lambda c=cell, s=s, x=share: speed_run(c, x, s, lr)) for s in seeds]
            ci = gain_interval(uniform, arm, FRACTIONS, interval=SAVING_MAP.interval)
            speed.append(
                {
                    "cell": cell.key,
                    "share": share,
                    "lr": lr,
                    "gain_speedup": gain_speedup(uniform, arm, FRACTIONS),
                    "ci90": [ci["low"], ci["high"]],
                    "spend": float(
                        np.mean([r["rollouts"][-1] for r in arm]) / np.mean([r["rollouts"][-1] for r in uniform])
                    ),
                    "final_gap": float(np.mean([r["final"] for r in arm]) - np.mean([r["final"] for r in uniform])),
                }
            )
            print(
                f"{cell.key:28s} share {share:<5g} {speed[-1]['gain_speedup']:.2f}x spend {speed[-1]['spend']:.2f}",
                flush=True,
            )
    bar.close()
    data = {
        "ledger": ledger,
        "pool": pool,
        "speed": speed,
        "pilot_commit": {c.key: maps[c.key]["pilot_commit"] for c in speed_cells},
        "rates_from": sorted({maps[c.key]["map"] for c in speed_cells}),
        "interval": SAVING_MAP.interval,
        "steps": SAVING_MAP.steps,
        "shipped": SavingProgressive.share,
        **settings,
    }
    print(f"wrote {write_result(args.result, data, settings=settings)}")


if __name__ == "__main__":
    main()

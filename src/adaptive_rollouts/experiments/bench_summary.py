"""The benchmark's table: best learning rate per (scenario, aggregation, method) and the metrics at it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from adaptive_rollouts.experiments.speedup import rollouts_to_target

__all__ = ["SummaryConfig", "summarize"]


class SummaryConfig(Protocol):
    """What the table needs of a benchmark's configuration (`bench.BenchConfig` has it)."""

    seeds: Sequence[int]
    lr_select: str
    target_frac: float


def summarize(runs: list[dict[str, Any]], cfg: SummaryConfig) -> dict[str, Any]:
    """Best learning rate per (scenario, aggregation, method) and the metrics at that rate."""
    by: dict[tuple, list] = {}
    for r in runs:
        by.setdefault((r["scenario"], r["aggregation"], r["method"], r["lr"]), []).append(r)
    best: dict[tuple, tuple[float, list]] = {}
    first_seed = cfg.seeds[0]
    for (sc, agg, m, _lr), rs in by.items():
        chosen_on = [r for r in rs if r["seed"] == first_seed] if cfg.lr_select == "first-seed" else rs
        auc = float(np.mean([r["auc"] for r in chosen_on])) if chosen_on else -np.inf
        key = (sc, agg, m)
        if key not in best or auc > best[key][0]:
            best[key] = (auc, rs)
    table = []
    for (sc, agg, m), (_, rs) in sorted(best.items()):
        ref = best.get((sc, agg, "uniform"))
        speed, r_m, r_u, finals, eq_acc = [], [], [], [], []
        for r in sorted(rs, key=lambda r: r["seed"]):
            finals.append(r["final"])
            if ref is None:
                continue
            u = next(x for x in ref[1] if x["seed"] == r["seed"])
            target = u["accuracy0"] + cfg.target_frac * (u["final"] - u["accuracy0"])
            ru = rollouts_to_target(u["rollouts"], u["accuracy"], target)
            rm = rollouts_to_target(r["rollouts"], r["accuracy"], target)
            r_u.append(ru)
            r_m.append(rm)
            speed.append(ru / rm if np.isfinite(rm) else 0.0)
            # accuracy at equal rollouts: at the rollouts Uniform spent by half of the run
            half = u["rollouts"][len(u["rollouts"]) // 2]
            eq_acc.append(float(np.interp(half, r["rollouts"], r["accuracy"])))
        # The same comparison with the method at Uniform's best rate (the learning-rate confound).
        same_lr = []
        if ref is not None:
            for u in ref[1]:
                twin: dict[str, Any] | None = next(
                    (x for x in by.get((sc, agg, m, u["lr"]), []) if x["seed"] == u["seed"]), None
                )
                if twin is None:
                    continue
                target = u["accuracy0"] + cfg.target_frac * (u["final"] - u["accuracy0"])
                rm = rollouts_to_target(twin["rollouts"], twin["accuracy"], target)
                ru = rollouts_to_target(u["rollouts"], u["accuracy"], target)
                same_lr.append(ru / rm if np.isfinite(rm) else 0.0)
        grid = sorted({lr for (s2, a2, m2, lr) in by if (s2, a2, m2) == (sc, agg, m)})
        calib_p = np.concatenate([np.asarray(r["calib_pred"], float) for r in rs]) if rs else np.zeros(0)
        calib_t = np.concatenate([np.asarray(r["calib_true"], float) for r in rs]) if rs else np.zeros(0)
        table.append(
            {
                "scenario": sc,
                "aggregation": agg,
                "method": m,
                "lr": rs[0]["lr"],
                "lr_at_grid_edge": bool(len(grid) > 1 and rs[0]["lr"] in (grid[0], grid[-1])),
                "speedup_at_uniform_lr": float(np.mean(same_lr)) if same_lr else float("nan"),
                "speedup_mean": float(np.mean(speed)) if speed else float("nan"),
                "speedup_min": float(np.min(speed)) if speed else float("nan"),
                "speedup_max": float(np.max(speed)) if speed else float("nan"),
                "rollouts_to_target": r_m,
                "uniform_rollouts_to_target": r_u,
                "final_accuracy": float(np.mean(finals)),
                "accuracy_at_half": float(np.mean(eq_acc)) if eq_acc else float("nan"),
                "grad_var_ratio": float(np.nanmean([r["grad_var_ratio"] for r in rs])),
                "noise_to_signal_ratio": float(np.nanmean([r["noise_to_signal_ratio"] for r in rs])),
                "zero_variance_fraction": float(np.mean([r["zero_variance_fraction"] for r in rs])),
                "wasted_frac": float(np.mean([r["wasted_frac"] for r in rs])),
                "skipped_frac": float(np.mean([r["skipped_frac"] for r in rs])),
                "allocator_seconds": float(np.median([r["allocator_seconds"] for r in rs])),
                "calib_brier": float(np.mean((calib_p - calib_t) ** 2)) if calib_p.size else float("nan"),
                "calib_mae": float(np.mean(np.abs(calib_p - calib_t))) if calib_p.size else float("nan"),
            }
        )
    return {"table": table}

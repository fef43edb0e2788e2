"""What the recurring pool allows: the saving default's rule with three beliefs, at several shares.

The recurring pool of ``benchmarks/saving_signal.py`` (200 prompts, 80% at p within 0.02 of 0 or 1,
p fixed, no policy view) is where the default must find the flat prompts from their history alone.
This runs the shipped rule (pilot, rounds, exploration, allowance) with its belief replaced
(`SavingProgressive.belief`), so that what separates the rows is what the belief knows:

- learned: the default's own belief (`predictors.flatness.FlatnessPredictor`);
- posterior: the exact posterior of each prompt's p given its whole history and the pool's
  population, known (`predictors.reference.PopulationPosterior`): the most a history can say;
- known p: the true p (`predictors.reference.KnownBelief`): the rule's own limit.

And, without any run, the least share of the budget that keeps 0.85, 0.9 or 0.95 of Uniform's
expected signal when p is known and nothing is explored (`least_spend` over the pool's population:
the prompts worth most kept whole, the others skipped).

Each at the shares epsilon of a step's expected signal it may give up (`SavingProgressive.share`)
in ``--shares``, at 4 and 8 rollouts per prompt, ``--seeds`` seeds fixed before the run: share of
the budget spent and share of Uniform's expected signal kept (the ledger of saving_signal.py).
Every run is appended to ``runs.jsonl`` in ``--out`` as it ends and reused on a rerun.

Run: .venv/bin/python benchmarks/pool_beliefs.py [--seeds 6]
(writes results/pool_beliefs/pool_beliefs.json and pool_frontier.png, rendered into docs/saving.md
by ``make docs``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.experiments.run_store import append_jsonl, read_jsonl
from adaptive_rollouts.objectives.signal import known_p_group_signal
from adaptive_rollouts.predictors.reference import KnownBelief, PopulationPosterior
from adaptive_rollouts.progress import progress_bar

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import saving_share  # noqa: E402  (its --shares)
import saving_signal  # noqa: E402  (the pool and its ledger)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "pool_beliefs" / "pool_beliefs.json"
SHARES = (0.05, 0.1, 0.2, 0.3)
SIZES = (4, 8)
GRID = (np.arange(4000) + 0.5) / 4000  # the posterior's grid of p: even, inside (0, 1)


def _posterior(pool: Any) -> PopulationPosterior:
    return PopulationPosterior(GRID, pool.density(GRID))


def _known(pool: Any) -> KnownBelief:
    return KnownBelief(lambda prompts: pool.success(np.asarray(prompts, dtype=np.int64)))


BELIEFS: dict[str, Any] = {"learned": None, "posterior": _posterior, "known p": _known}
KEEPS = (0.85, 0.9, 0.95)


def least_spend(values: np.ndarray, mass: np.ndarray, keep: float) -> float:
    """The least share of the prompts (by ``mass``) whose groups carry ``keep`` of the total expected
    signal, each prompt's group worth ``values``: whole groups of one size cost alike, so the prompts
    worth most are kept first (a knapsack of equal weights, where the greedy order is optimal),
    the last one in part.

    >>> least_spend(np.array([3.0, 1.0, 0.0, 6.0]), np.full(4, 0.25), 0.9)  # 6 + 3 = 0.9 of 10
    0.5
    """
    order = np.argsort(-values, kind="stable")
    v, m = values[order] * mass[order], mass[order]
    share = np.cumsum(v) / v.sum()
    i = int(np.searchsorted(share, keep - 1e-12))
    before = share[i - 1] if i else 0.0
    return float(m[:i].sum() + m[i] * (keep - before) / (share[i] - before)) / float(m.sum())


def known_p_bound(pool: Any, n: int, keep: float) -> float:
    """`least_spend` over the pool's population: what knowing p and exploring nothing spends to keep
    ``keep`` of Uniform's expected signal at groups of ``n``."""
    values = known_p_group_signal(n, GRID, estimator=saving_signal.ESTIMATOR, aggregation=saving_signal.AGGREGATION)
    return least_spend(values, pool.density(GRID), keep)


def plot(rows: list[dict], path: Path) -> None:
    """Signal kept against budget spent, one line per belief through its shares, a panel per n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["n"] for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        for belief in BELIEFS:
            line = sorted((r for r in rows if r["n"] == n and r["belief"] == belief), key=lambda r: r["share"])
            ax.plot([r["spent"] for r in line], [r["kept"] for r in line], "o-", label=belief)
            for r in line:
                ax.annotate(
                    f"{r['share']:g}", (r["spent"], r["kept"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
                )
        ax.axhline(0.9, color="grey", lw=0.8, ls="--")
        ax.set(
            title=f"recurring pool, n = {n}",
            xlabel="share of the budget spent",
            ylabel="share of Uniform's signal kept",
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--shares", default=",".join(map(str, SHARES)))
    ap.add_argument("--out", default="runs/pool_beliefs")
    ap.add_argument("--result", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    shares = saving_share.parse_shares(args.shares)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "runs.jsonl"
    settings = {"seeds": args.seeds, "shares": shares, "sizes": list(SIZES), "pool": saving_signal.POOL}
    done = {(r["belief"], r["n"], r["share"], r["seed"]): r for r in read_jsonl(store) if r.get("settings") == settings}
    bar = progress_bar(len(BELIEFS) * len(SIZES) * len(shares) * args.seeds, not args.no_progress)
    rows = []
    for n in SIZES:
        for belief, make in BELIEFS.items():
            for share in shares:
                runs = []
                for seed in range(args.seeds):
                    key = (belief, n, share, seed)
                    if key not in done:
                        got = saving_signal.pool_run("default", seed, n, share, belief=make)
                        done[key] = {
                            "belief": belief,
                            "n": n,
                            "share": share,
                            "seed": seed,
                            "settings": settings,
                            **got,
                        }
                        append_jsonl(store, done[key])
                    runs.append(done[key])
                    bar.update(1)
                row: dict[str, Any] = {"n": n, "belief": belief, "share": share}
                for k in ("spent", "kept", "given", "claimed"):
                    values = np.array([r[k] for r in runs], dtype=float)
                    row[k], row[f"{k}_sd"] = float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0
                rows.append(row)
                print(f"n={n} {belief:9s} share {share:g}: spent {row['spent']:.3f} kept {row['kept']:.3f}", flush=True)
    bar.close()
    population = saving_signal.StaticPool(saving_signal.POOL["size"], saving_signal.POOL["extreme"], 0)
    bound = [{"n": n, "keep": k, "spent": known_p_bound(population, n, k)} for n in SIZES for k in KEEPS]
    result = Path(args.result)
    result.parent.mkdir(parents=True, exist_ok=True)
    plot(rows, result.parent / "pool_frontier.png")
    path = write_result(
        result,
        {"rows": rows, "bound": bound, "shipped": saving_signal.SavingProgressive.share, **settings},
        settings=settings,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Which parts of the probe's belief decide how well it ranks the groups of the tiny LM: the
belief before the change and the changes one at a time, on recorded traces.

    python benchmarks/probe_variants.py --traces results/flatness_calibration/tinylm_dev
    python benchmarks/probe_variants.py --traces results/flatness_calibration/tinylm_heldout

Each variant of `FlatnessPredictor` (the probe alone, ``history=None``, and with the history, as
the default) replays every trace step by step, as ``benchmarks/flatness_calibration.py`` does:
the step's hidden states, then P(all-equal at n) for each prompt, then the groups. Variants:

- ``before``: 32 columns (a random projection of the 192-wide hidden state) and the weights'
  variance in the belief (``rank=32, weight_variance=True``), the belief as it was;
- ``32 columns``: the projection kept, the belief's mean the regression's point estimate;
- ``whole view, weight variance``: every column, the weights' variance kept;
- ``now``: every column (``rank=256``), the point estimate: the belief as it is (the weights'
  prior variance `flatness.PRIOR_VAR`, 1);
- ``prior 3``, ``prior 10``, ``prior 30``, ``prior 100``: ``now`` with a weaker prior on the
  weights (``prior_var``).

Scores: the AUROC of P(all-equal) pooled over every group of every trace, the same within a step
(only pairs of groups of one step compared: what a rule that ranks a step's prompts sees), ECE, and
the Brier score over the history-only Beta's; and each variant's pooled AUROC minus ``before``'s
and minus ``now``'s, with 90% intervals from a paired bootstrap over traces (2000 resamples
of whole traces).
Writes ``results/probe_variants/<folder name>.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.demo.traces import load_trace
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.objectives.beta import all_equal_beta, beta_from_moments
from adaptive_rollouts.predictors import DiscountedBeta
from adaptive_rollouts.predictors.calibration import auroc, calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor
from adaptive_rollouts.progress import progress_bar

OUT = Path(__file__).resolve().parents[1] / "results" / "probe_variants"
VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"rank": 32, "weight_variance": True},
    "32 columns": {"rank": 32},
    "whole view, weight variance": {"weight_variance": True},
    "now": {},
    "prior 3": {"prior_var": 3.0},
    "prior 10": {"prior_var": 10.0},
    "prior 30": {"prior_var": 30.0},
    "prior 100": {"prior_var": 100.0},
}
NOW = "now"  # the belief as it ships (every column, the point estimate, the weights' prior variance 1)
SOURCES = {"probe": None, "default": True}  # the history source of each
RESAMPLES = 2000


def replay(stem: Path) -> dict[str, np.ndarray]:
    """One trace through every variant and the history-only Beta: each group's P(all-equal) per
    (source, variant), whether it was all-equal, and its step."""
    trace, _ = load_trace(stem)
    models = {(s, v): FlatnessPredictor(history=h, **kw) for s, h in SOURCES.items() for v, kw in VARIANTS.items()}
    history = DiscountedBeta()
    got: dict[str, list] = {"outcome": [], "step": [], "history": [], **{f"{s}/{v}": [] for s, v in models}}
    for step, (ids, rewards, features) in enumerate(trace.steps()):
        prompts, n = ids.tolist(), np.array([r.size for r in rewards])
        for (s, v), model in models.items():
            model.observe_policy(prompts, features)
            got[f"{s}/{v}"].append(model.all_equal(prompts, n)[0])
        pred = history.predict(prompts)
        got["history"].append(all_equal_beta(*beta_from_moments(pred.mean, pred.var, min_strength=1e-3), n)[0])
        got["outcome"].append(np.array([float(np.ptp(r) == 0) for r in rewards]))
        got["step"].append(np.full(len(prompts), step))
        for model in models.values():
            model.update(prompts, rewards)
        history.update(prompts, rewards)
    return {k: np.concatenate(v) for k, v in got.items()}


def within_step_auroc(score: np.ndarray, outcome: np.ndarray, group: np.ndarray) -> float:
    """AUROC over the pairs (all-equal, varied) of the same step only: each step's `auroc` weighted
    by its number of such pairs."""
    hits = pairs = 0.0
    for g in np.unique(group):
        s, y = score[group == g], outcome[group == g]
        n = float((y == 1).sum() * (y == 0).sum())
        if n:
            hits, pairs = hits + auroc(s, y) * n, pairs + n
    return hits / pairs if pairs else float("nan")


def paired_bootstrap(runs: list[dict[str, np.ndarray]], key: str, base: str, seed: int = 0) -> dict[str, float]:
    """Pooled AUROC of ``key`` minus ``base``'s over resamples of whole traces: mean and 90% interval."""
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(RESAMPLES):
        pick = [runs[i] for i in rng.integers(0, len(runs), len(runs))]
        y = np.concatenate([r["outcome"] for r in pick])
        diffs.append(
            auroc(np.concatenate([r[key] for r in pick]), y) - auroc(np.concatenate([r[base] for r in pick]), y)
        )
    low, high = np.quantile(diffs, [0.05, 0.95])
    return {"mean": float(np.mean(diffs)), "low": float(low), "high": float(high), "resamples": RESAMPLES}


def score(runs: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Every (source, variant)'s scores pooled over the traces (see the module docstring)."""
    y = np.concatenate([r["outcome"] for r in runs])
    group = np.concatenate([r["step"] + 1000 * i for i, r in enumerate(runs)])  # a step of a trace
    history_brier = calibration_scores(np.concatenate([r["history"] for r in runs]), y)["brier"]
    out: dict[str, Any] = {}
    for source in SOURCES:
        for variant in VARIANTS:
            key = f"{source}/{variant}"
            p = np.concatenate([r[key] for r in runs])
            cal = calibration_scores(p, y)
            out[key] = {
                "auroc": auroc(p, y),
                "within_step_auroc": within_step_auroc(p, y, group),
                "ece": cal["ece"],
                "brier_ratio": cal["brier"] / history_brier,
                "auroc_minus_before": paired_bootstrap(runs, key, f"{source}/before"),
                "auroc_minus_now": paired_bootstrap(runs, key, f"{source}/{NOW}"),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", required=True, help="a folder of traces (benchmarks/tinylm_traces.py)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    folder = Path(args.traces)
    stems = sorted(p.with_suffix("") for p in folder.glob("*.npz"))
    if not stems:
        raise SystemExit(f"no traces in {folder} (record them: python benchmarks/tinylm_traces.py)")
    bar = progress_bar(len(stems), not args.no_progress)
    runs = []
    for stem in stems:
        runs.append(replay(stem))
        bar.update(1)
    bar.close()
    data = {
        "scores": score(runs),
        "groups": int(sum(r["outcome"].size for r in runs)),
        "all_equal_share": float(np.concatenate([r["outcome"] for r in runs]).mean()),
    }
    settings = {
        "traces": [f"{folder.name}/{s.name}" for s in stems],
        "variants": VARIANTS,
        "sources": list(SOURCES),
    }
    path = write_result(Path(args.out) / f"{folder.name}.json", data, settings=settings)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

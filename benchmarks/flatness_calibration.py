"""How calibrated is P(a group of n rollouts will be all-equal), predicted before generating?

On simulator traces (Uniform's groups of n = 8 on several cells of the saving map, the policy
trained by AdamW), every predictor gives, before each step, P(all-equal at n) for each prompt of
the step; the step's groups then say whether each was all-equal, and every predictor learns from
the same groups. Predictors:

- ``history``: the prompt's own `DiscountedBeta` (discount 0.9 per visit, Beta(1, 1) prior);
- ``text-gp``: `GaussianProcess` on the prompts' feature vectors (the simulator's text embeddings);
- ``probe``: `FlatnessPredictor` on the policy's noisy view of its own margin alone (AUROC 0.8);
- ``combined``: `FlatnessPredictor` with the probe, the text GP and the history;
- ``default``: the belief the default allocator (`SavingProgressive`) now spends by: probe and history;
- ``default-raw``: the default's best candidate before its recalibration (a diagnostic);
- ``default-before``: the default's belief before it (a population prior fitted by moments to the
  last step's rates, blended with the history, capped at 8 pseudo-rollouts, by the measured
  persistence of p).

On tiny-LM traces (``--traces``: the tiny LM trained by TRL with Uniform on the ladder task,
recorded by ``benchmarks/tinylm_traces.py``, `demo.traces`) the same predictors replay each
recorded step: ``probe`` reads the trainer model's last-layer hidden state at each prompt's last
token (192 columns, all of them), ``text-gp`` the prompts' all-MiniLM-L6-v2 embeddings.

P(all-equal at n) = E[p^n + (1 - p)^n] under each Beta belief (`objectives.beta.all_equal_beta`).
Scores: Brier, log-loss, ECE (10 bins), AUROC and a reliability diagram (PNG), per cell and pooled,
and the ECE's noise floor: the ECE that a perfectly calibrated predictor giving the same predictions
would read on as many groups (outcomes drawn from the predictions, 200 draws: median and 90% range).
After a flat pilot: on the groups whose first 2 rewards are equal, each belief's chance that the
rest repeats them (`objectives.beta.stays_flat_beta` under the belief updated with the pilot: what
the default's bound per group cuts by), scored the same way; and the AUROC of each belief's mean of
p for the success of each rollout.

Run: python benchmarks/flatness_calibration.py [--seeds 3] [--steps 60]
(writes results/flatness_calibration/flatness_calibration.json and reliability.png);
python benchmarks/flatness_calibration.py --traces results/flatness_calibration/tinylm
(writes results/flatness_calibration/tinylm.json and reliability_tinylm.png: a folder's traces
write <folder name>.json and reliability_<folder name>.png).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from flatness_predictors import (
    PREDICTORS,
    QUANTILES,
    SCORES,
    TARGETS,
    Events,
    PredictorSet,
    by_half,
    flat,
    pooled_scores,
)

from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.experiments.map_run import cell_run
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.predictors.calibration import calibration_scores
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.sim.regimes import select_cells
from adaptive_rollouts.sim.train import TrainConfig, train

OUT = Path(__file__).resolve().parents[1] / "results" / "flatness_calibration"
CELLS = (
    "hard-heavy/d16-Q32",
    "cold-start/d16-Q32",
    "bimodal/d128-Q16-L16",
    "pareto/d128-Q16-L16",
    "hard-heavy/d128-Q16-pool200-L16",
)


class Recorder:
    """Uniform's allocation; before each step every predictor's P(all-equal at n), after it the outcomes."""

    def __init__(self, problem: Any, seed: int):
        self.predictors = PredictorSet(FeatureTable(list(range(problem.n_prompts)), problem.features), seed)
        self.inner = Uniform()
        self.kind = self.inner.kind
        self.pred: dict[str, list] = {m: [] for m in PREDICTORS}
        self.outcome: list = []
        self.events = Events()

    def observe_policy(self, prompts: list, features: np.ndarray) -> None:
        self.predictors.observe_policy(prompts, features)

    def run(self, prompts: list, budget: int, sample: Any) -> list:
        n = budget // len(prompts)
        for name, prob in self.predictors.all_equal(prompts, np.full(len(prompts), n)).items():
            self.pred[name].append(prob)
        rewards = self.inner.run(prompts, budget, sample)
        self.outcome.append(flat(rewards))
        self.events.record(self.predictors, rewards)
        self.predictors.update(prompts, rewards)
        return rewards

    def state_dict(self) -> dict:
        return {}


def one_trace(cell: Any, seed: int, steps: int) -> dict[str, Any]:
    run = cell_run(cell, SAVING_MAP, seed, lr=0.4, steps=steps)
    rec = Recorder(run.problem, seed)
    train(run.problem, rec, run.config)
    return {
        "outcome": np.concatenate(rec.outcome),
        **{m: np.concatenate(v) for m, v in rec.pred.items()},
        "events": rec.events,
    }


def replay_trace(trace: Any) -> dict[str, Any]:
    """A recorded tiny-LM trace (`demo.traces.GroupTrace`) through every predictor, step by step:
    the step's policy features, then P(all-equal at the group's size), then the groups."""
    if not trace.text.shape[1] or not trace.policy.shape[1]:
        raise ValueError("a tiny-LM trace needs the text embeddings and the policy features")
    predictors = PredictorSet(FeatureTable(list(range(len(trace.prompts))), trace.text), seed=0)
    pred: dict[str, list] = {m: [] for m in PREDICTORS}
    outcome, means = [], []
    events = Events()
    for ids, rewards, features in trace.steps():
        prompts = ids.tolist()
        predictors.observe_policy(prompts, features)
        for name, prob in predictors.all_equal(prompts, np.array([r.size for r in rewards])).items():
            pred[name].append(prob)
        a, b = predictors.models["default"].belief(prompts, recalibrate=False)
        means.append(a / (a + b))
        outcome.append(flat(rewards))
        events.record(predictors, rewards)
        predictors.update(prompts, rewards)
    steps = np.concatenate([np.full(o.size, t) for t, o in enumerate(outcome)])
    diagnostics = {
        "choices": [list(c) for c in predictors.choices],
        "mean_quantiles": np.quantile(np.concatenate(means), QUANTILES).tolist(),
    }
    return {
        "outcome": np.concatenate(outcome),
        "step": steps,
        "diagnostics": diagnostics,
        **{m: np.concatenate(v) for m, v in pred.items()},
        "events": events,
    }


def score_traces(folder: Path, out: Path) -> None:
    """Every predictor on the tiny-LM traces in ``folder`` (`demo.traces`): per trace and pooled."""
    from adaptive_rollouts.demo.traces import load_trace

    stems = sorted(p.with_suffix("") for p in folder.glob("*.npz"))
    if not stems:
        raise SystemExit(f"no traces in {folder} (record them: python benchmarks/tinylm_traces.py)")
    per_trace, pooled_data = [], {m: [] for m in (*PREDICTORS, "outcome", "step")}
    events = Events()
    settings: dict[str, Any] = {}
    for stem in stems:
        trace, meta = load_trace(stem)
        got = replay_trace(trace)
        for m in pooled_data:
            pooled_data[m].append(got[m])
        events.extend(got["events"])
        row: dict[str, Any] = {"trace": stem.name, "groups": int(got["outcome"].size)}
        row["all_equal_share"] = float(got["outcome"].mean())
        row["default"] = got["diagnostics"]  # scores added below
        for m in PREDICTORS:
            row[m] = row.get(m, {}) | {
                k: v for k, v in calibration_scores(got[m], got["outcome"]).items() if k in SCORES
            }
        per_trace.append(row)
        settings = {k: v for k, v in meta.items() if k not in ("seed", "step_seconds", "policy_seconds")}
        print(stem.name, {m: round(row[m]["ece"], 3) for m in PREDICTORS}, flush=True)
    pooled = pooled_scores(pooled_data)
    out.mkdir(parents=True, exist_ok=True)
    reliability_png(pooled, out / f"reliability_{folder.name}.png", f"tiny-LM ladder traces ({folder.name})")
    settings |= {
        "traces": [f"{stem.parent.name}/{stem.name}" for stem in stems],
        "predictors": list(PREDICTORS),
        "targets": TARGETS,
        "quantiles": list(QUANTILES),
    }
    data = {
        "traces": per_trace,
        "pooled": pooled,
        "halves": by_half(pooled_data),
        **events.scores(),
    }
    path = write_result(out / f"{folder.name}.json", data, settings=settings)
    print(f"wrote {path}")


def reliability_png(pooled: dict[str, dict], path: Path, what: str = "simulator traces") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="calibrated")
    for name, s in pooled.items():
        used = np.array(s["count"]) > 0
        ax.plot(
            np.array(s["mean_prediction"])[used],
            np.array(s["frequency"])[used],
            marker="o",
            ms=3,
            label=f"{name} (ECE {s['ece']:.3f})",
        )
    ax.set_xlabel("predicted P(all-equal at n)")
    ax.set_ylabel("observed share of all-equal groups")
    ax.set_title(f"Reliability of P(all-equal), {what}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--traces", default=None, help="score the tiny-LM traces in this folder instead (tinylm.json)")
    args = ap.parse_args()
    if args.traces is not None:
        score_traces(Path(args.traces), Path(args.out))
        return
    cells = select_cells(SAVING_MAP.cells, args.cells.split(","))
    bar = progress_bar(len(cells) * args.seeds, not args.no_progress)
    per_cell, pooled_data = [], {m: [] for m in (*PREDICTORS, "outcome")}
    events = Events()
    for cell in cells:
        traces = []
        for seed in range(args.seeds):
            traces.append(one_trace(cell, seed, args.steps))
            bar.update(1)
        y = np.concatenate([t["outcome"] for t in traces])
        pooled_data["outcome"].append(y)
        for t in traces:
            events.extend(t["events"])
        row: dict[str, Any] = {"cell": cell.key, "groups": int(y.size), "all_equal_share": float(y.mean())}
        for m in PREDICTORS:
            p = np.concatenate([t[m] for t in traces])
            pooled_data[m].append(p)
            s = calibration_scores(p, y)
            row[m] = {k: s[k] for k in SCORES}
        per_cell.append(row)
        print(cell.key, {m: round(row[m]["ece"], 3) for m in PREDICTORS}, flush=True)
    bar.close()
    pooled = pooled_scores(pooled_data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reliability_png(pooled, out / "reliability.png")
    settings = {
        "seeds": args.seeds,
        "steps": args.steps,
        "cells": [c.key for c in cells],
        "n": 8,
        "policy_view_auroc": TrainConfig().policy_view_auroc,
        "predictors": list(PREDICTORS),
        "targets": TARGETS,
    }
    data = {
        "cells": per_cell,
        "pooled": pooled,
        **events.scores(),
    }
    path = write_result(out / "flatness_calibration.json", data, settings=settings)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

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
- ``default-before``: the default's belief before it (a population prior fitted by moments to the
  last step's rates, blended with the history, capped at 8 pseudo-rollouts, by the measured
  persistence of p).

On tiny-LM traces (``--traces``: the tiny LM trained by TRL with Uniform on the ladder task,
recorded by ``benchmarks/tinylm_traces.py``, `demo.traces`) the same predictors replay each
recorded step: ``probe`` reads the trainer model's last-layer hidden state at each prompt's last
token (192 columns, projected to 32), ``text-gp`` the prompts' all-MiniLM-L6-v2 embeddings.

P(all-equal at n) = E[p^n + (1 - p)^n] under each Beta belief (`objectives.beta.all_equal_beta`).
Scores: Brier, log-loss, ECE (10 bins) and a reliability diagram (PNG), per cell and pooled.

Run: python benchmarks/flatness_calibration.py [--seeds 3] [--steps 60]
(writes results/flatness_calibration/flatness_calibration.json and reliability.png);
python benchmarks/flatness_calibration.py --traces results/flatness_calibration/tinylm
(writes results/flatness_calibration/tinylm.json and reliability_tinylm.png).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.allocators.guarded import measured_persistence
from adaptive_rollouts.allocators.posterior_progressive import beta_prior
from adaptive_rollouts.checks.rewards import all_equal
from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.experiments.regime_map import SAVING_MAP
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.objectives.beta import all_equal_beta, beta_from_moments
from adaptive_rollouts.predictors import DiscountedBeta, GaussianProcess
from adaptive_rollouts.predictors.calibration import calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor
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
PREDICTORS = ("history", "text-gp", "probe", "combined", "default", "default-before")
SCORES = ("brier", "log_loss", "ece")


def population_prior(successes: np.ndarray, trials: np.ndarray, max_strength: float) -> tuple[float, float]:
    """The default-before's population prior: Beta by moments of the rates s / k, their binomial
    noise taken out of the variance (empirical Bayes), strength capped."""
    k, s = trials[trials > 0].astype(float), successes[trials > 0].astype(float)
    if not k.size:
        return 1.0, 1.0
    mean = float(np.clip(s.sum() / k.sum(), 0.5 / k.sum(), 1.0 - 0.5 / k.sum()))
    h = float(np.mean(1.0 / k))
    between = float((np.var(s / k) - mean * (1.0 - mean) * h) / (1.0 - h)) if k.size > 1 and h < 1 else 0.0
    a, b = beta_from_moments(
        [mean], [max(between, mean * (1.0 - mean) / (max_strength + 1.0))], min_strength=0.1, max_strength=max_strength
    )
    return float(a[0]), float(b[0])


class DefaultBefore:
    """The default's belief before the calibrated one (see the module docstring)."""

    def __init__(self) -> None:
        self.history, self.tracker, self.population = DiscountedBeta(), RegimeTracker(), (1.0, 1.0)

    def belief(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        rho = measured_persistence(self.tracker)
        a_h, b_h = beta_prior(self.history.predict(prompts), 8.0)
        return (1 - rho) * self.population[0] + rho * a_h, (1 - rho) * self.population[1] + rho * b_h

    def update(self, prompts: list, rewards: list) -> None:
        s = np.array([r.sum() for r in rewards])
        k = np.array([r.size for r in rewards])
        self.population = population_prior(s, k, 8.0)
        self.history.update(prompts, rewards)
        self.tracker.update(prompts, rewards)


def _beta_of(prediction: Any) -> tuple[np.ndarray, np.ndarray]:
    return beta_from_moments(prediction.mean, prediction.var, min_strength=1e-3)


class PredictorSet:
    """Every predictor of `PREDICTORS`, fed alike: the step's policy features, P(all-equal at n)
    before the step, then its groups. ``table``: the prompts' text features (the text GP's)."""

    def __init__(self, table: FeatureTable, seed: int):
        self.models: dict[str, Any] = {
            "history": DiscountedBeta(),
            "text-gp": GaussianProcess(table, seed=seed),
            "probe": FlatnessPredictor(history=None, policy=True),
            "combined": FlatnessPredictor(history=True, text=GaussianProcess(table, seed=seed), policy=True),
            "default": FlatnessPredictor(history=True, policy=True),
            "default-before": DefaultBefore(),
        }

    def observe_policy(self, prompts: list, features: np.ndarray) -> None:
        for model in self.models.values():
            if isinstance(model, FlatnessPredictor) and model.policy:
                model.observe_policy(prompts, features)

    def all_equal(self, prompts: list, n: np.ndarray) -> dict[str, np.ndarray]:
        """Each predictor's P(all-equal) for groups of ``n`` (one size per prompt)."""
        out = {}
        for name, model in self.models.items():
            a, b = model.belief(prompts) if hasattr(model, "belief") else _beta_of(model.predict(prompts))
            out[name] = all_equal_beta(a, b, n)[0]
        return out

    def update(self, prompts: list, rewards: list) -> None:
        for model in self.models.values():
            model.update(prompts, rewards)


def flat(rewards: list) -> np.ndarray:
    """1 where a group's rewards are all equal (`checks.rewards.all_equal`), else 0."""
    return all_equal(np.array([r.min() for r in rewards]), np.array([r.max() for r in rewards])).astype(float)


class Recorder:
    """Uniform's allocation; before each step every predictor's P(all-equal at n), after it the outcomes."""

    def __init__(self, problem: Any, seed: int):
        self.predictors = PredictorSet(FeatureTable(list(range(problem.n_prompts)), problem.features), seed)
        self.inner = Uniform()
        self.kind = self.inner.kind
        self.pred: dict[str, list] = {m: [] for m in PREDICTORS}
        self.outcome: list = []

    def observe_policy(self, prompts: list, features: np.ndarray) -> None:
        self.predictors.observe_policy(prompts, features)

    def run(self, prompts: list, budget: int, sample: Any) -> list:
        n = budget // len(prompts)
        for name, prob in self.predictors.all_equal(prompts, np.full(len(prompts), n)).items():
            self.pred[name].append(prob)
        rewards = self.inner.run(prompts, budget, sample)
        self.outcome.append(flat(rewards))
        self.predictors.update(prompts, rewards)
        return rewards

    def state_dict(self) -> dict:
        return {}


def one_trace(cell: Any, seed: int, steps: int) -> dict[str, Any]:
    problem = cell.problem(seed)
    rec = Recorder(problem, seed)
    cfg = TrainConfig(
        steps=steps, batch_prompts=cell.batch_prompts, budget=cell.budget, lr=0.4, seed=seed, grad_var_every=0
    )
    train(problem, rec, cfg)
    return {"outcome": np.concatenate(rec.outcome), **{m: np.concatenate(v) for m, v in rec.pred.items()}}


def replay_trace(trace: Any) -> dict[str, Any]:
    """A recorded tiny-LM trace (`demo.traces.GroupTrace`) through every predictor, step by step:
    the step's policy features, then P(all-equal at the group's size), then the groups."""
    if not trace.text.shape[1] or not trace.policy.shape[1]:
        raise ValueError("a tiny-LM trace needs the text embeddings and the policy features")
    predictors = PredictorSet(FeatureTable(list(range(len(trace.prompts))), trace.text), seed=0)
    pred: dict[str, list] = {m: [] for m in PREDICTORS}
    outcome = []
    for ids, rewards, features in trace.steps():
        prompts = ids.tolist()
        predictors.observe_policy(prompts, features)
        for name, prob in predictors.all_equal(prompts, np.array([r.size for r in rewards])).items():
            pred[name].append(prob)
        outcome.append(flat(rewards))
        predictors.update(prompts, rewards)
    steps = np.concatenate([np.full(o.size, t) for t, o in enumerate(outcome)])
    return {"outcome": np.concatenate(outcome), "step": steps, **{m: np.concatenate(v) for m, v in pred.items()}}


def by_half(got: dict[str, list[np.ndarray]]) -> dict[str, dict]:
    """Scores on the first and the second half of each trace's steps, pooled over the traces: how
    far calibration has come once the predictors have seen the prompts a few times."""
    halves: dict[str, dict] = {}
    for half in ("first", "second"):
        keep = [(s >= (s.max() + 1) / 2) == (half == "second") for s in got["step"]]
        y = np.concatenate([o[k] for o, k in zip(got["outcome"], keep)])
        halves[half] = {
            m: {
                x: v
                for x, v in calibration_scores(np.concatenate([p[k] for p, k in zip(got[m], keep)]), y).items()
                if x in SCORES
            }
            for m in PREDICTORS
        }
        halves[half]["groups"] = int(y.size)
    return halves


def score_traces(folder: Path, out: Path) -> None:
    """Every predictor on the tiny-LM traces in ``folder`` (`demo.traces`): per trace and pooled."""
    from adaptive_rollouts.demo.traces import load_trace

    stems = sorted(p.with_suffix("") for p in folder.glob("*.npz"))
    if not stems:
        raise SystemExit(f"no traces in {folder} (record them: python benchmarks/tinylm_traces.py)")
    per_trace, pooled_data = [], {m: [] for m in (*PREDICTORS, "outcome", "step")}
    settings: dict[str, Any] = {}
    for stem in stems:
        trace, meta = load_trace(stem)
        got = replay_trace(trace)
        for m in pooled_data:
            pooled_data[m].append(got[m])
        row: dict[str, Any] = {"trace": stem.name, "groups": int(got["outcome"].size)}
        row["all_equal_share"] = float(got["outcome"].mean())
        row |= {
            m: {k: v for k, v in calibration_scores(got[m], got["outcome"]).items() if k in SCORES} for m in PREDICTORS
        }
        per_trace.append(row)
        settings = {k: v for k, v in meta.items() if k not in ("seed", "step_seconds", "policy_seconds")}
        print(stem.name, {m: round(row[m]["ece"], 3) for m in PREDICTORS}, flush=True)
    y = np.concatenate(pooled_data["outcome"])
    pooled = {m: calibration_scores(np.concatenate(pooled_data[m]), y) for m in PREDICTORS}
    out.mkdir(parents=True, exist_ok=True)
    reliability_png(pooled, out / "reliability_tinylm.png", "tiny-LM ladder traces")
    settings |= {"traces": [f"{stem.parent.name}/{stem.name}" for stem in stems], "predictors": list(PREDICTORS)}
    data = {"traces": per_trace, "pooled": pooled, "halves": by_half(pooled_data)}
    path = write_result(out / "tinylm.json", data, settings=settings)
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
    for cell in cells:
        traces = []
        for seed in range(args.seeds):
            traces.append(one_trace(cell, seed, args.steps))
            bar.update(1)
        y = np.concatenate([t["outcome"] for t in traces])
        pooled_data["outcome"].append(y)
        row: dict[str, Any] = {"cell": cell.key, "groups": int(y.size), "all_equal_share": float(y.mean())}
        for m in PREDICTORS:
            p = np.concatenate([t[m] for t in traces])
            pooled_data[m].append(p)
            s = calibration_scores(p, y)
            row[m] = {k: s[k] for k in SCORES}
        per_cell.append(row)
        print(cell.key, {m: round(row[m]["ece"], 3) for m in PREDICTORS}, flush=True)
    bar.close()
    y = np.concatenate(pooled_data["outcome"])
    pooled = {m: calibration_scores(np.concatenate(pooled_data[m]), y) for m in PREDICTORS}
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
    }
    path = write_result(out / "flatness_calibration.json", {"cells": per_cell, "pooled": pooled}, settings=settings)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

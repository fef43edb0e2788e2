"""How much the policy's view can tell, and how much of it a probe learns within one run: the
shipped online probe against a logistic regression refitted at every step on everything the run
has seen, and against one fitted on other runs' groups, on recorded tiny-LM traces.

    python benchmarks/view_information.py

Every predictor here sees only the hidden state at each prompt's last token (the probe alone,
``FlatnessPredictor(history=None)``, no history, no text), and scores each group's P(all-equal at
n) on the held-out traces (``results/flatness_calibration/tinylm_heldout``):

- ``online probe``: the shipped probe, replayed step by step (as ``benchmarks/probe_variants.py``);
- ``online logistic, plug-in``: the probe's learner alone (`OnlineLogistic` on the view
  standardised by `RunningScaler`, the same prior and forgetting), every rollout one observation
  (no group weight), P(all-equal at n) = p^n + (1 - p)^n at the regression's point estimate: no
  spread, no recalibration, no choice among candidates. What the probe's belief layers cost or buy;
- ``refit within the run``: before each step, a ridge logistic regression of each rollout's
  success on the standardised view, fitted (to convergence) on every earlier step of the same run,
  no forgetting; P(all-equal at n) = p^n + (1 - p)^n at its point estimate. The most a batch learner
  gets from the run's own groups;
- ``fitted on other runs``: the same regression fitted once on every group of the development
  traces (``tinylm_dev``: other seeds, the same warm-started model), never updated: what the view
  holds when labels are plentiful.

The ridge strength of both regressions is chosen on the development traces only (the refit's by
its within-run AUROC there, the other runs' by leave-one-trace-out). Scores: the AUROC of P(all-equal)
pooled over every group, the same within a step, its ECE, and each predictor's pooled AUROC minus the online
probe's with a 90% interval from a paired bootstrap over whole traces (2000 resamples).
Writes ``results/view_information/view_information.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from probe_variants import RESAMPLES, paired_bootstrap, within_step_auroc
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from adaptive_rollouts.demo.traces import load_trace
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.predictors.calibration import auroc, calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor
from adaptive_rollouts.predictors.probe import OnlineLogistic, RunningScaler
from adaptive_rollouts.progress import progress_bar

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "results" / "flatness_calibration" / "tinylm_dev"
HELDOUT = ROOT / "results" / "flatness_calibration" / "tinylm_heldout"
OUT = ROOT / "results" / "view_information" / "view_information.json"
RIDGE = (0.01, 0.1, 1.0, 10.0)  # prior precision of the standardised weights (the intercept: none)


def fit_logistic(x: np.ndarray, successes: np.ndarray, trials: np.ndarray, ridge: float) -> np.ndarray:
    """Ridge-penalised binomial logistic regression, weights [intercept, x columns], by L-BFGS:
    minimises -sum(k log s + (n - k) log(1 - s)) + ridge / 2 |w[1:]|^2, s = sigmoid(w0 + x w).

    >>> x = np.array([[-1.0], [1.0]])
    >>> w = fit_logistic(x, np.array([1.0, 9.0]), np.array([10.0, 10.0]), 1e-9)
    >>> np.round(expit(w[0] + x[:, 0] * w[1]), 3).tolist()
    [0.1, 0.9]
    """
    z = np.column_stack([np.ones(len(x)), x])
    fail = trials - successes

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        m = z @ w
        value = -(successes @ log_expit(m) + fail @ log_expit(-m)) + 0.5 * ridge * (w[1:] @ w[1:])
        grad = z.T @ (trials * expit(m) - successes)
        grad[1:] += ridge * w[1:]
        return float(value), grad

    return minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B").x


def all_equal_at(w: np.ndarray, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    p = expit(w[0] + x @ w[1:])
    return p**n + (1.0 - p) ** n


def standardise(train: np.ndarray, *rest: np.ndarray) -> list[np.ndarray]:
    mean, sd = train.mean(axis=0), train.std(axis=0) + 1e-6
    return [(a - mean) / sd for a in (train, *rest)]


def load(folder: Path) -> list[dict[str, np.ndarray]]:
    """Per trace: the view, successes, group sizes, steps and whether each group was all-equal."""
    runs = []
    for stem in sorted(p.with_suffix("") for p in folder.glob("*.npz")):
        trace, _ = load_trace(stem)
        rows = [(ids, rewards, features) for ids, rewards, features in trace.steps()]
        runs.append(
            {
                "name": f"{folder.name}/{stem.name}",
                "trace": rows,
                "view": np.concatenate([f for _, _, f in rows]),
                "successes": np.concatenate([[float(np.sum(r)) for r in rs] for _, rs, _ in rows]),
                "trials": np.concatenate([[float(r.size) for r in rs] for _, rs, _ in rows]),
                "step": np.concatenate([np.full(len(ids), t) for t, (ids, _, _) in enumerate(rows)]),
                "outcome": np.concatenate([[float(np.ptp(r) == 0) for r in rs] for _, rs, _ in rows]),
            }
        )
    if not runs:
        raise SystemExit(f"no traces in {folder} (record them: python benchmarks/tinylm_traces.py)")
    return runs


def online_probe(run: dict) -> np.ndarray:
    probe, out = FlatnessPredictor(history=None), []
    for ids, rewards, features in run["trace"]:
        prompts = ids.tolist()
        probe.observe_policy(prompts, features)
        out.append(probe.all_equal(prompts, np.array([r.size for r in rewards]))[0])
        probe.update(prompts, rewards)
    return np.concatenate(out)


def online_plug_in(run: dict) -> np.ndarray:
    width = run["view"].shape[1]
    model, scaler, out = OnlineLogistic(1 + width), RunningScaler(width), []
    for _, rewards, features in run["trace"]:
        scaler.observe(features)
        z = np.column_stack([np.ones(len(features)), scaler.transform(features)])
        n = np.array([r.size for r in rewards], dtype=float)
        out.append(all_equal_at(model.mean, z[:, 1:], n))
        model.update(z, np.array([float(np.sum(r)) for r in rewards]), n)
    return np.concatenate(out)


def refit_within(run: dict, ridge: float) -> np.ndarray:
    """Each step's P(all-equal) from the regression fitted on the run's earlier steps (the first
    step: the run's all-equal share is unknown, every group 1/2)."""
    score = np.full(run["outcome"].size, 0.5)
    for t in range(1, int(run["step"].max()) + 1):
        seen, now = run["step"] < t, run["step"] == t
        x_seen, x_now = standardise(run["view"][seen], run["view"][now])
        w = fit_logistic(x_seen, run["successes"][seen], run["trials"][seen], ridge)
        score[now] = all_equal_at(w, x_now, run["trials"][now])
    return score


def fitted_on(train: list[dict], test: dict, ridge: float) -> np.ndarray:
    x = np.concatenate([r["view"] for r in train])
    x_train, x_test = standardise(x, test["view"])
    k = np.concatenate([r["successes"] for r in train])
    n = np.concatenate([r["trials"] for r in train])
    return all_equal_at(fit_logistic(x_train, k, n, ridge), x_test, test["trials"])


def pooled_auroc(runs: list[dict], key: str) -> float:
    return auroc(np.concatenate([r[key] for r in runs]), np.concatenate([r["outcome"] for r in runs]))


def choose_ridge(dev: list[dict], bar: Any) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The ridge of each regression, chosen on the development traces by pooled AUROC."""
    tried: dict[str, dict[str, float]] = {"refit": {}, "other runs": {}}
    for ridge in RIDGE:
        for r in dev:
            r["refit"] = refit_within(r, ridge)
            r["other runs"] = fitted_on([o for o in dev if o is not r], r, ridge)
        bar.update(1)
        for key in tried:
            tried[key][f"{ridge:g}"] = pooled_auroc(dev, key)
    best = {key: float(max(t, key=t.__getitem__)) for key, t in tried.items()}
    return best, tried


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    dev, held = load(DEV), load(HELDOUT)
    bar = progress_bar(len(RIDGE) + len(held), not args.no_progress)
    ridge, tried = choose_ridge(dev, bar)
    names = {
        "online probe": "online",
        "online logistic, plug-in": "plug-in",
        "refit within the run": "refit",
        "fitted on other runs": "other runs",
    }
    for r in held:
        r["online"] = online_probe(r)
        r["plug-in"] = online_plug_in(r)
        r["refit"] = refit_within(r, ridge["refit"])
        r["other runs"] = fitted_on(dev, r, ridge["other runs"])
        bar.update(1)
    bar.close()
    y = np.concatenate([r["outcome"] for r in held])
    group = np.concatenate([r["step"] + 1000 * i for i, r in enumerate(held)])
    scores = {}
    for label, key in names.items():
        p = np.concatenate([r[key] for r in held])
        scores[label] = {
            "auroc": auroc(p, y),
            "within_step_auroc": within_step_auroc(p, y, group),
            "ece": calibration_scores(p, y)["ece"],
            "minus_online": paired_bootstrap(held, key, "online"),
        }
    data = {
        "scores": scores,
        "ridge": ridge,
        "ridge_tried_dev_auroc": tried,
        "groups": int(y.size),
        "all_equal_share": float(y.mean()),
        "view_width": int(held[0]["view"].shape[1]),
    }
    settings = {
        "heldout": [r["name"] for r in held],
        "dev": [r["name"] for r in dev],
        "ridge_grid": list(RIDGE),
        "resamples": RESAMPLES,
    }
    path = write_result(Path(args.out), data, settings=settings)
    print(f"wrote {path}")
    for label, s in scores.items():
        d = s["minus_online"]
        print(
            f"{label:22s} AUROC {s['auroc']:.3f} within a step {s['within_step_auroc']:.3f} "
            f"minus online {d['mean']:+.3f} ({d['low']:+.3f} to {d['high']:+.3f})"
        )


if __name__ == "__main__":
    main()

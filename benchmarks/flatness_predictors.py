"""The predictors `benchmarks/flatness_calibration.py` scores, fed alike, and its scores: the ECE's
noise floor, pooled and per-half scores, and the chance after a flat pilot (see that script's
docstring for the predictors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptive_rollouts.allocators.guarded import measured_persistence
from adaptive_rollouts.allocators.posterior_progressive import beta_prior
from adaptive_rollouts.checks.rewards import all_equal
from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.objectives.beta import all_equal_beta, beta_from_moments, stays_flat_beta
from adaptive_rollouts.predictors import DiscountedBeta, GaussianProcess
from adaptive_rollouts.predictors.calibration import auroc, calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor

PREDICTORS = ("history", "text-gp", "probe", "combined", "default", "default-raw", "default-before")
SCORES = ("brier", "log_loss", "ece")
TARGETS = {"ece": 0.05, "brier_ratio": 0.8}  # the default's: ECE at most, Brier at most this times the history's
FLOOR_DRAWS = 200
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)  # of the default's (unrecalibrated) mean of p, per trace
PILOT = 2  # the flat pilot after which the chance that the rest repeats it is scored (the shortest pilot)


def ece_floor(prob: np.ndarray, draws: int = FLOOR_DRAWS, seed: int = 0) -> dict[str, float]:
    """The ECE a perfectly calibrated predictor would read with these predictions: outcomes drawn
    as Bernoulli(prob), ``draws`` times; median and 5% / 95% quantiles."""
    rng = np.random.default_rng(seed)
    got = [calibration_scores(prob, (rng.random(prob.size) < prob).astype(float))["ece"] for _ in range(draws)]
    low, median, high = np.quantile(got, [0.05, 0.5, 0.95])
    return {"median": float(median), "low": float(low), "high": float(high), "draws": draws}


def pooled_scores(pooled_data: dict[str, list]) -> dict[str, dict]:
    """`calibration_scores` of every predictor over all the groups, with its ECE's noise floor."""
    y = np.concatenate(pooled_data["outcome"])
    out = {}
    for m in PREDICTORS:
        p = np.concatenate(pooled_data[m])
        out[m] = calibration_scores(p, y) | {"ece_floor": ece_floor(p)}
    return out


def success_auroc(pooled_data: dict[str, list]) -> dict[str, float]:
    """Every predictor's AUROC of its mean of p for the rollouts' successes (`PredictorSet.successes`)."""
    y = np.concatenate(pooled_data["outcome"])
    return {m: auroc(np.concatenate(pooled_data[m]), y) for m in PREDICTORS}


def pilot_scores(pooled_data: dict[str, list]) -> dict[str, Any]:
    """`calibration_scores` of every predictor's chance that the rest of a group repeats its flat
    pilot (`PredictorSet.after_pilot`), with the share of such groups whose rest did."""
    y = np.concatenate(pooled_data["outcome"])
    out: dict[str, Any] = {"pilot": PILOT, "groups": int(y.size), "repeated_share": float(y.mean()) if y.size else None}
    for m in PREDICTORS:
        p = np.concatenate(pooled_data[m])
        out[m] = {k: v for k, v in calibration_scores(p, y).items() if k in (*SCORES, "auroc")} | {
            "mean": float(p.mean())
        }
    return out


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
        self.choices: list[tuple[float, float]] = []  # the default's (kappa, t) at each step
        self._betas: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # each belief before the step

    def observe_policy(self, prompts: list, features: np.ndarray) -> None:
        for model in self.models.values():
            if isinstance(model, FlatnessPredictor) and model.policy:
                model.observe_policy(prompts, features)

    def all_equal(self, prompts: list, n: np.ndarray) -> dict[str, np.ndarray]:
        """Each predictor's P(all-equal) for groups of ``n`` (one size per prompt)."""
        out = {}
        for name, model in self.models.items():
            self._betas[name] = model.belief(prompts) if hasattr(model, "belief") else _beta_of(model.predict(prompts))
        self._betas["default-raw"] = self.models["default"].belief(prompts, recalibrate=False)
        for name in PREDICTORS:
            out[name] = all_equal_beta(*self._betas[name], n)[0]
        self.choices.append(self.models["default"].choice())
        return out

    def successes(self, rewards: list) -> dict[str, np.ndarray]:
        """Per rollout of the last `all_equal` call's groups, each predictor's mean of p for its prompt,
        and under ``outcome`` the rollout's reward (binary rewards only): how well each belief tells
        success from failure, beside how well it tells which groups will be all-equal."""
        rows = [i for i, r in enumerate(rewards) if np.all((r == 0.0) | (r == 1.0))]
        sizes = [rewards[i].size for i in rows]
        out = {"outcome": np.concatenate([rewards[i] for i in rows]) if rows else np.zeros(0)}
        for name in PREDICTORS:
            a, b = self._betas[name]
            out[name] = np.repeat((a / (a + b))[rows], sizes)
        return out

    def after_pilot(self, rewards: list) -> dict[str, np.ndarray]:
        """On the groups of the last `all_equal` call whose first `PILOT` rewards are equal and that
        go on past them: each predictor's chance that the rest repeats the pilot's reward (what the
        bound per group cuts by, `objectives.beta.stays_flat_beta` under the belief updated with the
        pilot), and under ``outcome`` whether it did."""
        rows = [i for i, r in enumerate(rewards) if r.size > PILOT and np.ptp(r[:PILOT]) == 0 and r[0] in (0.0, 1.0)]
        idx = np.array(rows, dtype=np.int64)
        passed = np.array([rewards[i][0] == 1.0 for i in rows], dtype=bool)
        rest = np.array([rewards[i].size - PILOT for i in rows])
        out = {"outcome": np.array([float(np.all(rewards[i][PILOT:] == rewards[i][0])) for i in rows])}
        won = np.where(passed, float(PILOT), 0.0)  # the pilot's successes
        for name in PREDICTORS:
            a, b = self._betas[name]
            out[name] = stays_flat_beta(a[idx] + won, b[idx] + PILOT - won, passed, rest) if rows else np.zeros(0)
        return out

    def update(self, prompts: list, rewards: list) -> None:
        for model in self.models.values():
            model.update(prompts, rewards)


class Events:
    """Every step's after-pilot and success events per predictor (`PredictorSet.after_pilot`,
    `PredictorSet.successes`), gathered over steps and traces, and their scores."""

    def __init__(self) -> None:
        self.got: dict[str, dict[str, list]] = {
            k: {m: [] for m in (*PREDICTORS, "outcome")} for k in ("pilot", "success")
        }

    def record(self, predictors: PredictorSet, rewards: list) -> None:
        for kind, events in (("pilot", predictors.after_pilot(rewards)), ("success", predictors.successes(rewards))):
            for name, got in events.items():
                self.got[kind][name].append(got)

    def extend(self, other: Events) -> None:
        for kind, by_name in other.got.items():
            for name, got in by_name.items():
                self.got[kind][name].extend(got)

    def scores(self) -> dict[str, Any]:
        return {"after_pilot": pilot_scores(self.got["pilot"]), "success_auroc": success_auroc(self.got["success"])}


def flat(rewards: list) -> np.ndarray:
    """1 where a group's rewards are all equal (`checks.rewards.all_equal`), else 0."""
    return all_equal(np.array([r.min() for r in rewards]), np.array([r.max() for r in rewards])).astype(float)


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

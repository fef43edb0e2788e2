"""The recommended default: spend a rollout only where it is expected to teach at least as much as
the step's average rollout (a saving allocator: at most the budget, never more than Uniform's
group size per prompt)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..fingerprints import RegimeTracker
from ..objectives import beta_from_moments
from ..objectives.signal import expected_group_signal, group_signal
from ..state_checks import StateReader
from ..types import Prompt, Rewards, SampleFn, StateDict
from ..validation import AGGREGATIONS, ESTIMATORS, check_choice
from .base import BaseAllocator, RolloutCollector
from .guarded import equal_split, measured_persistence
from .posterior_progressive import beta_prior
from .predictive import PredictorSlot

__all__ = ["SavingProgressive", "population_prior", "worth_continuing"]

_TIE = 1e-8


def population_prior(successes: np.ndarray, trials: np.ndarray, max_strength: float) -> tuple[float, float]:
    """Beta(a, b) of p across this step's prompts, by moments of their observed rates (empirical
    Bayes): mean m = sum s / sum k, between-prompt variance = Var(s/k) minus the binomial noise
    E[m (1 - m) / k], strength capped at ``max_strength``. With no trials: Beta(1, 1).

    >>> a, b = population_prior(np.array([0, 0, 0, 4]), np.array([4, 4, 4, 4]), 8.0)
    >>> round(a / (a + b), 3)
    0.25
    """
    seen = trials > 0
    if not seen.any():
        return 1.0, 1.0
    k, s = trials[seen].astype(float), successes[seen].astype(float)
    half = 0.5 / k.sum()  # keeps the mean off 0 and 1: no sample proves a population of p = 0
    mean = float(np.clip(s.sum() / k.sum(), half, 1.0 - half))
    between = float(np.var(s / k) - np.mean(mean * (1.0 - mean) / k)) if k.size > 1 else 0.0
    var = max(between, mean * (1.0 - mean) / (max_strength + 1.0))
    a, b = beta_from_moments([mean], [var], min_strength=1.0, max_strength=max_strength)
    return float(a[0]), float(b[0])


def worth_continuing(value: np.ndarray, cost: np.ndarray, banked_value: float, banked_cost: float) -> np.ndarray:
    """Which optional spends to make so that the step's expected signal per rollout is highest:
    with R = banked_value / banked_cost (what is already spent or committed), take the options in
    descending order of value / cost while value / cost >= R, updating R after each (the exact
    maximiser of (V + sum value) / (C + sum cost) over subsets: it is a prefix in ratio order).

    >>> worth_continuing(np.array([0.1, 3.0, 0.5]), np.array([4, 4, 4]), 2.0, 8.0).tolist()
    [False, True, False]
    """
    take = np.zeros(value.size, dtype=bool)
    ratio = np.where(cost > 0, value / np.maximum(cost, 1), -np.inf)
    total_value, total_cost = float(banked_value), float(banked_cost)
    for i in np.argsort(-ratio, kind="stable").tolist():
        if cost[i] <= 0 or value[i] <= 0 or (total_cost > 0 and ratio[i] < total_value / total_cost):
            break
        take[i] = True
        total_value += float(value[i])
        total_cost += float(cost[i])
    return take


class SavingProgressive(BaseAllocator):
    """Pilot, then pay only for rollouts worth the step's average (this library's default;
    docs/saving.md derives the rule).

    A "save" allocator: it spends at most the budget C and never gives a prompt more than
    Uniform's group size n_q (the equal split of C over the Q prompts), so what it does not spend is
    saved, never moved. Per step, with the value of a group a(k; n) from
    `objectives.signal.group_signal` (its update along the prompt's expected direction; 0 for an
    all-equal group under GRPO, Dr. GRPO and RLOO):

    1. belief: Beta(a0 + rho a_q, b0 + rho b_q) - a population prior (a0, b0) fitted by moments to
       the previous step's rates (`population_prior`), plus the predictor's history moment-matched
       to Beta(a_q, b_q) (strength capped at ``max_prior_strength``) and weighted by rho in [0, 1],
       how persistent p has been in this run (measured, 0 until it can be, as in
       `GuardedProgressive`): stale or unmeasured history counts for nothing;
    2. before any rollout, prompt q is piloted with probability min(1, (V_q / n_q) / R_run), V_q the
       expected signal of its full group under the belief and R_run the signal per generated
       rollout of the run's last steps; so a prompt the belief says is flat is still explored, the
       more often the less certain the belief (every prompt is piloted until R_run is measured);
    3. pilot: m = min(``pilot``, n_q) rollouts each (4: two rollouts misjudge too many rare
       successes); the population prior is refitted to this step's pilots;
    4. rounds: a prompt whose rewards already differ is completed to n_q; a prompt whose rewards
       are all equal gets its next chunk (half of what it lacks) only if the expected signal of
       completing it per rollout still to pay, E[a | data] / (n_q - k_q) under its posterior, is at
       least R, the step's expected signal per rollout spent or committed (`worth_continuing`, the
       exact maximiser of the step's signal per rollout). Repeat until no prompt continues.

    Nothing here needs tuning: R and R_run are measured on the run's own rollouts, rho too; at a
    cold start where every pilot is flat R is 0 and every prompt continues (rare successes are not
    starved). ``saving=False`` completes every group to n_q through the same rounds: Uniform's
    counts, the null control of the benchmarks. Predictor: "beta" (`DiscountedBeta`, history only)
    by default; any predictor name or object (e.g. "gp" with ``features``).

    >>> import numpy as np
    >>> def sample(idx, counts):  # prompt 1 always fails, the others alternate
    ...     return [np.zeros(c) if i == 1 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
    >>> alloc = SavingProgressive(estimator="grpo")
    >>> [len(r) for r in alloc.run([10, 11, 12, 13], 32, sample)]  # 0 of 4 could still be 1 of 8
    [8, 8, 8, 8]
    >>> _ = alloc.run([10, 11, 12, 13], 32, sample)
    >>> [len(r) for r in alloc.run([10, 11, 12, 13], 32, sample)]  # p persistent: prompt 11 skipped
    [8, 0, 8, 8]
    >>> alloc.last_metrics["rollouts_spent"], alloc.last_metrics["rollouts_saved"], alloc.last_metrics["skipped"]
    (24, 8, 1)
    """

    name = "saving-progressive"
    kind = "save"
    lower = 2
    allow_skip = True

    def __init__(
        self,
        predictor: Any = "beta",
        *,
        features: Any = None,
        estimator: str = "grpo",
        aggregation: str | None = None,
        pilot: int = 4,
        max_prior_strength: float = 8.0,
        saving: bool = True,
        window: int = 10,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        check_choice("estimator", estimator, ESTIMATORS)
        if aggregation is not None:
            check_choice("aggregation", aggregation, AGGREGATIONS)
        if isinstance(pilot, bool) or not isinstance(pilot, (int, np.integer)) or pilot < 2:
            raise ValueError(f"pilot must be an integer >= 2, got {pilot!r}")
        if not (isinstance(max_prior_strength, (int, float)) and math.isfinite(max_prior_strength)):
            raise ValueError(f"max_prior_strength must be a finite number > 0, got {max_prior_strength!r}")
        if max_prior_strength <= 0:
            raise ValueError(f"max_prior_strength must be a finite number > 0, got {max_prior_strength!r}")
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.slot = PredictorSlot(predictor, features)
        self.estimator, self.aggregation = estimator, aggregation
        self.pilot, self.max_prior_strength = int(pilot), float(max_prior_strength)
        self.saving, self.window = bool(saving), int(window)
        self.tracker = RegimeTracker()
        self.population = (1.0, 1.0)
        self.history: list[tuple[float, int]] = []  # (realised signal, rollouts spent) of the last steps

    @property
    def predictor(self) -> Any:
        return self.slot.predictor

    def run_ratio(self) -> float | None:
        """R_run: realised signal per generated rollout over the last ``window`` steps (None before)."""
        spent = sum(c for _, c in self.history)
        return sum(v for v, _ in self.history) / spent if spent else None

    def _aggregation(self) -> str:
        return self.aggregation or "seq-mean"

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        start = time.perf_counter()
        prompts, budget, collector, _ = self._begin_rounds(prompts, budget, sample)
        q = len(prompts)
        target = self._targets(budget, q)
        rho = measured_persistence(self.tracker)
        prediction = self.predictor.predict(prompts)
        a_h, b_h = beta_prior(prediction, self.max_prior_strength)
        a0, b0 = self.population[0] + rho * a_h, self.population[1] + rho * b_h
        keep = self._explore(target, a0, b0) if self.saving else np.ones(q, dtype=bool)
        keep &= target >= 2
        collector.draw(np.where(keep, np.minimum(target, self.pilot), 0))
        pilot_s = self._successes(collector)
        self.population = population_prior(pilot_s, collector.scored, self.max_prior_strength)
        a0, b0 = self.population[0] + rho * a_h, self.population[1] + rho * b_h
        rounds = 1
        while True:
            inc = self._round(collector, target, keep, a0, b0)
            if not inc.any():
                break
            collector.draw(inc)
            rounds += 1
        self._check_counts(collector.counts, budget, max(int(target.max()), self.lower))
        rewards = collector.rewards()
        seen = [i for i, r in enumerate(rewards) if r.size]
        if seen:
            self.predictor.update([prompts[i] for i in seen], [rewards[i] for i in seen])
        self.tracker.update(list(prompts), [np.asarray(r, dtype=float) for r in rewards])
        spent = int(collector.counts.sum())
        self.history = [*self.history, (self._realised(rewards), spent)][-self.window :]
        extra = {
            "pilot": int(min(self.pilot, int(target.max()))),
            "pre_skipped": int(np.sum(~keep)),
            "cut": int(np.sum(keep & (collector.counts < target))),
            "rounds": rounds,
            "persistence": rho,
            "signal_per_rollout": self.run_ratio(),
        }
        return self._finish(prompts, collector, start, prediction, extra, budget=budget)

    def _targets(self, budget: int, q: int) -> np.ndarray:
        """n_q: Uniform's group sizes (the equal split of the budget). Below 2 rollouts a prompt a
        group carries no signal, so with C < 2Q the split is over C // 2 prompts drawn at random."""
        if budget >= 2 * q:
            return equal_split(budget, q)
        target = np.zeros(q, dtype=np.int64)
        chosen = self.rng.permutation(q)[: budget // 2]
        if chosen.size:
            target[chosen] = equal_split(budget, chosen.size)
        return target

    def _successes(self, collector: RolloutCollector) -> np.ndarray:
        return np.array([float(r.sum()) for r in collector.rewards()])

    def _explore(self, target: np.ndarray, a0: np.ndarray, b0: np.ndarray) -> np.ndarray:
        """Step 2: which prompts are piloted (probability min(1, (V_q / n_q) / R_run))."""
        ratio_run = self.run_ratio()
        if ratio_run is None or ratio_run <= 0:
            return np.ones(target.size, dtype=bool)
        zeros = np.zeros(target.size, dtype=np.int64)
        value = expected_group_signal(
            target, zeros, zeros, a0, b0, estimator=self.estimator, aggregation=self._aggregation()
        )
        chance = np.clip(value / np.maximum(target, 1) / ratio_run, 0.0, 1.0)
        keep = self.rng.random(target.size) < chance
        if not keep.any():  # always learn something: the prompt most worth it
            keep[int(np.argmax(chance))] = True
        return keep

    def _round(
        self, collector: RolloutCollector, target: np.ndarray, keep: np.ndarray, a0: np.ndarray, b0: np.ndarray
    ) -> np.ndarray:
        """Step 4: the next round's increments (all zero when nothing is worth another rollout)."""
        k = collector.scored
        rewards = collector.rewards()
        s = np.array([float(r.sum()) for r in rewards])
        varied = np.array([r.size >= 2 and float(np.ptp(r)) > _TIE for r in rewards])
        open_ = keep & (collector.counts > 0) & (collector.counts < target)
        if not self.saving:
            return np.where(open_, np.minimum(target - collector.counts, self._chunk(target, collector.counts)), 0)
        value = expected_group_signal(
            k + target - collector.counts,
            k,
            s,
            a0 + s,
            b0 + k - s,
            estimator=self.estimator,
            aggregation=self._aggregation(),
        )
        inc = np.where(open_ & varied, target - collector.counts, 0)
        banked_value = float(value[keep & varied].sum())
        banked_cost = float(collector.counts.sum() + inc.sum())
        tied = np.flatnonzero(open_ & ~varied)
        take = worth_continuing(value[tied], (target - collector.counts)[tied], banked_value, banked_cost)
        chosen = tied[take]
        inc[chosen] = np.minimum(target - collector.counts, self._chunk(target, collector.counts))[chosen]
        return inc

    @staticmethod
    def _chunk(target: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Half of what a prompt still lacks (at least 1, and never leaving a lone last rollout)."""
        lack = target - counts
        half = np.maximum((lack + 1) // 2, 1)
        return np.where(lack - half == 1, lack, half)

    def _realised(self, rewards: Rewards) -> float:
        """Signal of this step's groups, a(k; n) of each."""
        total = 0.0
        for r in rewards:
            n = int(r.size)
            if n >= 2 and float(np.ptp(r)) > _TIE:
                total += float(
                    group_signal(self.estimator, n, self._aggregation())[int(np.clip(round(r.sum()), 1, n - 1))]
                )
        return total

    # -- state ----------------------------------------------------------------------------------
    def _extra_state(self) -> StateDict:
        return {
            "predictor": self.slot.state_dict(),
            "tracker": self.tracker.state_dict(),
            "population": [float(x) for x in self.population],
            "history_signal": [float(v) for v, _ in self.history],
            "history_spent": [int(c) for _, c in self.history],
        }

    def _load_extra_state(self, state: StateDict) -> None:
        """Checks the population prior and the history before anything changes; the tracker and the
        predictor check their own parts."""
        reader = StateReader(
            state, type(self).__name__, ["predictor", "tracker", "population", "history_signal", "history_spent"]
        )
        population = reader.array("population", (2,), dtype=float, low=0.0, low_open=True)
        raw = reader["history_signal"]
        if not isinstance(raw, (list, tuple, np.ndarray)):
            raise reader.error("history_signal", f"must be a list, got {type(raw).__name__}")
        signal = reader.array("history_signal", (len(raw),), dtype=float, low=0.0)
        spent = reader.array("history_spent", (signal.size,), dtype=np.int64, low=0)
        tracker = RegimeTracker()
        tracker.load_state_dict(state["tracker"])
        self.slot.load_state_dict(state["predictor"])
        self.tracker = tracker
        self.population = (float(population[0]), float(population[1]))
        self.history = [(float(v), int(c)) for v, c in zip(signal, spent)][-self.window :]

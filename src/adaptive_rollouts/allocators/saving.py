"""The recommended default: spend a rollout only where it is expected to teach at least as much as
the step's average rollout (a saving allocator: at most the budget, never more than Uniform's
group size per prompt)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..checks.validation import AGGREGATIONS, ESTIMATORS, check_choice, check_integer, check_range
from ..fingerprints import RegimeTracker
from ..metrics import group_has_signal
from ..objectives import beta_from_moments
from ..objectives.signal import expected_group_signal, group_signal
from ..solvers import equal_split
from ..state.checks import StateReader
from ..types import Prompt, Rewards, SampleFn, StateDict
from .base import BaseAllocator, RolloutCollector
from .guarded import measured_persistence
from .posterior_progressive import beta_prior
from .predictive import PredictorSlot

__all__ = ["SavingProgressive", "population_prior", "worth_continuing"]


def population_prior(successes: np.ndarray, trials: np.ndarray, max_strength: float) -> tuple[float, float]:
    """Beta(a, b) of p across this step's prompts, by moments of their observed rates x = s / k
    (empirical Bayes): mean m = sum s / sum k; since Var(x) = v + (m (1 - m) - v) E[1/k] for a
    between-prompt variance v, v = (Var(x) - m (1 - m) h) / (1 - h), h = mean of 1/k; strength
    capped at ``max_strength``. With no trials: Beta(1, 1).

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
    h = float(np.mean(1.0 / k))
    between = float((np.var(s / k) - mean * (1.0 - mean) * h) / (1.0 - h)) if k.size > 1 and h < 1 else 0.0
    var = max(between, mean * (1.0 - mean) / (max_strength + 1.0))
    a, b = beta_from_moments([mean], [var], min_strength=0.1, max_strength=max_strength)
    return float(a[0]), float(b[0])


def worth_continuing(
    value: np.ndarray,
    cost: np.ndarray,
    banked_value: float,
    banked_cost: float,
    elasticity: float = 0.5,
    floor: float = 0.0,
) -> np.ndarray:
    """Which optional spends to make so that the step's progress per rollout, taken as
    V^gamma / C (V the step's expected signal, C its rollouts, gamma = ``elasticity``), is highest:
    starting from what is already spent or committed (``banked_value``, ``banked_cost``), take the
    options in descending order of value / cost while each raises V^gamma / C. For small options this
    is value / cost >= R / gamma, R = V / C the step's signal per rollout so far; gamma = 1 maximises
    the signal per rollout itself (then the taken set is the exact maximiser, a prefix in ratio order).
    ``floor``: a signal per rollout the run has shown it can get; no option below floor / gamma is
    taken, even in a step whose own R is lower (a step where nothing has varied yet has R = 0).

    >>> worth_continuing(np.array([0.1, 1.5, 0.5]), np.array([4, 4, 4]), 2.0, 8.0, elasticity=1.0).tolist()
    [False, True, False]
    >>> worth_continuing(np.array([0.1, 1.5, 0.5]), np.array([4, 4, 4]), 2.0, 8.0).tolist()  # gamma = 1/2
    [False, False, False]
    """
    take = np.zeros(value.size, dtype=bool)
    ratio = np.where(cost > 0, value / np.maximum(cost, 1), -np.inf)
    total_value, total_cost = float(banked_value), float(banked_cost)
    for i in np.argsort(-ratio, kind="stable").tolist():
        if cost[i] <= 0 or value[i] <= 0 or ratio[i] < floor / elasticity:
            break
        new_value, new_cost = total_value + float(value[i]), total_cost + float(cost[i])
        if (
            total_value > 0
            and total_cost > 0
            and new_value**elasticity / new_cost < total_value**elasticity / total_cost
        ):
            break
        take[i] = True
        total_value, total_cost = new_value, new_cost
    return take


class SavingProgressive(BaseAllocator):
    """Pilot, then pay only for rollouts worth the step's average (this library's default;
    docs/saving.md derives the rule).

    A "save" allocator: it spends at most the budget C and never gives a prompt more than
    Uniform's group size n_q (the equal split of C over the Q prompts), so what it does not spend is
    saved, never moved. Per step, with the value of a group a(k; n) from
    `objectives.signal.group_signal` (its update along the prompt's expected direction; 0 for an
    all-equal group under GRPO, Dr. GRPO and RLOO):

    1. belief: Beta((1 - rho) a0 + rho a_q, (1 - rho) b0 + rho b_q) - between a population prior
       (a0, b0) fitted by moments to the previous step's rates (`population_prior`) and the
       predictor's history moment-matched to Beta(a_q, b_q) (strength capped at
       ``max_prior_strength``), by rho in [0, 1], how persistent p has been in this run (measured,
       0 until it can be, as in `GuardedProgressive`): stale or unmeasured history counts for nothing;
    2. before any rollout, prompt q is piloted with probability min(1, V_q / V_0), V_q the expected
       signal of its full group under its belief and V_0 under the population prior alone (a prompt
       the run knows nothing particular about): a prompt without (persistent) history is always
       piloted, and one the belief says is flat is still explored, the more often the less certain
       the belief (its strength is capped) - drift and rare successes get noticed;
    3. pilot: m = min(``pilot``, n_q) rollouts each (4: a 2-rollout pilot shows two failures for a
       prompt with p = 0.1 81% of the time, and cutting such prompts starved the rare successes at a
       cold start on the map; a pilot's flat outcome is still not a verdict, step 4 weighs it
       against the belief); the population prior is refitted to this step's pilots;
    4. rounds: a prompt whose rewards already differ is completed to n_q; a prompt whose rewards
       are all equal gets its next chunk (half of what it lacks) only if the expected signal of
       completing it per rollout still to pay, E[a | data] / (n_q - k_q) under its posterior, is at
       least R / gamma, R the step's expected signal per rollout spent or committed
       (`worth_continuing`: the spend raises the step's V^gamma / C, progress per rollout when
       progress grows as the signal to the power gamma). gamma = ``elasticity`` = 1: a spend is
       made when it brings at least the step's average signal per rollout. One step's progress
       under Adam grows with an elasticity of at most 1/2 (docs/saving.md), but a group cut on a
       flat pilot also loses what later steps would learn from it; on the map gamma = 1/2 cut too
       many prompts with rare successes (both are in docs/saving.md's evidence).
       A step where nothing has varied yet (R = 0) still compares with R_run, the signal per
       generated rollout of the run's last 10 steps: an option below R_run / gamma is never taken.
       Repeat until no prompt continues.

    Nothing here needs tuning: R is measured on the step's own rollouts, R_run, rho and the
    population prior on the run's; at a cold start where every pilot is flat R is 0 and every prompt continues
    (rare successes are not starved). ``saving=False`` completes every group to n_q through the same rounds: Uniform's
    counts, the null control of the benchmarks. Predictor: "beta" (`DiscountedBeta`, history only)
    by default; any predictor name or object (e.g. "gp" with ``features``).

    >>> import numpy as np
    >>> def sample(idx, counts):  # odd prompts always fail, even ones alternate
    ...     return [np.zeros(c) if i % 2 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
    >>> alloc = SavingProgressive(estimator="grpo")
    >>> [len(r) for r in alloc.run(list(range(8)), 64, sample)]  # no history: every flat pilot continues
    [8, 8, 8, 8, 8, 8, 8, 8]
    >>> _ = alloc.run(list(range(8)), 64, sample)
    >>> [len(r) for r in alloc.run(list(range(8)), 64, sample)]  # p persists: flat prompts skipped or cut
    [8, 0, 8, 0, 8, 4, 8, 0]
    >>> m = alloc.last_metrics
    >>> m["rollouts_spent"], m["rollouts_saved"], m["skipped"], m["pre_skipped"], m["cut"]
    (36, 28, 3, 3, 1)
    """

    HISTORY = 10  # steps over which R_run is measured
    name = "saving-progressive"
    kind = "save"
    aggregation_aware = True
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
        elasticity: float = 1.0,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        check_choice("estimator", estimator, ESTIMATORS)
        if aggregation is not None:
            check_choice("aggregation", aggregation, AGGREGATIONS)
        self.slot = PredictorSlot(predictor, features)
        self.estimator, self.aggregation = estimator, aggregation
        self.pilot = check_integer(pilot, "pilot", least=2)
        self.max_prior_strength = check_range(max_prior_strength, "max_prior_strength", 0.0)
        self.saving = bool(saving)
        self.elasticity = check_range(elasticity, "elasticity", 0.0, 1.0, high_closed=True)
        self.tracker = RegimeTracker()
        self.population = (1.0, 1.0)
        self.history: list[tuple[float, int]] = []  # (realised signal, rollouts spent) of the last steps

    @property
    def predictor(self) -> Any:
        return self.slot.predictor

    def run_ratio(self) -> float:
        """R_run: realised signal per generated rollout over the last ``HISTORY`` steps (0 before)."""
        spent = sum(c for _, c in self.history)
        return sum(v for v, _ in self.history) / spent if spent else 0.0

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
        a0, b0 = self._prior(rho, a_h, b_h)
        keep = self._explore(target, a0, b0) if self.saving else np.ones(q, dtype=bool)
        keep &= target >= 2
        collector.draw(np.where(keep, np.minimum(target, self.pilot), 0))
        pilot_s = self._successes(collector.rewards())
        self.population = population_prior(pilot_s, collector.scored, self.max_prior_strength)
        a0, b0 = self._prior(rho, a_h, b_h)
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
        self.history = [*self.history, (self._realised(rewards), spent)][-self.HISTORY :]
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

    @staticmethod
    def _successes(rewards: Rewards) -> np.ndarray:
        return np.array([float(r.sum()) for r in rewards])

    def _prior(self, rho: float, a_h: np.ndarray, b_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Step 1: the prompt's history where it has predicted the next visit, the population prior
        where it has not: pseudo-counts (1 - rho) (a0, b0) + rho (a_q, b_q)."""
        return (1.0 - rho) * self.population[0] + rho * a_h, (1.0 - rho) * self.population[1] + rho * b_h

    def _explore(self, target: np.ndarray, a0: np.ndarray, b0: np.ndarray) -> np.ndarray:
        """Step 2: which prompts are piloted (probability min(1, V_q / V_0))."""
        zeros = np.zeros(target.size, dtype=np.int64)
        pop_a, pop_b = np.full(target.size, self.population[0]), np.full(target.size, self.population[1])
        agg = self._aggregation()
        value = expected_group_signal(target, zeros, zeros, a0, b0, estimator=self.estimator, aggregation=agg)
        fresh = expected_group_signal(target, zeros, zeros, pop_a, pop_b, estimator=self.estimator, aggregation=agg)
        chance = np.clip(value / np.maximum(fresh, 1e-12), 0.0, 1.0)
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
        s = self._successes(rewards)
        varied = np.array([group_has_signal(r) for r in rewards])
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
        take = worth_continuing(
            value[tied], (target - collector.counts)[tied], banked_value, banked_cost, self.elasticity, self.run_ratio()
        )
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
        """The signal of this step's groups: a(k; n) of each (graded rewards: their rounded sum)."""
        total = 0.0
        agg = self._aggregation()
        for r in rewards:
            n = int(r.size)
            if group_has_signal(r):
                total += float(group_signal(self.estimator, n, agg)[int(np.clip(round(float(r.sum())), 1, n - 1))])
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
        """Checks the population prior before anything changes; the tracker and the predictor check
        their own parts (the tracker into a fresh object, so a refused one changes nothing)."""
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
        self.history = [(float(v), int(c)) for v, c in zip(signal, spent)][-self.HISTORY :]

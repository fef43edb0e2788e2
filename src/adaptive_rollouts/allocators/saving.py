"""The recommended default: skip and cut the groups a calibrated belief expects to be all-equal,
giving up at most a fifth of the step's expected signal (a saving allocator: at most the budget,
never more than Uniform's group size per prompt)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..checks.validation import AGGREGATIONS, ESTIMATORS, InfeasibleBudgetError, check_budget, check_choice, check_range
from ..fingerprints import RegimeTracker
from ..objectives.beta import all_equal_beta, stays_flat_beta
from ..objectives.signal import MAX_GROUP, expected_group_signal, known_p_group_signal
from ..predictors.discounted_beta import DiscountedBeta
from ..predictors.flatness import FlatnessPredictor
from ..predictors.lengths import LengthBelief
from ..types import Prediction, Prompt, Rewards, SampleFn, StateDict
from ._pilot import pilot_parameter
from .base import BaseAllocator, RolloutCollector
from .guarded import measured_persistence
from .predictive import PredictorSlot
from .round_plan import RoundPlanner
from .saving_rounds import flat_round
from .saving_rule import (
    FLAT_CHANCE,
    LOSS_SHARE,
    affordable_losses,
    group_stats,
    realised_signal,
    uniform_targets,
    unseen_evidence,
)
from .saving_skip import pilot_sizes, skip_unseen
from .saving_state import carried_belief, load_saving_state, saving_state

__all__ = ["SavingProgressive", "LOSS_SHARE", "affordable_losses"]


class SavingProgressive(BaseAllocator):
    """Skip and cut by a calibrated chance that a group will be all-equal, giving up at most a
    fifth of the step's expected signal (this library's default; docs/saving.md derives the rule
    and measures the share, docs/flatness.md measures the belief).

    A "save" allocator: it spends at most the budget C and never gives a prompt more than
    Uniform's group size n_q (the equal split of C over the Q prompts), so what it does not spend is
    saved, never moved. Per step, with the value of a group a(k; n) from
    `objectives.signal.group_signal` (its update along the prompt's expected direction; 0 for an
    all-equal group under GRPO, Dr. GRPO and RLOO):

    1. belief: p_q ~ Beta(alpha_q, beta_q) from `predictors.flatness.FlatnessPredictor`: the
       policy's own view of the prompt (when the trainer gives it through `observe_policy`), a text
       predictor (when ``predictor`` is one), the prompt's history, combined online and calibrated on
       the run's own groups; so V_q, the expected signal of the prompt's full group, prices
       P(all-equal at n_q) and how sure that is;
    2. before any rollout: the prompts whose V_q / n_q is lowest are skipped while the V_q they give
       up sum to at most ``LOSS_SHARE`` (1/5) of the step's sum_q V_q, among those worth less per
       rollout than the step's average (`affordable_losses`: a belief that cannot tell prompts
       apart, as at a cold start, skips nothing).
       A skipped prompt is still piloted when a draw of p from its belief says it would be worth
       its rollouts (Thompson exploration: drift and rare successes get noticed at the rate the
       belief leaves room for them), and with chance ``EXPLORE_SHARE`` (1/20) in any case (a
       belief that has grown sure still meets drift);
    3. pilot: m = min(``pilot``, n_q) rollouts each (4: a 2-rollout pilot is flat for 81% of the
       prompts with p = 0.1), shortened (``short_pilots``, from a run's second step) to the fewest,
       from 2, whose flat outcome would settle the prompt by the bound of step 4
       (`saving_rule.settling_pilot`): a belief sure a prompt is flat confirms it with 2 or 3
       rollouts, an unsure one gets all 4; at n_q <= 4 the full pilot is the group, and step 2
       is where it saves most: there the bound per group of step 4 acts before any rollout, on the
       belief alone (a prompt worth less per rollout than the average whose group of n_q is
       all-equal with chance at least 1 - ``flat_chance`` is skipped, its loss charged to the
       allowance first);
    4. rounds: a prompt whose rewards already differ is completed to n_q; of those whose rewards
       are all equal, the ones whose completion is worth least per rollout, E[a | data] / (n_q - k_q)
       under the posterior, are cut while the signal given up (steps 2 and 4 together) stays within
       the allowance; whatever the allowance, a flat group whose completion has at most
       ``flat_chance`` (1/10, `FLAT_CHANCE`) of showing a reward that differs under that posterior
       is cut too, its loss charged to the allowance first (the bound per group: it cuts the flat
       groups the belief is sure of even when it cannot tell the step's prompts apart, as at a cold
       start or at n_q = 4); the others get their next chunk (half of what they lack; all of it when
       they are alike, as at a run's first step: no later round could cut one,
       `round_plan.cannot_cut`).
       A prompt piloted only by exploration continues while its completion is worth exploration's
       bar per rollout (its skip was paid for in step 2). Repeat until no prompt continues.

    Weighing by tokens: once the trainer's ``sample`` has given completion lengths (`types.Draw`),
    the cost in steps 2 and 4 (and exploration's bar) is a group's expected tokens instead of its
    rollouts, E[L_q] = p_q m_q(success) + (1 - p_q) m_q(failure) per rollout from
    `predictors.lengths.LengthBelief` (the prompt's history, this step's pilot at a cut, pooled over
    prompts for new ones); the allowance stays a share of signal. Without lengths, and in rounds
    whose lengths are partial (`checks.lengths.LengthsNotice`), every decision is the rollout rule's.

    Pricing rounds: once the trainer also times its rounds (`types.Draw.seconds`), the pilot of
    step 3 and the halving of step 4 are made only where the round they add is expected to save
    more time in tokens than its latency costs (`allocators.round_plan`; a synchronous engine: one
    round a step; told beforehand, `expect_round_times`, one round a step until two are timed);
    without round times, the rounds above.

    Nothing here needs tuning: the belief's spread and the weight of history are chosen by how
    well they predicted this run's groups; the share 1/5, the bound 1/10 and the pilot of 4 are
    structural (docs/saving.md; ``share`` and ``flat_chance`` set others, for studies of them;
    ``flat_chance=None`` turns the bound off; ``bound_skips=True`` applies it before any rollout for
    every prompt, among the prompts worth less than the average, on the belief alone instead of each
    prompt's own flat pilot, ``bound_skips=False`` never, not even where the pilot is the group:
    the rule before it acted there, `saving_rule.bound_before_rollouts`; ``bound_skips="measured"``
    as True once the run has measured that the prompts it would skip yield fewer varied groups per
    rollout than the rest, until they are shown to yield more, `saving_rule.skipping_pays`: logged
    as ``skips_unseen``); ``short_pilots=False``
    keeps every pilot at ``pilot`` (the rule before; pilots are not shortened either while rounds
    are planned from round times, or awaited). ``saving=False`` completes every group to n_q
    through the same rounds: Uniform's counts, the null control of the benchmarks. ``predictor``:
    "beta" (history only, `DiscountedBeta`) by default; any other predictor name or object is used
    as the text source (e.g. "gp" with ``features``), with the history kept beside it.
    ``belief_from``: start the belief from what an earlier run learned (a state file of
    `state.save_state`, or a dict: that run's allocator state or its belief's,
    `saving_state.carried_belief`): the regression of p on the prompt's features and its
    calibration, never the prompt history (docs/flatness.md, "A belief carried from an earlier
    run"); a resumed checkpoint replaces it.

    >>> import numpy as np
    >>> def sample(idx, counts):  # odd prompts always fail, even ones alternate
    ...     return [np.zeros(c) if i % 2 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]
    >>> alloc = SavingProgressive(estimator="grpo")
    >>> [len(r) for r in alloc.run(list(range(8)), 64, sample)]  # no history, yet 4 failures in a row are cut
    [8, 4, 8, 4, 8, 4, 8, 4]
    >>> off = SavingProgressive(estimator="grpo", flat_chance=None)  # without the bound per group
    >>> [len(r) for r in off.run(list(range(8)), 64, sample)]  # nothing to tell prompts apart: nothing cut
    [8, 8, 8, 8, 8, 8, 8, 8]
    >>> for _ in range(5):  # p persists: the flat prompts' pilots are cut, then (history grown) skipped
    ...     _ = alloc.run(list(range(8)), 64, sample)
    >>> [len(r) for r in alloc.run(list(range(8)), 64, sample)]  # p persists: the flat prompts are skipped
    [8, 0, 8, 0, 8, 0, 8, 0]
    >>> m = alloc.last_metrics
    >>> m["rollouts_spent"], m["rollouts_saved"], m["skipped"], m["pre_skipped"], m["cut"]
    (32, 32, 4, 4, 0)
    """

    HISTORY = 10  # steps over which the logged signal per rollout is measured
    share = LOSS_SHARE  # the shipped share; ``share=`` sets another (benchmarks/saving_share.py measures them)
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
        max_prior_strength: float = 32.0,
        saving: bool = True,
        policy: bool = True,
        share: float = LOSS_SHARE,
        flat_chance: float | None = FLAT_CHANCE,
        bound_skips: bool | str | None = None,
        short_pilots: bool = True,
        belief_from: Any = None,
        seed: int | None = 0,
    ):
        super().__init__(seed)
        check_choice("estimator", estimator, ESTIMATORS)
        if aggregation is not None:
            check_choice("aggregation", aggregation, AGGREGATIONS)
        self.slot = PredictorSlot(predictor, features)
        self.estimator, self.aggregation = estimator, aggregation
        self.pilot = pilot_parameter("pilot", pilot)
        self.max_prior_strength = check_range(max_prior_strength, "max_prior_strength", 0.0)
        self.saving = bool(saving)
        self.share = check_range(share, "share", 0.0, 1.0)
        self.flat_chance = None if flat_chance is None else check_range(flat_chance, "flat_chance", 0.0, 1.0)
        if not (bound_skips is None or bound_skips == "measured" or isinstance(bound_skips, (bool, np.bool_))):
            raise ValueError(f"bound_skips must be None, True, False or 'measured', got {bound_skips!r}")
        self.bound_skips = bound_skips if bound_skips is None or isinstance(bound_skips, str) else bool(bound_skips)
        # [varied, rollouts] of the prompts the bound would skip unseen, then of the others, and whether
        # the run skips them ("measured", saving_rule.skipping_pays)
        self.skip_evidence, self.skipping_unseen = np.zeros(4), False
        self.short_pilots = bool(short_pilots)
        self.policy = bool(policy)
        self.tracker = RegimeTracker()
        self.history: list[tuple[float, int]] = []  # (realised signal, rollouts spent) of the last steps
        self._belief: FlatnessPredictor | None = None
        # a learned belief to start from (an earlier run's): checked now, applied when the belief is built
        self._carried = None if belief_from is None else carried_belief(belief_from)
        self.lengths = LengthBelief()  # expected tokens per rollout, once the trainer gives lengths
        self.round_plan = RoundPlanner()  # what a round costs, once the trainer times them (round_plan)

    @property
    def predictor(self) -> Any:
        return self.slot.predictor

    def budget_range(self, num_prompts: int) -> tuple[int, int | None]:
        """Any budget up to groups of `objectives.signal.MAX_GROUP` rollouts (the largest it prices)."""
        return 0, num_prompts * MAX_GROUP

    def _check_budget(self, prompts: Sequence[Prompt], budget: Any) -> int:
        budget = check_budget(budget)
        if budget > len(prompts) * MAX_GROUP:
            raise InfeasibleBudgetError(
                f"budget {budget} is too large for {type(self).__name__} on {len(prompts)} prompts: its groups "
                f"(the equal split) would pass {MAX_GROUP} rollouts, the largest it prices"
            )
        return budget

    @property
    def belief(self) -> Any:
        """The calibrated belief (built on first use around the predictor: its history source when
        the predictor is a `DiscountedBeta`, else its text source beside a history of its own)."""
        if self._belief is None:
            history_only = isinstance(self.predictor, DiscountedBeta)
            belief = FlatnessPredictor(
                history=self.predictor if history_only else True,
                text=None if history_only else self.predictor,
                policy=self.policy,
                max_history_strength=self.max_prior_strength,
                seed=0 if self.seed is None else int(self.seed),
            )
            if self._carried is not None:  # a carried state that does not fit is refused on every use
                belief.load_state_dict(self._carried)
            self._belief = belief
        return self._belief

    @belief.setter
    def belief(self, belief: Any) -> None:
        """Put another belief in place of the learned one (benchmarks: `predictors.reference`, what
        the rule does when it knows more); it must offer what the rule reads of a belief."""
        missing = [m for m in ("belief", "update", "choice", "state_dict", "load_state_dict") if not hasattr(belief, m)]
        if missing or not hasattr(belief, "history"):
            raise ValueError(f"belief: a {type(belief).__name__} lacks {missing or ['history']}")
        self._belief = belief

    def expect_round_times(self) -> None:
        """The trainer will time every round (`types.Draw.seconds`): until two rounds are timed, each
        step goes in one round (`round_plan.RoundPlanner.awaiting_times`). Said by `bridge.TrainerStep`
        with ``time_rounds`` and by the simulator with an engine; not part of the state."""
        self.round_plan.expect_times()

    def observe_policy(self, prompts: Sequence[Prompt], features: np.ndarray) -> None:
        """The policy's feature vector per prompt for the coming step (`types.PolicyAware`):
        checked and kept by the belief (ValueError naming the input on a wrong width or NaN)."""
        self.belief.observe_policy(prompts, features)

    def stores_prompts(self) -> bool:
        """Always: the history and the tracker keep state keyed by prompt."""
        return True

    def run_ratio(self) -> float:
        """Realised signal per generated rollout over the last ``HISTORY`` steps (0 before); logged."""
        spent = sum(c for _, c in self.history)
        return sum(v for v, _ in self.history) / spent if spent else 0.0

    def _aggregation(self) -> str:
        return self.aggregation or "seq-mean"

    def _value(self, target: np.ndarray, k: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return expected_group_signal(target, k, s, a, b, estimator=self.estimator, aggregation=self._aggregation())

    def _hopeless(self, a: np.ndarray, b: np.ndarray, n: np.ndarray, passed: np.ndarray | None = None) -> Any:
        """With ``flat_chance`` set, the options whose chance of carrying any signal is at most it
        under Beta(a, b): a group of n all-equal (``passed`` None), or n more rollouts all repeating
        a flat pilot's reward (``passed``: the pilot's successes; `objectives.beta.stays_flat_beta`);
        None when unset."""
        if self.flat_chance is None:
            return None
        flat = all_equal_beta(a, b, n)[0] if passed is None else stays_flat_beta(a, b, passed, n)
        return flat >= 1.0 - self.flat_chance

    def _value_at(self, n: int, p: np.ndarray) -> np.ndarray:
        return known_p_group_signal(n, p, estimator=self.estimator, aggregation=self._aggregation())

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        start = time.perf_counter()
        prompts, budget, collector, _ = self._begin_rounds(prompts, budget, sample)
        q = len(prompts)
        target = uniform_targets(budget, q, self.rng)
        a0, b0 = self.belief.belief(prompts)
        zeros = np.zeros(q, dtype=np.int64)
        value = self._value(target, zeros, zeros, a0, b0)
        allowance = self.share * float(value.sum())
        # the price of a prompt's group: its rollouts, or their expected tokens once lengths are known
        weigh = self.saving and self.lengths.known
        cost = target * self.lengths.rollout_tokens(prompts, a0 / (a0 + b0)) if weigh else target
        keep, explored, bar, unseen = skip_unseen(self, target, value, cost, a0, b0, allowance)
        probe = explored, bar  # the prompts piloted only by exploration, and its bar
        keep &= target >= 2
        lost = float(value[~keep & (target >= 2)].sum())
        size, plan = pilot_sizes(self, prompts, target, keep, a0, b0, weigh)
        collector.draw(np.where(keep, size, 0))
        flat_pilots = keep & (collector.counts < target) & (collector.scored > 0) & ~group_stats(collector.rewards())[2]
        rounds, stopped = 1, np.zeros(q, dtype=bool)
        while True:
            inc, lost = flat_round(
                self, collector, target, keep & ~stopped, a0, b0, allowance, lost, weigh, plan, probe
            )
            stopped |= keep & (collector.counts > 0) & (collector.counts < target) & (inc == 0)
            if not inc.any():
                break
            collector.draw(inc)
            rounds += 1
        self._check_counts(collector.counts, budget, max(int(target.max()), self.lower))
        rewards = collector.rewards()
        self.belief.update(prompts, rewards)
        lengths = collector.lengths()
        if lengths is not None:
            self.lengths.update(prompts, rewards, lengths)
        for timed in collector.timed_rounds():
            self.round_plan.observe_round(*timed)
        # the share of flat pilots cut (what a pilot's round may save; a step without pilots: none)
        self.round_plan.observe_pilots(int(flat_pilots.sum()), int(np.sum(flat_pilots & (collector.counts < target))))
        self.tracker.update(list(prompts), [np.asarray(r, dtype=float) for r in rewards])
        if unseen is not None:
            self.skip_evidence = unseen_evidence(self.skip_evidence, unseen, collector.counts, group_stats(rewards)[2])
        spent = int(collector.counts.sum())
        realised = realised_signal(rewards, self.estimator, self._aggregation())
        self.history = [*self.history, (realised, spent)][-self.HISTORY :]
        kappa, temper = self.belief.choice()
        extra: dict[str, Any] = {
            "pilot": int(min(self.pilot, int(target.max()))),
            "pre_skipped": int(np.sum(~keep)),
            "explored": int(explored.sum()),
            "cut": int(np.sum(keep & (collector.counts < target))),
            "rounds": rounds,
            "persistence": measured_persistence(self.tracker),
            "belief_spread": kappa,
            "history_weight": temper,
            "signal_given_up": lost / max(float(value.sum()), 1e-12),
            "signal_per_rollout": self.run_ratio(),
        }
        if unseen is not None:
            extra["skips_unseen"] = self.skipping_unseen
        if weigh:
            extra["cost_unit"] = "tokens"
        if plan:
            extra["round_cost"] = self.round_plan.round_cost()
        total = a0 + b0
        prediction = Prediction(a0 / total, a0 * b0 / (total * total * (total + 1.0)))
        return self._finish(prompts, collector, start, prediction, extra, budget=budget)

    def _completion_cost(
        self, collector: RolloutCollector, rows: np.ndarray, lack: np.ndarray, rewards: Rewards, p: np.ndarray
    ) -> np.ndarray:
        """The expected tokens of completing the prompts ``rows`` (``lack`` rollouts each, chance of
        success ``p`` under the posterior): the length belief with this step's lengths so far counted
        in; when the step's lengths are known for some rollouts and not others, rollouts
        (`checks.lengths.LengthsNotice` says so once)."""
        lengths = collector.lengths()
        if lengths is None and collector.lengths_partial:
            self.lengths_notice.say(type(self).__name__)
            return lack
        prompts = [collector.prompts[i] for i in rows.tolist()]
        this_step = None if lengths is None else ([rewards[i] for i in rows], [lengths[i] for i in rows])
        return lack * self.lengths.rollout_tokens(prompts, p, this_step)

    # -- state (`saving_state`: the entries and their checks) ------------------------------------
    def _extra_state(self) -> StateDict:
        return saving_state(self)

    def _load_extra_state(self, state: StateDict) -> None:
        load_saving_state(self, state)

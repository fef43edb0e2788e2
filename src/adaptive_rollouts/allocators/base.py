"""What every allocator shares: input checks, the run loop, seeded randomness, state and metrics.

Two ways to allocate:

- `SingleShotAllocator`: decides all counts before any rollout (`plan` returns a `Plan` value),
  then learns from the rewards (`observe(plan, rewards)`); `run` = plan -> sample once -> observe.
  Trainers that generate outside the allocator (verl, TRL) call `plan` and `observe` themselves.
- progressive allocators (VIGOR, PosteriorProgressive, AR3PO, SpeedRL, the pilots) subclass
  `BaseAllocator`, implement `_run`, and call `sample` several times through a `RolloutCollector`.

Two kinds (`kind`, a class attribute): a "fill" allocator spends exactly the budget it is given, a
"save" allocator at most the budget; both raise `ValueError` before sampling when the budget is
infeasible. A prompt given zero rollouts gets an empty reward array and is counted as skipped in
the metrics, with the rollouts spent and saved.

Public calls (`run`, `plan`, `observe`) are defined here once and wrap the subclass hooks (`_run`,
`_plan`, `_observe`) in `_restoring_state`, so a call that raises - bad input, or a `sample` that
fails in any round - leaves the allocator's state as it was: the generator and every attribute
are put back. The rule subclasses keep for this: between rounds they rebind attributes (the
default's refitted population prior), never mutate them in place; in-place updates (predictor,
tracker, streaks) come after the last `sample` and validate before they mutate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from ..checks.lengths import LengthsNotice, check_lengths, lengths_state
from ..checks.validation import budget_span, check_budget, check_feasible, check_prompts, check_rewards_flat
from ..metrics import step_metrics, token_metrics
from ..state import check_savable_keys, describe
from ..state.checks import restore_on_error
from ..types import AllocatorKind, Draw, Plan, Prediction, Prompt, Rewards, SampleFn, StateDict
from .collector import RolloutCollector, _checked_unscored

__all__ = [
    "BaseAllocator",
    "SingleShotAllocator",
    "RolloutCollector",
    "random_order",
]


def random_order(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """Indices by descending score, ties broken uniformly at random with `rng`."""
    scores = np.asarray(scores, dtype=float)
    tiebreak = rng.random(scores.size)
    return np.lexsort((tiebreak, -scores))


class BaseAllocator:
    """Seeded randomness, state, bounds and metrics shared by every allocator.

    Subclasses set `name` (registry key), `kind` ("fill": exactly the budget; "save": at most),
    `aggregation_aware` (its objective is derived per loss aggregation), `lower` / `upper` (bounds
    on a non-zero count; upper None = unbounded), `allow_skip` (whether a count may be 0), and
    implement `_run`.
    """

    name: str = "base"
    kind: ClassVar[AllocatorKind] = "fill"
    # whether the objective is derived per loss aggregation, so a trainer's ``aggregation`` is passed
    # on (VIP takes one too but then leaves the paper's variance objective, so it says no)
    aggregation_aware: ClassVar[bool] = False
    lower: int = 1
    upper: int | None = None
    allow_skip: bool = False

    def __init__(self, seed: int | None = 0):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.last_metrics: dict[str, Any] | None = None
        # says once per run that a step's lengths were partly missing (shared with `bridge.TrainerStep`)
        self.lengths_notice = LengthsNotice()

    # -- budget ---------------------------------------------------------------------------------
    @contextmanager
    def _restoring_state(self) -> Iterator[None]:
        """If the block raises, put the generator back where it was and every attribute back to
        the object it named (`restore_on_error`: a shallow snapshot, enough because a step rebinds
        what it changes before its last `sample`; see the module docstring)."""
        saved = self.rng.bit_generator.state
        with restore_on_error(self):
            try:
                yield
            except BaseException:
                self.rng.bit_generator.state = saved
                raise

    def budget_range(self, num_prompts: int) -> tuple[int, int | None]:
        """Smallest and largest budget this allocator accepts on `num_prompts` prompts: one it can
        spend exactly ("fill"), or one it can keep to ("save": at most the budget; a saving allocator
        that may skip every prompt accepts any budget >= 0, a budget below its smallest group
        spending nothing)."""
        return budget_span(num_prompts, self.lower, self.upper, self.allow_skip)

    def _check_budget(self, prompts: Sequence[Prompt], budget: Any) -> int:
        """The budget as an int (`check_budget`), feasible for this allocator on these prompts
        (`check_feasible` over `budget_range`; only a "fill" allocator must meet it exactly): the
        entry check of `run` and `plan`."""
        budget = check_budget(budget)
        span = self.budget_range(len(prompts))
        exact = self.kind == "fill"
        return check_feasible(
            budget,
            len(prompts),
            self.lower,
            self.upper,
            self.allow_skip and exact,
            span=span,
            owner=type(self).__name__,
            detail=None if exact else f" (it spends at most the budget; a prompt it keeps gets >= {self.lower}):",
        )

    def _begin_rounds(
        self, prompts: Sequence[Prompt], budget: Any, sample: SampleFn, first_round: int = 0
    ) -> tuple[list, int, RolloutCollector, float]:
        """Common start of a progressive run: validated prompts and budget, a collector, the wall
        clock, and (if ``first_round``) min(first_round, budget // Q) rollouts for every prompt."""
        start = time.perf_counter()
        prompts = check_prompts(prompts)
        budget = self._check_budget(prompts, budget)
        self._check_storable(prompts)
        collector = RolloutCollector(prompts, sample)
        collector.clock.start()
        if first_round:
            collector.draw(np.full(len(prompts), min(first_round, budget // len(prompts)), dtype=np.int64))
        return prompts, budget, collector, start

    def stores_prompts(self) -> bool:
        """Whether this allocator (or its predictor) keeps state keyed by prompt, which a checkpoint
        must be able to hold."""
        slot = getattr(self, "slot", None)
        return slot is not None and bool(getattr(slot.predictor, "stores_prompts", False))

    def _check_storable(self, prompts: list) -> None:
        """Prompts a checkpoint could not hold are refused before any rollout, not at save time."""
        if self.stores_prompts():
            check_savable_keys(prompts)

    def _check_counts(self, counts: np.ndarray, budget: int, upper: int | None = None) -> np.ndarray:
        """Internal invariant: the budget spent exactly ("fill") or not exceeded ("save"), bounds
        respected. A failure is a bug, not bad input."""
        counts = np.asarray(counts, dtype=np.int64)
        upper = self.upper if upper is None else upper
        used = counts > 0
        over = counts.sum() > budget if self.kind == "save" else counts.sum() != budget
        bad = (
            over
            or np.any(counts < 0)
            or (not self.allow_skip and not used.all())
            or np.any(counts[used] < self.lower)
            or (upper is not None and np.any(counts > upper))
        )
        if bad:
            raise RuntimeError(
                f"internal error in {type(self).__name__}: counts {counts.tolist()} "
                f"violate budget {budget} / bounds [{self.lower}, {upper}]"
            )
        return counts

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> StateDict:
        return {"allocator": type(self).__name__, "rng": self.rng.bit_generator.state, **self._extra_state()}

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the allocator's state (generator, learned state, predictor). Every value is
        checked before anything changes; a refused state raises ValueError naming the entry (and
        the file, for a state read by `load_state`) and leaves the allocator as it was."""
        cls = type(self).__name__
        if not isinstance(state, dict):
            raise ValueError(f"{cls} state must be a dict, got {type(state).__name__}")
        if state.get("allocator") != cls:
            raise ValueError(
                f"{describe(state, 'allocator')}: the state is for {state.get('allocator')!r}, not {cls!r}"
            )
        if "rng" not in state:
            raise ValueError(f"{cls} state, {describe(state)}: missing key 'rng'")
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError, OverflowError) as err:
            raise ValueError(f"{cls} state, {describe(state, 'rng')}: not a PCG64 generator state ({err!r})") from None
        with restore_on_error(self):
            self._load_extra_state(state)
            self.rng = rng

    def _extra_state(self) -> StateDict:
        return {}

    def _load_extra_state(self, state: StateDict) -> None:
        pass

    # -- protocol -------------------------------------------------------------------------------
    def run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        """Spend ``budget`` rollouts (exactly, or at most for a "save" allocator) over ``prompts``
        through ``sample``; returns every prompt's rewards (empty for a skipped prompt)."""
        with self._restoring_state():
            return self._run(prompts, budget, sample)

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        raise NotImplementedError

    def _finish(
        self,
        prompts: list,
        collector: RolloutCollector,
        wall_start: float,
        prediction: Prediction | None = None,
        extra: dict | None = None,
        budget: int | None = None,
    ) -> Rewards:
        rewards = collector.rewards()
        wall = collector.clock.stop()  # since _begin_rounds, sampling out
        # counts of what was generated (unscored rollouts included), reward statistics of what was scored
        self.last_metrics = step_metrics(
            prompts, collector.scored, rewards, prediction, wall, budget=budget, generated=collector.counts
        )
        self.last_metrics.update(self._token_values(collector.lengths(), collector.lengths_partial, budget))
        if extra:
            self.last_metrics.update(extra)
        return rewards

    def _token_values(self, lengths: list[np.ndarray] | None, partial: bool, budget: int | None) -> dict[str, Any]:
        """`metrics.token_metrics` of the step when every rollout came with its length (nothing
        otherwise; a step with lengths for only some rollouts says so once, `LengthsNotice`). A "fill"
        allocator that was not told its budget spent exactly it."""
        if partial:
            notice = getattr(self, "lengths_notice", None)
            if not isinstance(notice, LengthsNotice):
                notice = self.lengths_notice = LengthsNotice()
            notice.say(f"{type(self).__name__}.run")
        if lengths is None:
            return {}
        if budget is None and self.kind == "fill":
            budget = int(sum(len(g) for g in lengths))
        return token_metrics(lengths, budget)

    def _add_metrics(self, extra: dict[str, Any]) -> None:
        """Extend this step's `last_metrics` (set by the step that just ran)."""
        if self.last_metrics is None:
            raise RuntimeError(f"internal error in {type(self).__name__}: no metrics to extend")
        self.last_metrics.update(extra)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lower={self.lower}, upper={self.upper}, seed={self.seed})"


class SingleShotAllocator(BaseAllocator):
    """plan -> sample once -> observe. Subclasses implement `_plan` (and `_predict` / `_observe` to
    learn)."""

    def plan(self, prompts: Sequence[Prompt], budget: int) -> Plan:
        """The step's `Plan`: counts per prompt (sum == budget, or <= budget for a "save"
        allocator) without sampling anything; give it back to `observe` with the rewards."""
        with self._restoring_state():
            start = time.perf_counter()
            prompts = check_prompts(prompts)
            budget = self._check_budget(prompts, budget)
            self._check_storable(prompts)
            prediction = self._predict(prompts)
            counts = self._check_counts(self._plan(prompts, budget, prediction), budget)
            return Plan(prompts, counts, budget, prediction, time.perf_counter() - start)

    def observe(self, plan: Plan | Sequence[Prompt], rewards: Sequence[np.ndarray]) -> None:
        """Learn from this step's rewards (one array per prompt, its length the rollouts scored) and
        set `last_metrics`. ``plan`` is the `Plan` they were drawn for (its prediction, budget and
        planning time enter the metrics), or the prompts alone. ``rewards`` may be a `Draw` with
        each rollout's completion length (``lengths``; then ``tokens_spent`` / ``tokens_saved`` enter
        the metrics) and its ``unscored`` rollouts."""
        with self._restoring_state():
            start = time.perf_counter()
            if not isinstance(plan, Plan):
                plan = Plan(check_prompts(plan), np.zeros(0, dtype=np.int64), -1)
            checked, flat, sizes = check_rewards_flat(plan.prompts, rewards)
            assert checked is not None
            self._check_storable(plan.prompts)
            lengths: list[np.ndarray | None] = [None] * len(plan.prompts)
            if isinstance(rewards, Draw) and rewards.lengths is not None:
                room = (
                    plan.counts - sizes
                    if plan.counts.shape == sizes.shape
                    else np.full(sizes.shape, np.iinfo(np.int64).max)
                )
                unscored = _checked_unscored(rewards.unscored, room, plan.prompts)
                lengths = check_lengths(plan.prompts, rewards.lengths, sizes + unscored, source="observe(...)")
            spent = int(plan.counts.sum()) if plan.budget >= 0 else int(sizes.sum())
            state = lengths_state(lengths)
            known = [g for g in lengths if g is not None] if state == "complete" else None
            self._observe_checked(plan, checked, flat, start, spent, known, state == "partial")

    def _observe_checked(
        self,
        plan: Plan,
        rewards: list[np.ndarray],
        flat: np.ndarray | None,
        start: float,
        spent: int,
        lengths: list[np.ndarray] | None = None,
        lengths_partial: bool = False,
    ) -> None:
        """`observe` on input already checked (by `observe`, or by the collector inside `run`)."""
        self._observe(plan.prompts, rewards)
        counts = np.fromiter(map(len, rewards), dtype=np.int64, count=len(rewards))
        wall = plan.seconds + time.perf_counter() - start
        budget = plan.budget if plan.budget >= 0 else None
        # what the plan gave each prompt (the rollouts generated), not only those that came back scored
        made = plan.counts if plan.counts.shape == counts.shape and np.all(plan.counts >= counts) else counts
        self.last_metrics = step_metrics(
            plan.prompts, counts, rewards, plan.prediction, wall, flat=flat, budget=budget, spent=spent, generated=made
        )
        self.last_metrics.update(self._token_values(lengths, lengths_partial, budget))

    def _run(self, prompts: Sequence[Prompt], budget: int, sample: SampleFn) -> Rewards:
        plan = self.plan(prompts, budget)
        collector = RolloutCollector(plan.prompts, sample)
        collector.draw(plan.counts)  # plan.counts: what was generated, so unscored ones are not "skipped"
        start = time.perf_counter()
        rewards = collector.rewards()
        spent = int(collector.counts.sum())
        self._observe_checked(
            plan, rewards, collector.flat(), start, spent, collector.lengths(), collector.lengths_partial
        )
        return rewards

    def _predict(self, prompts: list) -> Prediction | None:
        """The belief the plan is made from (None: this allocator uses none)."""
        return None

    def _plan(self, prompts: list, budget: int, prediction: Prediction | None) -> np.ndarray:
        raise NotImplementedError

    def _observe(self, prompts: list, rewards: list[np.ndarray]) -> None:
        pass

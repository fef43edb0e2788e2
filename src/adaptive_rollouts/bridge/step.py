"""One trainer step, written once for every trainer (TRL, verl, a third one): `TrainerStep`.

A trainer gives it the allocator, the success signal (`success.SuccessSignal`) and, per step, the
prompt keys, the budget and one callable of its own that plays a *round*:

    generate(indices, counts) -> one group of raw rewards per asked prompt

(``counts[j]`` new rollouts of ``keys[indices[j]]``, scored by the trainer's reward; None / NaN: a
rollout nobody could score; a group shorter than asked: the rest failed, spent without a reward),
or a `book.Generated` of those groups and each rollout's completion length in tokens, which the step
checks (`checks.lengths.check_lengths`, at most ``max_length``), hands to the allocator in its
`types.Draw` and turns into ``tokens_spent`` / ``tokens_saved`` (`metrics.token_metrics`) and their
running totals.
`TrainerStep.run` then owns everything between the trainer and the allocator: the allocator's
``sample`` around ``generate`` (each request checked, refused before anything is generated when it
would pass the budget), the rewards mapped to successes in [0, 1] a round at a time, the counts,
successes, raw rewards, unscored rollouts and rounds of the step, the allocator clock
(`clock.AllocatorClock`), the policy's features for an allocator that reads them
(`types.PolicyAware`, before it allocates), the metrics (computed once: the allocator's own
``last_metrics``, or `metrics.step_metrics` of what was generated for an allocator without them),
one regime tracker fed the successes, and the running totals. `StepResult.log` is what the trainer
logs. Single-shot trainers that generate outside the allocator (verl) use `TrainerStep.plan` and
`TrainerStep.observe` instead of `run`.

>>> import numpy as np
>>> from adaptive_rollouts.allocators import Uniform
>>> step = TrainerStep(Uniform())
>>> result = step.run(["a", "b"], 4, lambda idx, cnt: [[1.0, -1.0][: int(c)] for c in cnt])
>>> result.counts.tolist(), [s.tolist() for s in result.successes], result.log()["adaptive/rollouts_spent"]
([2, 2], [[1.0, 0.0], [1.0, 0.0]], 4.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptive_rollouts.allocators.round_plan import check_seconds
from adaptive_rollouts.checks.lengths import LengthsNotice
from adaptive_rollouts.checks.validation import check_choice, check_integer
from adaptive_rollouts.clock import AllocatorClock
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.metrics import step_metrics, token_metrics
from adaptive_rollouts.sim.step_time import ENGINES
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw, PolicyAware, ReportsMetrics, allocator_kind

from .book import Generated, RoundFn, RoundIncomplete, RunningTotals, StepBook
from .logs import scalar
from .steps import check_counts, check_request, check_spent, plan_or_prompts

__all__ = ["NOT_LOGGED", "PlannedStep", "StepResult", "TrainerStep", "check_policy_features", "round_clock"]

INCOMPLETE_KEYS = ("num_prompts", "rollouts_spent", "unscored", "budget", "rollouts_saved", "skipped")
"""What an incomplete step (`RoundIncomplete`) reports: what it spent, not statistics of cut groups."""

TOKEN_KEYS = ("tokens_spent", "tokens_saved")
"""What a step with completion lengths adds (`metrics.token_metrics`), computed by the step for every allocator."""

NOT_LOGGED = ("budget",)
"""Step values that are the trainer's own setting, the same every step: kept in `StepResult.values`,
not logged; ``budget_share_total`` says how much of the budget was spent."""


@dataclass
class StepResult:
    """One step as the trainer needs it: per prompt ``counts`` (rollouts generated), scored
    ``successes`` (what the allocator saw) and ``raw`` rewards; ``unscored`` (spent, no reward),
    ``rounds``, ``allocator_seconds`` (generation out), ``policy_seconds`` (the policy-features pass,
    None without one; logged with ``policy_share``, its share of the step's wall time: the pass, the
    allocator and the generation rounds), ``incomplete`` (the allocator's run was cut short, `RoundIncomplete`),
    ``values`` (the step's metrics, computed once), ``regime`` (the fingerprints after this step) and
    ``totals`` (`RunningTotals.values` after this step)."""

    keys: list
    budget: int
    counts: np.ndarray
    successes: list[np.ndarray]
    raw: list[np.ndarray]
    unscored: int
    rounds: int
    allocator_seconds: float
    policy_seconds: float | None
    incomplete: bool
    values: dict[str, Any]
    regime: dict[str, float] = field(default_factory=dict)
    totals: dict[str, Any] = field(default_factory=dict)

    @property
    def spent(self) -> int:
        return int(self.counts.sum())

    def log(self, extra: Mapping[str, Any] | None = None, prefix: str = "adaptive/") -> dict[str, float]:
        """``prefix + name`` -> float, one key per quantity: the step's values, the running totals and
        the trainer's ``extra``; then ``regime/...``. Nothing None, NaN, non-numeric or constant
        (`NOT_LOGGED`)."""
        merged = {**self.values, **self.totals, **(extra or {})}
        out = {
            prefix + name: number
            for name, value in merged.items()
            if name not in NOT_LOGGED and (number := scalar(value)) is not None and np.isfinite(number)
        }
        out.update({name: float(v) for name, v in self.regime.items() if np.isfinite(v)})
        return out


@dataclass
class PlannedStep:
    """A single-shot step between `TrainerStep.plan` and `TrainerStep.observe`."""

    keys: list
    budget: int
    plan: Any
    counts: np.ndarray
    clock: AllocatorClock
    policy_seconds: float | None
    began: float = 0.0  # perf_counter at plan: the step's wall time runs from here to observe


def check_policy_features(features: Any, n_prompts: int, width: int | None = None) -> np.ndarray:
    """``policy_features``'s answer as float32 ``[n_prompts, width]``, finite (``width``: the run's,
    once known). Raises ValueError naming ``policy_features`` otherwise.

    >>> check_policy_features([[1, 2], [3, 4]], 2).dtype
    dtype('float32')
    """
    try:
        arr = np.asarray(features, dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise ValueError(f"policy_features returned something that is not a float array ({err})") from None
    if arr.ndim != 2 or arr.shape[0] != n_prompts or arr.shape[1] == 0:
        raise ValueError(f"policy_features returned shape {arr.shape}, expected ({n_prompts}, width): one row a prompt")
    if width is not None and arr.shape[1] != width:
        raise ValueError(f"policy_features returned width {arr.shape[1]}, earlier steps gave {width}")
    if not np.all(np.isfinite(arr)):
        rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))[:10].tolist()
        raise ValueError(f"policy_features returned NaN or inf (rows {rows})")
    return arr


def round_clock(time_rounds: Any, option: str = "time_rounds") -> Callable[[float, float], float] | None:
    """The engine model a ``time_rounds`` value names: None for True or False (the wall clock or
    nothing), the engine's ``round_seconds`` for a name of `sim.step_time.ENGINES`
    (``"synchronous"``: a round lasts its longest completion), a callable
    ``seconds(longest, tokens)`` as it is; a ValueError naming ``option`` otherwise.

    >>> round_clock(True) is None, round_clock("synchronous")(120.0, 900.0)
    (True, 120.0)
    """
    if isinstance(time_rounds, bool):
        return None
    if isinstance(time_rounds, str):
        check_choice(option, time_rounds, tuple(ENGINES))
        return ENGINES[time_rounds].round_seconds
    if callable(time_rounds):
        return time_rounds
    raise ValueError(
        f"{option} must be true, false, an engine ({', '.join(ENGINES)}) or seconds(longest, tokens), "
        f"got {type(time_rounds).__name__}"
    )


class TrainerStep:
    """The step every trainer runs (see the module docstring).

    ``policy_features(prompts) -> [Q, width]``: the policy's view of each prompt, given to an
    allocator that offers ``observe_policy`` (`types.PolicyAware`) once per step before it
    allocates; for any other allocator it is never called. ``totals``: the running totals (restored
    from a checkpoint by the trainer). ``max_length``: the trainer's largest completion length in
    tokens (TRL's ``max_completion_length``), which no rollout's length may pass (None: no limit).
    ``time_rounds``: hand each round's time to the allocator (`types.Draw.seconds`), so that the
    default prices a generation round against the tokens it saves (`allocators.round_plan`):
    True, the wall clock; or a model of the engine (`round_clock`: a name of
    `sim.step_time.ENGINES` or ``seconds(longest, tokens)``), the engine a run is sized for, not
    the machine it is tried on; deterministic, so a rerun with the same seeds allocates alike; it
    needs the completion lengths, a ValueError naming ``time_rounds`` otherwise. Off by default,
    because with the wall clock the allocation depends on the machine's timings."""

    def __init__(
        self,
        allocator: Any,
        signal: SuccessSignal | None = None,
        *,
        regime: RegimeTracker | None = None,
        policy_features: Callable[[Sequence[Any]], Any] | None = None,
        totals: RunningTotals | None = None,
        max_length: int | None = None,
        time_rounds: bool | str | Callable[[float, float], float] = False,
    ):
        self.allocator = allocator
        self.round_seconds = round_clock(time_rounds)
        self.time_rounds = self.round_seconds is not None or time_rounds is True
        expect_times = getattr(allocator, "expect_round_times", None)
        if self.time_rounds and expect_times is not None:  # it prices rounds once two are timed
            expect_times()
        self.kind = allocator_kind(allocator)
        self.signal = SuccessSignal() if signal is None else signal
        self.regime = RegimeTracker() if regime is None else regime
        self.policy_features = policy_features
        self.totals = RunningTotals() if totals is None else totals
        self.max_length = None if max_length is None else check_integer(max_length, "max_length", least=1)
        # one notice for the run: the allocator's own when it has one, so partly missing lengths are said once
        notice = getattr(allocator, "lengths_notice", None)
        self.lengths_notice = notice if isinstance(notice, LengthsNotice) else LengthsNotice()
        self._width: int | None = None
        self.who = f"allocator {type(allocator).__name__}"

    # -- the policy's view ------------------------------------------------------------------------
    def reads_policy(self) -> bool:
        """Whether a policy-features pass runs each step (given, and the allocator reads it)."""
        return self.policy_features is not None and isinstance(self.allocator, PolicyAware)

    def _observe_policy(self, keys: Sequence[Hashable], prompts: Sequence[Any] | None) -> float | None:
        """``policy_features`` reads ``prompts`` (default: the keys); the allocator gets the features
        under the keys its ``run`` / ``plan`` will get (a trainer's rows need not be hashable)."""
        if not self.reads_policy():
            return None
        assert self.policy_features is not None
        start = time.perf_counter()
        read = list(keys) if prompts is None else list(prompts)
        features = check_policy_features(self.policy_features(read), len(keys), self._width)
        self._width = features.shape[1]
        self.allocator.observe_policy(list(keys), features)
        return time.perf_counter() - start

    # -- progressive: run -------------------------------------------------------------------------
    def run(
        self,
        keys: Sequence[Hashable],
        budget: int,
        generate: RoundFn,
        prompts: Sequence[Any] | None = None,
        book: StepBook | None = None,
    ) -> StepResult:
        """``allocator.run(keys, budget, sample)`` with ``sample`` playing ``generate``'s rounds.
        ``prompts``: what ``policy_features`` reads (default: the keys); ``book``: a `StepBook` (or a
        trainer's subclass keeping its own extras) to fill."""
        keys, budget = list(keys), int(budget)
        began = time.perf_counter()
        book = StepBook(keys, signal=self.signal) if book is None else book
        policy_seconds = self._observe_policy(keys, prompts)
        clock = AllocatorClock()

        def sample(indices: Any, counts: Any) -> Draw:
            with clock.paused():  # the trainer's generation and scoring are not the allocator's time
                idx, cnt = check_request(indices, counts, len(keys))
                book.reserve(idx, cnt, budget, self.who)
                began_round = time.perf_counter()
                try:
                    raws = generate(idx, cnt)
                except RoundIncomplete as err:
                    if err.raws is not None:
                        book.add(idx, err.raws, cnt, self.max_length)
                    raise
                draw = book.add(idx, raws, cnt, self.max_length)
                if self.time_rounds:  # the round's time (allocators.round_plan)
                    draw.seconds = self._round_time(draw, time.perf_counter() - began_round)
                return draw

        incomplete = False
        with clock.running():
            try:
                self.allocator.run(keys, budget, sample)
            except RoundIncomplete:
                incomplete = True
        if not incomplete:
            check_spent(book.requested, budget, self.kind, self.who)
        return self._result(book, budget, clock.seconds, policy_seconds, incomplete, time.perf_counter() - began)

    def _round_time(self, draw: Draw, wall: float) -> float:
        """The round's seconds: the wall clock, or the engine model's of its lengths."""
        if self.round_seconds is None:
            return wall
        lengths = draw.lengths
        if lengths is None or any(x is None for x in lengths):
            raise ValueError(
                "time_rounds: an engine model prices a round by its completion lengths, and generate "
                "returned none for this round (return a Generated with lengths, or time_rounds=True)"
            )
        sizes = [np.asarray(x) for x in lengths if np.size(x)]
        if not sizes:
            return 0.0
        flat = np.concatenate(sizes)
        seconds = check_seconds(
            self.round_seconds(float(flat.max()), float(flat.sum())), "time_rounds(longest, tokens)"
        )
        if seconds is None:
            raise ValueError(
                "time_rounds(longest, tokens) returned None: an engine model must give the round's seconds"
            )
        return seconds

    # -- single-shot: plan, then observe ----------------------------------------------------------
    def plan(self, keys: Sequence[Hashable], budget: int, prompts: Sequence[Any] | None = None) -> PlannedStep:
        """``allocator.plan(keys, budget)``, its counts checked; give the result back to `observe`."""
        keys, budget = list(keys), int(budget)
        began = time.perf_counter()
        policy_seconds = self._observe_policy(keys, prompts)
        clock = AllocatorClock()
        with clock.running():
            plan = self.allocator.plan(keys, budget)
        counts = check_counts(plan, len(keys), budget, self.kind, self.who)
        return PlannedStep(keys, budget, plan_or_prompts(plan, keys), counts, clock, policy_seconds, began)

    def observe(
        self, planned: PlannedStep, raws: Sequence[Any] | Generated, book: StepBook | None = None
    ) -> StepResult:
        """The planned step's raw rewards (one group per prompt, at most its count; or a `Generated`
        with their completion lengths) to ``observe`` (a `types.Draw` with the lengths, when given)."""
        book = StepBook(planned.keys, signal=self.signal) if book is None else book
        book.reserve(np.arange(len(planned.keys)), planned.counts, planned.budget, self.who)
        book.add(np.arange(len(planned.keys)), raws, planned.counts, self.max_length)
        with planned.clock.running():
            self.allocator.observe(planned.plan, book.draw())
        wall = time.perf_counter() - planned.began
        return self._result(book, planned.budget, planned.clock.seconds, planned.policy_seconds, False, wall)

    # -- the result -------------------------------------------------------------------------------
    def _own_metrics(self, book: StepBook, incomplete: bool) -> dict[str, Any] | None:
        """The allocator's ``last_metrics`` of this step, if it has them (`types.ReportsMetrics`)."""
        if incomplete or not isinstance(self.allocator, ReportsMetrics):
            return None  # an incomplete step's allocator did not finish: its metrics are the last step's
        own = self.allocator.last_metrics
        if own is None or own.get("rollouts_spent") != int(book.requested.sum()):
            return None  # not this step's (an allocator object that does not set them each step)
        return dict(own) if own.get("num_prompts") == len(book.prompts) else None

    def _result(
        self,
        book: StepBook,
        budget: int,
        seconds: float,
        policy_seconds: float | None,
        incomplete: bool,
        wall: float,
    ) -> StepResult:
        successes = book.successes()
        values = self._own_metrics(book, incomplete)
        if values is None:  # an allocator without metrics, or a step it did not finish
            scored = np.array([s.size for s in successes], dtype=np.int64)
            values = dict(step_metrics(book.prompts, scored, successes, budget=budget, generated=book.requested))
        if incomplete:  # the groups are cut short: what was spent, not statistics of unfinished groups
            values = {k: values[k] for k in INCOMPLETE_KEYS}
        for name in TOKEN_KEYS:  # the step's own count below, the same for every allocator
            values.pop(name, None)
        if book.lengths_partial:
            self.lengths_notice.say(f"the step of {self.who}")
        lengths = book.lengths()
        tokens = None if lengths is None else token_metrics(lengths, budget)
        values.update(tokens or {})
        spent = int(book.requested.sum())
        values["budget"], values["rollouts_saved"] = budget, budget - spent  # the step's, whatever the allocator knew
        values["allocator_seconds"] = seconds  # the trainer's clock: one measure for every allocator
        values["rounds"] = book.rounds
        values["incomplete_step"] = int(incomplete)
        if policy_seconds is not None:
            values["policy_seconds"] = policy_seconds
            values["policy_share"] = min(1.0, policy_seconds / wall) if wall > 0 else 0.0  # of the step's time
        self.regime.update(book.prompts, successes)  # one tracker, one signal: what the allocator saw
        self.totals.add(spent, budget, tokens)
        return StepResult(
            keys=book.prompts,
            budget=budget,
            counts=book.requested.copy(),
            successes=successes,
            raw=book.raw_rewards(),
            unscored=spent - sum(s.size for s in successes),
            rounds=book.rounds,
            allocator_seconds=seconds,
            policy_seconds=policy_seconds,
            incomplete=incomplete,
            values=values,
            regime=self.regime.metrics(),
            totals=self.totals.values(),
        )

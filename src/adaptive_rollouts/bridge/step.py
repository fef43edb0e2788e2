"""One trainer step, written once for every trainer (TRL, verl, a third one): `TrainerStep`.

A trainer gives it the allocator, the success signal (`success.SuccessSignal`) and, per step, the
prompt keys, the budget and one callable of its own that plays a *round*:

    generate(indices, counts) -> one group of raw rewards per asked prompt

(``counts[j]`` new rollouts of ``keys[indices[j]]``, scored by the trainer's reward; None / NaN: a
rollout nobody could score; a group shorter than asked: the rest failed, spent without a reward).
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

from adaptive_rollouts.clock import AllocatorClock
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.metrics import step_metrics
from adaptive_rollouts.state.checks import StateReader
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw, PolicyAware, ReportsMetrics, StateDict, allocator_kind

from .logs import scalar
from .steps import check_counts, check_request, check_spent, plan_or_prompts, scored_draw

__all__ = [
    "NOT_LOGGED",
    "PerPrompt",
    "PlannedStep",
    "RoundFn",
    "RoundIncomplete",
    "RunningTotals",
    "StepBook",
    "StepResult",
    "TrainerStep",
    "check_policy_features",
]

RoundFn = Callable[[np.ndarray, np.ndarray], Sequence[Any]]
"""``generate(indices, counts)``: one group of raw rewards per asked prompt (see the module docstring)."""

NOT_LOGGED = ("budget",)
"""Step values that are the trainer's own setting, the same every step: kept in `StepResult.values`,
not logged; ``budget_share_total`` says how much of the budget was spent."""


class PerPrompt:
    """A round built from a framework's two callables, for trainers that generate one prompt at a
    time: ``generate(prompt, n)`` -> n completions, ``reward(prompt, completion)`` -> a score in any
    range (None: unscored). Keeps every completion and raw reward per prompt (``completions``,
    ``rewards``), in the order generated.

    >>> rounds = PerPrompt(["a"], lambda p, n: [p] * n, lambda p, c: 1.0)
    >>> rounds([0], [2]), rounds.completions
    ([[1.0, 1.0]], [['a', 'a']])
    """

    def __init__(
        self,
        prompts: Sequence[Any],
        generate: Callable[[Any, int], Sequence[Any]],
        reward: Callable[[Any, Any], float | None],
    ):
        self.prompts = list(prompts)
        self.generate, self.reward = generate, reward
        self.completions: list[list] = [[] for _ in self.prompts]
        self.rewards: list[list] = [[] for _ in self.prompts]

    def __call__(self, indices: Any, counts: Any) -> list[list]:
        groups = []
        for i, n in zip(np.asarray(indices).tolist(), np.asarray(counts).tolist()):
            new = list(self.generate(self.prompts[i], n)) if n else []
            if len(new) != n:
                raise ValueError(f"generate({self.prompts[i]!r}, {n}) returned {len(new)} completions")
            scores = [self.reward(self.prompts[i], c) for c in new]
            self.completions[i] += new
            self.rewards[i] += scores
            groups.append(scores)
        return groups


class RoundIncomplete(RuntimeError):
    """Raised by a trainer's ``generate`` when it could not deliver a round (verl: sessions still
    failing after its retries). ``raws``: what it did produce for the asked prompts (or None). The
    allocator's run stops there and leaves its state as before the step; the step result keeps what
    was generated, marked ``incomplete``."""

    def __init__(self, message: str, raws: Sequence[Any] | None = None):
        super().__init__(message)
        self.raws = raws


class StepBook:
    """What one step generated, per prompt: rollouts asked (``requested``), scored successes, scored
    raw rewards, unscored and missing (failed) rollouts, rounds. `add` maps one round's raw rewards
    at once (`steps.scored_draw`) and returns the `Draw` the allocator gets."""

    def __init__(self, prompts: Sequence[Hashable], requested: Any = None, signal: SuccessSignal | None = None):
        self.prompts = list(prompts)
        n = len(self.prompts)
        self.requested = np.zeros(n, dtype=np.int64) if requested is None else np.asarray(requested, dtype=np.int64)
        self.signal = SuccessSignal() if signal is None else signal
        self._success: list[list[float]] = [[] for _ in range(n)]
        self._raw: list[list[float]] = [[] for _ in range(n)]
        self.unscored = 0  # rollouts generated whose reward is None / NaN
        self.missing = 0  # rollouts asked that came back without any record (failed)
        self.rounds = 0

    def reserve(self, indices: np.ndarray, counts: np.ndarray, budget: int, who: str) -> None:
        """Book a round's request, refused (before anything is generated) past the budget."""
        asked = int(self.requested.sum() + counts.sum())
        if asked > budget:
            raise ValueError(
                f"{who} asked for {int(counts.sum())} more rollouts in round {self.rounds + 1} after "
                f"spending {int(self.requested.sum())}: over the budget {budget} (it asked for {asked} "
                f"rollouts this step in all, the budget is {budget})"
            )
        self.requested[indices] += counts
        self.rounds += 1

    def add(self, indices: Any, raws: Sequence[Any], asked: Any) -> Draw:
        """One round: prompt ``indices[j]`` got raw rewards ``raws[j]`` for ``asked[j]`` rollouts (fewer:
        the rest failed). Returns the allocator's `Draw` (scored successes; unscored = asked - scored)."""
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        asked = np.asarray(asked, dtype=np.int64).reshape(-1)
        groups = [np.atleast_1d(np.asarray(r, dtype=object)).ravel().tolist() for r in raws]
        if len(groups) != len(idx):
            raise ValueError(f"generate returned {len(groups)} reward groups for {len(idx)} asked prompts")
        for i, g, n in zip(idx, groups, asked.tolist()):
            if len(g) > n:
                raise ValueError(f"generate returned {len(g)} rewards for prompt {self.prompts[i]!r}, asked {n}")
        draw = scored_draw(self.signal, groups, [self.prompts[i] for i in idx])
        unscored = np.zeros(len(idx), dtype=np.int64)
        for j, (i, g, scored, n) in enumerate(zip(idx, groups, draw, asked.tolist())):
            raw = np.array([np.nan if r is None else float(r) for r in g], dtype=float)
            self._success[i].extend(scored.tolist())
            self._raw[i].extend(raw[~np.isnan(raw)].tolist())
            self.unscored += int(draw.unscored[j])
            self.missing += n - len(g)
            unscored[j] = n - scored.size
        return Draw(list(draw), unscored)

    def successes(self) -> list[np.ndarray]:
        return [np.asarray(s, dtype=float) for s in self._success]

    def raw_rewards(self) -> list[np.ndarray]:
        return [np.asarray(r, dtype=float) for r in self._raw]

    @property
    def delivered(self) -> np.ndarray:
        return np.array([len(s) for s in self._success], dtype=np.int64)


@dataclass
class RunningTotals:
    """Rollouts spent and budgeted since the start of the run (part of a trainer's checkpoint, so a
    resumed run logs the totals of an uninterrupted one).

    >>> t = RunningTotals(); t.add(24, 32); t.add(32, 32); t.values()
    {'rollouts_spent_total': 56, 'rollouts_saved_total': 8, 'budget_share_total': 0.875}
    """

    steps: int = 0
    rollouts_spent: int = 0
    budget: int = 0

    def add(self, spent: int, budget: int) -> None:
        self.steps += 1
        self.rollouts_spent += int(spent)
        self.budget += int(budget)

    def values(self) -> dict[str, Any]:
        return {
            "rollouts_spent_total": self.rollouts_spent,
            "rollouts_saved_total": self.budget - self.rollouts_spent,
            "budget_share_total": self.rollouts_spent / self.budget if self.budget else 0.0,
        }

    def state_dict(self) -> StateDict:
        return {"steps": self.steps, "rollouts_spent": self.rollouts_spent, "budget": self.budget}

    def load_state_dict(self, state: StateDict) -> None:
        """Checked whole before anything changes: ValueError naming the entry otherwise."""
        reader = StateReader(state, "RunningTotals", ["steps", "rollouts_spent", "budget"])
        steps, spent, budget = (reader.integer(k, low=0) for k in ("steps", "rollouts_spent", "budget"))
        if spent > budget:
            raise ValueError(f"RunningTotals state: rollouts_spent {spent} exceeds budget {budget}")
        self.steps, self.rollouts_spent, self.budget = steps, spent, budget


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


class TrainerStep:
    """The step every trainer runs (see the module docstring).

    ``policy_features(prompts) -> [Q, width]``: the policy's view of each prompt, given to an
    allocator that offers ``observe_policy`` (`types.PolicyAware`) once per step before it
    allocates; for any other allocator it is never called. ``totals``: the running totals (restored
    from a checkpoint by the trainer)."""

    def __init__(
        self,
        allocator: Any,
        signal: SuccessSignal | None = None,
        *,
        regime: RegimeTracker | None = None,
        policy_features: Callable[[Sequence[Any]], Any] | None = None,
        totals: RunningTotals | None = None,
    ):
        self.allocator = allocator
        self.kind = allocator_kind(allocator)
        self.signal = SuccessSignal() if signal is None else signal
        self.regime = RegimeTracker() if regime is None else regime
        self.policy_features = policy_features
        self.totals = RunningTotals() if totals is None else totals
        self._width: int | None = None
        self.who = f"allocator {type(allocator).__name__}"

    # -- the policy's view ------------------------------------------------------------------------
    def reads_policy(self) -> bool:
        """Whether a policy-features pass runs each step (given, and the allocator reads it)."""
        return self.policy_features is not None and isinstance(self.allocator, PolicyAware)

    def _observe_policy(self, prompts: Sequence[Any], n: int) -> float | None:
        if not self.reads_policy():
            return None
        assert self.policy_features is not None
        start = time.perf_counter()
        features = check_policy_features(self.policy_features(list(prompts)), n, self._width)
        self._width = features.shape[1]
        self.allocator.observe_policy(list(prompts), features)
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
        policy_seconds = self._observe_policy(keys if prompts is None else prompts, len(keys))
        clock = AllocatorClock()

        def sample(indices: Any, counts: Any) -> Draw:
            with clock.paused():  # the trainer's generation and scoring are not the allocator's time
                idx, cnt = check_request(indices, counts, len(keys))
                book.reserve(idx, cnt, budget, self.who)
                try:
                    raws = generate(idx, cnt)
                except RoundIncomplete as err:
                    if err.raws is not None:
                        book.add(idx, err.raws, cnt)
                    raise
                return book.add(idx, raws, cnt)

        incomplete = False
        with clock.running():
            try:
                self.allocator.run(keys, budget, sample)
            except RoundIncomplete:
                incomplete = True
        if not incomplete:
            check_spent(book.requested, budget, self.kind, self.who)
        return self._result(book, budget, clock.seconds, policy_seconds, incomplete, time.perf_counter() - began)

    # -- single-shot: plan, then observe ----------------------------------------------------------
    def plan(self, keys: Sequence[Hashable], budget: int, prompts: Sequence[Any] | None = None) -> PlannedStep:
        """``allocator.plan(keys, budget)``, its counts checked; give the result back to `observe`."""
        keys, budget = list(keys), int(budget)
        began = time.perf_counter()
        policy_seconds = self._observe_policy(keys if prompts is None else prompts, len(keys))
        clock = AllocatorClock()
        with clock.running():
            plan = self.allocator.plan(keys, budget)
        counts = check_counts(plan, len(keys), budget, self.kind, self.who)
        return PlannedStep(keys, budget, plan_or_prompts(plan, keys), counts, clock, policy_seconds, began)

    def observe(self, planned: PlannedStep, raws: Sequence[Any], book: StepBook | None = None) -> StepResult:
        """The planned step's raw rewards (one group per prompt, at most its count) to ``observe``."""
        book = StepBook(planned.keys, signal=self.signal) if book is None else book
        book.reserve(np.arange(len(planned.keys)), planned.counts, planned.budget, self.who)
        book.add(np.arange(len(planned.keys)), raws, planned.counts)
        with planned.clock.running():
            self.allocator.observe(planned.plan, book.successes())
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
        spent = int(book.requested.sum())
        values["budget"], values["rollouts_saved"] = budget, budget - spent  # the step's, whatever the allocator knew
        values["allocator_seconds"] = seconds  # the trainer's clock: one measure for every allocator
        values["rounds"] = book.rounds
        values["incomplete_step"] = int(incomplete)
        if policy_seconds is not None:
            values["policy_seconds"] = policy_seconds
            values["policy_share"] = min(1.0, policy_seconds / wall) if wall > 0 else 0.0  # of the step's time
        self.regime.update(book.prompts, successes)  # one tracker, one signal: what the allocator saw
        self.totals.add(spent, budget)
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

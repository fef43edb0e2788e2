"""Round planning for a progressive allocator: a generation round is added to a step only where the
tokens it is expected to save are worth more time than the round's own latency.

A generation round (one ``sample`` call) whose longest rollout has M tokens and whose rollouts have S
tokens in all is modelled to last

    t(M, S) = c + a M + b S                  (seconds; c, a, b >= 0)

with c the fixed cost of a call (scheduling, prefill, scoring), a M the latency floor (a call lasts
at least as long as its longest rollout, decoded one token at a time) and b S the throughput term
(an engine with every slot busy costs its tokens). `fit_round_time` fits (c, a, b) by non-negative
least squares on the last ``WINDOW`` rounds the trainer timed (`types.Draw.seconds`) with their
lengths. A synchronous engine gives b = 0, continuous batching a = c = 0, and a round of an engine
with a bounded number of slots, c + max(tau M, S / throughput), lies between.

One round more in a step costs c + a M_hat (M_hat: the mean longest rollout of those rounds; the
longest of a few dozen rollouts is nearly that of a few hundred, so a smaller round is hardly
shorter) and saves b x the tokens it lets the allocator not generate, so it pays when

    b x E[tokens saved] > c + a M_hat                                       (`RoundPlanner.pays`).

The tokens it may save, with p ~ Beta(alpha, beta) and L1, L0 the expected lengths of a success and
of a failure (`predictors.lengths.LengthBelief`), ``share`` the share of the allocator's flat pilots
it has cut (`RoundPlanner.cut_share`):

* a pilot of m rollouts before a group of n (`pilot_saving`): a pilot that comes back flat may be
  cut, giving up the n - m other rollouts of its outcome:
      E[saved] = share x (n - m) x (E[p^m] L1 + E[(1 - p)^m] L0);
* a group still flat after k rollouts, l of them lacking, given h now instead of all l (`split_saving`):
  the l - h others are given up if the h come back like the k, under the posterior:
      E[saved] = share x (l - h) x E[p^h] L1     (all successes so far; E[(1 - p)^h] L0 after failures).

Nothing is planned before the trainer has timed a few rounds with their lengths, nor while the model
explains less than half the spread of their times (R^2 < `MIN_EXPLAINED`: times that are noise, as a
mock trainer's or a tiny model's on a CPU, say nothing about what a round costs): until then the
allocator's rounds are its own (and without timings, always). Pure numpy; the state is JSON-able and
a resumed planner decides exactly as an uninterrupted one.

>>> coef = fit_round_time([12.0, 12.0, 16.0, 8.0], [8000, 6000, 8000, 4000], [1e5, 2e5, 3e5, 1e5])
>>> [round(float(x), 6) for x in coef]  # seconds = 2 + M / 1000 + S / 50000
[2.0, 0.001, 2e-05]
>>> planner = RoundPlanner()
>>> for t, m, s in [(8.0, 8000, 1e5), (8.1, 8100, 3e5), (7.9, 7900, 2e5)]:  # synchronous: seconds = M / 1000
...     planner.observe_round(t, m, s)
>>> planner.known, planner.pays(1e6)  # the tokens buy no time: one round
(True, False)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..checks.validation import check_real_array
from ..state.checks import StateReader
from ..types import StateDict
from .round_savings import cannot_cut, pilot_saving, split_saving

__all__ = [
    "WINDOW",
    "MIN_ROUNDS",
    "check_seconds",
    "fit_round_time",
    "pilot_saving",
    "split_saving",
    "cannot_cut",
    "RoundPlanner",
]

WINDOW = 64
"""Rounds the time model is fitted on (the most recent)."""
MIN_ROUNDS = 2
"""Timed rounds before anything is planned: a first step's pilot and its completion (the fit of three
coefficients on two rounds takes the simplest exact one, `fit_round_time`; the later rounds refine it)."""
MIN_EXPLAINED = 0.5
"""The share of the spread of the round times the model must explain (R^2) before rounds are priced."""
CUT_DISCOUNT = 0.9
"""The weight left to earlier steps' flat pilots and cuts at each step (`RoundPlanner.cut_share`)."""


def check_seconds(seconds: Any, source: str = "sample(...)") -> float | None:
    """A round's ``seconds`` (`types.Draw.seconds`): None, or a finite real >= 0; a ValueError naming
    ``source`` otherwise.

    >>> check_seconds(1.5), check_seconds(None)
    (1.5, None)
    """
    if seconds is None:
        return None
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise ValueError(f"{source} returned a Draw whose seconds is not a number: {seconds!r}") from None
    if isinstance(seconds, bool) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{source} returned a Draw whose seconds must be a finite number >= 0, got {seconds!r}")
    return value


def fit_round_time(
    seconds: Sequence[float] | np.ndarray, longest: Sequence[float] | np.ndarray, tokens: Sequence[float] | np.ndarray
) -> np.ndarray:
    """(c, a, b) >= 0 minimising sum_r (t_r - c - a M_r - b S_r)^2: non-negative least squares, exact
    (the least-squares fit on each subset of the three terms; the best whose coefficients are all
    >= 0 is the optimum, since the optimum is the least-squares fit on its own support)."""
    t, m, s = (
        check_real_array(seconds, "seconds"),
        check_real_array(longest, "longest"),
        check_real_array(tokens, "tokens"),
    )
    if not t.size == m.size == s.size:
        raise ValueError(f"seconds ({t.size}), longest ({m.size}) and tokens ({s.size}) differ in length")
    x = np.column_stack([np.ones(t.size), m, s])
    scale = np.maximum(np.abs(x).max(axis=0), 1e-300) if t.size else np.ones(3)
    z = x / scale
    best, best_loss = np.zeros(3), float(t @ t)
    for size in (1, 2, 3):
        for cols in itertools.combinations(range(3), size):
            coef, *_ = np.linalg.lstsq(z[:, cols], t, rcond=None)
            if np.any(coef < 0):
                continue
            loss = float(np.sum((t - z[:, cols] @ coef) ** 2))
            if loss < best_loss * (1 - 1e-12):
                best, best_loss = np.zeros(3), loss
                best[list(cols)] = coef
    return best / scale


class RoundPlanner:
    """The time model of the trainer's rounds and the share of flat pilots cut (module docstring)."""

    def __init__(self) -> None:
        self.rounds: list[tuple[float, float, float]] = []  # (seconds, longest, tokens), the last WINDOW
        self.flat = 0.0  # discounted flat pilots, and how many of them were cut
        self.cut = 0.0
        self._coef: np.ndarray | None = None
        self._explained = 0.0
        self.announced = False  # the trainer said it times every round (`expect_times`; not state)

    def expect_times(self) -> None:
        """The trainer times every round (said before the first step, and again on resume): until
        `MIN_ROUNDS` rounds are timed, a step goes in one round (`awaiting_times`)."""
        self.announced = True

    @property
    def awaiting_times(self) -> bool:
        """Announced but fewer than `MIN_ROUNDS` rounds timed: nothing says yet what a round costs, and
        one round a step is never slower than Uniform's step, where a pilot and its completion take
        two or three times as long on a synchronous engine; what it gives up is those steps' cuts.
        (Once rounds are timed and their times are noise, the allocator's own rounds, as without times.)

        >>> planner = RoundPlanner()
        >>> planner.expect_times()
        >>> planner.awaiting_times, planner.observe_round(8.0, 8000, 1e5), planner.awaiting_times
        (True, None, True)
        >>> planner.observe_round(8.0, 8000, 2e5); planner.awaiting_times
        False
        """
        return self.announced and len(self.rounds) < MIN_ROUNDS

    def observe_round(self, seconds: float, longest: float, tokens: float) -> None:
        """A round the trainer timed, with its longest rollout and its tokens."""
        self.rounds = [*self.rounds, (float(seconds), float(longest), float(tokens))][-WINDOW:]
        self._coef = None

    def observe_pilots(self, flat: int, cut: int) -> None:
        """A step's flat pilots and how many of them the allocator cut (0 <= cut <= flat)."""
        if not 0 <= cut <= flat:
            raise RuntimeError(f"internal error: {cut} cuts of {flat} flat pilots")
        self.flat = CUT_DISCOUNT * self.flat + flat
        self.cut = CUT_DISCOUNT * self.cut + cut

    @property
    def known(self) -> bool:
        """Whether rounds are priced: at least `MIN_ROUNDS` timed rounds, some of them taking time,
        whose times the model explains (R^2 >= `MIN_EXPLAINED`)."""
        if len(self.rounds) < MIN_ROUNDS or not any(t > 0 for t, _, _ in self.rounds):
            return False
        _ = self.coefficients
        return self._explained >= MIN_EXPLAINED

    @property
    def coefficients(self) -> np.ndarray:
        """(c, a, b) of the rounds seen (`fit_round_time`)."""
        if self._coef is None:
            t, m, s = (np.array(col) for col in zip(*self.rounds)) if self.rounds else (np.zeros(0),) * 3
            self._coef = fit_round_time(t, m, s)
            residual = float(np.sum((t - self._coef[0] - self._coef[1] * m - self._coef[2] * s) ** 2))
            spread = float(np.sum((t - t.mean()) ** 2)) if t.size else 0.0
            # R^2; times that do not vary are explained when the fit meets them
            exact = residual <= 1e-18 * max(float(t @ t), 1e-300)
            self._explained = 1.0 if exact else (1.0 - residual / spread if spread > 0 else 0.0)
        return self._coef

    @property
    def cut_share(self) -> float:
        """The share of flat pilots cut, (cut + 1) / (flat + 1): one pseudo-pilot, cut, before any."""
        return (self.cut + 1.0) / (self.flat + 1.0)

    def round_cost(self) -> float:
        """c + a M_hat: what one more round costs (seconds)."""
        c, a, _ = self.coefficients
        return float(c + a * np.mean([m for _, m, _ in self.rounds]))

    def pays(self, tokens: float) -> bool:
        """Whether a round that saves ``tokens`` in expectation (before `cut_share`) is worth its cost."""
        return bool(self.coefficients[2] * self.cut_share * float(tokens) > self.round_cost())

    def pilot_size(
        self,
        pilot: int,
        target: np.ndarray,
        alpha: np.ndarray,
        beta: np.ndarray,
        fail_tokens: np.ndarray,
        success_tokens: np.ndarray,
    ) -> int:
        """``pilot`` when the round after it pays for itself (`pilot_saving` summed over the groups
        ``target``), else the largest group: the step in one round."""
        m = np.full(np.shape(target), pilot, dtype=np.int64)
        saved = float(pilot_saving(target, m, alpha, beta, fail_tokens, success_tokens).sum())
        return pilot if self.pays(saved) else max(int(np.max(target, initial=0)), pilot)

    def chunks(
        self,
        chunk: np.ndarray,
        lack: np.ndarray,
        alpha: np.ndarray,
        beta: np.ndarray,
        succeeded: np.ndarray,
        fail_tokens: np.ndarray,
        success_tokens: np.ndarray,
    ) -> np.ndarray:
        """``chunk`` of the still-flat groups when the round after it pays for itself (`split_saving`
        summed), else all they ``lack``: their last round."""
        saved = float(split_saving(lack, chunk, alpha, beta, succeeded, fail_tokens, success_tokens).sum())
        return np.asarray(chunk) if self.pays(saved) else np.asarray(lack)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> StateDict:
        return {"rounds": [list(r) for r in self.rounds], "flat": self.flat, "cut": self.cut}

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the state, checked first (at most `WINDOW` rounds of three finite values >= 0;
        0 <= cut <= flat); a refused state changes nothing."""
        reader = StateReader(state, "RoundPlanner", ["rounds", "flat", "cut"])
        unknown = sorted(set(state) - {"rounds", "flat", "cut"}, key=str)
        if unknown:
            raise reader.error(None, f"unknown entries {unknown}")
        raw = state["rounds"]
        if not isinstance(raw, (list, tuple)) or len(raw) > WINDOW:
            raise reader.error("rounds", f"must be a list of at most {WINDOW} rounds")
        rounds = reader.array("rounds", (len(raw), 3), low=0.0) if raw else np.zeros((0, 3))
        flat = reader.real("flat", low=0.0)
        cut = reader.real("cut", low=0.0)
        if cut > flat * (1 + 1e-12):
            raise reader.error("cut", f"must be at most flat ({flat}), got {cut}")
        self.rounds = [(float(t), float(m), float(s)) for t, m, s in rounds]
        self.flat, self.cut, self._coef = flat, cut, None

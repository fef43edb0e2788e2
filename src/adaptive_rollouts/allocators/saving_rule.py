"""The saving default's rule, as pure functions: which options (skipping a prompt, cutting a flat
group) to give up within a share of the step's expected signal, the rounds' chunks, and the
per-group facts it reads (docs/saving.md derives the rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import betainc

from ..checks.rewards import all_equal, group_extremes
from ..objectives.beta import stays_flat_beta
from ..objectives.signal import group_signal
from ..solvers import equal_split
from ..types import Rewards

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

__all__ = [
    "LOSS_SHARE",
    "EXPLORE_SHARE",
    "FLAT_CHANCE",
    "SKIP_CONFIDENCE",
    "SKIP_MEMORY",
    "affordable_losses",
    "bound_before_rollouts",
    "group_stats",
    "next_chunk",
    "realised_signal",
    "settling_pilot",
    "skipping_pays",
    "unseen_evidence",
    "uniform_targets",
]

_TIE = 1e-8  # relative: ratios closer than this are equal
LOSS_SHARE = 0.2
"""The share of a step's expected signal (under the belief) the default may give up by skipping
and cutting: what it saves is bought with at most this much signal, so it keeps four fifths of
it in expectation. A fifth since a check on fresh seeds, fixed before its runs, found it faster
than a tenth (docs/saving.md, "The share 0.2, checked on fresh seeds"; the study before it
measured 1/20 to 3/10)."""
FLAT_CHANCE = 0.1
"""The bound per group: a flat pilot whose completion has at most this chance (one in ten) of
showing any reward that differs, under its posterior after the pilot, is cut whatever the
allowance (what it gives up is charged to the allowance first). It lets the default cut the flat
groups it is sure of even when its belief cannot tell the step's prompts apart, as at a cold
start or at 4 rollouts a prompt (docs/saving.md measures 0.05 and 0.1, before any rollout and on
pilots only)."""
EXPLORE_SHARE = 0.05
"""The chance that a skipped prompt is piloted whatever its belief says (one in twenty), so that a
belief grown sure of a prompt still meets drift (docs/saving.md)."""

SKIP_CONFIDENCE = 0.9
"""How sure the run must be that the prompts the bound would skip unseen yield fewer varied groups
per rollout than the others before it skips them unseen (``bound_skips="measured"``,
`skipping_pays`)."""
SKIP_MEMORY = 0.95
"""Per step, the weight the evidence of `unseen_evidence` keeps (the belief's forgetting): the
policy moves, and what its prompts yielded twenty steps ago says little now."""


def affordable_losses(
    value: np.ndarray,
    cost: np.ndarray,
    allowance: float,
    rng: np.random.Generator | None = None,
    hopeless: np.ndarray | None = None,
) -> np.ndarray:
    """Which options to give up (skip or cut) so that as many rollouts as possible are saved while the
    signal given up stays within ``allowance``: among the options worth less per rollout than the
    average option (value / cost below sum value / sum cost), in ascending order of value / cost
    (ties in random order, by ``rng``), the longest prefix whose values sum to at most
    ``allowance``. Options the belief cannot tell apart are all average: a belief that knows nothing
    particular about any prompt gives nothing up. Options of cost 0 are never given up.
    ``hopeless`` (optional, a mask): options given up whatever the allowance and the average
    (`SavingProgressive`'s ``flat_chance``); what they give up is taken from the allowance first.

    >>> affordable_losses(np.array([0.3, 0.01, 0.02, 2.0]), np.array([8, 8, 8, 8]), 0.05).tolist()
    [False, True, True, False]
    >>> affordable_losses(np.array([0.01, 0.01, 0.01]), np.array([8, 8, 8]), 0.025).tolist()  # all alike
    [False, False, False]
    """
    value, cost = np.asarray(value, dtype=float), np.asarray(cost, dtype=float)
    give = np.zeros(value.size, dtype=bool)
    ok = np.flatnonzero(cost > 0)
    if ok.size == 0:
        return give
    if hopeless is not None:
        sure = np.zeros(value.size, dtype=bool)
        sure[ok] = np.asarray(hopeless, dtype=bool)[ok]
        give |= sure
        allowance -= float(value[sure].sum())
        ok = ok[~sure[ok]]
        if ok.size == 0:
            return give
    ratio = value[ok] / cost[ok]
    below = below_average(value[ok], cost[ok])
    tiebreak = (rng if rng is not None else np.random.default_rng(0)).random(ok.size)
    order = np.lexsort((tiebreak, ratio))
    order = order[below[order]]
    fits = np.flatnonzero(np.cumsum(value[ok][order]) <= allowance)
    if fits.size:
        give[ok[order[: int(fits[-1]) + 1]]] = True
    return give


def bound_before_rollouts(bound_skips: bool | str | None, target: np.ndarray, pilot: int) -> np.ndarray:
    """Where the bound per group acts before any rollout, on the belief alone: everywhere
    (``bound_skips=True``), nowhere (False), or, by default (None, and "measured" until its evidence
    says otherwise, `skipping_pays`), on the prompts whose pilot would be their whole group
    (n_q <= ``pilot``): there no flat pilot is left to cut, so the only saving is to skip before
    generating (at 4 rollouts a prompt, every prompt).

    >>> bound_before_rollouts(None, np.array([8, 4, 3, 0]), 4).tolist()
    [False, True, True, True]
    >>> bound_before_rollouts(True, np.array([8, 4]), 4).tolist(), bound_before_rollouts(False, np.array([8, 4]), 4).tolist()
    ([True, True], [False, False])
    """
    target = np.asarray(target)
    if bound_skips is None or bound_skips == "measured":
        return target <= pilot
    return np.full(target.shape, bool(bound_skips))


def skipping_pays(evidence: np.ndarray, skipping: bool = False, confidence: float = SKIP_CONFIDENCE) -> bool:
    """Whether to skip unseen the prompts the bound would skip, on the run's own evidence
    ``[v_s, r_s, v_k, r_k]``: the varied groups v and rollouts r of those prompts (s) and of the
    other kept prompts (k) where they were piloted (`unseen_evidence`). With Jeffreys posteriors of
    the two rates, lambda ~ Gamma(v + 1/2, rate r), the chance that the skipped prompts yield less
    is P(lambda_s < lambda_k), the Beta(v_s + 1/2, v_k + 1/2) CDF at r_s / (r_s + r_k). A run starts
    skipping when that chance reaches ``confidence`` and, once ``skipping``, goes on until the
    chance that they yield more reaches it (a two-sided sequential test: while skipping, only the
    skipped prompts' exploration pilots add to their side, so their evidence thins and the chance
    drifts back between the two bounds, where the decision stays as it is). Removing rollouts that
    yield less than the rest raises the varied groups a rollout buys; without evidence on either
    side, a run does not start.

    >>> skipping_pays(np.array([0.0, 40.0, 8.0, 60.0])), skipping_pays(np.array([3.0, 40.0, 5.0, 60.0]))
    (True, False)
    >>> skipping_pays(np.array([3.0, 40.0, 5.0, 60.0]), skipping=True)  # not shown to yield more: go on
    True
    >>> skipping_pays(np.zeros(4)), skipping_pays(np.array([9.0, 40.0, 1.0, 60.0]), skipping=True)
    (False, False)
    """
    v_s, r_s, v_k, r_k = (float(x) for x in evidence)
    if r_s <= 0.0 or r_k <= 0.0:
        return bool(skipping)
    less = float(betainc(v_s + 0.5, v_k + 0.5, r_s / (r_s + r_k)))
    return less > 1.0 - confidence if skipping else less >= confidence


def unseen_evidence(evidence: np.ndarray, would_skip: np.ndarray, counts: np.ndarray, varied: np.ndarray) -> np.ndarray:
    """The evidence of `skipping_pays` after a step: the old one weighed by `SKIP_MEMORY`, plus this
    step's varied groups and rollouts of the prompts generated (``counts`` > 0) that the bound would
    have skipped unseen (``would_skip``) and of the others.

    >>> unseen_evidence(np.zeros(4), np.array([True, True, False]), np.array([2, 8, 8]), np.array([False, True, True])).tolist()
    [1.0, 10.0, 1.0, 8.0]
    """
    got = np.asarray(counts) > 0
    mine, rest = got & would_skip, got & ~would_skip
    step = [varied[mine].sum(), counts[mine].sum(), varied[rest].sum(), counts[rest].sum()]
    return SKIP_MEMORY * np.asarray(evidence, dtype=float) + np.asarray(step, dtype=float)


def settling_pilot(
    alpha: np.ndarray, beta: np.ndarray, target: np.ndarray, pilot: int, flat_chance: float
) -> np.ndarray:
    """Per prompt, the smallest pilot (from 2 up to ``pilot``, never more than its group ``target``)
    whose likelier flat outcome (failures where the belief's mean is below 1/2, else successes)
    would settle it: leave the rest of the group with at most ``flat_chance`` of showing a reward
    that differs (`objectives.beta.stays_flat_beta` under the posterior after that pilot). Where no
    pilot up to ``pilot`` would, ``pilot``. A belief sure that a prompt is flat needs only a short
    pilot to confirm it; an unsure one gets the full pilot, where a rare success shows.

    >>> settling_pilot(np.array([0.05, 2.0]), np.array([20.0, 2.0]), np.array([8, 8]), 4, 0.1).tolist()
    [2, 4]
    """
    alpha, beta, target = np.asarray(alpha, float), np.asarray(beta, float), np.asarray(target)
    size = np.minimum(target, pilot).astype(np.int64)
    up = alpha > beta  # the likelier flat pilot: successes
    for m in range(pilot - 1, 1, -1):  # the smallest settling m wins: walk down
        rest = np.maximum(target - m, 1)
        after_a, after_b = alpha + np.where(up, m, 0), beta + np.where(up, 0, m)
        settles = (stays_flat_beta(after_a, after_b, up, rest) >= 1.0 - flat_chance) & (target > m)
        size = np.where(settles & (size > m), m, size)
    return size


def below_average(value: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Which options (cost > 0) are worth less per unit of cost than the average option, value /
    cost below sum value / sum cost (ratios closer than a relative 1e-8 are equal).

    >>> below_average(np.array([0.1, 0.5, 0.5]), np.array([1.0, 1.0, 1.0])).tolist()
    [True, False, False]
    """
    average = float(value.sum() / cost.sum())
    return value / cost < average - _TIE * max(average, 1e-12)


def explore_skipped(
    skip: np.ndarray,
    value: np.ndarray,
    cost: np.ndarray,
    target: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    rng: np.random.Generator,
    worth_at: Callable[[int, np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, float]:
    """Which prompts are piloted after ``skip`` (`affordable_losses`), which of them only by
    exploration, and exploration's bar. A skipped prompt is piloted when its group, at a draw of p
    from its belief Beta(alpha, beta), would be worth (``worth_at(n, p)``, the known-p signal of a
    group of n) at least the bar per unit of ``cost``: what the cheapest kept prompt is expected to
    bring (Thompson sampling); and with chance `EXPLORE_SHARE` anyway, so that a belief grown sure
    still meets drift. With every prompt skipped, the one most worth its cost is piloted.

    >>> rng = np.random.default_rng(0)
    >>> skip = np.array([True, True, False])
    >>> keep, explored, bar = explore_skipped(
    ...     skip, np.array([0.0, 0.0, 1.0]), np.full(3, 8), np.full(3, 8), np.array([1e-3, 50.0, 1.0]),
    ...     np.array([50.0, 1e-3, 1.0]), rng, lambda n, p: 2.0 * n * p * (1 - p))
    >>> keep.tolist(), round(bar, 3)  # both skipped prompts are surely flat: kept only by chance 1/20
    ([False, False, True], 0.125)
    """
    keep, bar = ~skip, 0.0
    if skip.any():
        bar = float(np.min(value[keep] / np.maximum(cost[keep], 1))) if keep.any() else 0.0
        rows = np.flatnonzero(skip)
        draw = np.clip(rng.beta(alpha[rows], beta[rows]), 1e-9, 1.0 - 1e-9)
        worth = np.zeros(rows.size)
        for n in np.unique(target[rows]).tolist():
            at = target[rows] == n
            worth[at] = worth_at(n, draw[at])
        anyway = rng.random(rows.size) < EXPLORE_SHARE
        keep[rows[(worth / np.maximum(cost[rows], 1) >= bar) | anyway]] = True
    explored = keep & skip
    if not keep.any():  # always learn something: the prompt most worth it
        keep[int(np.argmax(value / np.maximum(cost, 1)))] = True
    return keep, explored, bar


def group_stats(rewards: Rewards) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: its size, its sum and whether it has signal (>= 2 rollouts, not all equal:
    `metrics.group_has_signal`, `checks.rewards.all_equal`), in one pass over the concatenated rewards."""
    sizes = np.fromiter(map(len, rewards), dtype=np.int64, count=len(rewards))
    flat = np.concatenate(rewards) if len(rewards) else np.zeros(0)
    low, high, sums = group_extremes(flat, sizes)
    with np.errstate(invalid="ignore"):  # empty groups: NaN extremes, no signal
        return sizes, sums, (sizes >= 2) & ~all_equal(low, high)


def next_chunk(target: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The next round's rollouts for a prompt that continues: half of what it still lacks to
    ``target`` (at least 1), never leaving a lone last rollout.

    >>> next_chunk(np.array([8, 8, 8, 4]), np.array([4, 6, 7, 0])).tolist()
    [2, 2, 1, 2]
    >>> next_chunk(np.array([8]), np.array([5])).tolist()  # 3 lacking: 2 would leave a lone 1
    [3]
    """
    lack = target - counts
    half = np.maximum((lack + 1) // 2, 1)
    return np.where(lack - half == 1, lack, half)


def realised_signal(rewards: Rewards, estimator: str, aggregation: str) -> float:
    """The signal of a step's groups: sum of a(k; n) (`objectives.signal.group_signal`) over the
    groups that varied (graded rewards: their rounded sum); all-equal groups carry 0.

    >>> round(realised_signal([np.array([1.0, 0.0]), np.ones(4), np.array([1.0, 0, 0, 0])], "drgrpo", "seq-mean"), 4)
    1.25
    """
    sizes, sums, varied = group_stats(rewards)
    total = 0.0
    for n in np.unique(sizes[varied]).tolist():
        at = varied & (sizes == n)
        row = group_signal(estimator, n, aggregation)
        total += float(row[np.clip(np.rint(sums[at]).astype(np.int64), 1, n - 1)].sum())
    return total


def uniform_targets(budget: int, q: int, rng: np.random.Generator) -> np.ndarray:
    """n_q: Uniform's group sizes (the equal split of the budget over the ``q`` prompts). A group of
    one rollout carries no signal, so with C < 2Q the split is over C // 2 prompts drawn by ``rng``.

    >>> uniform_targets(20, 4, np.random.default_rng(0)).tolist()
    [5, 5, 5, 5]
    >>> int((uniform_targets(5, 4, np.random.default_rng(0)) > 0).sum())  # 2 prompts of 2 and 3
    2
    """
    if budget >= 2 * q:
        return equal_split(budget, q)
    target = np.zeros(q, dtype=np.int64)
    chosen = rng.permutation(q)[: budget // 2]
    if chosen.size:
        target[chosen] = equal_split(budget, chosen.size)
    return target

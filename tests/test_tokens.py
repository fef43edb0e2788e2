"""Completion lengths through the typed draw: the collector keeps them per prompt over the rounds,
``last_metrics`` report ``tokens_spent`` / ``tokens_saved`` (nothing changes without lengths), bad
lengths are refused naming the prompt, and partly missing lengths fall back to counting rollouts with
one notice per run."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from adaptive_rollouts.allocators import VIGOR, Pilot, SavingProgressive, Uniform
from adaptive_rollouts.allocators.collector import RolloutCollector
from adaptive_rollouts.checks.lengths import check_lengths
from adaptive_rollouts.metrics import token_metrics
from adaptive_rollouts.solvers import equal_split
from adaptive_rollouts.types import Draw

# prompt -> its successive rewards and lengths, drawn in order: "a" varies, "b" and "c" are flat
REWARDS = {0: [0.0, 1.0, 0.0, 1.0], 1: [1.0, 1.0, 1.0, 1.0], 2: [0.0, 0.0, 0.0, 0.0]}
LENGTHS = {0: [10, 30, 20, 40], 1: [5, 7, 5, 7], 2: [100, 200, 100, 200]}


def _sampler(with_lengths=True):
    drawn = {i: 0 for i in REWARDS}

    def sample(idx, cnt):
        rewards, lengths = [], []
        for i, n in zip(idx.tolist(), cnt.tolist()):
            start, drawn[i] = drawn[i], drawn[i] + n
            rewards.append(np.array(REWARDS[i][start : start + n]))
            lengths.append(LENGTHS[i][start : start + n])
        return Draw.with_lengths(rewards, lengths) if with_lengths else rewards

    return sample


def test_two_round_step_reports_hand_computed_tokens():
    """Pilot m=2 on three prompts, budget 12: round 1 gives each prompt 2 rollouts, round 2 gives the
    varied "a" 2 more. Spent: a 10+30+20+40, b 5+7, c 100+200 = 412. Uniform gives 4 each; saved:
    a (4-4) x 25 + b (4-2) x 6 + c (4-2) x 150 = 312."""
    alloc = Pilot(m=2)
    alloc.run(["a", "b", "c"], 12, _sampler())
    m = alloc.last_metrics
    assert m["rollouts_spent"] == 8 and m["rollouts_saved"] == 4
    assert m["tokens_spent"] == 412
    assert m["tokens_saved"] == pytest.approx(312.0)


def test_without_lengths_the_metrics_are_identical():
    """A plain list, a Draw without lengths and one whose lengths are all None give the same metrics,
    and the metrics with lengths are those plus the two token keys."""

    def run(sample):
        alloc = Pilot(m=2)
        alloc.run(["a", "b", "c"], 12, sample)
        m = dict(alloc.last_metrics)
        m.pop("allocator_seconds")
        return m

    plain = run(_sampler(with_lengths=False))

    def no_lengths(idx, cnt):
        return Draw(_plain(idx, cnt), np.zeros(len(idx), dtype=np.int64))

    def none_lengths(idx, cnt):
        return Draw(_plain(idx, cnt), np.zeros(len(idx), dtype=np.int64), [None] * len(idx))

    _plain = _sampler(with_lengths=False)
    assert run(no_lengths) == plain
    _plain = _sampler(with_lengths=False)
    assert run(none_lengths) == plain
    with_lengths = run(_sampler())
    assert {k: v for k, v in with_lengths.items() if not k.startswith("tokens_")} == plain
    assert "tokens_spent" not in plain and "tokens_saved" not in plain


def test_collector_keeps_lengths_per_prompt_scored_first_over_rounds():
    answers = iter(
        [
            Draw([np.array([1.0]), np.array([0.0, 1.0])], [1, 0], [[10, 30], [1, 2]]),  # a: 30 is unscored
            Draw([np.array([0.0, 0.0])], [0], [[20, 40]]),
        ]
    )
    collector = RolloutCollector(["a", "b"], lambda idx, cnt: next(answers))
    collector.draw(np.array([2, 2]))
    collector.draw(np.array([2, 0]))
    assert [r.tolist() for r in collector.rewards()] == [[1.0, 0.0, 0.0], [0.0, 1.0]]
    assert [g.tolist() for g in collector.lengths()] == [[10, 20, 40, 30], [1, 2]]  # scored in reward order
    assert not collector.lengths_partial


def test_token_formula_matches_brute_force():
    """`token_metrics` against a loop over prompts and rollouts on random steps (skipped prompts,
    budgets not divisible by Q)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        q = int(rng.integers(1, 6))
        sizes = rng.integers(0, 6, q)
        if sizes.sum() == 0:
            sizes[0] = 1
        lengths = [rng.integers(0, 50, n) for n in sizes]
        budget = int(sizes.sum() + rng.integers(0, 8))
        every = [x for g in lengths for x in g]
        step_mean = sum(every) / len(every)
        uniform = [budget // q + (1 if k < budget % q else 0) for k in range(q)]
        want = 0.0
        for k in range(q):
            price = sum(lengths[k]) / len(lengths[k]) if len(lengths[k]) else step_mean
            want += (uniform[k] - len(lengths[k])) * price
        got = token_metrics(lengths, budget)
        assert got["tokens_spent"] == sum(every)
        assert got["tokens_saved"] == pytest.approx(want)
        assert uniform == equal_split(budget, q).tolist()
    assert token_metrics([np.zeros(0, int)], 4)["tokens_saved"] is None  # nothing to price with
    assert token_metrics([np.array([3])], None)["tokens_saved"] is None


@pytest.mark.parametrize("allocator", [Uniform(), VIGOR(), SavingProgressive()], ids=["uniform", "vigor", "default"])
def test_tokens_spent_is_every_generated_length_also_unscored(allocator):
    def sample(idx, cnt):
        rewards = [np.resize([0.0, 1.0], n - 1) for n in cnt.tolist()]
        lengths = [np.full(n, 7 + i) for i, n in zip(idx.tolist(), cnt.tolist())]
        return Draw(rewards, np.ones(len(idx), dtype=np.int64), lengths)

    allocator.run(["a", "b", "c", "d"], 16, sample)
    m = allocator.last_metrics
    counts = m["allocation_histogram"]
    assert sum(n * k for n, k in counts.items()) == m["rollouts_spent"]
    assert m["tokens_spent"] >= 7 * m["rollouts_spent"] and m["tokens_spent"] <= 10 * m["rollouts_spent"]
    assert m["tokens_saved"] is not None


def test_observe_takes_lengths_from_a_draw():
    alloc = Uniform()
    plan = alloc.plan(["a", "b"], 4)
    alloc.observe(plan, Draw([np.array([1.0]), np.array([0.0, 1.0])], [1, 0], [[3, 9], [4, 4]]))
    assert alloc.last_metrics["tokens_spent"] == 20 and alloc.last_metrics["tokens_saved"] == 0.0
    alloc.observe(plan, [np.array([1.0, 0.0]), np.array([0.0, 1.0])])
    assert "tokens_spent" not in alloc.last_metrics


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        ([[3, 4], [-1, 2]], r"prompt 1 \('b'\) must be >= 0, got -1"),
        ([[3, float("nan")], [1, 2]], r"prompt 0 \('a'\) must be finite, got nan"),
        ([[3, 4.5], [1, 2]], r"prompt 0 \('a'\) must be whole token counts, got 4.5"),
        ([[3, 4], [1]], r"prompt 1 \('b'\) has 1 entries for 2 rollouts"),
        ([[3, 4], ["x", "y"]], r"prompt 1 \('b'\) must be integers"),
        ([[3, 4]], r"lengths has 1 entries for 2 prompts"),
    ],
)
def test_bad_lengths_are_refused_naming_the_prompt(lengths, message):
    alloc = Uniform()
    before = alloc.state_dict()

    def sample(idx, cnt):
        return Draw.with_lengths([np.array([0.0, 1.0]) for _ in idx], lengths)

    with pytest.raises(ValueError, match=r"sample\(\.\.\.\): (lengths of )?" + message):
        alloc.run(["a", "b"], 4, sample)
    assert alloc.state_dict()["rng"] == before["rng"]


def test_lengths_above_the_maximum_are_refused():
    with pytest.raises(ValueError, match=r"lengths of prompt 0 \('p'\) must be <= the configured maximum 8, got 9"):
        check_lengths(["p"], [[8, 9]], [2], maximum=8)
    assert check_lengths(["p"], [[8, 0]], [2], maximum=8)[0].tolist() == [8, 0]


def test_partly_missing_lengths_count_rollouts_and_say_so_once_per_run(caplog):
    """Round 1 has lengths, round 2 not, in two steps: no token keys, one log line for the run."""

    rounds = []

    def sample(idx, cnt):
        rewards = [np.resize([0.0, 1.0], n) for n in cnt.tolist()]
        rounds.append(1)
        if len(rounds) % 2:  # the pilot round of each step
            return Draw.with_lengths(rewards, [np.full(n, 5) for n in cnt.tolist()])
        return rewards

    alloc = Pilot(m=2)
    with caplog.at_level(logging.WARNING, logger="adaptive_rollouts"):
        for _ in range(2):
            alloc.run(["a", "b", "c"], 12, sample)
            assert "tokens_spent" not in alloc.last_metrics and alloc.last_metrics["rollouts_spent"] == 12
    lines = [r for r in caplog.records if "completion lengths are missing" in r.getMessage()]
    assert len(lines) == 1 and "Pilot.run" in lines[0].getMessage()
    # within one draw too: one prompt without lengths
    other = Uniform()
    with caplog.at_level(logging.WARNING, logger="adaptive_rollouts"):
        other.run(["a", "b"], 4, lambda i, c: Draw.with_lengths([np.ones(2), np.ones(2)], [[1, 2], None]))
    assert "tokens_spent" not in other.last_metrics
    assert len([r for r in caplog.records if "completion lengths are missing" in r.getMessage()]) == 2

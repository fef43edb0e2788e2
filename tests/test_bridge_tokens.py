"""Completion lengths through `bridge.TrainerStep`: a trainer's round answers with `Generated`
(raw rewards and lengths), the step hands them to the allocator in its `Draw`, logs
``tokens_spent`` / ``tokens_saved`` and their running totals, refuses bad lengths naming the prompt,
and counts rollouts (saying so once) when lengths are partly missing."""

from __future__ import annotations

import logging

import pytest

from adaptive_rollouts.allocators import Pilot, Uniform
from adaptive_rollouts.bridge import Generated, RoundIncomplete, RunningTotals, TrainerStep

REWARDS = {0: [0.0, 1.0, 0.0, 1.0], 1: [1.0, 1.0, 1.0, 1.0], 2: [0.0, 0.0, 0.0, 0.0]}
LENGTHS = {0: [10, 30, 20, 40], 1: [5, 7, 5, 7], 2: [100, 200, 100, 200]}


def _generate(with_lengths=True):
    drawn = {i: 0 for i in REWARDS}

    def generate(idx, cnt):
        rewards, lengths = [], []
        for i, n in zip(idx.tolist(), cnt.tolist()):
            start, drawn[i] = drawn[i], drawn[i] + n
            rewards.append(REWARDS[i][start : start + n])
            lengths.append(LENGTHS[i][start : start + n])
        return Generated(rewards, lengths) if with_lengths else rewards

    return generate


def test_two_round_step_logs_hand_computed_tokens_and_running_totals():
    """Pilot m=2, budget 12 (see tests/test_tokens.py): spent 412 tokens, saved 2 x 6 + 2 x 150 = 312."""
    step = TrainerStep(Pilot(m=2))
    first = step.run(["a", "b", "c"], 12, _generate())
    assert first.values["tokens_spent"] == 412 and first.values["tokens_saved"] == pytest.approx(312.0)
    log = first.log()
    assert log["adaptive/tokens_spent"] == 412.0 and log["adaptive/tokens_saved"] == pytest.approx(312.0)
    assert log["adaptive/tokens_spent_total"] == 412.0
    second = step.run(["a", "b", "c"], 12, _generate())
    assert second.log()["adaptive/tokens_spent_total"] == 824.0
    assert second.log()["adaptive/tokens_saved_total"] == pytest.approx(624.0)
    assert step.totals.token_steps == 2


def test_without_lengths_the_log_has_the_same_keys_and_values():
    with_lengths = TrainerStep(Pilot(m=2)).run(["a", "b", "c"], 12, _generate()).log()
    without = TrainerStep(Pilot(m=2)).run(["a", "b", "c"], 12, _generate(False)).log()
    assert not any("tokens" in k for k in without)
    drop = ("adaptive/allocator_seconds",)
    assert {k: v for k, v in with_lengths.items() if "tokens" not in k and k not in drop} == {
        k: v for k, v in without.items() if k not in drop
    }


def test_single_shot_observe_gets_the_lengths_scored_first_and_failed_rollouts_count_zero():
    seen = []

    class Recording(Uniform):
        def observe(self, plan, rewards):
            seen.append(rewards)
            super().observe(plan, rewards)

    step = TrainerStep(Recording())
    planned = step.plan(["a", "b"], 6)
    # a: three rollouts, the first unscored; b: two came back (one failed), lengths for those two
    result = step.observe(planned, Generated([[None, 1.0, 0.0], [1.0, 0.0]], [[9, 4, 6], [3, 5]]))
    draw = seen[0]
    assert draw.unscored.tolist() == [1, 1]
    assert [g.tolist() for g in draw.lengths] == [[4, 6, 9], [3, 5, 0]]
    assert result.values["tokens_spent"] == 27 and result.values["tokens_saved"] == 0.0
    assert step.allocator.last_metrics["tokens_spent"] == 27


def test_lengths_above_the_trainer_maximum_are_refused_naming_the_prompt():
    step = TrainerStep(Uniform(), max_length=16)
    with pytest.raises(
        ValueError,
        match=r"generate\(\.\.\.\): lengths of prompt 1 \('b'\) must be <= the configured maximum 16, got 17",
    ):
        step.run(["a", "b"], 4, lambda idx, cnt: Generated([[1.0, 0.0]] * 2, [[16, 2], [17, 1]]))
    with pytest.raises(ValueError, match="max_length must be >= 1"):
        TrainerStep(Uniform(), max_length=0)


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        ([[3, -2], [1, 1]], "must be >= 0"),
        ([[3, float("nan")], [1, 1]], "must be finite"),
        ([[3], [1, 1]], "has 1 entries"),
    ],
)
def test_bad_lengths_from_the_trainer_are_refused(lengths, message):
    step = TrainerStep(Uniform())
    planned = step.plan(["a", "b"], 4)
    with pytest.raises(ValueError, match=r"generate\(\.\.\.\): lengths of prompt 0 \('a'\) " + message):
        step.observe(planned, Generated([[1.0, 0.0], [1.0, 0.0]], lengths))


def test_partly_missing_lengths_count_rollouts_and_are_said_once_per_run(caplog):
    step = TrainerStep(Pilot(m=2))

    def generate(idx, cnt):
        rewards = [REWARDS[i][: int(n)] for i, n in zip(idx.tolist(), cnt.tolist())]
        return Generated(rewards, [[5] * int(n) if i else None for i, n in zip(idx.tolist(), cnt.tolist())])

    with caplog.at_level(logging.WARNING, logger="adaptive_rollouts"):
        for _ in range(3):
            result = step.run(["a", "b", "c"], 12, generate)
            assert "tokens_spent" not in result.values and "adaptive/tokens_spent_total" not in result.log()
    assert len([r for r in caplog.records if "completion lengths are missing" in r.getMessage()]) == 1


def test_an_incomplete_step_reports_the_tokens_it_spent():
    def generate(idx, cnt):
        raise RoundIncomplete("sessions failed", Generated([[1.0]] * len(idx), [[11]] * len(idx)))

    result = TrainerStep(Uniform()).run(["a", "b"], 4, generate)
    assert result.incomplete
    assert result.values["tokens_spent"] == 22  # two records of 11 tokens; the failed rollouts count 0


def test_running_totals_round_trip_and_old_states_load_with_zero_tokens():
    totals = RunningTotals()
    totals.add(8, 12, {"tokens_spent": 412, "tokens_saved": 312.0})
    totals.add(12, 12)  # a step without lengths
    again = RunningTotals()
    again.load_state_dict(totals.state_dict())
    assert again == totals and again.values()["tokens_spent_total"] == 412
    old = RunningTotals()
    old.load_state_dict({"steps": 2, "rollouts_spent": 20, "budget": 24})
    assert old.token_steps == 0 and "tokens_spent_total" not in old.values()
    with pytest.raises(ValueError, match="tokens_spent"):
        RunningTotals().load_state_dict({**totals.state_dict(), "tokens_spent": -1})
    with pytest.raises(ValueError, match="token_steps"):
        RunningTotals().load_state_dict({**totals.state_dict(), "token_steps": 5})

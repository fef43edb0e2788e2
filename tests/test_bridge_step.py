"""`bridge.TrainerStep`, the one step every trainer runs: rounds, budget guard, one success signal
for the allocator and the regime tracker, metrics of what was generated, running totals, the
policy-features pass."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.allocators import VIGOR, SavingProgressive, Uniform
from adaptive_rollouts.bridge import PerPrompt, RoundIncomplete, RunningTotals, StepBook, TrainerStep
from adaptive_rollouts.fingerprints import zero_variance_fraction
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Draw, PolicyAware


def _rounds(rewards_of):
    """A round: prompt i's next rewards from ``rewards_of(i, n)``."""
    return lambda idx, cnt: [rewards_of(int(i), int(n)) for i, n in zip(idx, cnt)]


def test_progressive_and_single_shot_paths_feed_the_regime_tracker_the_same_successes():
    """TRL runs ``run``, verl's single-shot path ``plan`` / ``observe``: with a threshold signal both log
    the zero-variance share of the mapped successes (0.2 and 0.4 both fail the 0.5 threshold: flat)."""
    keys = ["a", "b"]
    raw = {0: [0.2, 0.4, 0.2, 0.4], 1: [0.9, 0.1, 0.9, 0.1]}
    trl = TrainerStep(Uniform(), SuccessSignal(threshold=0.5)).run(keys, 8, _rounds(lambda i, n: raw[i][:n]))
    step = TrainerStep(Uniform(), SuccessSignal(threshold=0.5))
    planned = step.plan(keys, 8)
    verl = step.observe(planned, [raw[0], raw[1]])
    want = zero_variance_fraction([np.zeros(4), np.array([1.0, 0.0, 1.0, 0.0])])
    assert zero_variance_fraction([np.array(raw[0]), np.array(raw[1])]) == 0.0  # what raw rewards would say
    assert trl.regime["regime/zero_variance_fraction"] == verl.regime["regime/zero_variance_fraction"] == want == 0.5
    assert trl.log()["regime/zero_variance_fraction"] == 0.5  # not 0.0, the share of the raw rewards


@pytest.mark.parametrize("allocator", [Uniform(), VIGOR(), SavingProgressive()], ids=["uniform", "vigor", "default"])
def test_last_metrics_count_what_was_generated_not_only_what_was_scored(allocator):
    """A prompt whose rollouts were all generated but left unscored is not skipped; one with one
    scored rollout of four is not a singleton."""

    def sample(indices, counts):
        rewards, unscored = [], []
        for i, n in zip(indices.tolist(), counts.tolist()):
            if i == 0:  # every rollout unscored
                rewards.append(np.zeros(0)), unscored.append(n)
            elif i == 1:  # one scored rollout
                rewards.append(np.ones(1)), unscored.append(n - 1)
            else:
                rewards.append(np.tile([0.0, 1.0], n)[:n]), unscored.append(0)
        return Draw(rewards, unscored)

    allocator.run(["a", "b", "c", "d"], 16, sample)
    m = allocator.last_metrics
    assert m["skipped"] == 0 and m["singletons"] == 0 and m["count_min"] >= 2
    assert m["unscored"] > 0 and sum(m["allocation_histogram"].values()) == 4 and 0 not in m["allocation_histogram"]


def test_observe_with_a_plan_counts_the_planned_rollouts():
    alloc = Uniform()
    plan = alloc.plan(["a", "b"], 6)
    alloc.observe(plan, [np.zeros(0), np.array([0.0, 1.0, 1.0])])  # a's three rollouts unscored
    assert alloc.last_metrics["skipped"] == 0 and alloc.last_metrics["unscored"] == 3


def test_the_step_guards_the_budget_before_generating_and_counts_unscored_and_failed():
    asked = []

    class Greedy(Uniform):
        def _run(self, prompts, budget, sample):
            sample(np.array([0, 1]), np.array([3, 3]))
            return sample(np.array([0]), np.array([3]))  # 9 > 8

    def generate(idx, cnt):
        asked.append(cnt.tolist())
        return [[None] + [1.0] * (int(n) - 2) for n in cnt]  # one unscored, one failed (missing)

    with pytest.raises(ValueError, match="over the budget 8"):
        TrainerStep(Greedy()).run(["a", "b"], 8, generate)
    assert asked == [[3, 3]]  # the third request never reached the trainer
    result = TrainerStep(Uniform()).run(["a", "b"], 8, generate)
    assert result.counts.tolist() == [4, 4] and result.unscored == 4 and result.values["skipped"] == 0
    assert [r.tolist() for r in result.raw] == [[1.0, 1.0], [1.0, 1.0]]


def test_an_incomplete_round_keeps_what_was_generated_and_reports_no_allocator_metrics():
    def generate(idx, cnt):
        raise RoundIncomplete("sessions failed", raws=[[1.0] for _ in cnt])

    alloc = VIGOR()
    result = TrainerStep(alloc).run(["a", "b"], 8, generate)
    assert result.incomplete and result.counts.sum() > 0 and result.log()["adaptive/incomplete_step"] == 1.0
    assert result.values["rollouts_spent"] == result.counts.sum() and alloc.last_metrics is None
    assert "effective_rollouts" not in result.values  # no statistics of groups the allocator did not finish


def test_running_totals_add_up_and_survive_a_state_round_trip():
    step = TrainerStep(SavingProgressive())
    rng = np.random.default_rng(0)
    spent = 0
    for _ in range(3):
        result = step.run(
            list("abcd"), 32, _rounds(lambda i, n: (rng.random(n) < [0.0, 1.0, 0.5, 0.5][i]).astype(float).tolist())
        )
        spent += result.spent
    log = result.log()
    assert log["adaptive/rollouts_spent_total"] == spent and log["adaptive/rollouts_saved_total"] == 96 - spent
    assert log["adaptive/budget_share_total"] == pytest.approx(spent / 96)
    back = RunningTotals()
    back.load_state_dict(step.totals.state_dict())
    assert back == step.totals
    for bad, match in (({"steps": 1, "rollouts_spent": 5, "budget": 4}, "exceeds"), ({"steps": -1}, "")):
        with pytest.raises(ValueError, match=match):
            RunningTotals().load_state_dict(bad)


def test_the_log_has_one_key_a_quantity_and_nothing_none_nan_or_constant():
    log = TrainerStep(Uniform()).run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n)).log({"extra": None})
    assert "adaptive/rollouts" not in log and "adaptive/budget" not in log and "adaptive/extra" not in log
    assert "adaptive/brier" not in log and "adaptive/predicted_success" not in log  # Uniform predicts nothing
    assert "regime/p_persistence" not in log  # NaN before any prompt is revisited
    assert all(np.isfinite(v) for v in log.values())


class Reader(Uniform):
    """A policy-aware allocator: records the features it was given, and when."""

    def __init__(self):
        super().__init__()
        self.events = []

    def observe_policy(self, prompts, features):
        self.events.append(("policy", list(prompts), features.copy()))

    def _plan(self, prompts, budget, prediction):
        self.events.append(("plan",))
        return super()._plan(prompts, budget, prediction)


def test_policy_features_reach_a_policy_aware_allocator_before_it_allocates():
    alloc = Reader()
    assert isinstance(alloc, PolicyAware) and not isinstance(Uniform(), PolicyAware)
    read = []
    step = TrainerStep(alloc, policy_features=lambda prompts: read.append(prompts) or np.ones((len(prompts), 3)))
    result = step.run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n), prompts=[{"text": "a"}, {"text": "b"}])
    assert [e[0] for e in alloc.events] == ["policy", "plan"]
    assert read == [[{"text": "a"}, {"text": "b"}]]  # the pass reads the trainer's rows (not hashable) ...
    assert alloc.events[0][1] == ["a", "b"]  # ... the allocator gets the keys its run gets
    assert alloc.events[0][2].dtype == np.float32 and alloc.events[0][2].shape == (2, 3)
    log = result.log()
    assert log["adaptive/policy_seconds"] >= 0 and 0 <= log["adaptive/policy_share"] <= 1
    planned = step.plan(["a", "b"], 4)  # the single-shot path reads it too
    step.observe(planned, [[1.0, 0.0], [1.0, 1.0]])
    assert [e[0] for e in alloc.events] == ["policy", "plan", "policy", "plan"]


def test_policy_features_are_never_computed_for_an_allocator_that_does_not_read_them():
    calls = []
    step = TrainerStep(Uniform(), policy_features=lambda prompts: calls.append(prompts))
    result = step.run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n))
    assert calls == [] and "policy_seconds" not in result.values


@pytest.mark.parametrize(
    "features, match",
    [
        (np.ones((3, 4)), r"shape \(3, 4\), expected \(2, width\)"),
        (np.array([[1.0, np.nan], [0.0, 0.0]]), "NaN or inf"),
        ("text", "not a float array"),
    ],
)
def test_bad_policy_features_are_refused_naming_the_input(features, match):
    step = TrainerStep(Reader(), policy_features=lambda prompts: features)
    with pytest.raises(ValueError, match=f"policy_features.*{match}|{match}") as err:
        step.run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n))
    assert "policy_features" in str(err.value)


def test_policy_features_keep_one_width_for_the_run():
    widths = iter([4, 5])
    step = TrainerStep(Reader(), policy_features=lambda prompts: np.zeros((len(prompts), next(widths))))
    step.run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n))
    with pytest.raises(ValueError, match="policy_features returned width 5, earlier steps gave 4"):
        step.run(["a", "b"], 4, _rounds(lambda i, n: [1.0] * n))


def test_per_prompt_rounds_keep_completions_and_refuse_a_short_generation():
    rounds = PerPrompt(["a", "b"], lambda p, n: [p] * n, lambda p, c: None if p == "a" else 1.0)
    result = TrainerStep(Uniform()).run(["a", "b"], 4, rounds)
    assert rounds.completions == [["a", "a"], ["b", "b"]] and rounds.rewards[0] == [None, None]
    assert result.unscored == 2 and result.values["skipped"] == 0
    with pytest.raises(ValueError, match=r"generate\('a', 2\) returned 1 completions"):
        TrainerStep(Uniform()).run(["a"], 2, PerPrompt(["a"], lambda p, n: [p], lambda p, c: 1.0))


def test_a_book_refuses_more_rewards_than_asked():
    with pytest.raises(ValueError, match="returned 3 rewards for prompt 'a', asked 2"):
        StepBook(["a"]).add([0], [[1.0, 1.0, 1.0]], [2])


def test_a_prior_equal_for_every_prompt_is_not_scored_as_a_prediction():
    """The default predicts its prior (the same p) for prompts it has never seen: no Brier score of
    that (it would read 0.25 on every step of a run that never revisits a prompt)."""
    from adaptive_rollouts.metrics import step_metrics
    from adaptive_rollouts.types import Prediction

    rewards = [np.array([0.0, 1.0]), np.array([1.0, 1.0])]
    flat = step_metrics(["a", "b"], [2, 2], rewards, Prediction(np.full(2, 0.5), np.zeros(2)))
    assert flat["brier"] is None and flat["predicted_success"] is None
    varied = step_metrics(["a", "b"], [2, 2], rewards, Prediction(np.array([0.5, 0.9]), np.zeros(2)))
    assert varied["brier"] == pytest.approx((0.25 + 0.25 + 0.01 + 0.01) / 4)
    log = TrainerStep(SavingProgressive()).run(list("abcd"), 32, _rounds(lambda i, n: [float(i % 2)] * n)).log()
    assert "adaptive/brier" not in log  # first step: every prompt new, the prior for all


class _SecondsReader(Uniform):
    """Uniform that keeps the ``seconds`` of every round it drew."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list = []

    def _run(self, prompts, budget, sample):
        def timed(indices, counts):
            draw = sample(indices, counts)
            self.seconds.append(draw.seconds)
            return draw

        return super()._run(prompts, budget, timed)


@pytest.mark.parametrize("time_rounds", [False, True])
def test_round_times_reach_the_allocator_only_when_asked(time_rounds):
    """Without ``time_rounds`` the allocation cannot depend on the machine's timings (runs with the
    same seeds reproduce); with it every round carries its wall-clock seconds."""
    alloc = _SecondsReader()
    TrainerStep(alloc, time_rounds=time_rounds).run(["a", "b"], 4, _rounds(lambda i, n: [1.0, 0.0][:n]))
    assert alloc.seconds, "the allocator drew no round"
    if time_rounds:
        assert all(s is not None and s >= 0 for s in alloc.seconds)
    else:
        assert all(s is None for s in alloc.seconds)

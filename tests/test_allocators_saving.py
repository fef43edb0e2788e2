"""The saving default (`allocators/saving.py`, `SavingProgressive`) and the group signal it is derived from
(`objectives/signal.py`)."""

import numpy as np
import pytest

from adaptive_rollouts.allocators import SavingProgressive, Uniform, make_allocator
from adaptive_rollouts.allocators.saving import LOSS_SHARE, affordable_losses
from adaptive_rollouts.allocators.saving_rule import EXPLORE_SHARE
from adaptive_rollouts.objectives.signal import expected_group_signal, group_signal, known_p_group_signal
from adaptive_rollouts.sim.estimators import group_advantages_np


def _sampler(p: np.ndarray, seed: int = 0):
    rng = np.random.default_rng(seed)

    def sample(idx, counts):
        return [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]

    return sample


# ---------------------------------------------------------------- the signal of a group
@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_group_signal_is_the_advantage_projection_of_the_estimators(estimator):
    """a(k; n) = sum_i A_i (r_i - k/n) with the advantages the trainer computes (brute force per group)."""
    for n in range(1, 11):
        row = group_signal(estimator, n)
        for k in range(n + 1):
            r = np.r_[np.ones(k), np.zeros(n - k)]
            adv = group_advantages_np(r, np.zeros(n, dtype=np.int64), estimator, eps=0.0)
            assert row[k] == pytest.approx(float(adv @ (r - k / n)), abs=1e-9), (n, k)
        assert row[0] == 0 and row[n] == 0  # an all-equal group teaches nothing
    assert np.allclose(group_signal(estimator, 6, "prompt-mean"), group_signal(estimator, 6) / 6)


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_expected_group_signal_matches_monte_carlo(estimator):
    rng = np.random.default_rng(0)
    total, drawn, succ, a, b = (
        np.array([8, 8, 6]),
        np.array([2, 4, 3]),
        np.array([0, 1, 3]),
        np.array([0.5, 2.0, 3.0]),
        np.array([6.0, 3.0, 1.0]),
    )
    exact = expected_group_signal(total, drawn, succ, a, b, estimator=estimator)
    for i in range(3):
        p = rng.beta(a[i], b[i], 200_000)
        t = rng.binomial(total[i] - drawn[i], p)
        mc = group_signal(estimator, int(total[i]))[succ[i] + t].mean()
        assert exact[i] == pytest.approx(mc, rel=0.02, abs=1e-3)


@pytest.mark.parametrize("estimator", ["grpo", "drgrpo", "rloo"])
def test_known_p_group_signal_matches_monte_carlo(estimator):
    rng = np.random.default_rng(3)
    p = np.array([0.0, 0.03, 0.3, 0.5, 0.9, 1.0])
    exact = known_p_group_signal(8, p, estimator=estimator)
    row = group_signal(estimator, 8)
    mc = np.array([row[rng.binomial(8, x, size=200_000)].mean() for x in p])
    assert exact[0] == exact[-1] == 0.0
    assert np.allclose(exact, mc, atol=0.01)
    with pytest.raises(ValueError, match="p must lie in"):
        known_p_group_signal(8, [1.2], estimator=estimator)


def test_expected_group_signal_rejects_bad_input():
    with pytest.raises(ValueError, match="one entry per prompt"):
        expected_group_signal([8], [2, 2], [0], [1.0], [1.0], estimator="grpo")
    with pytest.raises(ValueError, match="successes <= drawn <= total"):
        expected_group_signal([4], [6], [0], [1.0], [1.0], estimator="grpo")
    with pytest.raises(ValueError, match="estimator"):
        group_signal("ppo", 4)


# ---------------------------------------------------------------- the decision rules
def test_affordable_losses_gives_up_the_cheapest_below_average_options_within_the_allowance():
    rng = np.random.default_rng(0)
    for _ in range(200):
        value, cost = rng.gamma(0.5, 1.0, 10), rng.integers(1, 9, 10)
        allowance = float(rng.uniform(0, 0.3) * value.sum())
        give = affordable_losses(value, cost, allowance, np.random.default_rng(1))
        ratio, average = value / cost, value.sum() / cost.sum()
        assert value[give].sum() <= allowance + 1e-12 and np.all(ratio[give] < average)
        # a prefix in ratio order: nothing kept below the dearest given up ...
        if give.any():
            assert not np.any(~give & (ratio < ratio[give].max()))
        # ... and it is the longest such prefix
        below = np.flatnonzero(~give & (ratio < average))
        if below.size:
            nxt = below[np.argmin(ratio[below])]
            assert value[give].sum() + value[nxt] > allowance


def test_affordable_losses_gives_up_hopeless_options_whatever_the_allowance_and_the_average():
    value, cost = np.array([0.01, 0.01, 0.01, 0.5]), np.full(4, 8.0)
    hopeless = np.array([True, True, False, False])
    assert affordable_losses(value, cost, 0.0, hopeless=hopeless).tolist() == [True, True, False, False]
    # what they give up comes out of the allowance first: 0.025 - 0.02 leaves no room for the third
    assert affordable_losses(value, cost, 0.025, hopeless=hopeless).tolist() == [True, True, False, False]
    assert affordable_losses(value, cost, 0.035, hopeless=hopeless).tolist() == [True, True, True, False]
    alike = np.full(3, 0.01)  # no option below the average, yet the hopeless one goes
    assert affordable_losses(alike, np.full(3, 8.0), 0.0, hopeless=np.array([True, False, False])).tolist() == [
        True,
        False,
        False,
    ]


def test_flat_chance_cuts_hopeless_flat_pilots_and_keeps_a_rare_success_in_reach():
    from adaptive_rollouts.predictors.reference import KnownBelief

    def run(p, flat_chance):
        alloc = SavingProgressive(estimator="grpo", flat_chance=flat_chance, seed=0)
        alloc.belief = KnownBelief(lambda prompts: np.array([p[int(q)] for q in prompts]))
        rng = np.random.default_rng(0)
        sample = lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]  # noqa: E731
        return [len(r) for r in alloc.run([str(i) for i in range(len(p))], 8 * len(p), sample)]

    # known p: prompts that are never solved or always solved are skipped before any rollout
    counts = run(np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5]), 0.1)
    assert counts[4:] == [8, 8] and sum(counts[:4]) <= 8  # only exploration may pilot one
    # p = 0.1: a group of 8 varies with chance 0.57: never hopeless, every prompt is completed
    assert run(np.full(6, 0.1), 0.1) == [8] * 6
    with pytest.raises(ValueError, match="flat_chance"):
        SavingProgressive(flat_chance=1.0)


def test_bound_skips_false_keeps_the_bound_to_each_prompts_own_pilot():
    from adaptive_rollouts.predictors.reference import KnownBelief

    p = np.array([0.01] * 4 + [0.5] * 2)  # a group of 8 at p = 0.01 varies with chance 0.077: hopeless

    def run(skips, seed):
        # a share of a tenth pays for skipping only some of the hopeless prompts unseen (a fifth, all)
        alloc = SavingProgressive(estimator="grpo", flat_chance=0.1, bound_skips=skips, share=0.1, seed=seed)
        alloc.belief = KnownBelief(lambda prompts: np.array([p[int(q)] for q in prompts]))
        rng = np.random.default_rng(seed)
        sample = lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]  # noqa: E731
        groups = alloc.run([str(i) for i in range(len(p))], 8 * len(p), sample)
        return [len(r) for r in groups], [bool(np.ptp(r)) if len(r) else False for r in groups]

    for seed in range(5):
        skipping, _ = run(True, seed)
        assert skipping[4:] == [8, 8] and sum(skipping[:4]) <= 4  # skipped unseen: exploration pilots one at most
        waiting, varied = run(False, seed)
        assert waiting[4:] == [8, 8]
        # the allowance still skips some unseen (it pays for them); the bound cuts only flat pilots
        assert sum(waiting[:4]) >= 8 and all(n in (0, 4) or v for n, v in zip(waiting[:4], varied[:4]))


def test_at_four_rollouts_a_prompt_the_default_bounds_before_generating():
    from adaptive_rollouts.predictors.reference import KnownBelief

    # a group of 4 at p = 0.02 varies with chance 0.08: hopeless; six of them are worth more than the
    # allowance (here a tenth of the step's expected signal) pays for
    p = np.array([0.02] * 6 + [0.5] * 2)

    def run(skips, seed, per_prompt):
        alloc = SavingProgressive(estimator="grpo", bound_skips=skips, share=0.1, seed=seed)
        alloc.belief = KnownBelief(lambda prompts: np.array([p[int(q)] for q in prompts]))
        rng = np.random.default_rng(seed)
        sample = lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]  # noqa: E731
        return [len(r) for r in alloc.run([str(i) for i in range(len(p))], per_prompt * len(p), sample)]

    for seed in range(5):
        skipping = run(None, seed, 4)  # the default: the pilot is the group, so the bound acts before it
        assert skipping[6:] == [4, 4] and sum(skipping[:6]) <= 4  # exploration pilots one at most
        assert sum(run(False, seed, 4)) >= sum(skipping) + 12  # the rule before: only the allowance skips
        at_eight = run(None, seed, 8)  # groups of 8: the bound waits for each prompt's own pilot
        assert at_eight[6:] == [8, 8] and at_eight == run(False, seed, 8)


def test_the_default_bounds_flat_pilots_shortens_sure_ones_and_none_turns_the_bound_off():
    from adaptive_rollouts.allocators.saving_rule import FLAT_CHANCE

    alloc = make_allocator()
    assert (alloc.flat_chance, alloc.bound_skips, alloc.short_pilots) == (FLAT_CHANCE, None, True) == (0.1, None, True)
    # a cold start with alike prompts: the allowance alone cuts nothing, the bound cuts every flat pilot
    flat = lambda idx, counts: [np.zeros(c) if i < 6 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]  # noqa: E731
    cut = [len(r) for r in SavingProgressive(estimator="grpo", seed=0).run(list(range(8)), 64, flat)]
    kept = [len(r) for r in SavingProgressive(estimator="grpo", flat_chance=None, seed=0).run(list(range(8)), 64, flat)]
    assert cut == [4] * 6 + [8, 8] and kept == [8] * 8


def test_affordable_losses_gives_nothing_up_when_prompts_look_alike():
    assert not affordable_losses(np.full(6, 0.2), np.full(6, 8), 10.0).any()
    assert affordable_losses(np.array([0.2, 0.2, 0.0, 0.0]), np.full(4, 8), 0.0).sum() == 2  # worthless: free


# ---------------------------------------------------------------- the allocator
def test_is_the_default_and_a_saving_allocator():
    alloc = make_allocator(estimator="rloo", aggregation="token-mean", seed=3)
    assert isinstance(alloc, SavingProgressive) and alloc.kind == "save"
    assert alloc.estimator == "rloo" and alloc.aggregation == "token-mean"


@pytest.mark.parametrize("budget", [32, 77, 128, 300])
def test_never_more_than_the_budget_nor_uniforms_group_size(budget):
    p = np.random.default_rng(1).beta(0.4, 0.4, size=16)
    alloc = SavingProgressive(seed=0)
    uniform = Uniform().plan(list(range(16)), budget).counts
    for step in range(6):
        rewards = alloc.run(list(range(16)), budget, _sampler(p, step))
        counts = np.array([r.size for r in rewards])
        m = alloc.last_metrics
        assert counts.sum() <= budget and np.all(counts <= uniform) and np.all((counts == 0) | (counts >= 2))
        assert m["rollouts_spent"] == counts.sum() and m["rollouts_saved"] == budget - counts.sum()
        assert m["skipped"] == int(np.sum(counts == 0))


def test_null_control_spends_uniforms_counts():
    p = np.random.default_rng(3).random(12)
    alloc = SavingProgressive(saving=False)
    for step in range(3):
        counts = [r.size for r in alloc.run(list(range(12)), 96, _sampler(p, step))]
        assert counts == Uniform().plan(list(range(12)), 96).counts.tolist()


def test_completes_varied_groups_and_saves_on_flat_ones():
    p = np.r_[np.full(8, 0.5), np.zeros(4), np.ones(4)]
    alloc = SavingProgressive(seed=0)
    for step in range(4):
        rewards = alloc.run(list(range(16)), 128, _sampler(p, step))
        counts = np.array([r.size for r in rewards])
        varied = np.array([r.size >= 2 and np.ptp(r) > 0 for r in rewards])
        assert np.all(counts[varied] == 8)  # a group that varied is always completed
        if step >= 2:  # once the belief can tell them apart, a flat prompt costs at most its pilot,
            # unless it was explored (a lone tied group is not cut: the rule gives nothing up among
            # options it cannot tell apart)
            assert np.sum(counts[8:] > 4) <= alloc.last_metrics["explored"]


def test_a_step_where_nothing_is_known_pilots_every_prompt():
    """A cold start where every pilot is flat: the belief cannot tell the prompts apart, so nothing
    is skipped unseen (every prompt gets its pilot, where a rare success would show) and the
    allowance gives no flat prompt up; only the bound per group cuts the flat pilots, on each one's
    own four failures."""
    alloc = SavingProgressive(seed=0)
    rewards = alloc.run(list(range(16)), 128, _sampler(np.zeros(16), 0))
    assert [r.size for r in rewards] == [4] * 16 and alloc.last_metrics["skipped"] == 0
    without_bound = SavingProgressive(seed=0, flat_chance=None)
    rewards = without_bound.run(list(range(16)), 128, _sampler(np.zeros(16), 0))
    assert [r.size for r in rewards] == [8] * 16 and without_bound.last_metrics["cut"] == 0


def test_saves_at_four_rollouts_per_prompt_by_skipping_before_generating():
    """At n = 4 the pilot is the group: the saving is a skip decided from the belief alone."""
    p = np.r_[np.zeros(24), np.full(8, 0.5)]
    alloc = SavingProgressive(seed=0)
    spent = [sum(r.size for r in alloc.run(list(range(32)), 128, _sampler(p, s))) for s in range(30)]
    assert np.mean(spent[-10:]) < 0.75 * 128
    assert alloc.last_metrics["signal_given_up"] <= LOSS_SHARE + 1e-9


def test_history_skips_a_persistently_flat_prompt_but_keeps_exploring_it():
    p = np.r_[np.zeros(8), np.full(8, 0.5)]  # p persists: the history predicts the next visit
    alloc = SavingProgressive(seed=0)
    got = [[r.size for r in alloc.run(list(range(16)), 128, _sampler(p, s))[:8]] for s in range(100)]
    later = np.array(got[20:])  # the 8 flat prompts over 80 steps
    assert np.mean(later == 0) >= 0.75  # skipped before any rollout once p is known to persist
    # and still explored now and then: at least one skipped prompt in 20 is piloted (EXPLORE_SHARE)
    assert np.sum(later > 0) >= 0.5 * EXPLORE_SHARE * later.size
    assert alloc.last_metrics["persistence"] > 0.3  # measured, not configured


def test_state_is_checked_before_anything_changes():
    alloc = SavingProgressive(seed=0)
    p = np.random.default_rng(4).random(8)
    alloc.run(list(range(8)), 64, _sampler(p))
    state = alloc.state_dict()
    before = repr(alloc.state_dict())
    for key, value in (("belief", {"x": 1}), ("history_signal", "x"), ("history_spent", [1, 2, 3])):
        bad = {**state, key: value}
        with pytest.raises(ValueError, match=key):
            alloc.load_state_dict(bad)
        assert repr(alloc.state_dict()) == before
    fresh = SavingProgressive(seed=0)
    fresh.load_state_dict(state)
    assert [r.size for r in fresh.run(list(range(8)), 64, _sampler(p, 5))] == [
        r.size for r in alloc.run(list(range(8)), 64, _sampler(p, 5))
    ]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"pilot": 1}, "pilot"),
        ({"pilot": "4"}, "pilot must be an integer"),
        ({"max_prior_strength": float("nan")}, "max_prior"),
    ],
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SavingProgressive(**kwargs)


def test_a_budget_below_one_group_spends_nothing():
    """A saving allocator spends at most the budget: a budget of 1 (like 0) skips every prompt
    without calling `sample` (before: "cannot be met exactly", while 0 was accepted)."""
    calls = []

    def sample(idx, counts):
        calls.append(1)
        return [np.zeros(c) for c in counts]

    alloc = SavingProgressive()
    assert [r.size for r in alloc.run(["a", "b"], 1, sample)] == [0, 0]
    assert calls == [] and alloc.last_metrics["skipped"] == 2 and alloc.last_metrics["rollouts_spent"] == 0


@pytest.mark.parametrize("value", ["16", None, [16]])
def test_guarded_trust_scale_must_be_a_number(value):
    from adaptive_rollouts.allocators import GuardedProgressive

    with pytest.raises(ValueError, match="trust_scale must be a real number"):
        GuardedProgressive(trust_scale=value)


@pytest.mark.parametrize("predictor", ["beta", "cumulative"])
def test_a_resumed_default_continues_identically_with_the_policy_view(predictor):
    """Saved between steps (npz/JSON-safe state), loaded into a fresh allocator: the same counts
    and the same belief afterwards, whether the history is the predictor or kept beside it."""
    rng = np.random.default_rng(8)
    p = rng.beta(0.3, 0.3, 24)
    view = np.log(np.clip(p, 1e-3, 1 - 1e-3) / (1 - np.clip(p, 1e-3, 1 - 1e-3)))[:, None]
    a = SavingProgressive(predictor, seed=1)
    for step in range(6):
        a.observe_policy(list(range(24)), view)
        a.run(list(range(24)), 96, _sampler(p, step))
    b = SavingProgressive(predictor, seed=1)
    b.load_state_dict(a.state_dict())
    for step in range(6, 10):
        counts = []
        for alloc in (a, b):
            alloc.observe_policy(list(range(24)), view)
            counts.append([r.size for r in alloc.run(list(range(24)), 96, _sampler(p, step))])
        assert counts[0] == counts[1]
    assert np.array_equal(a.belief.predict(list(range(24))).mean, b.belief.predict(list(range(24))).mean)


def test_settling_pilot_is_the_smallest_pilot_whose_flat_outcome_settles_the_prompt():
    from adaptive_rollouts.allocators.saving_rule import settling_pilot

    def settles(a, b, m, n, up, bound=0.1):
        # P(n - m more repeat a flat pilot of m) = E[p^n] / E[p^m] = prod_{i=m}^{n-1} (a + i) / (a + b + i)
        # for successes (a and b swapped for failures): Beta moments as products, no special functions
        a, b = (a, b) if up else (b, a)
        return np.prod([(a + i) / (a + b + i) for i in range(m, n)]) >= 1 - bound

    rng = np.random.default_rng(3)
    a, b = np.exp(rng.uniform(-2, 2.5, 40)), np.exp(rng.uniform(-2, 2.5, 40))
    a[:10], b[:10] = 0.3, 12.0  # sure of failures
    target = rng.choice([4, 6, 8], 40)
    got = settling_pilot(a, b, target, 4, 0.1)
    for i in range(40):
        up = a[i] > b[i]
        small = [m for m in range(2, min(4, int(target[i]))) if settles(a[i], b[i], m, int(target[i]), up)]
        assert got[i] == (small[0] if small else min(4, int(target[i]))), (a[i], b[i], target[i])
    assert (got[:10] < 4).all() and (got[10:] == 4).any()


def test_short_pilots_shorten_the_pilot_where_the_belief_is_sure_and_never_at_the_first_step():
    from adaptive_rollouts.predictors.reference import KnownBelief

    # p = 0.02: a flat pilot of 3 leaves 5 more all-equal with chance 0.98^5 = 0.904 (settled), one
    # of 2 leaves 6 with 0.886 (not); six such prompts are more than the allowance skips
    p = np.array([0.02] * 6 + [0.5] * 2)
    alloc = SavingProgressive(estimator="grpo", short_pilots=True, flat_chance=0.1, seed=0)
    alloc.belief = KnownBelief(lambda prompts: np.array([p[int(q)] for q in prompts]))
    pilots: list[dict[int, int]] = []  # per step, the first round's count per prompt drawn

    def sample(idx, counts):
        if first_round:
            pilots.append({int(i): int(c) for i, c in zip(idx, counts)})
            first_round.clear()
        return [np.zeros(c) if p[i] < 0.1 else np.resize([1.0, 0.0], c) for i, c in zip(idx, counts)]

    for _ in range(3):
        first_round = [True]
        sizes = [len(r) for r in alloc.run([str(i) for i in range(8)], 64, sample)]
        assert sizes[6:] == [8, 8] and all(n < 8 for n in sizes[:6])
    assert set(pilots[0].values()) == {4}  # the first step: the full pilot everywhere
    for later in pilots[1:]:
        flat = [c for i, c in later.items() if i < 6]
        assert flat and set(flat) == {3} and [later[6], later[7]] == [4, 4]


def test_short_pilots_keep_a_step_in_one_round_while_round_times_are_awaited():
    from adaptive_rollouts.predictors.reference import KnownBelief

    # groups of 4 at p = 0.1: a flat pilot of 3 would settle (0.9^1), so without round times the
    # second step pilots 3 and completes the varied group in a second round
    def rounds(awaited: bool) -> list[list[list[int]]]:
        alloc = SavingProgressive(estimator="grpo", seed=0)
        alloc.belief = KnownBelief(lambda prompts: np.full(len(prompts), 0.1))
        if awaited:
            alloc.expect_round_times()
        calls: list[list[int]] = []

        def sample(idx, counts):
            calls.append(counts.tolist())
            return [np.resize([1.0, 0.0], c) if i == 0 else np.zeros(c) for i, c in zip(idx, counts)]

        steps = []
        for _ in range(3):
            calls.clear()
            alloc.run([str(i) for i in range(8)], 32, sample)
            steps.append(list(calls))
        return steps

    free = rounds(False)
    assert free[0] == [[4] * 8] and free[1] == [[3] * 8, [1]]
    assert rounds(True) == [[[4] * 8]] * 3  # one round a step until two are timed, as the round plan says

"""Bad input, tried systematically: one table of (component, input) cases. Each raises an exception
whose message names the input, and the component's state is unchanged afterwards (state_dict
equal, and the next good step gives what it would have given without the bad call); solvers
are stateless and must leave their arguments unmodified."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from conftest import (
    FEATURE_BACKED,
    POOL,
    PREDICTORS,
    REGISTRY,
    BernoulliEnv,
    budget_for,
    build_allocator,
    build_predictor,
    check_step_invariants,
    feature_table,
    states_equal,
)

from adaptive_rollouts.allocators import PosteriorProgressive, make_allocator
from adaptive_rollouts.allocators.proportional import proportional_counts
from adaptive_rollouts.solvers import allocate, solve_table

Q = 4


class WrongDimEncoder:
    """Claims dim 4 but returns 5 columns."""

    dim = 4

    def encode(self, prompts):
        return np.zeros((len(prompts), 5))


def _sample_returning(make):
    """A `sample` that answers every request with make(count)."""
    return lambda indices, counts: [make(int(c)) for c in counts]


# ------------------------------------------------------------------------------------------------
# allocators: (input name, action(alloc, prompts, budget), exception, message pattern)
# ------------------------------------------------------------------------------------------------
def _run(sample=None, prompts=None, budget=None):
    def act(alloc, good_prompts, good_budget):
        p = good_prompts if prompts is None else prompts(good_prompts)
        b = good_budget if budget is None else budget(alloc, good_budget)
        s = sample if sample is not None else BernoulliEnv(seed=1).sampler(p)
        return alloc.run(p, b, s)

    return act


def _observe(rewards_for, prompts=None):
    def act(alloc, good_prompts, good_budget):
        p = good_prompts if prompts is None else prompts(good_prompts)
        return alloc.observe(p, rewards_for(len(p)))

    return act


def _infeasible(alloc, budget):
    low, high = alloc.budget_range(Q)
    return low - 1 if low > 0 else high + 1 if high is not None else -1


ALLOCATOR_CASES = [
    ("nan-rewards", _run(_sample_returning(lambda c: np.full(c, np.nan))), ValueError, "NaN"),
    ("inf-rewards", _run(_sample_returning(lambda c: np.full(c, np.inf))), ValueError, "inf"),
    ("none-rewards", _run(lambda i, c: [None] * len(c)), ValueError, "None"),
    ("graded-above-1", _run(_sample_returning(lambda c: np.full(c, 1.5))), ValueError, r"outside \[0, 1\]"),
    ("graded-below-0", _run(_sample_returning(lambda c: np.full(c, -0.2))), ValueError, r"outside \[0, 1\]"),
    ("sample-too-few-arrays", _run(lambda i, c: [np.zeros(int(x)) for x in c][:-1]), ValueError, "reward arrays"),
    (
        "sample-wrong-group-size",
        _run(_sample_returning(lambda c: np.zeros(c + 1))),
        ValueError,
        r"has \d+ rewards, expected",
    ),
    ("empty-prompts", _run(prompts=lambda p: []), ValueError, "prompts is empty"),
    ("duplicate-prompts", _run(prompts=lambda p: [p[0], p[1], p[0], p[2]]), ValueError, "duplicates.*'q"),
    ("infeasible-budget", _run(budget=_infeasible), ValueError, "budget"),
    ("non-integer-budget", _run(budget=lambda a, b: b + 0.5), ValueError, "budget"),
    ("string-budget", _run(budget=lambda a, b: str(b)), ValueError, "budget must be an integer, got str"),
    ("none-budget", _run(budget=lambda a, b: None), ValueError, "budget must be an integer, got NoneType"),
    ("string-rewards", _run(_sample_returning(lambda c: np.array(["1"] * c))), ValueError, "real numbers"),
    ("complex-rewards", _run(_sample_returning(lambda c: np.ones(c) * (1 + 1j))), ValueError, "real numbers"),
]
SINGLE_SHOT_CASES = [
    ("observe-nan", _observe(lambda n: [np.array([np.nan, 1.0])] * n), ValueError, "NaN"),
    ("observe-none", _observe(lambda n: [None] * n), ValueError, "None"),
    ("observe-out-of-range", _observe(lambda n: [np.array([0.0, 2.0])] * n), ValueError, r"outside \[0, 1\]"),
    ("observe-length-mismatch", _observe(lambda n: [np.ones(2)] * (n + 1)), ValueError, "reward arrays"),
    ("observe-string-rewards", _observe(lambda n: [["1", "0"]] * n), ValueError, "real numbers"),
    ("observe-empty", _observe(lambda n: [], prompts=lambda p: []), ValueError, "prompts is empty"),
]
UNKNOWN_PROMPT_CASE = (
    "observe-unknown-prompt",
    _observe(lambda n: [np.ones(2)] * n, prompts=lambda p: p[:-1] + ["never-seen"]),
    KeyError,
    "never-seen",
)


def allocator_rows():
    rows = []
    for name in REGISTRY:
        single_shot = hasattr(build_allocator(name), "observe")
        cases = ALLOCATOR_CASES + (SINGLE_SHOT_CASES if single_shot else [])
        if name in FEATURE_BACKED and single_shot:
            cases = cases + [UNKNOWN_PROMPT_CASE]
        rows += [pytest.param(name, *case[1:], id=f"{name}-{case[0]}") for case in cases]
    return rows


def _twin_after_one_step(name):
    env = BernoulliEnv(seed=4)
    prompts = env.batch(Q)
    alloc = build_allocator(name, seed=2)
    budget = budget_for(alloc, Q, 2 * Q + 1)
    alloc.run(prompts, budget, env.sampler(prompts))
    return alloc, prompts, budget


@pytest.mark.parametrize("name, action, exc, match", allocator_rows())
def test_allocator_bad_input(name, action, exc, match):
    alloc, prompts, budget = _twin_after_one_step(name)
    twin, _, _ = _twin_after_one_step(name)
    before = copy.deepcopy(alloc.state_dict())
    with pytest.raises(exc, match=match):
        action(alloc, prompts, budget)
    assert states_equal(alloc.state_dict(), before), f"{name}: state changed by a failed call"
    # and behaviour: the next good step equals the twin's, which never saw the bad call
    out = [a.run(prompts, budget, BernoulliEnv(seed=9).sampler(prompts)) for a in (alloc, twin)]
    assert [r.tolist() for r in out[0]] == [r.tolist() for r in out[1]]


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("uniform", {"lower": 5, "upper": 3}, "lower"),
        ("vip", {"lower": 5, "upper": 3, "predictor": "beta"}, "lower"),
        ("posterior-progressive", {"lower": 5, "upper": 3, "predictor": "beta"}, "lower"),
        ("knapsack", {"lower": 5, "upper": 3}, "lower"),
        ("dynamo", {"lower": 5, "upper": 3}, "lower"),
        ("inverse-accuracy", {"lower": 5, "upper": 3, "predictor": "beta"}, "lower"),
        ("inverse-variance", {"lower": 5, "upper": 3, "predictor": "beta"}, "lower"),
        ("vigor", {"m0": 4, "upper": 3}, "upper"),
        ("vip", {"predictor": "no-such-predictor"}, "predictor"),
        ("vip", {"predictor": "gp", "features": WrongDimEncoder()}, "dimension"),
        ("vip-paper", {"features": WrongDimEncoder()}, "pool"),
    ],
)
def test_allocator_bad_construction(name, kwargs, match):
    """lower > upper, unknown predictor, wrong embedding dimension: refused at construction or at
    the first use of the features, with the offending argument named."""
    with pytest.raises(ValueError, match=match):
        alloc = make_allocator(name, **kwargs)
        alloc.run(POOL[:Q], 4 * Q, BernoulliEnv().sampler(POOL[:Q]))


def test_wrong_embedding_dimension_leaves_allocator_unchanged():
    alloc = make_allocator("posterior-progressive", predictor="gp", features=WrongDimEncoder(), seed=0)
    before = copy.deepcopy(alloc.state_dict())
    with pytest.raises(ValueError, match="wrong feature dimension"):
        alloc.run(POOL[:Q], 4 * Q, BernoulliEnv().sampler(POOL[:Q]))
    assert states_equal(alloc.state_dict(), before)
    assert isinstance(alloc, PosteriorProgressive)


# ------------------------------------------------------------------------------------------------
# predictors: update / predict / load_state_dict with bad input
# ------------------------------------------------------------------------------------------------
GOOD = [np.array([1.0, 0.0, 1.0]), np.array([0.0, 0.0]), np.array([0.5, 1.0])]
PREDICTOR_CASES = [
    ("nan-rewards", lambda m: m.update(POOL[:3], [np.array([np.nan, 1.0])] + GOOD[1:]), ValueError, "q0"),
    ("inf-rewards", lambda m: m.update(POOL[:3], GOOD[:2] + [np.array([np.inf])]), ValueError, "q2"),
    ("none-rewards", lambda m: m.update(POOL[:3], [GOOD[0], None, GOOD[2]]), ValueError, "None.*q1"),
    ("graded-outside-0-1", lambda m: m.update(POOL[:3], GOOD[:2] + [np.array([1.2])]), ValueError, r"\[0, 1\].*q2"),
    ("negative-reward", lambda m: m.update(POOL[:3], [np.array([-0.1])] + GOOD[1:]), ValueError, r"\[0, 1\].*q0"),
    ("empty-prompts", lambda m: m.update([], []), ValueError, "prompts is empty"),
    ("duplicate-prompts", lambda m: m.update(["q0", "q1", "q0"], GOOD), ValueError, "duplicates 'q0'"),
    ("rewards-count-mismatch", lambda m: m.update(POOL[:3], GOOD[:2]), ValueError, "rewards has 2 entries"),
    ("two-d-rewards", lambda m: m.update(POOL[:3], [np.ones((2, 2))] + GOOD[1:]), ValueError, "1-D.*q0"),
    ("single-string-prompts", lambda m: m.predict("q0"), ValueError, "single string"),
    ("string-rewards", lambda m: m.update(POOL[:3], [np.array(["1", "0"])] + GOOD[1:]), ValueError, "real numbers"),
]
# predictors keyed by prompt (no features): a prompt a checkpoint cannot hold is refused when first seen
KEYED_CASES = [
    ("unsaveable-prompt", lambda m: m.update(["q0", b"bytes"], GOOD[:2]), ValueError, "checkpoint can hold.*bytes"),
]
FEATURE_CASES = [
    ("unknown-prompt-update", lambda m: m.update(["q0", "never-seen"], GOOD[:2]), KeyError, "never-seen"),
    ("unknown-prompt-predict", lambda m: m.predict(["never-seen"]), KeyError, "never-seen"),
    (
        "state-of-other-dimension",
        lambda m: m.load_state_dict(type(m)(feature_table(dim=3)).state_dict()),
        ValueError,
        "dim|shape|keys",
    ),
]


def predictor_rows():
    rows = []
    for name in PREDICTORS:
        cases = PREDICTOR_CASES + (FEATURE_CASES if name in ("gp", "paper-gp", "ridge") else KEYED_CASES)
        rows += [pytest.param(name, *case[1:], id=f"{name}-{case[0]}") for case in cases]
    return rows


@pytest.mark.parametrize("name, action, exc, match", predictor_rows())
def test_predictor_bad_input(name, action, exc, match):
    model = build_predictor(name)
    model.update(["q0", "q3"], [np.array([1.0, 0.0]), np.array([1.0, 1.0, 1.0])])
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(exc, match=match):
        action(model)
    assert states_equal(model.state_dict(), before), f"{name}: state changed by a failed call"


@pytest.mark.parametrize("name", ["gp", "ridge"])
def test_predictor_wrong_embedding_dimension(name):
    model = build_predictor(name, features=feature_table())
    model.update(["q0"], [np.ones(2)])
    before = copy.deepcopy(model.state_dict())
    model.features = WrongDimEncoder()
    for call in (lambda: model.predict(["q0"]), lambda: model.update(["q0"], [np.ones(2)])):
        with pytest.raises(ValueError, match=r"wrong feature dimension"):
            call()
    assert states_equal(model.state_dict(), before)


# ------------------------------------------------------------------------------------------------
# solvers: stateless; arguments must come back untouched
# ------------------------------------------------------------------------------------------------
W = np.array([0.25, 0.09, 0.16])
TABLE = 1.0 / np.maximum(np.arange(9.0) - 1.0, 1.0)[None, :] * W[:, None]


def _with_nan(a):
    a = a.copy()
    a.flat[1] = np.nan
    return a


SOLVER_CASES = [
    ("allocate-nan-weights", lambda: allocate(_with_nan(W), 9), "weights"),
    ("allocate-inf-weights", lambda: allocate(np.array([0.2, np.inf]), 6), "weights"),
    ("allocate-negative-weights", lambda: allocate(np.array([0.2, -0.1, 0.3]), 9), "weights.*-0.1"),
    ("allocate-none-weights", lambda: allocate(np.array([0.2, None, 0.3]), 9), "weights"),
    ("allocate-empty", lambda: allocate(np.zeros(0), 4), "empty"),
    ("allocate-lower-above-upper", lambda: allocate(W, 12, lower=5, upper=3), "lower.*upper"),
    ("allocate-budget-too-small", lambda: allocate(W, 5, lower=2, upper=8), "budget=5 is infeasible"),
    ("allocate-budget-too-large", lambda: allocate(W, 30, lower=2, upper=8), "budget=30 is infeasible"),
    ("allocate-fractional-budget", lambda: allocate(W, 9.5), "budget must be an integer"),
    ("allocate-string-budget", lambda: allocate(W, "9"), "budget must be an integer, got str"),
    ("allocate-none-budget", lambda: allocate(W, None), "budget must be an integer, got NoneType"),
    ("allocate-bool-weight", lambda: allocate([0.2, True, 0.3], 9), "weights must be real numbers; entry 1 is bool"),
    ("allocate-string-weight", lambda: allocate([0.2, "0.2", 0.3], 9), "weights must be real numbers"),
    ("allocate-complex-weights", lambda: allocate(np.array([0.2 + 1j, 0.1, 0.3]), 9), "weights must be real"),
    ("allocate-string-lower", lambda: allocate(W, 9, lower="2"), "lower must be an integer"),
    ("allocate-bool-upper", lambda: allocate(W, 9, upper=True), "upper must be an integer"),
    (
        "allocate-grpo-bool-success-prob",
        lambda: allocate(W, 9, objective="grpo", success_prob=[0.2, True, 0.1]),
        "success_prob must be real numbers",
    ),
    ("allocate-2d-weights", lambda: allocate(np.ones((2, 2)), 8), "weights must be 1-D"),
    (
        "allocate-grpo-bad-success-prob",
        lambda: allocate(W, 9, objective="grpo", success_prob=[0.2, 1.5, 0.1]),
        "success_prob",
    ),
    ("allocate-skip-without-price", lambda: allocate(W, 9, allow_skip=True), "skip_cost"),
    ("allocate-unknown-objective", lambda: allocate(W, 9, objective="ppo"), "objective"),
    ("solve-table-nan-costs", lambda: solve_table(_with_nan(TABLE), 9, 2, 8), "NaN"),
    ("solve-table-minus-inf", lambda: solve_table(-np.inf * np.ones((3, 9)), 9, 2, 8), "-inf"),
    ("solve-table-wrong-columns", lambda: solve_table(TABLE[:, :5], 9, 2, 8), "columns"),
    ("solve-table-empty", lambda: solve_table(np.zeros((0, 9)), 0, 2, 8), "empty"),
    ("solve-table-lower-above-upper", lambda: solve_table(TABLE, 9, 9, 8), "lower.*upper"),
    ("solve-table-infeasible", lambda: solve_table(TABLE, 40, 2, 8), "budget=40 is infeasible"),
    (
        "solve-table-all-forbidden-row",
        lambda: solve_table(np.vstack([TABLE[:2], np.full(9, np.inf)]), 9, 2, 8),
        "rows \\[2\\]",
    ),
    ("proportional-negative-weights", lambda: proportional_counts(np.array([1.0, -2.0]), 8, 2, 6), "weights"),
    ("proportional-infeasible", lambda: proportional_counts(np.array([1.0, 2.0]), 20, 2, 6), "budget 20"),
]


@pytest.mark.parametrize("call, match", [pytest.param(c[1], c[2], id=c[0]) for c in SOLVER_CASES])
def test_solver_bad_input(call, match):
    w, table = W.copy(), TABLE.copy()
    with pytest.raises(ValueError, match=match):
        call()
    assert np.array_equal(W, w) and np.array_equal(TABLE, table)  # inputs untouched


def test_support_builds_every_registry_allocator():
    """The helpers above cover the whole registry (so the parametrized tests cannot miss one)."""
    for name in REGISTRY:
        alloc = build_allocator(name)
        env = BernoulliEnv()
        prompts = env.batch(4)
        budget = budget_for(alloc, 4, 8)
        env.log.clear()
        rewards = alloc.run(prompts, budget, env.sampler(prompts))
        assert check_step_invariants(alloc, prompts, budget, env.log, rewards) == [], name


# ------------------------------------------------------------------------------------------------
# load_state_dict: a damaged or hand-edited state is refused as the constructor would refuse it,
# naming the file and the entry, and the component is left exactly as it was
# ------------------------------------------------------------------------------------------------
def _set(key, value):
    def mutate(state):
        state[key] = value(state[key]) if callable(value) else value

    return mutate


def _set_at(key, index, value):
    def mutate(state):
        arr = np.array(state[key], copy=True)
        arr[index] = value
        state[key] = arr

    return mutate


def _duplicate_first_key(state):
    state["keys"] = [state["keys"][0]] + list(state["keys"][1:-1]) + [state["keys"][0]]


STATE_CASES = {
    "beta": [
        ("negative-alpha", _set_at("alpha", 0, -5.0), "alpha.*> 0"),
        ("nan-beta", _set_at("beta", 1, np.nan), "beta.*finite"),
        ("discount-7", _set("discount", 7.0), "discount must be in"),
        ("string-prior", _set("prior_alpha", "1.0"), "prior_alpha must be a real number"),
        ("duplicate-keys", _duplicate_first_key, "duplicate prompt keys"),
        ("unsaveable-key", _set("keys", lambda k: [frozenset({1})] + list(k[1:])), "frozenset"),
        ("alpha-wrong-length", _set("alpha", lambda a: a[:-1]), "alpha.*shape"),
        # before: accepted, then an overflow warning at the first prediction
        ("alpha-1e300", _set_at("alpha", 0, 1e300), r"alpha.*<= 9007199254740992"),
    ],
    "windowed": [
        ("negative-counts", _set_at("counts", (0, 0), -4.0), "counts.*>= 0"),
        ("sum-above-count", _set_at("sums", (0, 0), 99.0), "sum exceeds"),
        ("slot-out-of-range", _set_at("next", 0, 7), "next.*<= 1"),
        ("window-as-string", _set("window", "2"), "window must be an integer"),
    ],
    "cumulative": [
        ("sum-above-count", _set_at("sum", 0, 99.0), "sum exceeds"),
        ("prior-mean-1", _set("prior_mean", 1.0), r"prior_mean must be in \(0, 1\)"),
        ("inf-count", _set_at("count", 0, np.inf), "count.*finite"),
    ],
    "gp": [
        ("negative-u-var", _set_at("u_var", 0, -1.0), "u_var.*> 0"),
        ("nan-w-cov", _set_at("w_cov", (0, 0), np.nan), "w_cov.*finite"),
        ("u-step-after-step", _set_at("u_step", 0, 10**6), "u_step"),
        ("zero-half-life", _set("shared_half_life", 0.0), "shared_half_life must be"),
        ("bool-seed", _set("seed", True), "seed must be an integer"),
    ],
    "paper-gp": [
        ("nan-mean", _set_at("mean", 3, np.nan), "mean.*finite"),
        ("row-outside-pool", _set("last_rows", lambda r: np.array([99], dtype=np.int64)), "last_rows.*<= 11"),
        ("zero-jitter", _set("jitter", 0.0), "jitter must be"),
        ("negative-step", _set("step", -1), "step"),
    ],
    "ridge": [
        ("nan-gram", _set_at("gram", (0, 1), np.nan), "gram.*finite"),
        ("asymmetric-gram", _set_at("gram", (0, 1), 5.0), "symmetric"),
        ("negative-n", _set("n", -2.0), "n'.*>= 0"),
        ("alpha-zero", _set("alpha", 0.0), "alpha must be"),
    ],
}


def state_rows():
    return [
        pytest.param(name, mutate, match, id=f"{name}-{case}")
        for name, cases in STATE_CASES.items()
        for case, mutate, match in cases
    ]


def _trained_predictor(name):
    model = build_predictor(name)
    model.update(["q0", "q3"], [np.array([1.0, 0.0]), np.array([1.0, 1.0, 1.0])])
    model.update(["q0", "q5"], [np.array([0.0, 0.5]), np.array([1.0, 0.0, 1.0])])
    return model


@pytest.mark.parametrize("name, mutate, match", state_rows())
def test_predictor_refuses_bad_state_naming_file_and_entry(name, mutate, match, tmp_path):
    from adaptive_rollouts.state import load_state, save_state

    source = _trained_predictor(name)
    bad = copy.deepcopy(source.state_dict())
    mutate(bad)
    target = build_predictor(name)
    target.update(["q1"], [np.array([1.0, 0.0, 0.0])])
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(ValueError, match=match):  # in memory
        target.load_state_dict(bad)
    assert states_equal(target.state_dict(), before), f"{name}: a refused state changed the predictor"
    try:
        path = tmp_path / "ckpt.safetensors"
        save_state(path, {"predictor": bad})
    except ValueError:  # the value cannot even be written (e.g. an unsaveable key): refused at save time
        return
    with pytest.raises(ValueError, match=match) as err:  # from a file: the file and the entry are named
        target.load_state_dict(load_state(path)["predictor"])
    assert str(path) in str(err.value) and "entry 'predictor" in str(err.value)
    assert states_equal(target.state_dict(), before)


def _greso_with_streaks():
    alloc = make_allocator("greso", seed=0)
    alloc.observe(["a", "b", "c"], [np.ones(4), np.zeros(4), np.array([0.0, 1.0])])
    return alloc


ALLOCATOR_STATE_CASES = [
    # GRESO's load used to overwrite p_easy / p_hard before a KeyError on "keys"
    ("greso-missing-keys", "greso", lambda s: (s.update(p_easy=0.2), s.pop("keys")), "missing keys"),
    ("greso-p-easy-7", "greso", lambda s: s.update(p_easy=7.0), "p_easy must be in"),
    ("greso-negative-streak", "greso", lambda s: s.update(easy=[-3] * len(s["easy"])), "easy.*>= 0"),
    ("greso-duplicate-keys", "greso", lambda s: s.update(keys=[s["keys"][0]] * len(s["keys"])), "duplicate"),
    ("rng-garbage", "uniform", lambda s: s.update(rng={"bit_generator": "PCG64", "state": "x"}), "rng"),
    ("rng-missing", "uniform", lambda s: s.pop("rng"), "rng"),
    ("wrong-allocator", "uniform", lambda s: s.update(allocator="VIP"), "not 'Uniform'"),
    # hand-edited saving state the default could never produce (before: all loaded; a prior of
    # strength 1e300 pre-skipped 9 of 10 prompts, 1e308 made signal_per_rollout inf, a 50-step
    # history was silently cut to 10, unknown entries were ignored)
    (
        "default-history-prior-1e300",
        "default",
        lambda s: s["predictor"]["alpha"].__setitem__(0, 1e300),
        "predictor/alpha",
    ),
    ("default-old-population-entry", "default", lambda s: s.update(population=[1.0, 1.0]), "unknown entries"),
    ("default-history-signal-1e308", "default", lambda s: s.update(history_signal=[1e308]), "history_signal.*half"),
    (
        "default-history-50-steps",
        "default",
        lambda s: s.update(history_signal=[0.0] * 50, history_spent=[8] * 50),
        "history_signal.*at most 10 steps, got 50",
    ),
    ("default-unknown-entry", "default", lambda s: s.update(surprise=1), r"unknown entries \['surprise'\]"),
    ("vip-bad-predictor", "vip", lambda s: s["predictor"]["alpha"].__setitem__(0, np.nan), "predictor/alpha"),
    ("vip-predictor-not-a-dict", "vip", lambda s: s.update(predictor=[1, 2]), "must be a dict"),
    # GuardedProgressive's tracker used to be read after its predictor had been replaced, with raw
    # KeyError / TypeError naming neither file nor entry, and accepted negative windows, NaN tol, ...
    *[
        (f"{name}-tracker-{case}", name, mutate, match)
        for name in ("default", "guarded-progressive")
        for case, mutate, match in [
            ("nan", lambda s: s["tracker"]["last"].__setitem__((0, 0), np.nan), "tracker/last"),
            ("zv-sum-text", lambda s: s["tracker"].update(zv_sum="abc"), "tracker/zv_sum"),
            ("missing", lambda s: s.pop("tracker"), "tracker'.*missing|missing.*tracker"),
            ("window", lambda s: s["tracker"].update(window=-5), "window must be an integer >= 3"),
            ("tol-nan", lambda s: s["tracker"].update(tol=np.nan), "tol"),
            ("zv-steps", lambda s: s["tracker"].update(zv_steps=-7), "zv_steps.*-7"),
            ("zv-sum-above-steps", lambda s: s["tracker"].update(zv_sum=1e308), "zv_sum"),
            ("mean-1e308", lambda s: s["tracker"]["last"].__setitem__((0, 0), 1e308), "outside"),
            ("negative-noise", lambda s: s["tracker"]["last"].__setitem__((0, 1), -1.0), "negative"),
            (
                "duplicate-keys",
                lambda s: s["tracker"].update(keys=[s["tracker"]["keys"][0]] * len(s["tracker"]["keys"])),
                "tracker/keys.*duplicate",
            ),
            (
                "unhashable-keys",
                lambda s: s["tracker"].update(keys=[[1, 2]] * len(s["tracker"]["keys"])),
                "tracker/keys.*unhashable",
            ),
        ]
    ],
]


@pytest.mark.parametrize("case, name, mutate, match", [pytest.param(*c, id=c[0]) for c in ALLOCATOR_STATE_CASES])
def test_allocator_refuses_bad_state_atomically(case, name, mutate, match, tmp_path):
    from adaptive_rollouts.state import load_state, save_state

    def build():
        if name == "greso":
            return _greso_with_streaks()
        alloc = make_allocator(name, predictor="beta", seed=0) if name == "vip" else make_allocator(name, seed=0)
        alloc.run(POOL[:Q], 3 * Q, BernoulliEnv(seed=2).sampler(POOL[:Q]))
        return alloc

    source, target = build(), make_allocator(name, **({"predictor": "beta"} if name == "vip" else {}), seed=5)
    target.run(POOL[4 : 4 + Q], 3 * Q, BernoulliEnv(seed=3).sampler(POOL[4 : 4 + Q]))
    before = copy.deepcopy(target.state_dict())
    path = tmp_path / "ckpt.npz"
    save_state(path, {"allocator": source.state_dict()}, format="npz")
    bad = load_state(path)["allocator"]
    mutate(bad)
    with pytest.raises(ValueError, match=match) as err:
        target.load_state_dict(bad)
    assert states_equal(target.state_dict(), before), f"{case}: a refused state changed the allocator"
    if "missing" not in case and "not-a-dict" not in case:
        assert str(path) in str(err.value), "the error names the file"


# ------------------------------------------------------------------------------------------------
# the command line: argparse-style errors (exit status 2, the argument and the value typed named),
# never a traceback
# ------------------------------------------------------------------------------------------------
CLI_CASES = [
    ("p-not-a-number", ["allocate", "--p", "0.1,abc", "--budget", "8"], r"argument --p: 'abc' is not a number"),
    ("p-above-1", ["allocate", "--p", "1.5,0.5", "--budget", "8"], r"argument --p: .*\[0, 1\], got 1.5"),
    ("p-nan", ["allocate", "--p", "nan,0.5", "--budget", "8"], r"argument --p: .*got nan"),
    ("p-empty", ["allocate", "--p", "", "--budget", "8"], r"argument --p: expected comma-separated"),
    ("p-trailing-comma", ["allocate", "--p", "0.1,", "--budget", "8"], r"argument --p: expected comma-separated"),
    ("negative-budget", ["allocate", "--p", "0.1,0.5", "--budget", "-3"], r"argument --budget: must be >= 0, got -3"),
    ("budget-not-int", ["allocate", "--p", "0.1,0.5", "--budget", "8.5"], r"argument --budget: invalid integer '8.5'"),
    ("zero-upper", ["allocate", "--p", "0.1,0.5", "--budget", "8", "--upper", "0"], r"argument --upper: must be >= 1"),
    ("infeasible", ["allocate", "--p", "0.1,0.5", "--budget", "100", "--upper", "4"], r"allocate: error: .*budget"),
    (
        "lower-above-upper",
        ["allocate", "--p", "0.1,0.5", "--budget", "8", "--lower", "5", "--upper", "3"],
        r"allocate: error: .*lower",
    ),
    ("bench-negative-steps", ["bench", "--steps", "-1"], r"argument --steps: must be >= 1, got -1"),
    ("bench-zero-seeds", ["bench", "--seeds", "0"], r"argument --seeds: must be >= 1, got 0"),
    ("bench-budget-text", ["bench", "--budget", "lots"], r"argument --budget: invalid integer 'lots'"),
    # each of these used to exit 0, end in a traceback, or run something else than asked
    ("bench-unknown-method", ["bench", "--methods", "nosuch"], r"bench: error: --methods: 'nosuch': unknown method"),
    ("map-unknown-method", ["bench", "--map", "--methods", "nosuch"], r"--methods: 'nosuch': unknown method"),
    ("bench-lr-grid-negative", ["bench", "--lr-grid=-1,0,nan"], r"argument --lr-grid: must be a finite number > 0"),
    ("bench-lr-grid-text", ["bench", "--lr-grid", "1,x"], r"argument --lr-grid: 'x' is not a number"),
    ("bench-budget-infeasible", ["bench", "--budget", "3"], r"--budget 3 is infeasible for method 'uniform'"),
    ("bench-batch-above-pool", ["bench", "--batch-prompts", "50", "--prompts", "10"], r"--batch-prompts 50 exceeds"),
    ("bench-quick-and-full", ["bench", "--quick", "--full"], r"give one of --quick and --full"),
    ("bench-out-is-a-file", ["bench", "--out", "{file}"], r"--out: '.*' is a file, not a folder"),
    ("bench-out-unwritable", ["bench", "--out", "{file}/sub"], r"--out: cannot create"),
    ("map-ignores-seeds", ["bench", "--map", "--seeds", "3"], r"--seeds not used by --map"),
    ("map-ignores-several", ["bench", "--map", "--lr-grid", "1", "--budget", "9"], r"--budget, --lr-grid not used"),
    ("map-ignores-scenarios", ["bench", "--map", "--scenarios", "pareto"], r"--scenarios not used by --map"),
    ("map-two-aggregations", ["bench", "--map", "--aggregations", "seq-mean,token-mean"], r"give one aggregation"),
    ("map-unknown-cell", ["bench", "--map", "--cells", "nosuch"], r"bench: error: .*nosuch"),
    ("allocate-huge-budget", ["allocate", "--p", "0.5", "--budget", "10000000000000000000"], r"--budget: must be <="),
    ("allocate-lower-0", ["allocate", "--p", "0.5,0.2", "--budget", "8", "--lower", "0"], r"--lower: must be >= 1"),
    ("demo-zero-prompts", ["demo", "--prompts-per-step", "0"], r"argument --prompts-per-step: must be >= 1, got 0"),
    ("demo-negative-rollouts", ["demo", "--mean-rollouts", "-3"], r"argument --mean-rollouts: must be >= 1, got -3"),
    ("demo-one-rollout", ["demo", "--mean-rollouts", "1"], r"argument --mean-rollouts: must be >= 2, got 1"),
    ("demo-loss-type", ["demo", "--loss-type", "nosuch"], r"argument --loss-type: invalid choice: 'nosuch'"),
    ("demo-eval-every-0", ["demo", "--eval-every", "0"], r"argument --eval-every: must be >= 1, got 0"),
    ("demo-lr-nan", ["demo", "--lr", "nan"], r"demo: error: --lr must be a finite number > 0, got nan"),
    ("demo-unknown-method", ["demo", "--methods", "nosuch"], r"demo: error: --methods: unknown"),
    ("demo-model-dir", ["demo", "--model-dir", "{file}/none"], r"--model-dir: '.*' is not a folder"),
    ("demo-out-is-a-file", ["demo", "--out", "{file}"], r"--out: '.*' is a file"),
]


@pytest.mark.parametrize("argv, match", [pytest.param(c[1], c[2], id=c[0]) for c in CLI_CASES])
def test_cli_bad_input(argv, match, capsys, tmp_path):
    import time

    from adaptive_rollouts.cli import main

    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    argv = [a.replace("{file}", str(a_file)) for a in argv]
    if argv[0] in ("bench", "demo") and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    start = time.process_time()
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own exit for a bad argument
        status = exit_.code
    err = capsys.readouterr().err
    assert status == 2
    assert "Traceback" not in err
    assert re.search(match, err), err
    assert time.process_time() - start < 20, "refused only after the expensive set-up"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "ran before refusing"


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: __import__("adaptive_rollouts.predictors").predictors.DiscountedBeta(discount="0.5"), "discount"),
        (lambda: __import__("adaptive_rollouts.predictors").predictors.WindowedMean(window=2.0), "window"),
        (lambda: __import__("adaptive_rollouts.predictors").predictors.CumulativeMean(prior_mean=True), "prior_mean"),
        (lambda: make_allocator("greso", p_easy="0.5"), "p_easy"),
        # used to be a raw TypeError ("9" < 2), silently truncated (2.5 -> 2), or accepted (nan)
        (lambda: make_allocator("uniform", upper="9"), "upper must be an integer, got str '9'"),
        (lambda: make_allocator("vip", predictor="beta", lower=2.5), "lower must be an integer, got float 2.5"),
        (lambda: make_allocator("knapsack", upper=None), "upper bound"),
        (lambda: make_allocator("inverse-accuracy", predictor="beta", lower="2"), "lower must be an integer"),
        (lambda: make_allocator("posterior-progressive", predictor="beta", upper="9"), "upper must be an integer"),
        (
            lambda: make_allocator("posterior-progressive", predictor="beta", max_prior_strength=float("nan")),
            "max_prior_strength",
        ),
        (lambda: make_allocator("guarded-progressive", lower=2.5), "lower must be an integer, got float 2.5"),
    ],
    ids=[
        "beta-string-discount",
        "windowed-float-window",
        "cumulative-bool-prior",
        "greso-string-p",
        "uniform-string-upper",
        "vip-fractional-lower",
        "knapsack-no-upper",
        "proportional-string-lower",
        "pp-string-upper",
        "pp-nan-prior-strength",
        "guarded-fractional-lower",
    ],
)
def test_constructors_take_real_numbers_only(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_duplicate_detection_is_linear():
    """Before: naming the duplicates was quadratic (40,000 prompts with duplicates: 6 s)."""
    import time

    from adaptive_rollouts.checks.validation import check_prompts

    prompts = [f"p{i % 100_000}" for i in range(200_000)]  # 100,000 duplicates
    start = time.process_time()
    with pytest.raises(ValueError, match="duplicates 'p0', 'p1'.* and 99995 more"):
        check_prompts(prompts)
    assert time.process_time() - start < 2.0  # quadratic: minutes


@pytest.mark.parametrize("name", REGISTRY + ["posterior-progressive+beta"])
def test_prompts_a_checkpoint_cannot_hold_are_refused_before_any_rollout(name):
    """The default's tracker, PosteriorProgressive and GuardedProgressive used to draw the whole
    budget (12 of 12 rollouts) before refusing a bytes prompt; allocators that keep nothing per
    prompt take it."""
    if name == "posterior-progressive+beta":  # a predictor that takes any prompt: no KeyError first
        alloc = make_allocator("posterior-progressive", predictor="beta", seed=0)
    else:
        alloc = build_allocator(name)
    if name in ("default", "guarded-progressive", "posterior-progressive", "posterior-progressive+beta"):
        assert alloc.stores_prompts()
    drawn = []

    def sample(indices, counts):
        drawn.append(int(np.sum(counts)))
        return [np.ones(int(c)) for c in counts]

    prompts = [b"bytes prompt", "b", "c"]
    budget = budget_for(alloc, 3, 6)
    try:
        alloc.run(prompts, budget, sample)
    except (ValueError, KeyError) as err:  # KeyError: a feature-backed predictor has no features for it
        assert re.search("checkpoint can hold|features", str(err)), err
        assert drawn == [], f"{name} drew {sum(drawn)} rollouts before refusing"
    else:
        assert not alloc.stores_prompts(), f"{name} keeps per-prompt state but took a bytes prompt"

"""No memory or time cliffs, no free groups without gradient.

* `allocate` answers at once in little memory whatever `upper` and the budget (before: `upper`
  defaulted to the budget and every solve built tables of that width: 7.28 TiB asked for a budget
  of 10^12, 3.2 GB and 12 s for `upper=10**8`).
* a 1-rollout group (and, under GRPO, an all-equal group) carries no gradient: it is priced as a
  skipped prompt, never as "zero variance"; 1-rollout groups appear only when the budget forces
  them, and identical priors give an even allocation.
The timings at Q = 100,000 and 1M prompts are a benchmark (benchmarks/scale.py), not tests.
"""

from __future__ import annotations

import time
import tracemalloc
from collections import Counter

import numpy as np
import pytest

from adaptive_rollouts.allocators import VIP
from adaptive_rollouts.cli import main
from adaptive_rollouts.objectives.pricing import allocation_cost
from adaptive_rollouts.solvers import allocate

P4 = np.array([0.1, 0.5, 0.3, 0.9])


def _args(objective):
    w = np.ones(4) if objective == "grpo" else P4 * (1 - P4)
    return w, {"success_prob": P4} if objective == "grpo" else {}


def _cost(objective, counts, w):
    p = P4 if objective == "grpo" else None
    return float(np.sum(w * allocation_cost(objective, counts, success_prob=p)))


HUGE = [
    ("budget-1e9", {"budget": 10**9}),
    ("budget-1e12", {"budget": 10**12}),
    ("upper-1e9", {"budget": 16, "upper": 10**9}),
    ("upper-1e8-lower-1", {"budget": 16, "upper": 10**8, "lower": 1}),
    ("budget-1e9-lower-1", {"budget": 10**9, "lower": 1}),
    ("budget-1e9-skip", {"budget": 10**9, "allow_skip": True, "skip_cost": 0.3}),
]


@pytest.mark.parametrize("objective", ["rloo", "drgrpo", "grpo"])
@pytest.mark.parametrize("case, kwargs", [pytest.param(*c, id=c[0]) for c in HUGE])
def test_memory_and_time_do_not_grow_with_upper_or_budget(objective, case, kwargs):
    w, extra = _args(objective)
    tracemalloc.start()
    start = time.process_time()
    try:
        counts = allocate(w, objective=objective, **kwargs, **extra)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    seconds = time.process_time() - start
    assert counts.sum() == kwargs["budget"] and counts.min() >= 2
    assert peak < 16 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert seconds < 5.0, f"{seconds:.1f} s"
    # optimal: no move of 1, 2, 4 or 8 rollouts between two prompts lowers the cost (beyond rounding)
    best = _cost(objective, counts, w)
    for i in range(4):
        for j in range(4):
            for d in (1, 2, 4, 8):
                moved = counts.copy()
                moved[i] -= d
                moved[j] += d
                if i != j and moved[i] >= 2 and moved.max() <= kwargs.get("upper", kwargs["budget"]):
                    assert _cost(objective, moved, w) >= best - 1e-12 * max(best, 1e-300)


def test_issue_examples_answer_at_once():
    w = P4 * (1 - P4)
    start = time.process_time()
    assert allocate(w, 16, upper=10**8).tolist() == allocate(w, 16, upper=10).tolist()
    assert allocate(w, 10**12).sum() == 10**12
    assert VIP("beta", upper=10**9).plan(["a", "b", "c", "d"], 10**9).counts.sum() == 10**9
    assert time.process_time() - start < 5.0


def test_cli_with_a_huge_upper_answers(capsys):
    """Before: OOM-killed."""
    assert main(["allocate", "--p", "0.1,0.5", "--budget", "8", "--upper", "1000000000"]) == 0
    assert _rollouts(capsys.readouterr().out) == ["3", "5"]


def _rollouts(out):
    """The counts on the `rollouts:` line of `allocate`'s output."""
    return next(line for line in out.splitlines() if line.startswith("rollouts:")).split()[1:]


# ------------------------------------------------------------------------------------------------
# groups without gradient are not free
# ------------------------------------------------------------------------------------------------
PROMPTS = [f"q{i}" for i in range(100)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"estimator": "drgrpo", "lower": 1},  # before: 99 prompts with 1 rollout and one with 701
        {"estimator": "grpo", "lower": 2, "upper": 32},  # before: {2: 46, 13: 48, 14: 6}
        {"estimator": "grpo", "lower": 2, "upper": 32, "variance": "expected"},
        {"estimator": "grpo", "lower": 1},
        {"estimator": "rloo", "lower": 1},
    ],
    ids=["drgrpo-lower-1", "grpo-lower-2", "grpo-expected", "grpo-lower-1", "rloo-lower-1"],
)
def test_identical_priors_give_an_even_allocation(kwargs):
    counts = VIP(predictor="beta", **kwargs).plan(PROMPTS, 800).counts
    assert Counter(counts.tolist()) == {8: 100}


def test_cli_drgrpo_lower_1_gives_no_free_singleton(capsys):
    """Before: `7 1`: the 1-rollout group looked free (zero variance, because zero gradient)."""
    assert main(["allocate", "--p", "0.1,0.5", "--budget", "8", "--lower", "1", "--objective", "drgrpo"]) == 0
    lower_1 = _rollouts(capsys.readouterr().out)
    assert main(["allocate", "--p", "0.1,0.5", "--budget", "8", "--lower", "2", "--objective", "drgrpo"]) == 0
    assert lower_1 == _rollouts(capsys.readouterr().out) and "1" not in lower_1


@pytest.mark.parametrize("objective", ["rloo", "drgrpo", "grpo"])
@pytest.mark.parametrize("seed", range(3))
def test_one_rollout_groups_only_when_the_budget_forces_them(objective, seed):
    rng = np.random.default_rng(seed)
    q = 40
    p = rng.uniform(0, 1, q)
    w = np.ones(q) if objective == "grpo" else p * (1 - p)
    extra = {"success_prob": p} if objective == "grpo" else {}
    for budget in (q, q + 7, 2 * q - 1, 2 * q, 2 * q + 5, 5 * q):
        counts = allocate(w, budget, lower=1, objective=objective, **extra)
        assert counts.sum() == budget
        assert int(np.sum(counts == 1)) == max(0, 2 * q - budget), (budget, counts.tolist())
        if budget >= 2 * q:  # no 1-rollout group: the same answer as lower = 2
            assert counts.tolist() == allocate(w, budget, lower=2, objective=objective, **extra).tolist()
        else:  # forced: the prompts that lose least get them, every other prompt 2
            assert set(counts.tolist()) <= {1, 2}
            loss = w * (allocation_cost(objective, 1, p) - allocation_cost(objective, 2, p))
            if 0 < budget - q < q:
                assert loss[counts == 1].max() <= loss[counts == 2].min() + 1e-15


def test_grpo_prices_all_equal_groups_as_skipped_prompts():
    """GRPO's std normalisation gives an all-equal group zero advantages: its raw variance is 0,
    which made groups of 2 (all-equal half the time at p = 1/2) look cheaper than groups of 3."""
    from adaptive_rollouts.objectives import grpo_variance

    assert grpo_variance(0.5, 2) < grpo_variance(0.5, 3)  # the raw variance: the trap
    cost = allocation_cost("grpo", np.arange(1, 12), success_prob=0.5)
    assert np.all(np.diff(cost) <= 0)  # the priced cost never rewards fewer rollouts
    assert cost[0] == pytest.approx(0.25)  # 1 rollout: no signal at all
    assert allocation_cost("grpo", 5, success_prob=0.0) == pytest.approx(0.25)  # p = 0: never a signal

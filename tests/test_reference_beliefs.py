"""The reference beliefs (`predictors.reference`): the exact posterior against quadrature, the known p
as a point, their checks and state, and the default's rule reading them in place of its own."""

import numpy as np
import pytest
from scipy.integrate import quad

from adaptive_rollouts.allocators import SavingProgressive
from adaptive_rollouts.predictors.reference import POINT_STRENGTH, KnownBelief, PopulationPosterior

GRID = (np.arange(4000) + 0.5) / 4000


def mixture(p):
    """The recurring pool's population: 40% on [0, 0.02], 40% on [0.98, 1], 20% on [0.1, 0.9]."""
    p = np.asarray(p, dtype=float)
    return ((p <= 0.02) | (p >= 0.98)) * 0.4 / 0.02 + ((p >= 0.1) & (p <= 0.9)) * 0.2 / 0.8


def quad_moments(s, f):
    """Posterior mean and variance of p under `mixture` after s successes and f failures, by
    adaptive quadrature on each piece."""
    pieces = [(0.0, 0.02), (0.1, 0.9), (0.98, 1.0)]

    def integral(k):
        return sum(
            quad(lambda p: p**k * p**s * (1 - p) ** f * float(mixture(p)), a, b, epsabs=0, epsrel=1e-12)[0]
            for a, b in pieces
        )

    z = integral(0)
    mean = integral(1) / z
    return mean, integral(2) / z - mean**2


@pytest.mark.parametrize("s,f", [(0, 0), (0, 8), (1, 7), (0, 40), (8, 0), (3, 5)])
def test_the_posterior_matches_quadrature(s, f):
    post = PopulationPosterior(GRID, mixture(GRID))
    if s + f:
        post.update(["q"], [np.array([1.0] * s + [0.0] * f)])
    a, b = post.belief(["q"])
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    want_mean, want_var = quad_moments(s, f)
    assert mean[0] == pytest.approx(want_mean, rel=2e-3, abs=1e-6)
    assert var[0] == pytest.approx(want_var, rel=5e-3, abs=1e-8)


def test_a_uniform_population_gives_the_conjugate_beta_and_visits_add_up():
    post = PopulationPosterior(GRID, np.ones(GRID.size))
    post.update(["q", "r"], [np.array([1.0, 0.0]), np.array([0.0])])
    post.update(["q"], [np.array([1.0, 1.0, 0.0])])  # q: 3 successes, 2 failures in all
    a, b = post.belief(["q", "r", "new"])
    assert a == pytest.approx([4.0, 1.0, 1.0], rel=1e-3)
    assert b == pytest.approx([3.0, 2.0, 1.0], rel=1e-3)


def test_the_known_p_is_a_point_and_its_input_is_checked():
    p = {"a": 0.0, "b": 0.3, "c": 1.0}
    known = KnownBelief(lambda prompts: np.array([p[q] for q in prompts]))
    a, b = known.belief(["a", "b", "c"])
    assert a + b == pytest.approx(np.full(3, POINT_STRENGTH))
    assert (a / (a + b)) == pytest.approx([0.0, 0.3, 1.0], abs=1e-5)
    with pytest.raises(ValueError, match="success must be a callable"):
        KnownBelief(0.3)
    with pytest.raises(ValueError, match=r"success\(prompts\) must give 2 values in \[0, 1\]"):
        KnownBelief(lambda prompts: np.array([0.5, 1.5])).belief(["a", "b"])
    with pytest.raises(ValueError, match="success"):
        KnownBelief(lambda prompts: np.array([np.nan, 0.5])).belief(["a", "b"])


@pytest.mark.parametrize(
    "grid,density,match",
    [
        (np.array([0.5]), np.array([1.0]), "one length >= 2"),
        (np.array([0.0, 0.5]), np.ones(2), "strictly inside"),
        (np.array([0.6, 0.5]), np.ones(2), "strictly inside"),
        (np.array([0.2, 0.5]), np.array([1.0, -1.0]), "density must be >= 0"),
        (np.array([0.2, 0.5]), np.zeros(2), "not all 0"),
        (np.array([0.2, 0.5]), np.ones(3), "one length"),
    ],
)
def test_a_bad_population_is_refused_by_name(grid, density, match):
    with pytest.raises(ValueError, match=match):
        PopulationPosterior(grid, density)


def test_the_rule_reads_a_reference_belief_and_resumes_with_it_exactly():
    p = np.where(np.arange(16) % 4 == 0, 0.5, 0.0)

    def sampler(seed):
        rng = np.random.default_rng(seed)
        return lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]

    def fresh():
        alloc = SavingProgressive(estimator="grpo", seed=3)
        alloc.belief = PopulationPosterior(GRID, mixture(GRID))
        return alloc

    alloc = fresh()
    for step in range(4):
        alloc.run(list(range(16)), 128, sampler(step))
    resumed = fresh()
    resumed.load_state_dict(alloc.state_dict())
    went_on = [len(g) for g in alloc.run(list(range(16)), 128, sampler(9))]
    assert [len(g) for g in resumed.run(list(range(16)), 128, sampler(9))] == went_on
    assert sum(went_on) < 128  # the never-solved prompts, known flat from their history, are skipped
    with pytest.raises(ValueError, match="belief: a dict lacks"):
        alloc.belief = {}


def test_the_pool_block_says_which_belief_meets_the_targets_and_reads_the_lines_at_the_default_spend(tmp_path):
    from adaptive_rollouts.experiments.results import write_result
    from adaptive_rollouts.reporting.share_tables import POOL_BELIEFS, render_pool_beliefs

    assert "benchmarks/pool_beliefs.py" in render_pool_beliefs(tmp_path)  # no file yet: how to make it
    points = {  # (n, belief): (spent, kept) at shares 0.1 and 0.2
        (4, "learned"): ((0.6, 0.9), (0.45, 0.85)),
        (4, "posterior"): ((0.7, 0.92), (0.5, 0.88)),
        (4, "known p"): ((0.45, 0.91), (0.3, 0.87)),
        (8, "learned"): ((0.5, 0.85), (0.4, 0.8)),
        (8, "posterior"): ((0.6, 0.9), (0.4, 0.8)),
        (8, "known p"): ((0.47, 0.91), (0.3, 0.83)),
    }
    rows = [
        {"n": n, "belief": b, "share": s, "spent": sp, "kept": k, "given": round(1 - k, 2), "claimed": 0.1}
        for (n, b), pts in points.items()
        for s, (sp, k) in zip((0.1, 0.2), pts)
    ]
    pool = {"size": 200, "extreme": 0.8, "batch": 32, "steps": 60}
    bound = [{"n": 8, "keep": 0.9, "spent": 0.45}, {"n": 8, "keep": 0.85, "spent": 0.32}]
    data = {"rows": rows, "bound": bound, "shipped": 0.1, "seeds": 6, "shares": [0.1, 0.2], "sizes": [4, 8]}
    data["pool"] = pool
    write_result(tmp_path / POOL_BELIEFS, data, command="python benchmarks/pool_beliefs.py", commit="abc1234")
    text = render_pool_beliefs(tmp_path)
    assert "| 4 | known p | 0.45 / 0.91 | 0.30 / 0.87 |" in text
    assert "- n = 4, target <= 0.5 of the budget at >= 0.9 kept: met by known p at 0.1." in text
    assert "- n = 8, target <= 0.4 of the budget at >= 0.9 kept: met by no belief at any share." in text
    # at the learned belief's spend 0.5 (n = 8): posterior halfway from (0.4, 0.8) to (0.6, 0.9); known p past its range
    assert "the other lines keep (interpolated): posterior 0.85; it keeps 0.85. With p known and nothing" in text
    assert "keeping 0.85 takes at least 0.32, 0.9 takes at least 0.45 of the budget" in text
    assert (
        "at the share shipped when run (0.1): learned 0.100 / 0.100 at n = 4; posterior 0.080 / 0.100 at n = 4;" in text
    )
    assert "pool_frontier.png" in text and "commit abc1234" in text


def test_the_least_spend_that_keeps_a_share_of_the_signal_is_the_exhaustive_optimum():
    """`least_spend` (benchmarks/pool_beliefs.py) against every subset of a small population of
    prompts of equal mass: the fewest prompts whose signal reaches the share (at a whole prompt)."""
    import itertools
    import runpy

    least_spend = runpy.run_path("benchmarks/pool_beliefs.py")["least_spend"]
    rng = np.random.default_rng(4)
    for _ in range(20):
        values = rng.exponential(1.0, 7) * (rng.random(7) < 0.7)
        for keep in (0.5, 0.8, 0.95):
            need = keep * values.sum()
            fewest = min(
                size
                for size in range(8)
                for subset in itertools.combinations(range(7), size)
                if values[list(subset)].sum() >= need - 1e-12
            )
            got = least_spend(values, np.ones(7), keep) * 7
            assert fewest - 1 < got <= fewest + 1e-9  # the last prompt kept in part

"""The saving-signal benchmark's ledger (`benchmarks/saving_signal.py`): what a method's stops gave
up, priced with the known p at what it had seen (against Monte Carlo), and the ledger's columns on a
hand-made allocator."""

import runpy

import numpy as np
import pytest

from adaptive_rollouts.objectives.signal import group_signal, known_p_group_signal

BENCH = runpy.run_path("benchmarks/saving_signal.py")


@pytest.mark.parametrize("n, k, s, p", [(8, 4, 0, 0.1), (8, 4, 4, 0.93), (8, 2, 1, 0.5), (4, 0, 0, 0.3)])
def test_given_up_signal_matches_monte_carlo(n, k, s, p):
    rng = np.random.default_rng(0)
    t = rng.binomial(n - k, p, 400_000)
    row = group_signal("grpo", n)
    assert BENCH["given_up_signal"](n, k, s, p) == pytest.approx(float(row[s + t].mean()), rel=0.02, abs=1e-3)
    if k == 0:
        assert BENCH["given_up_signal"](n, k, s, p) == pytest.approx(
            float(known_p_group_signal(n, [p], estimator="grpo")[0])
        )


class _Problem:
    def __init__(self, p):
        self.p = np.asarray(p)

    def success(self, idx):
        return self.p[np.asarray(idx)]


class _CutsAfterFourFailures:
    """Skips prompt 0, cuts the others after a pilot of 4 that is all failures, else completes."""

    def __init__(self):
        self.last_metrics = {"signal_given_up": 0.05}

    def run(self, prompts, budget, sample):
        n = budget // len(prompts)
        pilot = sample(list(range(1, len(prompts))), [4] * (len(prompts) - 1))
        groups = [np.zeros(0)]
        for i, g in enumerate(pilot, start=1):
            groups.append(g if g.sum() == 0 else np.r_[g, sample([i], [n - 4])[0]])
        return groups


def test_the_ledger_prices_a_cut_at_what_was_seen_and_a_skip_in_full():
    p = np.array([0.3, 0.2, 0.2, 0.5])
    ledger = BENCH["SignalLedger"](_CutsAfterFourFailures(), _Problem(p))
    rng = np.random.default_rng(1)
    groups = ledger.run(
        [0, 1, 2, 3], 32, lambda idx, counts: [(rng.random(c) < p[i]).astype(float) for i, c in zip(idx, counts)]
    )
    full = known_p_group_signal(8, p, estimator="grpo")
    cut = [j for j, g in enumerate(groups) if 0 < g.size < 8]
    expected = full[0] + sum(BENCH["given_up_signal"](8, 4, 0, p[j]) for j in cut)
    assert ledger.given == pytest.approx(expected)
    assert ledger.lost == pytest.approx(full[0] + full[cut].sum()) and ledger.given <= ledger.lost
    assert ledger.claimed == [0.05] and ledger.by_p.sum() == pytest.approx(ledger.given)
    low = [j for j in cut if p[j] < 0.3]
    assert ledger.by_p[BENCH["p_bin"](0.2)] == pytest.approx(sum(BENCH["given_up_signal"](8, 4, 0, p[j]) for j in low))
    assert ledger.by_p[BENCH["p_bin"](0.3)] == pytest.approx(
        full[0] + (BENCH["given_up_signal"](8, 4, 0, 0.5) if 3 in cut else 0.0)
    )

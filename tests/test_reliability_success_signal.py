"""`SuccessSignal` on awkward input: the auto range does not depend on the order of a step's
groups, extreme ranges stay finite, and a bad ``success_fn`` result, reward or argument is refused
naming ``success_fn`` / the input and the prompt."""

import numpy as np
import pytest

from adaptive_rollouts.success import SuccessSignal


def test_auto_range_maps_one_round_independently_of_group_order():
    groups = {"A": [0.0, 1.0], "B": [0.0, 2.0], "C": [0.0, 1.0]}
    forward = SuccessSignal().to_success_groups(list(groups.values()), list(groups))
    backward = SuccessSignal().to_success_groups(list(groups.values())[::-1], list(groups)[::-1])[::-1]
    assert [g.tolist() for g in forward] == [g.tolist() for g in backward]
    assert forward[0].tolist() == forward[2].tolist() == [0.0, 0.5]  # A and C alike (before: [0, 1] and [0, 0.5])


@pytest.mark.parametrize(
    "signal, rewards, want",
    [
        (SuccessSignal(reward_range=(-1e308, 1e308)), [-1e308, 0.0, 1e308], [0.0, 0.5, 1.0]),
        (SuccessSignal(), [-1e308, 1e308, 0.5], [0.0, 1.0, 0.5]),
        (SuccessSignal(reward_range=(0, 2)), [1.0, 2.0], [0.5, 1.0]),
    ],
    ids=["range-1e308", "auto-1e308", "ordinary"],
)
def test_extreme_ranges_map_to_finite_values(signal, rewards, want):
    got = signal.to_success(rewards, prompt="q")
    assert np.all(np.isfinite(got)) and got.tolist() == pytest.approx(want)


@pytest.mark.parametrize(
    "build, rewards, match",
    [
        (lambda: SuccessSignal(success_fn=lambda r: None), [1.0], r"success_fn returned NoneType None .*prompt 'q'"),
        (lambda: SuccessSignal(success_fn=lambda r: "yes"), [1.0], r"success_fn returned str 'yes' .*prompt 'q'"),
        (lambda: SuccessSignal(success_fn=lambda r: "1"), [1.0], r"success_fn returned str '1' .*not a number"),
        (lambda: SuccessSignal(success_fn=lambda r: [1]), [1.0], r"success_fn returned list .*prompt 'q'"),
        (lambda: SuccessSignal(success_fn=lambda r: np.nan), [1.0], r"success_fn returned float nan .*outside"),
        (lambda: SuccessSignal(), ["0.5"], r"rewards of prompt 'q' must be real numbers or None, got str"),
        (lambda: SuccessSignal(), [True], r"rewards of prompt 'q' must be real numbers or None, got bool"),
        (lambda: SuccessSignal(reward_range=(0, 1, 2)), [1.0], r"reward_range must be a pair \(low, high\)"),
        (lambda: SuccessSignal(reward_range="01"), [1.0], r"reward_range must be a pair"),
        (lambda: SuccessSignal(reward_range=("0", "1")), [1.0], r"reward_range must be a real number, got str"),
        (lambda: SuccessSignal(threshold="0.5"), [1.0], r"threshold must be a real number, got str"),
    ],
    ids=[
        "fn-none",
        "fn-yes",
        "fn-string-1",
        "fn-list",
        "fn-nan",
        "str-reward",
        "bool-reward",
        "range-3",
        "range-str",
        "range-strings",
        "threshold-str",
    ],
)
def test_bad_success_input_names_the_input(build, rewards, match):
    with pytest.raises(ValueError, match=match):
        build().to_success(rewards, prompt="q")


def test_success_fn_may_return_bools_and_numbers():
    got = SuccessSignal(success_fn=lambda r: np.bool_(r > 0) if r < 5 else 0.25).to_success([-1.0, 1.0, 9.0])
    assert got.tolist() == [0.0, 1.0, 0.25]


@pytest.mark.parametrize(
    "state, match",
    [
        ({"seen_low": 0.5, "seen_high": 1.0}, "seen_low"),
        ({"seen_low": 0.0}, "missing"),
        ({"seen_low": "a", "seen_high": 1}, "seen_low"),
    ],
    ids=["range-without-0", "missing-high", "text"],
)
def test_signal_state_is_checked_before_use(state, match):
    signal = SuccessSignal()
    signal.to_success([-3.0, 1.0])
    with pytest.raises(ValueError, match=match):
        signal.load_state_dict(state)
    assert signal.state_dict() == {"seen_low": -3.0, "seen_high": 1.0}

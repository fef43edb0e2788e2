"""group_advantages: hand computations, a per-group reference loop, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from adaptive_rollouts.advantages import group_advantages, group_ids_from_counts  # noqa: E402


def reference(rewards: list[float], ids: list[int], estimator: str, eps: float = 1e-6) -> list[float]:
    """Plain per-group loop, written straight from the formulas (statistics module style)."""
    out = [0.0] * len(rewards)
    for gid in set(ids):
        members = [i for i, x in enumerate(ids) if x == gid]
        vals = [rewards[i] for i in members]
        n = len(vals)
        if n < 2:
            continue
        m = sum(vals) / n
        s = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
        if s <= 1e-6:
            continue
        for i in members:
            if estimator == "grpo":
                out[i] = (rewards[i] - m) / (s + eps)
            elif estimator == "drgrpo":
                out[i] = rewards[i] - m
            else:
                out[i] = rewards[i] - (sum(vals) - rewards[i]) / (n - 1)
    return out


def test_hand_computed_grpo_group_of_four():
    # rewards 1,0,0,0: mean 1/4, unbiased var = (9/16 + 3/16)/3 = 1/4, std 1/2
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([7, 7, 7, 7]), "grpo", eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([1.5, -0.5, -0.5, -0.5]))


def test_hand_computed_eps_enters_as_std_plus_eps():
    adv = group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), "grpo", eps=0.5)
    s = math.sqrt(0.5)  # unbiased std of {1, 0}
    torch.testing.assert_close(adv, torch.tensor([0.5 / (s + 0.5), -0.5 / (s + 0.5)]))


def test_hand_computed_rloo_and_drgrpo_interleaved_groups():
    r = torch.tensor([3.0, 1.0, 0.0, 2.0, 4.0])
    g = torch.tensor([5, 2, 5, 5, 2])  # group 5: 3,0,2 ; group 2: 1,4
    rloo = group_advantages(r, g, "rloo")
    # group 5: 3 - (0+2)/2 = 2 ; 0 - (3+2)/2 = -2.5 ; 2 - (3+0)/2 = 0.5 ; group 2: 1-4 = -3, 4-1 = 3
    torch.testing.assert_close(rloo, torch.tensor([2.0, -3.0, -2.5, 0.5, 3.0]))
    dr = group_advantages(r, g, "drgrpo")
    torch.testing.assert_close(dr, torch.tensor([3 - 5 / 3, -1.5, -5 / 3, 2 - 5 / 3, 1.5]))


def test_singletons_and_constant_groups_give_exact_zero():
    # 0.1 three times: float mean differs from 0.1 in the last bit; must still give exact 0
    r = torch.tensor([0.1, 0.1, 0.1, 0.7, 1.0, 0.0], dtype=torch.float32)
    g = torch.tensor([0, 0, 0, 1, 2, 2])
    for est in ("grpo", "drgrpo", "rloo"):
        adv = group_advantages(r, g, est)
        assert adv[:4].tolist() == [0.0, 0.0, 0.0, 0.0], est
        assert adv[4] > 0 > adv[5]


def test_std_tolerance_is_a_tolerance():
    r = torch.tensor([0.5, 0.5 + 1e-9, 0.2, 0.9], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1])
    adv = group_advantages(r, g, "grpo")
    assert adv[:2].tolist() == [0.0, 0.0]  # std ~7e-10 <= 1e-6: treated as zero spread
    adv_strict = group_advantages(r, g, "grpo", std_tol=0.0, eps=0.0)
    torch.testing.assert_close(adv_strict[:2], torch.tensor([-1 / math.sqrt(2), 1 / math.sqrt(2)], dtype=torch.float64))


def test_dtype_and_device_follow_rewards():
    adv = group_advantages(torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]), "rloo")
    assert adv.dtype == torch.float32
    adv64 = group_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0]))
    assert adv64.dtype == torch.float64


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=12),
    seed=st.integers(0, 2**31 - 1),
    binary=st.booleans(),
    estimator=st.sampled_from(["grpo", "drgrpo", "rloo"]),
)
def test_matches_per_group_reference_on_random_ragged_groups(sizes, seed, binary, estimator):
    rng = np.random.default_rng(seed)
    ids = np.repeat(rng.permutation(1000)[: len(sizes)], sizes)  # arbitrary, non-contiguous ids
    perm = rng.permutation(ids.size)  # groups interleaved in any order
    ids = ids[perm]
    rewards = rng.integers(0, 2, ids.size).astype(float) if binary else rng.random(ids.size)
    adv = group_advantages(torch.tensor(rewards), torch.tensor(ids), estimator)
    ref = reference(rewards.tolist(), ids.tolist(), estimator)
    np.testing.assert_allclose(adv.numpy(), ref, rtol=1e-9, atol=1e-9)


def test_group_properties_sum_zero_and_grpo_unit_std():
    rng = np.random.default_rng(0)
    ids = torch.tensor(rng.integers(0, 50, 2000))
    r = torch.tensor(rng.random(2000))
    for est in ("grpo", "drgrpo", "rloo"):
        adv = group_advantages(r, ids, est)
        sums = torch.zeros(50, dtype=adv.dtype).index_add_(0, ids, adv)
        torch.testing.assert_close(sums, torch.zeros_like(sums), atol=1e-9, rtol=0)
    adv = group_advantages(r, ids, "grpo", eps=0.0)
    for gid in range(50):
        members = adv[ids == gid]
        if members.numel() >= 2:
            assert abs(members.std().item() - 1.0) < 1e-9


def test_group_ids_from_counts():
    assert group_ids_from_counts([2, 0, 3]).tolist() == [0, 0, 2, 2, 2]
    assert group_ids_from_counts(torch.tensor([1, 1])).tolist() == [0, 1]
    assert group_ids_from_counts(np.array([0, 0])).numel() == 0
    with pytest.raises(ValueError, match="counts must be >= 0"):
        group_ids_from_counts([2, -1])
    with pytest.raises(ValueError, match="counts must be integers"):
        group_ids_from_counts([1.5])
    with pytest.raises(ValueError, match="counts must be 1-D"):
        group_ids_from_counts([[1, 2]])


@pytest.mark.parametrize(
    "rewards, ids, kwargs, match",
    [
        (torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]), {}, "rewards contain NaN"),
        (torch.tensor([1.0, float("inf")]), torch.tensor([0, 0]), {}, "rewards contain NaN or inf"),
        (torch.tensor([1.0, 0.0]), torch.tensor([0, 0, 1]), {}, "group_ids shape"),
        (torch.tensor([[1.0, 0.0]]), torch.tensor([[0, 0]]), {}, "rewards must be 1-D"),
        (torch.tensor([]), torch.tensor([], dtype=torch.long), {}, "rewards is empty"),
        (torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0]), {}, "group_ids must be an integer"),
        (torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), {"estimator": "ppo"}, "estimator must be one of"),
        (torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), {"eps": -1.0}, "eps must be >= 0"),
        (torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), {"std_tol": float("nan")}, "std_tol must be"),
        ([1.0, 0.0], torch.tensor([0, 0]), {}, "rewards must be a torch.Tensor"),
    ],
)
def test_bad_input_raises_naming_the_input(rewards, ids, kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_advantages(rewards, ids, **kwargs)


@pytest.mark.parametrize("big", [1e300, 8e307, 1e-300])
def test_extreme_rewards_do_not_overflow(big):
    """The group sums are taken after scaling by a power of two: rewards +-1e300 (whose squares
    overflow) give the advantages of +-1, and tiny rewards keep theirs."""
    r = torch.tensor([big, -big, big, -big, 0.3, 0.9], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1, 2, 2])
    unit = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.3, 0.9], dtype=torch.float64)
    grpo = group_advantages(r, g, "grpo", eps=0.0, std_tol=0.0)
    torch.testing.assert_close(grpo, group_advantages(unit, g, "grpo", eps=0.0, std_tol=0.0))
    torch.testing.assert_close(grpo[:2], torch.tensor([1.0, -1.0], dtype=torch.float64) / math.sqrt(2))
    torch.testing.assert_close(
        group_advantages(r, g, "drgrpo", std_tol=0.0)[:2], torch.tensor([big, -big], dtype=torch.float64)
    )
    torch.testing.assert_close(
        group_advantages(r, g, "rloo", std_tol=0.0)[:2], torch.tensor([2 * big, -2 * big], dtype=torch.float64)
    )


def test_scaling_is_exact_on_ordinary_rewards():
    """Power-of-two scaling changes no bit of the result for rewards in [0, 1]."""
    gen = torch.Generator().manual_seed(0)
    r = torch.rand(400, generator=gen, dtype=torch.float64)
    g = torch.randint(0, 40, (400,), generator=gen)
    for est in ("grpo", "drgrpo", "rloo"):
        want = reference(r.tolist(), g.tolist(), est)
        got = group_advantages(r, g, est).tolist()
        assert np.allclose(got, want, rtol=1e-12, atol=0), est


def test_equal_prompt_weights_by_hand():
    from adaptive_rollouts.advantages import equal_prompt_weights

    w = equal_prompt_weights(torch.tensor([3, 3, 5, 7, 7, 7]))  # N = 6, Q' = 3, n = 2, 1, 3
    torch.testing.assert_close(w, torch.tensor([1.0, 1.0, 2.0, 2 / 3, 2 / 3, 2 / 3]))
    torch.testing.assert_close(equal_prompt_weights(torch.tensor([1, 1, 2, 2])), torch.ones(4))  # equal groups
    assert equal_prompt_weights(torch.tensor([], dtype=torch.long)).numel() == 0
    with pytest.raises(ValueError, match="group_ids"):
        equal_prompt_weights(torch.zeros(2, 2))

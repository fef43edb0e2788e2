"""Our verl estimators against verl's own compute_*_outcome_advantage on random ragged groups."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

from adaptive_rollouts.integrations.verl import advantage as ours  # noqa: E402

ours.register()


def ragged_batch(seed: int, min_size: int, graded: bool):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(min_size, 12, size=rng.integers(3, 20))
    uids = np.array([str(uuid.UUID(int=int(rng.integers(1 << 62)))) for _ in sizes], dtype=object)
    index = np.repeat(uids, sizes)
    perm = rng.permutation(index.size)  # groups interleaved, as after verl's balance_batch
    index = index[perm]
    n, length = index.size, 7
    mask = torch.zeros(n, length)
    lengths = rng.integers(1, length + 1, n)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1
    scores = rng.random(n) if graded else rng.integers(0, 2, n).astype(float)
    rewards = torch.zeros(n, length)
    rewards[torch.arange(n), torch.as_tensor(lengths - 1)] = torch.as_tensor(scores, dtype=torch.float32)
    return rewards, mask, index


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("graded", [False, True])
def test_grpo_matches_verl_on_groups_of_two_or_more(seed, graded):
    rewards, mask, index = ragged_batch(seed, 2, graded)
    fn = core_algos.get_adv_estimator_fn("adaptive_grpo")
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards.clone(), mask, index)
    adv, ret = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=None)
    torch.testing.assert_close(adv, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ret, adv)


@pytest.mark.parametrize("seed", range(6))
def test_drgrpo_matches_verl_grpo_without_std(seed):
    rewards, mask, index = ragged_batch(seed, 2, graded=True)
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards.clone(), mask, index, norm_adv_by_std_in_grpo=False)
    adv, _ = core_algos.get_adv_estimator_fn("adaptive_drgrpo")(
        token_level_rewards=rewards, response_mask=mask, index=index
    )
    torch.testing.assert_close(adv, ref, atol=1e-6, rtol=1e-6)
    # adaptive_grpo follows algorithm.norm_adv_by_std_in_grpo like verl's grpo
    adv2, _ = core_algos.get_adv_estimator_fn("adaptive_grpo")(
        token_level_rewards=rewards, response_mask=mask, index=index, config={"norm_adv_by_std_in_grpo": False}
    )
    torch.testing.assert_close(adv2, ref, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("graded", [False, True])
def test_rloo_matches_both_verl_rloo_implementations(seed, graded):
    rewards, mask, index = ragged_batch(seed, 2, graded)
    ref, _ = core_algos.compute_rloo_outcome_advantage(rewards.clone(), mask, index)
    ref_vec, _ = core_algos.compute_rloo_vectorized_outcome_advantage(rewards.clone(), mask, index)
    adv, _ = core_algos.get_adv_estimator_fn("adaptive_rloo")(
        token_level_rewards=rewards, response_mask=mask, index=index
    )
    torch.testing.assert_close(adv, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(adv, ref_vec, atol=1e-5, rtol=1e-5)


def test_singletons_get_zero_where_verl_returns_the_raw_reward():
    rewards, mask, index = ragged_batch(3, 1, graded=True)
    index = np.append(index, np.array(["lonely"], dtype=object))
    rewards = torch.cat([rewards, torch.zeros(1, rewards.shape[1])])
    rewards[-1, 0] = 0.8
    mask = torch.cat([mask, torch.zeros(1, mask.shape[1])])
    mask[-1, :3] = 1
    for name, verl_fn in [
        ("adaptive_grpo", core_algos.compute_grpo_outcome_advantage),
        ("adaptive_rloo", core_algos.compute_rloo_outcome_advantage),
    ]:
        adv, _ = core_algos.get_adv_estimator_fn(name)(token_level_rewards=rewards, response_mask=mask, index=index)
        ref, _ = verl_fn(rewards.clone(), mask, index)
        assert torch.all(adv[-1] == 0)
        assert ref[-1, 0] == pytest.approx(0.8, abs=1e-5)  # verl: raw reward
        _, counts = np.unique(index, return_counts=True)
        multi = np.isin(index, np.unique(index)[counts >= 2])
        torch.testing.assert_close(adv[torch.as_tensor(multi)], ref[torch.as_tensor(multi)], atol=1e-5, rtol=1e-5)


def test_estimator_rejects_bad_batches():
    fn = core_algos.get_adv_estimator_fn("adaptive_rloo")
    with pytest.raises(ValueError, match="index"):
        fn(token_level_rewards=torch.zeros(3, 4), response_mask=torch.ones(3, 4), index=np.array(["a", "b"]))
    with pytest.raises(ValueError, match="NaN"):
        r = torch.zeros(2, 4)
        r[0, 0] = float("nan")
        fn(token_level_rewards=r, response_mask=torch.ones(2, 4), index=np.array(["a", "a"], dtype=object))
    with pytest.raises(ValueError, match="needs the group index"):
        fn(token_level_rewards=torch.zeros(2, 4), response_mask=torch.ones(2, 4))

"""``adaptive.loss_rows=uniform`` in verl: a step of N trajectory rows that verl padded to P rows has,
through verl's own PPO policy loss (``compute_policy_loss_vanilla`` and ``agg_loss``), the loss and
gradient of the full batch in which the missing rows are generated rows of advantage 0; the
trainer scales the advantages and logs the factor."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from adaptive_rollouts.bridge.settings import AGGREGATION_FROM_LOSS_AGG_MODE, verl_loss_rows_scale  # noqa: E402
from adaptive_rollouts.integrations.verl.advantage import (  # noqa: E402
    advantage_scale,
    compute_adaptive_grpo_outcome_advantage,
)

N, T = 6, 5  # 6 generated rows of up to 5 tokens, padded by verl to 12 (one PPO mini-batch)
P = 2 * N


class _Actor:
    """The actor-config fields verl's vanilla policy loss reads."""

    clip_ratio, clip_ratio_low, clip_ratio_high = 0.2, 0.2, 0.28

    def __init__(self, **batch_info):
        self.global_batch_info = batch_info

    def get(self, key, default=None):
        return default


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 2, 4, 3, 5, 1])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    rewards = torch.zeros(N, T)
    rewards[torch.arange(N), lengths - 1] = scores
    uids = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    old = -torch.rand(N, T, generator=g) - 0.5
    new = (old + 0.3 * torch.randn(N, T, generator=g)).requires_grad_(True)  # some ratios clipped
    return mask, rewards, uids, old, new


def _padded(x, fill=0.0):
    return torch.cat([x, torch.full((P - N, *x.shape[1:]), fill, dtype=x.dtype)])


def _pg_loss(old, new, adv, mask, mode):
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla

    info = {"dp_size": 1, "batch_num_tokens": mask.sum(), "global_batch_size": P}
    loss, _ = compute_policy_loss_vanilla(old, new, adv, mask, loss_agg_mode=mode, config=_Actor(**info))
    return loss


def _step_and_uniform(mode, loss_rows):
    """(loss, gradient) of the step as the plug-in trains it, and of the full batch by hand."""
    mask, rewards, uids, old, new = _batch()
    # the step: N rows plus verl's padding (score 0, own uid, no loss tokens), advantages by the plug-in
    pad_uids = np.concatenate([uids, np.array([f"pad{i}" for i in range(P - N)], dtype=object)])
    scale = verl_loss_rows_scale(mode, rows=N, padded_rows=P) if loss_rows == "uniform" else 1.0
    with advantage_scale(scale):
        adv, _ = compute_adaptive_grpo_outcome_advantage(_padded(rewards), _padded(mask), pad_uids)
    loss = _pg_loss(_padded(old), torch.cat([new, _padded(new.detach())[N:]]), adv, _padded(mask), mode)
    (grad,) = torch.autograd.grad(loss, new)
    # the full batch: the N rows with verl's own GRPO advantages, then a zero-advantage copy of each
    # (so the missing rows have the generated rows' mean length)
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    ref, _ = compute_grpo_outcome_advantage(rewards, mask, uids)
    full_adv = torch.cat([ref, torch.zeros_like(ref)])
    full = _pg_loss(torch.cat([old, old]), torch.cat([new, new.detach()]), full_adv, torch.cat([mask, mask]), mode)
    (full_grad,) = torch.autograd.grad(full, new)
    return (float(loss), grad), (float(full), full_grad)


@pytest.mark.parametrize("mode", sorted(AGGREGATION_FROM_LOSS_AGG_MODE))
def test_uniform_rows_give_the_full_batchs_loss_and_gradient(mode):
    (loss, grad), (want, want_grad) = _step_and_uniform(mode, "uniform")
    assert float(want_grad.abs().max()) > 0
    assert loss == pytest.approx(want, rel=1e-5, abs=1e-7)
    torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-7)


def test_kept_rows_weigh_more_under_token_mean_only():
    (loss, grad), (want, want_grad) = _step_and_uniform("token-mean", "kept")
    # verl's token-mean divides by the tokens generated: half of the full batch's, so twice the step
    torch.testing.assert_close(grad, 2 * want_grad, rtol=1e-5, atol=1e-7)
    for mode in ("seq-mean-token-mean", "seq-mean-token-sum", "token-sum"):  # a fixed divisor already
        (_, grad), (_, want_grad) = _step_and_uniform(mode, "kept")
        torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-7)


def test_bad_scales_and_rows_are_refused():
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        with advantage_scale(0.0):
            pass
    with pytest.raises(ValueError, match="rows <= padded_rows"):
        verl_loss_rows_scale("token-mean", rows=5, padded_rows=4)
    with pytest.raises(ValueError, match="loss_agg_mode 'mean'"):
        verl_loss_rows_scale("mean", rows=4, padded_rows=4)


def test_the_trainer_scales_a_saving_steps_advantages_and_logs_the_factor(run):
    from harness import step_metrics
    from test_verl_saving import SINGLE, grpo_reference

    trainer, _, logged = run(1, **{"adaptive.allocator": SINGLE, "adaptive.loss_rows": "uniform"})
    assert trainer.loss_rows == "uniform" and trainer.loss_agg_mode == "token-mean"
    update = trainer.actor_rollout_wg.updates[0]
    real = [r for r in update["rows"] if not r["padding"]]
    # 9 generated rows, padded by verl to 16: every advantage is verl's GRPO one x 9 / 16
    assert len(real) == 9 and len(update["rows"]) == 16
    np.testing.assert_allclose([r["advantage"] for r in real], grpo_reference(real) * 9 / 16, atol=1e-5)
    assert step_metrics(logged, 1)["adaptive/loss_rows_scale"] == pytest.approx(9 / 16)

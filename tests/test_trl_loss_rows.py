"""``AdaptiveGRPOTrainer(loss_rows="uniform")``: a step that trains on fewer rows than the generation
batch (a saving allocator skips a prompt) has the policy loss, and its gradient, of Uniform's batch
in which the missing rows are rows of advantage 0. Checked by hand: the Uniform batch is built from
the step's own rows (advantages recomputed from the logged rewards) plus zero-advantage copies, and
run through TRL's ``_compute_loss`` in one micro-batch; the ``"kept"`` loss (TRL's own mean) differs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, Saver, logged, make_trainer, reward_length  # noqa: E402

from adaptive_rollouts.advantages import group_advantages  # noqa: E402
from adaptive_rollouts.bridge.settings import loss_rows_for, trl_loss_rows_scale  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402

ROW_FIELDS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps")


def _one_step(tmp_path, loss_type, plan, config, loss_rows, **kwargs):
    from transformers import set_seed

    set_seed(0)
    config = {"max_steps": 1, "loss_type": loss_type, **config}
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        allocator=Saver([plan]),
        config=config,
        loss_rows=loss_rows,
        reward=reward_length,
        **kwargs,
    )
    cap = Capture(trainer)
    trainer.train()
    return trainer, cap


def _loss_and_grad(trainer, batches, accumulation):
    """Sum over ``batches`` of TRL's ``_compute_loss`` (training mode, ``accumulation`` micro-batches per
    optimizer step) and its gradient, flat."""
    model = trainer.model
    model.train()
    model.zero_grad()
    trainer.current_gradient_accumulation_steps = accumulation
    total = sum(trainer._compute_loss(model, b) for b in batches)
    total.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return float(total.detach()), grad.clone()


def _rows(out, index):
    return {k: out[k][index] for k in ROW_FIELDS if out.get(k) is not None}


def _uniform_batch(trainer, out, cap, groups, budget):
    """Uniform's batch: the step's generated rows with their advantages by hand (GRPO on the logged
    rewards, TRL's eps) and ``budget - rows`` zero-advantage copies of them, in order."""
    real = torch.nonzero(out["completion_mask"].sum(1) > 0).flatten()
    rewards = torch.tensor(cap.rewards[-1]["reward_length"], dtype=torch.float32)
    hand = group_advantages(rewards, torch.tensor(groups), "grpo", eps=1e-4)
    extra = real[torch.arange(budget - len(real)) % len(real)]
    batch = _rows(out, torch.cat([real, extra]))
    batch["advantages"] = torch.cat([hand, torch.zeros(len(extra))]).to(out["advantages"])
    batch["num_items_in_batch"] = batch["completion_mask"].sum()
    return batch


def _micro_batches(out, parts):
    rows = out["completion_ids"].shape[0]
    size = rows // parts
    batches = []
    for i in range(parts):
        b = _rows(out, torch.arange(i * size, (i + 1) * size))
        b["num_items_in_batch"] = out["num_items_in_batch"]
        batches.append(b)
    return batches


# plan [0, 3, 2]: the first prompt skipped, 5 of 12 rows; two micro-batches of 3 (one padding row).
# plan [0, 3, 3]: 6 of 12 rows, so Uniform's missing rows are one copy of each (their tokens at the
# generated rows' mean length exactly, what the token-level losses assume).
CASES = [
    ("grpo", [0, 3, 2], {"per_device_train_batch_size": 6, "gradient_accumulation_steps": 2}, [1, 1, 1, 2, 2]),
    ("dr_grpo", [0, 3, 2], {"per_device_train_batch_size": 6, "gradient_accumulation_steps": 2}, [1, 1, 1, 2, 2]),
    ("luspo", [0, 3, 2], {}, [1, 1, 1, 2, 2]),
    ("dapo", [0, 3, 3], {}, [1, 1, 1, 2, 2, 2]),
    ("bnpo", [0, 3, 3], {}, [1, 1, 1, 2, 2, 2]),
]


@pytest.mark.parametrize("loss_type, plan, config, groups", CASES)
@pytest.mark.parametrize("loss_rows", ["uniform", "kept"])
def test_uniform_rows_loss_and_gradient_are_those_of_uniforms_batch(
    tmp_path, loss_type, plan, config, groups, loss_rows
):
    trainer, cap = _one_step(tmp_path, loss_type, plan, config, loss_rows)
    out = cap.outputs[-1]
    spg = trainer.args.steps_per_generation
    got, got_grad = _loss_and_grad(trainer, _micro_batches(out, spg), spg)
    want, want_grad = _loss_and_grad(trainer, [_uniform_batch(trainer, out, cap, groups, 12)], 1)
    assert np.isfinite(got) and float(want_grad.abs().max()) > 0
    if loss_rows == "uniform":
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-7)
        rows, padded = len(groups), out["completion_ids"].shape[0]
        assert logged(trainer, "adaptive/loss_rows_scale") == [
            pytest.approx(trl_loss_rows_scale(loss_type, rows=rows, padded_rows=padded, budget=12))
        ]
    else:  # TRL's own mean over the rows trained on: each weighs more than in Uniform's batch
        # (at ratio 1 the loss value itself is 0 for group-centred advantages; the gradient is not)
        assert float(got_grad.norm()) > float(want_grad.norm()) * 1.5
        assert logged(trainer, "adaptive/loss_rows_scale") == []


def test_equal_prompt_weight_with_uniform_rows_is_the_mean_over_uniforms_prompts(tmp_path):
    # prompt-mean over Uniform's 3 prompts, the skipped one contributing 0: sum over the kept groups of
    # their mean row loss, / 3
    trainer, cap = _one_step(tmp_path, "grpo", [0, 3, 2], {}, "uniform", equal_prompt_weight=True)
    out = cap.outputs[-1]
    got, got_grad = _loss_and_grad(trainer, [out], 1)
    groups = torch.tensor([1, 1, 1, 2, 2])
    n = torch.bincount(groups)[groups].to(torch.float32)
    batch = _uniform_batch(trainer, out, cap, groups.tolist(), 12)
    # rows weighted 1 / (Q n_q) under a mean over 12 rows: advantage x 12 / (3 n_q)
    batch["advantages"][:5] = batch["advantages"][:5] * 12 / (3 * n)
    want, want_grad = _loss_and_grad(trainer, [batch], 1)
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-7)


def test_a_filling_allocator_and_bad_names(tmp_path):
    # Uniform's own batch: the factor is 1, the loss TRL's
    trainer, cap = _one_step(tmp_path, "grpo", [4, 4, 4], {}, "uniform")
    assert logged(trainer, "adaptive/loss_rows_scale") == [1.0]
    assert trl_loss_rows_scale("bnpo", rows=12, padded_rows=12, budget=12) == 1.0
    with pytest.raises(ValueError, match="loss_rows"):
        make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator="uniform", loss_rows="budget")
    with pytest.raises(ValueError, match="padded_rows"):
        trl_loss_rows_scale("grpo", rows=7, padded_rows=6, budget=12)
    with pytest.raises(ValueError, match="loss_type 'ppo'"):
        trl_loss_rows_scale("ppo", rows=6, padded_rows=6, budget=12)
    assert loss_rows_for(None, "fill") == "kept"

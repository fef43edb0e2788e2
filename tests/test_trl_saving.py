"""AdaptiveGRPOTrainer with a saving allocator (kind "save"): a step trains on exactly the rollouts
generated (fewer than ``generation_batch_size``), skipped prompts are reported, padding rows for the
micro-batch layout carry no loss weight, an empty step trains nothing, and resume stays exact."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, Saver, logged, make_trainer, reward_length  # noqa: E402

from adaptive_rollouts.advantages import group_advantages  # noqa: E402
from adaptive_rollouts.bridge import check_spent  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402
from adaptive_rollouts.integrations.trl.checkpoint import STATE_FILE  # noqa: E402
from adaptive_rollouts.integrations.trl.layout import padded_rows, rank_shares  # noqa: E402


def reward_variety(prompts, completions, **kwargs):
    return [len(set(c)) / 5.0 for c in completions]


def saving_trainer(tmp_path, plans, config=None, **kwargs):
    from transformers import set_seed

    set_seed(0)
    kwargs.setdefault("reward", reward_length)
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Saver(plans), config=config, **kwargs)
    generated = []
    original = trainer._generate_call

    def counting(rows, n):
        generated.append(len(rows))
        return original(rows, n)

    trainer._generate_call = counting
    return trainer, generated


def test_saving_step_trains_on_exactly_what_was_generated(tmp_path):
    trainer, generated = saving_trainer(tmp_path, [[0, 3, 2]])
    before = [p.detach().clone() for p in trainer.model.parameters()]
    cap = Capture(trainer)
    trainer.train()
    # 12 rows = 3 prompts x 4; the allocator spent 5 of them: nothing generated to fill the shape
    assert [c.tolist() for c in trainer.allocation_history] == [[0, 3, 2]] * 2
    assert generated == [2, 3] * 2
    for out in cap.outputs:
        assert len(out["advantages"]) == out["completion_ids"].shape[0] == 5
        assert out["num_items_in_batch"] == out["completion_mask"].sum()
    rewards = torch.tensor(list(trainer._logs["rewards"]["reward_length"]))
    assert len(rewards) == len(trainer._logs["prompt"]) == len(trainer._logs["advantages"]) == 10  # 2 steps
    rewards = rewards[-5:]
    expected = group_advantages(rewards, torch.tensor([1, 1, 1, 2, 2]), "grpo", eps=1e-4)
    torch.testing.assert_close(cap.advantages[-1], expected, atol=1e-5, rtol=1e-5)
    assert logged(trainer, "adaptive/rollouts_spent") == [5, 5]
    assert logged(trainer, "adaptive/rollouts_saved") == [7, 7]
    assert logged(trainer, "adaptive/skipped") == [1, 1]
    assert logged(trainer, "adaptive/padding_rows") == [0, 0]
    assert logged(trainer, "adaptive/empty_step") == [0, 0]
    tokens = [float(out["completion_mask"].sum()) for out in cap.outputs]
    # a cut group and a skipped prompt: the tokens spent are those of the batch trained on
    assert logged(trainer, "adaptive/tokens_spent") == tokens
    assert any(not torch.equal(p, q) for p, q in zip(before, trainer.model.parameters()))


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_saving_with_steps_per_generation_and_accumulation_pads_without_loss_weight(tmp_path, loss_type):
    # one generation batch of 12 rows serves 2 micro-batches (steps_per_generation=2): 5 rollouts are
    # laid out as 6 rows, the 6th a copy with zero loss mask and zero advantage
    config = {"per_device_train_batch_size": 6, "gradient_accumulation_steps": 2, "loss_type": loss_type}
    trainer, generated = saving_trainer(tmp_path, [[0, 3, 2], [1, 1, 1]], config=config)
    assert trainer.args.steps_per_generation == 2
    cap = Capture(trainer)
    micro = []
    original = trainer._compute_loss

    def recording(model, inputs):
        loss = original(model, inputs)
        micro.append((inputs["completion_mask"].shape[0], float(loss)))
        return loss

    trainer._compute_loss = recording
    trainer.train()
    assert generated == [2, 3, 3]  # step 2 spends 3: one round
    first, second = cap.outputs
    assert first["completion_ids"].shape[0] == 6 and second["completion_ids"].shape[0] == 4
    for out, real in ((first, 5), (second, 3)):
        padding = out["completion_mask"].sum(1) == 0
        assert int(padding.sum()) == len(out["advantages"]) - real
        assert (out["advantages"][padding] == 0).all()
        assert out["num_items_in_batch"] == out["completion_mask"].sum()
    assert [rows for rows, _ in micro] == [3, 3, 2, 2]
    assert all(np.isfinite(loss) for _, loss in micro)
    assert logged(trainer, "adaptive/padding_rows") == [1, 1]
    assert len(trainer._logs["prompt"]) == len(trainer._logs["advantages"]) == 8  # 5 + 3: no padding rows


def test_empty_step_runs_a_zero_loss_step_and_says_so(tmp_path):
    trainer, generated = saving_trainer(tmp_path, [[0, 0, 0], [4, 4, 0]], reward=reward_variety)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    after_first = []
    cap = Capture(trainer)

    from transformers import TrainerCallback

    class Snapshot(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                after_first.extend(p.detach().clone() for p in trainer.model.parameters())

    trainer.add_callback(Snapshot())
    trainer.train()
    assert generated == [2, 6]  # nothing generated in the empty step
    assert [c.tolist() for c in trainer.allocation_history] == [[0, 0, 0], [4, 4, 0]]
    assert logged(trainer, "adaptive/empty_step") == [1, 0]
    assert logged(trainer, "adaptive/skipped") == [3, 1]
    assert logged(trainer, "adaptive/rollouts_saved") == [12, 4]
    empty = cap.outputs[0]
    assert empty["completion_mask"].sum() == 0 and (empty["advantages"] == 0).all()
    # Adam with zero gradients (and no weight decay) leaves the weights where they were
    assert all(torch.equal(p, q) for p, q in zip(before, after_first))
    assert any(not torch.equal(p, q) for p, q in zip(before, trainer.model.parameters()))
    first_log = trainer.state.log_history[0]
    assert first_log["loss"] == 0.0
    assert all(v is None or np.isfinite(v) for v in first_log.values() if isinstance(v, float))


def test_saving_resume_matches_uninterrupted_run(tmp_path):
    config = {"max_steps": 4, "save_strategy": "steps", "save_steps": 2}
    plans = [[0, 3, 2], [2, 0, 0], [1, 1, 4], [0, 0, 0]]
    full, _ = saving_trainer(tmp_path / "full", plans, config=config)
    full.train()
    folder = tmp_path / "full" / "checkpoint-2"
    assert (folder / STATE_FILE).exists()
    resumed, _ = saving_trainer(tmp_path / "resumed", plans, config=config)
    resumed.train(resume_from_checkpoint=str(folder))
    assert [c.tolist() for c in resumed.allocation_history] == [c.tolist() for c in full.allocation_history]
    assert [c.tolist() for c in full.allocation_history][2:] == [[1, 1, 4], [0, 0, 0]]
    for name in ("adaptive/rollouts_spent", "adaptive/skipped", "adaptive/padding_rows", "loss"):
        assert len(logged(full, name)) == 4
        assert logged(resumed, name)[-2:] == pytest.approx(logged(full, name)[2:])  # the steps run after resuming
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(p, q)


def test_spent_check_honours_the_kind(tmp_path):
    assert check_spent([0, 0], 8, "save") == 0
    with pytest.raises(ValueError, match="sum to 9, budget is 8: a 'save' allocator spends at most"):
        check_spent([5, 4], 8, "save")
    with pytest.raises(ValueError, match="sum to 5, budget is 8: a 'fill' allocator spends exactly"):
        check_spent([3, 2], 8, "fill")

    class Short:  # declares nothing: a filling allocator that spends less is an error
        def run(self, prompts, budget, sample):
            return sample(np.arange(len(prompts)), np.ones(len(prompts), dtype=int))

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Short())
    with pytest.raises(ValueError, match="a 'fill' allocator spends exactly"):
        trainer.train()


def test_a_round_past_the_budget_is_refused_before_it_is_generated(tmp_path):
    class Overspends:
        kind = "save"

        def run(self, prompts, budget, sample):
            q = len(prompts)
            sample(np.arange(q), np.full(q, 2))  # 6 of 12
            return sample(np.arange(q), np.full(q, 3))  # 9 more: refused

    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, allocator=Overspends())
    generated = []
    original = trainer._generate_call
    trainer._generate_call = lambda rows, n: generated.append(len(rows)) or original(rows, n)
    with pytest.raises(ValueError, match="asked for 9 more rollouts in round 2 after spending 6: over the budget 12"):
        trainer.train()
    assert generated == [6]


def test_shares_and_padding_rows():
    assert rank_shares(5, 2) == [3, 2] and rank_shares(0, 3) == [0, 0, 0]
    assert padded_rows([3, 2], 1) == 3 and padded_rows([3, 2], 2) == 4 and padded_rows([0, 0], 1) == 1
    assert padded_rows([12], 3) == 12  # stock shape: no padding


def reward_flat_on_half(prompts, completions, **kwargs):
    """Always 1 on three of the six prompts (flat groups), the completion's variety on the others."""
    return [1.0 if p in ("1+2=", "3*4=", "9-5=") else len(set(c)) / 5.0 for p, c in zip(prompts, completions)]


@pytest.mark.parametrize("name", ["pilot", "greso"])
def test_registry_saving_allocators_train(tmp_path, name):
    from transformers import set_seed

    set_seed(0)
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        reward=reward_flat_on_half,
        allocator=name,
        config={"max_steps": 4, "per_device_train_batch_size": 24, "num_generations": 8},
    )
    assert trainer.kind == "save"
    cap = Capture(trainer)
    trainer.train()
    spent = [int(c.sum()) for c in trainer.allocation_history]
    assert len(spent) == 4 and all(0 <= n <= 24 for n in spent)
    if name == "pilot":  # 4 pilot rollouts each, 4 more only where they varied
        assert min(spent) < 24 and all(set(c.tolist()) <= {4, 8} for c in trainer.allocation_history)
    assert logged(trainer, "adaptive/rollouts_spent") == spent
    assert logged(trainer, "adaptive/rollouts_saved") == [24 - n for n in spent]
    assert logged(trainer, "adaptive/skipped") == [int((c == 0).sum()) for c in trainer.allocation_history]
    for out, n in zip(cap.outputs, spent):  # trained on exactly what was generated (one process, one micro-batch)
        assert int((out["completion_mask"].sum(1) > 0).sum()) == n or n == 0
    assert all(np.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)


def test_uneven_shares_layout_keeps_every_rollout_once():
    from adaptive_rollouts.integrations.trl import assign_groups_to_ranks

    rng = np.random.default_rng(1)
    for _ in range(200):
        world = int(rng.integers(1, 5))
        sizes = rng.integers(0, 6, size=int(rng.integers(1, 8)))
        shares = rank_shares(int(sizes.sum()), world)
        pieces = assign_groups_to_ranks(sizes.tolist(), world, capacities=shares)
        assert [sum(n for _, n in p) for p in pieces] == shares
        totals = np.zeros(len(sizes), dtype=int)
        for p in pieces:
            for g, n in p:
                totals[g] += n
        assert totals.tolist() == sizes.tolist()
    with pytest.raises(ValueError, match="capacities"):
        assign_groups_to_ranks([3, 2], 2, capacities=[3, 3])

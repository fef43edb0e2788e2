"""The allocator's state travels with TRL checkpoints: a resumed run allocates as an uninterrupted one."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import logged, make_trainer, reward_has_digit_one  # noqa: E402

from adaptive_rollouts.allocators import PosteriorProgressive  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402
from adaptive_rollouts.integrations.trl.checkpoint import STATE_FILE, SUMMARY_FILE  # noqa: E402
from adaptive_rollouts.state import load_state  # noqa: E402

CONFIG = {"max_steps": 4, "save_strategy": "steps", "save_steps": 2}


def trainer_at(path):
    from transformers import set_seed

    set_seed(0)
    # history-driven predictor: what it learned in steps 1-2 decides the allocations of steps 3-4
    return make_trainer(
        AdaptiveGRPOTrainer,
        path,
        reward=reward_has_digit_one,
        allocator=PosteriorProgressive("beta", seed=0),
        config=CONFIG,
    )


def test_checkpoint_holds_allocator_state_and_resume_matches(tmp_path, caplog):
    full = trainer_at(tmp_path / "full")
    full.train()
    folder = tmp_path / "full" / "checkpoint-2"
    state = load_state(folder / STATE_FILE)
    assert state["allocator_class"] == "PosteriorProgressive" and state["allocator"]["predictor"]
    assert len(state["history"]) == 2 and state["regime"]["keys"]
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    assert summary["global_step"] == 2 and summary["allocator_state_saved"] and summary["estimator"] == "grpo"

    resumed = trainer_at(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(folder))
    assert [c.tolist() for c in resumed.allocation_history] == [c.tolist() for c in full.allocation_history]
    running = (
        "adaptive/rollouts_spent_total",
        "adaptive/budget_share_total",
        "adaptive/tokens_spent_total",
        "adaptive/tokens_saved_total",
    )
    assert state["totals"]["token_steps"] == 2 and state["totals"]["tokens_spent"] > 0
    assert resumed.tokens_total == full.tokens_total == full.totals.tokens_spent  # trained on = spent, restored
    for name in ("adaptive/count_max", "regime/revisits", "regime/zero_variance_fraction_mean", "loss", *running):
        assert logged(resumed, name) == pytest.approx(logged(full, name)[-len(logged(resumed, name)) :])
    ours, theirs = resumed.allocator.state_dict()["predictor"], full.allocator.state_dict()["predictor"]
    assert ours["keys"] == theirs["keys"] and np.allclose(ours["alpha"], theirs["alpha"])
    assert np.allclose(ours["beta"], theirs["beta"])

    # without the state the allocator starts fresh (with a warning) and allocates differently
    (folder / STATE_FILE).unlink()
    fresh = trainer_at(tmp_path / "fresh")
    with caplog.at_level(logging.WARNING):
        fresh.train(resume_from_checkpoint=str(folder))
    assert "start fresh" in caplog.text
    assert not all(np.array_equal(a, b) for a, b in zip(fresh.allocation_history, full.allocation_history[2:]))


def test_a_checkpoint_from_before_the_running_totals_loads_with_them_rebuilt(tmp_path, caplog):
    from adaptive_rollouts.state import save_state

    full = trainer_at(tmp_path / "full")
    full.train()
    folder = tmp_path / "full" / "checkpoint-2"
    state = load_state(folder / STATE_FILE)
    old = {k: v for k, v in state.items() if k not in ("totals", "tokens_total")}
    save_state(folder / STATE_FILE, old)
    resumed = trainer_at(tmp_path / "resumed")
    with caplog.at_level(logging.WARNING):
        resumed.train(resume_from_checkpoint=str(folder))
    assert "no running totals" in caplog.text
    name = "adaptive/rollouts_spent_total"
    assert logged(resumed, name) == logged(full, name) == [12.0, 24.0, 36.0, 48.0]  # rebuilt from the history

    # written before the token totals: tokens_spent_total rebuilt from the completion tokens, saved restarts
    caplog.clear()
    before_tokens = {**state, "totals": {k: state["totals"][k] for k in ("steps", "rollouts_spent", "budget")}}
    save_state(folder / STATE_FILE, before_tokens)
    again = trainer_at(tmp_path / "again")
    with caplog.at_level(logging.WARNING):
        again.train(resume_from_checkpoint=str(folder))
    assert "no token totals" in caplog.text
    name = "adaptive/tokens_spent_total"
    assert logged(again, name)[-2:] == pytest.approx(logged(full, name)[-2:])  # (the first two: TRL's log history)
    saved = logged(full, "adaptive/tokens_saved")
    assert logged(again, "adaptive/tokens_saved_total")[-2:] == pytest.approx(np.cumsum(saved[2:]).tolist())

    save_state(folder / STATE_FILE, {**state, "totals": {"steps": 2, "rollouts_spent": 30, "budget": 24}})
    with pytest.raises(ValueError, match="rollouts_spent 30 exceeds budget 24"):
        trainer_at(tmp_path / "bad").train(resume_from_checkpoint=str(folder))


def test_resumed_sampler_replays_the_epoch_order_of_an_uninterrupted_run():
    from datasets import Dataset
    from trl.trainer.utils import RepeatSampler

    from adaptive_rollouts.integrations.trl.checkpoint import ResumableRepeatSampler

    data = Dataset.from_dict({"prompt": [str(i) for i in range(8)]})
    stock = RepeatSampler(data, mini_repeat_count=2, batch_size=4, seed=3)
    epochs = [list(stock), list(stock), list(stock)]  # stock TRL: one generator over the run
    ours = RepeatSampler(data, mini_repeat_count=2, batch_size=4, seed=3)
    ours.__class__ = ResumableRepeatSampler
    for epoch in (0, 1, 2):
        ours.set_epoch(epoch)
        assert list(ours) == epochs[epoch]
    resumed = RepeatSampler(data, mini_repeat_count=2, batch_size=4, seed=3)
    resumed.__class__ = ResumableRepeatSampler
    resumed.set_epoch(2)  # a run resumed in epoch 2 sees epoch 2's order, not epoch 0's
    assert list(resumed) == epochs[2] != epochs[0]

"""A damaged or hand-edited TRL checkpoint state is checked whole before anything is replaced: a
refused state raises ValueError naming the file and the entry, and the trainer (allocator, success
signal, regime tracker, history, allocator time) is exactly as it was. Before: a missing key gave a
raw KeyError naming no file after the allocator had been replaced, `history` [-5, 99] and a NaN
`allocator_seconds` were accepted, and a bad `regime` or a string `history` left the trainer
partly restored."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("trl")

from conftest import states_equal  # noqa: E402

from adaptive_rollouts.allocators import make_allocator  # noqa: E402
from adaptive_rollouts.bridge.book import RunningTotals  # noqa: E402
from adaptive_rollouts.fingerprints import RegimeTracker  # noqa: E402
from adaptive_rollouts.integrations.trl.checkpoint import (  # noqa: E402
    STATE_FILE,
    load_trainer_state,
    save_trainer_state,
)
from adaptive_rollouts.state import load_state, save_state  # noqa: E402
from adaptive_rollouts.success import SuccessSignal  # noqa: E402

PROMPTS = [f"q{i}" for i in range(6)]


def _trainer(seed: int):
    """What `load_trainer_state` touches of a trainer, after two steps of its own."""
    rng = np.random.default_rng(seed)
    allocator, regime = make_allocator("default", seed=seed), RegimeTracker()
    success = SuccessSignal()
    history = []
    for _ in range(2):
        rewards = allocator.run(PROMPTS, 24, lambda i, c: [(rng.random(int(x)) < 0.5).astype(float) for x in c])
        regime.update(PROMPTS, rewards)
        success.to_success_groups([np.array([0.0, 2.0 * seed + 1.0])])
        history.append(np.array([r.size for r in rewards]))
    totals = RunningTotals()
    for counts in history:
        totals.add(int(counts.sum()), 24)
    return SimpleNamespace(
        totals=totals,
        tokens_total=100 * (seed + 1),
        args=SimpleNamespace(generation_batch_size=24),
        allocator=allocator,
        success=success,
        regime=regime,
        allocation_history=history,
        allocator_seconds=0.25 * (seed + 1),
        accelerator=SimpleNamespace(is_main_process=True),
        state=SimpleNamespace(global_step=2),
        estimator="grpo",
        aggregation=None,
    )


def _snapshot(trainer):
    return copy.deepcopy(
        {
            "allocator": trainer.allocator.state_dict(),
            "success": trainer.success.state_dict(),
            "regime": trainer.regime.state_dict(),
            "history": [c.tolist() for c in trainer.allocation_history],
            "seconds": trainer.allocator_seconds,
            "totals": trainer.totals.state_dict(),
            "tokens": trainer.tokens_total,
        }
    )


CASES = [
    ("missing-regime", lambda s: s.pop("regime"), r"missing entries \['regime'\]"),
    ("missing-history", lambda s: s.pop("history"), r"missing entries \['history'\]"),
    ("negative-history", lambda s: s.update(history=[np.array([-5, 99])]), "history/0.*negative rollout count -5"),
    ("string-history", lambda s: s.update(history="abc"), "'history' must be a list"),
    ("float-history", lambda s: s.update(history=[np.array([0.5, 2.0])]), "history/0.*integers"),
    ("nan-seconds", lambda s: s.update(allocator_seconds=float("nan")), "allocator_seconds"),
    ("negative-seconds", lambda s: s.update(allocator_seconds=-3.0), "allocator_seconds"),
    ("bad-regime", lambda s: s["regime"].update(window=-5), "regime/window|window must be"),
    ("bad-success", lambda s: s["success"].update(seen_low=5.0), "success/seen_low"),
    ("bad-tokens", lambda s: s.update(tokens_total=-4), "tokens_total"),
    ("bad-totals", lambda s: s["totals"].update(steps=-1), "totals"),
    ("bad-allocator", lambda s: s["allocator"].update(history_spent=[-8]), "allocator/history_spent"),
]


@pytest.mark.parametrize("mutate, match", [pytest.param(m, p, id=c) for c, m, p in CASES])
def test_a_damaged_checkpoint_state_leaves_the_trainer_unchanged(tmp_path, mutate, match):
    save_trainer_state(_trainer(0), str(tmp_path))
    path = tmp_path / STATE_FILE
    state = load_state(path)
    mutate(state)
    save_state(path, state)
    target = _trainer(1)
    before = _snapshot(target)
    with pytest.raises(ValueError, match=match) as err:
        load_trainer_state(target, str(tmp_path))
    assert str(path) in str(err.value), "the error names the file"
    assert states_equal(_snapshot(target), before), "a refused state changed the trainer"


def test_a_good_checkpoint_state_restores_everything(tmp_path):
    source = _trainer(0)
    save_trainer_state(source, str(tmp_path))
    target = _trainer(1)
    assert load_trainer_state(target, str(tmp_path))
    assert states_equal(_snapshot(target), _snapshot(source))

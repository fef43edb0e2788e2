"""Resuming the real AdaptiveRolloutTrainer (harness.py): the allocator's state is checked and
loaded before verl loads the model, all or none (`integrations.verl.checkpoint.resume_in_order`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")
pytest.importorskip("torch")

import harness as H  # noqa: E402

from adaptive_rollouts.state import load_state, save_state  # noqa: E402

COMMON = {"adaptive.allocator": "default", "trainer.save_freq": 2}
RESUME = {**COMMON, "trainer.resume_mode": "auto"}


@pytest.fixture
def model_loads(monkeypatch):
    """The model checkpoints verl loads (the faked worker group's ``load_checkpoint`` calls)."""
    loads: list[str] = []
    monkeypatch.setattr(H.FakeWorkerGroup, "load_checkpoint", lambda self, local_path, **kw: loads.append(local_path))
    return loads


def same(a, b) -> bool:
    """Deep equality of decoded states (dicts, lists, numpy arrays, scalars)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b or (a != a and b != b)


def state_path(tmp_path):
    return tmp_path / "run" / "ckpt" / "global_step_2" / "adaptive_allocator.safetensors"


def test_a_damaged_allocator_state_is_refused_before_verl_loads_the_model(run, tmp_path, model_loads):
    """A bad regime tracker in the checkpoint: one ValueError naming the file and the entry, raised
    before verl loads any model weights (verl's load used to come first)."""
    run(2, root=str(tmp_path / "run"), **COMMON)
    path = state_path(tmp_path)
    state = load_state(path)
    state["regime"]["window"] = -5
    save_state(path, state)
    with pytest.raises(ValueError, match=r"regime.*window must be an integer >= 3") as err:
        run(4, root=str(tmp_path / "run"), **RESUME)
    assert str(path) in str(err.value)
    assert model_loads == []
    run(4, root=str(tmp_path / "resumed"), **COMMON)  # control: an undamaged resume does load the model
    run(6, root=str(tmp_path / "resumed"), **RESUME)
    assert len(model_loads) == 1 and model_loads[0].endswith("global_step_4/actor")


def test_another_allocators_state_is_refused_before_verl_loads_the_model(run, tmp_path, model_loads):
    """A checkpoint of a run with another allocator (``uniform``) resumed with the default: refused,
    naming the file, before the model load."""
    run(2, root=str(tmp_path / "run"), **{**COMMON, "adaptive.allocator": "uniform"})
    with pytest.raises(ValueError) as err:
        run(4, root=str(tmp_path / "run"), **RESUME)
    assert str(state_path(tmp_path)) in str(err.value)
    assert model_loads == []


def test_the_state_is_loaded_first_and_undone_when_verls_load_fails(run, tmp_path, monkeypatch):
    """The allocator's state is in place when verl loads the model; if verl's load fails, the
    allocator, signal, tracker and totals are back to their fresh state (nothing half-loaded)."""
    run(2, root=str(tmp_path / "run"), **COMMON)
    cfg = H.compose(H.base_overrides(str(tmp_path / "run"), [str(tmp_path / "toy.parquet")], 4, **RESUME))
    trainer, _ = H.build_trainer(cfg, H.FakeLLM(H.P), load=False)
    parts = {"allocator": trainer.allocator, "success": trainer.signal, "regime": trainer.regime}
    parts["totals"] = trainer.adaptive_step.totals

    def states(tag: str) -> dict:
        """Each part's state, as written to and read back from a state file."""
        for name, part in parts.items():
            save_state(tmp_path / f"{tag}-{name}.safetensors", part.state_dict())
        return {name: load_state(tmp_path / f"{tag}-{name}.safetensors") for name in parts}

    fresh = states("fresh")
    seen = []

    def failing_load(self, local_path, **kw):
        seen.append(states("loaded"))
        raise OSError("actor shard unreadable")

    monkeypatch.setattr(H.FakeWorkerGroup, "load_checkpoint", failing_load)
    with pytest.raises(OSError, match="actor shard unreadable"):
        trainer._load_checkpoint()
    # the saved state (2 steps) was in place when verl loaded the model; afterwards the fresh one is back
    (loaded,) = seen
    assert loaded["totals"]["steps"] == 2 and not same(loaded, fresh)
    assert same(states("after"), fresh)

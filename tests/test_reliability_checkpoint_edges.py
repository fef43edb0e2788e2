"""Checkpoints at the edges: a state too large for a safetensors header, saving through a symbolic
link, loading from something that is not a regular file, and a regime tracker fed rewards near the
float limits, whose checkpoint its own loader must take back."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from conftest import states_equal

import adaptive_rollouts.state as state_module
from adaptive_rollouts.allocators import make_allocator
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.state import load_state, save_state


def _many_long_keys(n: int = 50) -> dict:
    keys = [f"prompt {i} " + "x" * 100 for i in range(n)]
    return {"keys": keys, "values": np.arange(n, dtype=float)}


def test_a_state_too_large_for_a_safetensors_header_is_saved_as_npz(tmp_path, monkeypatch):
    """Before: 100,000 prompts with 500-character keys raised a raw SafetensorError (header too
    large) with no fallback. The limit is lowered here so that the test stays small."""
    monkeypatch.setattr(state_module, "_SAFETENSORS_HEADER_LIMIT", 2000)
    state = _many_long_keys()
    path = tmp_path / "ckpt.safetensors"
    save_state(path, state)  # format=None: the automatic choice falls back to npz
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    back = load_state(path)
    assert back["keys"] == state["keys"] and np.array_equal(back["values"], state["values"])
    with pytest.raises(ValueError, match=rf"{path}: .*exceeds the safetensors header limit.*format='npz'"):
        save_state(path, state, format="safetensors")


def test_small_states_stay_safetensors(tmp_path):
    save_state(tmp_path / "s.safetensors", _many_long_keys())
    assert (tmp_path / "s.safetensors").read_bytes()[:4] != b"PK\x03\x04"


def test_saving_through_a_symbolic_link_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "ckpt.safetensors"
    save_state(target, {"v": 1})
    link = tmp_path / "latest.safetensors"
    link.symlink_to(target)
    save_state(link, {"v": 2})
    assert link.is_symlink() and os.path.realpath(link) == str(target)
    assert load_state(target) == {"v": 2} and load_state(link) == {"v": 2}


def test_loading_a_fifo_is_refused_instead_of_blocking(tmp_path):
    fifo = tmp_path / "ckpt.safetensors"
    os.mkfifo(fifo)
    outcome: list = []

    def load():
        try:
            load_state(fifo)
        except ValueError as err:
            outcome.append(err)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():  # unblock the reader so that the test process can end
        with open(fifo, "wb"):
            pass
        pytest.fail("load_state blocked on a FIFO")
    assert outcome and "not a regular file" in str(outcome[0]) and str(fifo) in str(outcome[0])


@pytest.mark.parametrize("scale", [1e200, 1e300, 1.7e308])
def test_a_tracker_fed_extreme_rewards_loads_its_own_checkpoint(tmp_path, scale):
    """Before: rewards of +-1e200 gave an infinite sampling variance, and the saved state was
    refused by the tracker's own loader (a TRL run could not resume)."""
    tracker = RegimeTracker()
    for _ in range(3):
        tracker.update(["a", "b", "c"], [np.array([scale, -scale]), np.array([scale, scale]), np.array([-scale, 0.0])])
    save_state(tmp_path / "t.safetensors", {"tracker": tracker.state_dict()})
    again = RegimeTracker()
    again.load_state_dict(load_state(tmp_path / "t.safetensors")["tracker"])
    assert states_equal(again.state_dict(), tracker.state_dict())
    assert np.all(np.isfinite(again.state_dict()["last"]))


def test_the_default_resumes_after_extreme_raw_rewards_reach_its_tracker(tmp_path):
    alloc = make_allocator("guarded-progressive", seed=0)
    alloc.tracker.update(["q0", "q1"], [np.array([1e200, -1e200]), np.array([0.0, 1e200])])
    save_state(tmp_path / "a.safetensors", alloc.state_dict())
    twin = make_allocator("guarded-progressive", seed=1)
    twin.load_state_dict(load_state(tmp_path / "a.safetensors"))
    assert twin.tracker.state_dict()["keys"] == ["q0", "q1"]


@pytest.mark.parametrize("window, tol, match", [(-5, 1e-8, "window"), (2, 1e-8, "window"), (8, float("nan"), "tol")])
def test_tracker_settings_are_checked_at_construction(window, tol, match):
    with pytest.raises(ValueError, match=match):
        RegimeTracker(window=window, tol=tol)


class _NamedEncoder:
    """An encoder of a given model name (vectors: a fixed function of the text)."""

    dim = 3

    def __init__(self, model_name: str):
        self.model_name = model_name

    def encode(self, texts):
        return np.array([[len(t), sum(map(ord, t)) % 7, 1.0] for t in texts], dtype=float)


@pytest.mark.parametrize("name", ["gp", "ridge"])
@pytest.mark.parametrize("wrap", [False, True], ids=["encoder", "keyed-texts"])
def test_a_state_learned_on_another_embedding_model_of_the_same_dimension_is_refused(tmp_path, name, wrap):
    """Before: a GP state saved with another 384-d embedding model loaded silently."""
    from adaptive_rollouts.embeddings import KeyedTexts
    from adaptive_rollouts.predictors import GaussianProcess, Ridge

    def build(model):
        features = KeyedTexts(_NamedEncoder(model)) if wrap else _NamedEncoder(model)
        if wrap:
            features.register(["a", "bb"], ["a", "bb"])
        return GaussianProcess(features, n_features=8, seed=0) if name == "gp" else Ridge(features)

    source = build("model-one")
    source.update(["a", "bb"], [np.array([1.0, 0.0]), np.array([1.0, 1.0])])
    save_state(tmp_path / "p.safetensors", {"predictor": source.state_dict()})
    state = load_state(tmp_path / "p.safetensors")["predictor"]
    same = build("model-one")
    same.load_state_dict(state)  # the same model: taken
    other = build("model-two")
    before = other.state_dict()
    with pytest.raises(ValueError, match=r"feature_model.*'model-one'.*'model-two'") as err:
        other.load_state_dict(state)
    assert str(tmp_path / "p.safetensors") in str(err.value)
    assert states_equal(other.state_dict(), before)


def test_a_warm_start_killed_mid_save_resumes_from_the_previous_checkpoint(tmp_path, monkeypatch):
    """Before: the weights were written in place and the step in a separate file, so a save cut
    short left a truncated checkpoint next to the previous step's number."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from adaptive_rollouts.demo.warm_start import load_checkpoint, save_checkpoint

    def setup():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        return model, torch.optim.Adam(model.parameters()), torch.Generator().manual_seed(1)

    model, opt, gen = setup()
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    save_checkpoint(tmp_path, 1, model, opt, gen)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies between writing and renaming

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, model, opt, gen)
    monkeypatch.undo()
    fresh, fresh_opt, fresh_gen = setup()
    assert load_checkpoint(tmp_path, fresh, fresh_opt, fresh_gen) == 1
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in weights.items())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "checkpoint.safetensors"]

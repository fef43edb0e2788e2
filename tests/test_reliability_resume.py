"""Checkpoint and resume: a run interrupted at step k, saved to disk, reloaded into fresh objects
and resumed gives exactly the allocations, rewards and predictions of the uninterrupted run
(random generators included), for every allocator in the registry and every predictor."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from conftest import (
    PREDICTORS,
    REGISTRY,
    BernoulliEnv,
    budget_for,
    build_allocator,
    build_predictor,
    predictor_of,
    states_equal,
)

from adaptive_rollouts.state import load_state, save_state

STEPS = 5
BATCH = 6


def run_steps(alloc, env: BernoulliEnv, steps: range, trace: list) -> None:
    """One record per step: the prompts, every sample call, the returned rewards, the beliefs."""
    for _ in steps:
        prompts = env.batch(BATCH)
        budget = budget_for(alloc, BATCH, 3 * BATCH + 1)
        env.log.clear()
        rewards = alloc.run(prompts, budget, env.sampler(prompts))
        predictor = predictor_of(alloc)
        beliefs = None
        if predictor is not None:
            pred = predictor.predict(env.pool)
            beliefs = (pred.mean.tolist(), pred.var.tolist())
        trace.append((prompts, list(env.log), [r.tolist() for r in rewards], beliefs))


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.parametrize("name", REGISTRY)
def test_interrupted_run_resumes_exactly(name, k, fmt, tmp_path):
    graded = name in ("vigor", "vip")  # graded rewards on two of them, binary elsewhere
    whole, whole_trace = build_allocator(name, seed=3), []
    run_steps(whole, BernoulliEnv(seed=11, graded=graded), range(STEPS), whole_trace)

    first, env, trace = build_allocator(name, seed=3), BernoulliEnv(seed=11, graded=graded), []
    run_steps(first, env, range(k), trace)
    path = tmp_path / f"checkpoint.{fmt}"
    save_state(path, {"allocator": first.state_dict(), "env": env.state_dict(), "step": k}, format=fmt)
    del first, env

    state = load_state(path)
    resumed = build_allocator(name, seed=999)  # another seed: the checkpoint must override it
    resumed.load_state_dict(state["allocator"])
    env = BernoulliEnv(seed=0, graded=graded)
    env.load_state_dict(state["env"])
    assert states_equal(resumed.state_dict(), load_state(path)["allocator"])
    run_steps(resumed, env, range(state["step"], STEPS), trace)

    assert len(trace) == len(whole_trace) == STEPS
    for step, (got, want) in enumerate(zip(trace, whole_trace)):
        assert got == want, f"{name}: step {step} differs after resuming at step {k}"
    assert states_equal(resumed.state_dict(), whole.state_dict())


@pytest.mark.parametrize("name", PREDICTORS)
def test_predictor_interrupted_updates_resume_exactly(name, tmp_path):
    env = BernoulliEnv(seed=5, graded=True)
    batches = [env.batch(5) for _ in range(6)]
    data = [[np.clip(env.p[p] + env.rng.uniform(-0.2, 0.2, 1 + i % 4), 0, 1) for i, p in enumerate(b)] for b in batches]
    whole = build_predictor(name)
    for b, r in zip(batches, data):
        whole.update(b, r)
    first = build_predictor(name)
    for b, r in zip(batches[:3], data[:3]):
        first.update(b, r)
    save_state(tmp_path / "p.safetensors", first.state_dict())
    resumed = build_predictor(name)
    resumed.load_state_dict(load_state(tmp_path / "p.safetensors"))
    for b, r in zip(batches[3:], data[3:]):
        resumed.update(b, r)
    a, b = whole.predict(env.pool), resumed.predict(env.pool)
    assert np.array_equal(a.mean, b.mean) and np.array_equal(a.var, b.var)
    assert states_equal(whole.state_dict(), resumed.state_dict())


def test_checkpoint_files_hold_json_and_raw_arrays_only(tmp_path):
    """What is on disk: a safetensors header whose metadata is JSON, or an npz of plain arrays."""
    alloc = build_allocator("posterior-progressive")
    run_steps(alloc, BernoulliEnv(), range(2), [])
    save_state(tmp_path / "a.npz", alloc.state_dict(), format="npz")
    with zipfile.ZipFile(tmp_path / "a.npz") as archive:
        for member in archive.namelist():
            data = archive.read(member)
            assert data[:6] == b"\x93NUMPY" and b"'descr': '|O'" not in data[:200], member
    save_state(tmp_path / "a.safetensors", alloc.state_dict())
    raw = (tmp_path / "a.safetensors").read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    tree = json.loads(header["__metadata__"]["adaptive_rollouts"])
    assert tree["allocator"] == "PosteriorProgressive" and "state" in tree["rng"]


def test_crash_during_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """Atomic write: a failure after the temporary file is written leaves the old file intact."""
    import adaptive_rollouts.state as state_module

    alloc = build_allocator("greso")
    run_steps(alloc, BernoulliEnv(), range(2), [])
    path = tmp_path / "ckpt.safetensors"
    save_state(path, alloc.state_dict())
    before = path.read_bytes()
    run_steps(alloc, BernoulliEnv(seed=1), range(2), [])

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(state_module.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save_state(path, alloc.state_dict())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"]

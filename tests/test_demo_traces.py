"""Calibration traces of the tiny LM (`demo.traces`): recorded through the step object, saved as
npz + JSON, loaded back the same; bad traces are refused naming the input."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.bridge import TrainerStep
from adaptive_rollouts.demo.traces import GroupTrace, TraceRecorder, load_trace, save_trace

KEYS = [f"train#{i}" for i in range(6)]
TEXTS = [f"a{i}{i}=" for i in range(6)]


def recorded(steps: int = 3, width: int = 4) -> tuple[TraceRecorder, list]:
    """A recorder fed through `bridge.TrainerStep` (as the trainers feed it), 3 prompts a step."""
    rng = np.random.default_rng(0)
    rec = TraceRecorder({k: i for i, k in enumerate(KEYS)})
    features = rng.normal(size=(steps, 3, width))
    feed = iter(features)
    step = TrainerStep(rec, policy_features=lambda rows: next(feed))
    seen = []
    for t in range(steps):
        keys = [KEYS[(t + j) % 6] for j in range(3)]
        groups = [rng.integers(0, 2, 4).astype(float) for _ in keys]
        step.run(keys, 12, lambda idx, cnt, g=groups: [g[i][: int(c)] for i, c in zip(idx, cnt)], prompts=keys)
        seen.append((keys, groups, features[t]))
    return rec, seen


def test_a_trace_round_trips_through_npz_and_json(tmp_path):
    rec, seen = recorded()
    text = np.arange(12, dtype=np.float32).reshape(6, 2)
    trace = rec.trace(TEXTS, text)
    path = save_trace(tmp_path / "seed0", trace, settings={"task": "ladder"})
    back, settings = load_trace(tmp_path / "seed0")
    assert path.name == "seed0.json" and settings == {"task": "ladder"} and back.prompts == TEXTS
    for name in ("step", "prompt", "counts", "policy", "text"):
        np.testing.assert_array_equal(getattr(back, name), getattr(trace, name))
    np.testing.assert_array_equal(back.rewards, trace.rewards)  # NaN past each count, equal as NaN
    for (ids, groups, features), (keys, want, feats) in zip(back.steps(), seen, strict=True):
        assert [KEYS[i] for i in ids] == keys
        assert all(np.array_equal(g, w) for g, w in zip(groups, want, strict=True))
        np.testing.assert_allclose(features, feats.astype(np.float32))


def test_groups_of_unequal_size_keep_their_sizes():
    rec = TraceRecorder({"x": 0, "y": 1})
    rec.run(["x", "y"], 5, lambda idx, cnt: [np.ones(int(c)) for c in cnt])
    trace = rec.trace(["x=", "y="])
    assert sorted(trace.counts.tolist()) == [2, 3] and trace.rewards.shape == (2, 3)
    assert trace.policy.shape == (2, 0) and trace.text.shape == (2, 0)  # no features given: width 0
    assert np.isnan(trace.rewards[trace.counts.argmin(), 2])


def test_features_for_other_prompts_than_the_steps_are_refused():
    rec = TraceRecorder({"x": 0, "y": 1})
    rec.observe_policy(["y", "x"], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="other prompts than the step's"):
        rec.run(["x", "y"], 4, lambda idx, cnt: [np.ones(int(c)) for c in cnt])


def test_a_bad_trace_file_is_refused_naming_it(tmp_path):
    rec, _ = recorded()
    trace = rec.trace(TEXTS)
    save_trace(tmp_path / "t", trace)
    arrays = dict(np.load(tmp_path / "t.npz"))
    np.savez(tmp_path / "t.npz", **{k: v for k, v in arrays.items() if k != "policy"})
    with pytest.raises(ValueError, match=r"t\.npz: missing arrays \['policy'\]"):
        load_trace(tmp_path / "t")
    arrays["rewards"] = arrays["rewards"] * 2
    np.savez(tmp_path / "t.npz", **arrays)
    with pytest.raises(ValueError, match="rewards must lie in"):
        load_trace(tmp_path / "t")


@pytest.mark.parametrize(
    "change, match",
    [
        ({"prompt": np.array([0, 9])}, "prompt indices"),
        ({"policy": np.full((2, 1), np.nan, np.float32)}, "finite"),
        ({"counts": np.array([1, 5])}, "counts"),
        ({"text": np.zeros((3, 2), np.float32)}, "text has 3 rows"),
    ],
)
def test_an_inconsistent_trace_is_refused(change, match):
    fields = dict(
        prompts=["a", "b"],
        step=np.array([0, 0]),
        prompt=np.array([0, 1]),
        counts=np.array([1, 1]),
        rewards=np.array([[1.0], [0.0]]),
        policy=np.zeros((2, 1), np.float32),
        text=np.zeros((2, 2), np.float32),
    )
    with pytest.raises(ValueError, match=match):
        GroupTrace(**{**fields, **change})

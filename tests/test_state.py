"""save_state / load_state: round trips, both formats, atomic writes, no code execution."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

from adaptive_rollouts import state as state_mod
from adaptive_rollouts.state import load_state, save_state


def _assert_same(a, b, where="root"):
    # dicts come back as LoadedDict, a dict that also remembers its file and entry
    assert type(a) is type(b) or (type(a) is dict and isinstance(b, dict)), (where, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _example_state():
    rng = np.random.default_rng(123)
    rng.random(7)  # advance so the state is not the seed's
    return {
        "name": "GaussianProcess",
        "step": 17,
        "lr": 0.125,
        "nan": float("nan"),
        "inf": float("inf"),
        "flag": True,
        "nothing": None,
        "keys": ["a", "b", 3],
        "pair": (1, "x"),
        "big": 2**100 + 1,
        "mean": rng.normal(size=(5, 3)),
        "counts": np.arange(6, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "f32": np.linspace(0, 1, 4, dtype=np.float32),
        "empty": np.zeros((0, 384)),
        "scalar_array": np.array(2.5),
        "strings": np.array(["alpha", "beta"]),
        "nested": {"inner": {"x": np.ones(2), "y": [np.zeros(1), {"z": 1}]}, "list": []},
        "rng": rng.bit_generator.state,
    }


@pytest.mark.parametrize("fmt", ["safetensors", "npz", None])
def test_round_trip_is_identical(tmp_path, fmt):
    state = _example_state()
    path = tmp_path / "sub" / "state.bin"
    save_state(path, state, format=fmt)
    back = load_state(path)
    _assert_same(state, back)


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
def test_generator_state_resumes_same_stream(tmp_path, fmt):
    rng = np.random.default_rng(7)
    rng.random(11)
    save_state(tmp_path / "s", {"rng": rng.bit_generator.state}, format=fmt)
    expected = rng.random(5)
    other = np.random.default_rng(0)
    other.bit_generator.state = load_state(tmp_path / "s")["rng"]
    np.testing.assert_array_equal(other.random(5), expected)


def test_mt19937_state_with_array_round_trips(tmp_path):
    gen = np.random.Generator(np.random.MT19937(5))
    gen.random(3)
    save_state(tmp_path / "s", {"rng": gen.bit_generator.state})
    expected = gen.random(4)
    other = np.random.Generator(np.random.MT19937(0))
    other.bit_generator.state = load_state(tmp_path / "s")["rng"]
    np.testing.assert_array_equal(other.random(4), expected)


def test_numpy_scalars_become_python_values(tmp_path):
    save_state(tmp_path / "s", {"a": np.float64(1.5), "b": np.int32(4), "c": np.bool_(True)})
    back = load_state(tmp_path / "s")
    assert back == {"a": 1.5, "b": 4, "c": True}
    assert type(back["b"]) is int and type(back["c"]) is bool


def test_complex_arrays_choose_npz_automatically(tmp_path):
    z = np.array([1 + 2j, 3 - 1j])
    save_state(tmp_path / "s", {"z": z})
    assert (tmp_path / "s").read_bytes()[:4] == b"PK\x03\x04"
    np.testing.assert_array_equal(load_state(tmp_path / "s")["z"], z)
    with pytest.raises(ValueError, match="complex"):
        save_state(tmp_path / "t", {"z": z}, format="safetensors")


def test_default_format_is_safetensors_with_json_metadata(tmp_path):
    from safetensors import safe_open

    save_state(tmp_path / "s", {"x": np.arange(3.0), "k": "v"})
    with safe_open(str(tmp_path / "s"), framework="np") as f:
        meta = json.loads(f.metadata()["adaptive_rollouts"])
        assert list(f.keys()) == ["t0"]
    assert meta == {"x": {"__ndarray__": "t0"}, "k": "v"}


def test_fallback_to_npz_without_safetensors(tmp_path, monkeypatch):
    monkeypatch.setattr(state_mod, "_safetensors_numpy", lambda: None)
    state = {"x": np.arange(4.0), "y": [1, 2]}
    save_state(tmp_path / "s", state)
    assert (tmp_path / "s").read_bytes()[:4] == b"PK\x03\x04"
    _assert_same(state, load_state(tmp_path / "s"))


@pytest.mark.parametrize(
    "bad, match",
    [
        ({1: 2}, "key 1"),
        ({"x": object()}, "object"),
        ({"x": np.array([object()], dtype=object)}, "dtype object"),
        ({"__ndarray__": "t0"}, "reserved"),
        ({"a": {"b": {3.5: 1}}}, "/a/b"),
    ],
)
def test_unsaveable_values_raise_naming_the_place(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        save_state(tmp_path / "s", bad)
    assert not (tmp_path / "s").exists()


def test_not_a_dict_and_bad_format(tmp_path):
    with pytest.raises(ValueError, match="state must be a dict"):
        save_state(tmp_path / "s", [1, 2])
    with pytest.raises(ValueError, match="format"):
        save_state(tmp_path / "s", {}, format="pickle")


def test_overwrite_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "s"
    save_state(path, {"v": 1})

    # a failing write (here: the rename) must leave the old file intact and no temp file behind
    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(state_mod.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        save_state(path, {"v": 2})
    monkeypatch.undo()
    assert load_state(path) == {"v": 1}
    assert os.listdir(tmp_path) == ["s"]
    save_state(path, {"v": 3})
    assert load_state(path) == {"v": 3}
    assert os.listdir(tmp_path) == ["s"]


def test_loading_never_unpickles(tmp_path):
    # an npz whose array is a pickled object must be refused, not executed
    path = tmp_path / "evil.npz"
    np.savez(path, __json__=np.frombuffer(b"{}", dtype=np.uint8), t0=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        load_state(path)
    # a raw pickle file is not a state file
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(Exception):
        load_state(raw)


def test_foreign_safetensors_file_is_rejected(tmp_path):
    import safetensors.numpy as sn

    sn.save_file({"w": np.zeros(2)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match="no adaptive_rollouts state"):
        load_state(tmp_path / "w.safetensors")

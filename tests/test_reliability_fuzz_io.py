"""Property-based fuzzing (hypothesis) of what reads outside input: the checkpoint loader, the
`load_state_dict` of predictors and allocators, the embedding cache and the command line.

* `load_state` on a saved state that was truncated, had bytes flipped, or is random bytes: it
  returns the state exactly as saved, or raises `CorruptStateError` (a ValueError) naming the
  file - never another exception, never a silently different state.
* `load_state_dict` of every predictor and every registry allocator (the default included) on a
  valid state with values perturbed (NaN, negatives, wrong types, wrong
  shapes, duplicate keys): it refuses with a ValueError and the component is unchanged, or it
  accepts and the component then predicts finite probabilities and plans a valid allocation.
* the embedding cache with a damaged chunk: vectors come back equal to a fresh encoding.
* `adaptive-rollouts allocate` with random arguments: exit status 0 and counts that sum to the
  budget, or status 2 with an error message - never a traceback.
`benchmarks/fuzz.py` runs the same properties for many more cases.
"""

from __future__ import annotations

import contextlib
import copy
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    POOL,
    PREDICTORS,
    REGISTRY,
    BernoulliEnv,
    budget_for,
    build_allocator,
    build_predictor,
    check_step_invariants,
    states_equal,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_rollouts.allocators import make_allocator
from adaptive_rollouts.cli import main
from adaptive_rollouts.state import CorruptStateError, load_state, save_state
from adaptive_rollouts.types import allocator_kind

CI = settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

_LEAF = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
    st.builds(lambda n, seed: np.random.default_rng(seed).normal(size=n), st.integers(0, 6), st.integers(0, 99)),
)
_STATE = st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: not k.startswith("__")), _LEAF, max_size=6)


# ------------------------------------------------------------------------------------------------
# the file loader
# ------------------------------------------------------------------------------------------------
@st.composite
def loader_cases(draw):
    state = draw(_STATE)
    fmt = draw(st.sampled_from(["safetensors", "npz"]))
    damage = draw(st.sampled_from(["none", "truncate", "flip", "random", "append"]))
    return {"state": state, "fmt": fmt, "damage": damage, "seed": draw(st.integers(0, 2**32 - 1))}


def check_loader_case(case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"ckpt.{case['fmt']}"
        save_state(path, case["state"], format=case["fmt"])
        data = bytearray(path.read_bytes())
        if case["damage"] == "truncate":
            data = data[: int(rng.integers(0, len(data)))]
        elif case["damage"] == "flip":
            for i in rng.integers(0, len(data), size=int(rng.integers(1, 6))):
                data[i] ^= int(rng.integers(1, 256))
        elif case["damage"] == "random":
            data = bytearray(rng.bytes(int(rng.integers(0, 2 * len(data) + 1))))
        elif case["damage"] == "append":
            data += rng.bytes(int(rng.integers(1, 64)))
        path.write_bytes(bytes(data))
        try:
            back = load_state(path)
        except CorruptStateError as err:
            assert str(path) in str(err), err
            return
        except ValueError as err:  # e.g. a pickle-bearing npz refused
            assert str(path) in str(err), err
            return
        assert states_equal(back, case["state"]), (case["damage"], "a damaged file loaded as another state")


@CI
@given(loader_cases())
def test_fuzz_loader(case):
    check_loader_case(case)


# ------------------------------------------------------------------------------------------------
# load_state_dict
# ------------------------------------------------------------------------------------------------
_BAD_VALUES = [np.nan, -5.0, np.inf, "0.5", True, None, [], 1e308, 0, -1, 7.0, [1, 2]]
# every predictor and every registry allocator (the default included), plus VIP with a Beta predictor
_TARGETS = PREDICTORS + tuple(REGISTRY) + ("vip-beta",)


def _trained(name: str, run: int = 0):
    """``name`` after some updates; another ``run`` sees other prompts / rollouts, so a refused load
    that changed any part of the component shows in its state."""
    if name in PREDICTORS:
        model = build_predictor(name)
        model.update(["q0", "q3", "q5"], [np.array([1.0, 0.0]), np.ones(3), np.array([0.0, 0.5, 1.0])])
        if run:
            model.update(["q1", "q3"], [np.array([0.0, 0.0, 1.0]), np.array([0.5, 1.0])])
        return model
    alloc = make_allocator("vip", predictor="beta") if name == "vip-beta" else build_allocator(name, seed=run)
    for seed in range(2):
        alloc.run(POOL[:6], budget_for(alloc, 6, 12), BernoulliEnv(seed=seed + 10 * run).sampler(POOL[:6]))
    return alloc


@st.composite
def state_dict_cases(draw, names=_TARGETS):
    return {
        "name": draw(st.sampled_from(names)),
        "edits": draw(st.integers(1, 3)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def _perturb(state: dict, rng: np.random.Generator) -> None:
    """Replace one value somewhere in the (nested) state: a whole entry or one array element."""
    keys = [k for k in state if k != "class"]
    key = keys[int(rng.integers(len(keys)))]
    value = state[key]
    if isinstance(value, dict) and value and rng.random() < 0.7:
        _perturb(value, rng)
        return
    if isinstance(value, np.ndarray) and value.size and rng.random() < 0.6:
        value = value.copy()
        flat = value.reshape(-1)
        bad = _BAD_VALUES[int(rng.integers(0, 3))] if value.dtype.kind == "f" else -3
        flat[int(rng.integers(flat.size))] = bad
        state[key] = value
    elif isinstance(value, list) and value and rng.random() < 0.5:
        state[key] = value + [value[0]]  # a duplicate key / a wrong length
    else:
        state[key] = _BAD_VALUES[int(rng.integers(len(_BAD_VALUES)))]


def check_state_dict_case(case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    source, target = _trained(case["name"]), _trained(case["name"], run=1)
    state = copy.deepcopy(source.state_dict())
    for _ in range(case["edits"]):
        _perturb(state, rng)
    before = copy.deepcopy(target.state_dict())
    try:
        target.load_state_dict(state)
    except ValueError:
        assert states_equal(target.state_dict(), before), "a refused state changed the component"
        return
    # accepted: the component must still work and give valid answers
    if hasattr(target, "predict"):
        pred = target.predict(POOL[:6])
    else:
        budget = budget_for(target, 6, 12)
        if hasattr(target, "plan"):
            counts = target.plan(POOL[:6], budget).counts
            assert counts.sum() <= budget and np.all(counts >= 0)
            assert allocator_kind(target) == "save" or counts.sum() == budget
        env = BernoulliEnv(seed=7)
        rewards = target.run(POOL[:6], budget, env.sampler(POOL[:6]))
        problems = check_step_invariants(target, POOL[:6], budget, env.log, rewards)
        assert not problems, (case, problems)
        pred = target.predictor.predict(POOL[:6]) if hasattr(target, "slot") else None
    if pred is not None:
        assert np.all(np.isfinite(pred.mean)) and np.all((pred.mean >= 0) & (pred.mean <= 1))
        assert np.all(np.isfinite(pred.var)) and np.all(pred.var >= 0)


@pytest.mark.parametrize("name", _TARGETS)
@settings(CI, max_examples=12)
@given(data=st.data())
def test_fuzz_load_state_dict(name, data):
    check_state_dict_case(data.draw(state_dict_cases(names=(name,))))


# ------------------------------------------------------------------------------------------------
# the embedding cache
# ------------------------------------------------------------------------------------------------
class _Model:
    def encode(self, texts, **kwargs):
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


@st.composite
def cache_cases(draw):
    texts = draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6, unique=True))
    return {"texts": texts, "seed": draw(st.integers(0, 2**32 - 1)), "damage": draw(st.sampled_from(["cut", "flip"]))}


def check_cache_case(case: dict) -> None:
    import warnings

    from adaptive_rollouts.embeddings import SentenceTransformerEncoder

    rng = np.random.default_rng(case["seed"])
    with tempfile.TemporaryDirectory() as folder:
        first = SentenceTransformerEncoder(model="fake", cache_dir=folder)
        first._model, first._dim = _Model(), 3
        want = first.encode(case["texts"])
        (chunk,) = first.cache_dir.glob("chunk-*.npz")
        data = bytearray(chunk.read_bytes())
        if case["damage"] == "cut":
            data = data[: int(rng.integers(0, len(data)))]
        else:
            data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
        chunk.write_bytes(bytes(data))
        again = SentenceTransformerEncoder(model="fake", cache_dir=folder)
        again._model, again._dim = _Model(), 3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = again.encode(case["texts"])
        np.testing.assert_array_equal(got, want)


@CI
@given(cache_cases())
def test_fuzz_embedding_cache(case):
    check_cache_case(case)


# ------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------
_NUMBERISH = st.one_of(
    st.integers(-5, 40).map(str),
    st.floats(-1, 2).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", " ", "0x10", "1_0"]),
    st.text(max_size=6),
)


@st.composite
def cli_cases(draw):
    probs = draw(st.lists(st.one_of(st.floats(0, 1).map(repr), _NUMBERISH), min_size=0, max_size=5))
    argv = ["allocate", "--p", ",".join(probs), "--budget", draw(_NUMBERISH)]
    for flag in ("--lower", "--upper"):
        if draw(st.booleans()):
            argv += [flag, draw(_NUMBERISH)]
    if draw(st.booleans()):
        argv += ["--objective", draw(st.sampled_from(["rloo", "drgrpo", "grpo", "ppo", ""]))]
    return argv


def check_cli_case(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:  # argparse's exit for a bad argument
            status = exit_.code
    assert "Traceback" not in err.getvalue()
    if status == 0:
        rollouts = next(line for line in out.getvalue().splitlines() if line.startswith("rollouts:"))
        counts = [int(c) for c in rollouts.split()[1:]]
        budget = int(argv[argv.index("--budget") + 1])
        assert sum(counts) == budget and min(counts) >= 1, (argv, counts)
    else:
        assert status == 2 and "error" in err.getvalue(), (argv, status, err.getvalue())


@CI
@given(cli_cases())
def test_fuzz_cli(argv):
    check_cli_case(argv)


@pytest.mark.parametrize(
    "argv", [["allocate", "--p", "0.5", "--budget", "3"], ["allocate", "--p", ",", "--budget", "3"]]
)
def test_cli_examples(argv):
    check_cli_case(argv)

"""Files on disk: checkpoints detect corruption (checksum), damaged files raise errors naming them,
files honour the umask, temporaries of killed writers are removed, and prompts a checkpoint could
not hold are refused when first seen, not at save time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import POOL, BernoulliEnv, states_equal

from adaptive_rollouts.allocators import make_allocator
from adaptive_rollouts.predictors import DiscountedBeta
from adaptive_rollouts.state import CorruptStateError, load_state, save_state
from adaptive_rollouts.state.atomic import _host, atomic_write, remove_stale_temporaries

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _trained_state():
    alloc = make_allocator("vip", predictor="beta", seed=0)
    for seed in range(3):
        alloc.run(POOL[:6], 20, BernoulliEnv(seed=seed).sampler(POOL[:6]))
    return alloc, {"allocator": alloc.state_dict(), "step": 3}


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
def test_flipped_byte_in_tensor_data_is_detected(fmt, tmp_path):
    """Before: a flipped byte in the array data loaded silently and changed the plan."""
    _, state = _trained_state()
    path = tmp_path / f"ckpt.{fmt}"
    save_state(path, state, format=fmt)
    data = bytearray(path.read_bytes())
    alpha = np.asarray(state["allocator"]["predictor"]["alpha"])
    offset = bytes(data).find(alpha.tobytes())  # the alpha tensor's bytes, wherever the format put them
    assert offset > 0
    data[offset + 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStateError, match=f"{path}.*(checksum|CRC|cannot read)"):
        load_state(path)


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
def test_every_single_byte_change_is_detected_or_harmless(fmt, tmp_path):
    """Flip every byte of a small checkpoint in turn: the load either raises an error naming the
    file or gives back exactly the saved state (a byte the format ignores, e.g. a zip timestamp)."""
    state = {"step": 3, "mean": np.array([0.25, 0.5, 0.75]), "keys": ["a", "b", "c"]}
    path = tmp_path / f"small.{fmt}"
    save_state(path, state, format=fmt)
    good = path.read_bytes()
    silent = []
    for i in range(len(good)):
        data = bytearray(good)
        data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        try:
            back = load_state(path)
        except ValueError as err:
            assert str(path) in str(err), f"byte {i}: error does not name the file: {err}"
            continue
        if not states_equal(dict(back), state):
            silent.append(i)
    assert silent == [], f"{fmt}: bytes {silent[:10]} changed the state silently"


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
def test_truncated_files_raise_naming_the_file(fmt, tmp_path):
    _, state = _trained_state()
    path = tmp_path / f"ckpt.{fmt}"
    save_state(path, state, format=fmt)
    good = path.read_bytes()
    for size in sorted({0, 1, 7, 8, 9, 100, len(good) // 2, len(good) - 1, *range(0, len(good), 97)}):
        path.write_bytes(good[:size])
        with pytest.raises(CorruptStateError, match=str(path)):
            load_state(path)


@pytest.mark.parametrize(
    "content",
    [
        b"\xff" * 64,  # before: UnicodeDecodeError
        (20).to_bytes(8, "little") + b'{"__metadata__": {"a',  # before: JSONDecodeError
        (2**62).to_bytes(8, "little") + b"{}",  # absurd header length
        b"PK\x03\x04" + b"\x00" * 40,  # a broken zip (BadZipFile)
        os.urandom(300),
    ],
    ids=["bad-utf8", "bad-json", "huge-header", "broken-zip", "random"],
)
def test_garbage_files_raise_naming_the_file(content, tmp_path):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes(content)
    with pytest.raises(CorruptStateError, match=str(path)):
        load_state(path)


def test_file_without_checksum_needs_verify_false(tmp_path):
    import json

    import safetensors.numpy as st

    tree = {"step": 1, "mean": {"__ndarray__": "t0"}}
    path = tmp_path / "old.safetensors"
    st.save_file({"t0": np.ones(2)}, str(path), metadata={"adaptive_rollouts": json.dumps(tree)})
    with pytest.raises(CorruptStateError, match="no checksum.*verify=False"):
        load_state(path)
    assert load_state(path, verify=False)["mean"].tolist() == [1.0, 1.0]


def test_dangling_array_reference_names_the_entry(tmp_path):
    import json

    import safetensors.numpy as st

    from adaptive_rollouts.state import _digest

    tree = json.dumps({"predictor": {"alpha": {"__ndarray__": "t7"}}})
    path = tmp_path / "dangling.safetensors"
    meta = {"adaptive_rollouts": tree, "adaptive_rollouts_sha256": _digest(tree, {})}
    st.save_file({}, str(path), metadata=meta)
    with pytest.raises(CorruptStateError, match="predictor/alpha.*missing array"):
        load_state(path)


# ------------------------------------------------------------------------------------------------
# permissions and temporaries
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_honour_the_umask(umask, mode, tmp_path):
    """Before: checkpoints were created 0600 whatever the umask (mkstemp)."""
    old = os.umask(umask)
    try:
        save_state(tmp_path / "ckpt.safetensors", {"v": np.ones(2)})
        atomic_write(tmp_path / "raw.bin", b"x")
    finally:
        os.umask(old)
    for name in ("ckpt.safetensors", "raw.bin"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_save_killed_midway_leaves_no_temporary_after_the_next_save(tmp_path):
    """kill -9 during the write: the next save to the same path removes the orphaned temporary."""
    path = tmp_path / "ckpt.safetensors"
    script = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {SRC!r})
        import numpy as np
        from adaptive_rollouts.state import save_state
        os.fsync = lambda fd: (print("writing", flush=True), time.sleep(60))
        save_state({str(path)!r}, {{"big": np.ones(1_000_000)}})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    orphans = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(orphans) == 1 and orphans[0].stat().st_size > 7_000_000  # the full-size orphan
    save_state(path, {"v": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.safetensors"]
    assert load_state(path) == {"v": 1}


def test_live_writers_temporaries_are_kept(tmp_path):
    host = _host()  # host name and process-ID space
    target = tmp_path / "ckpt.safetensors"
    live = tmp_path / f".ckpt.safetensors.{host}.{os.getppid()}.abc.tmp"  # our parent is alive
    dead = tmp_path / f".ckpt.safetensors.{host}.{_dead_pid()}.abc.tmp"
    other_old = tmp_path / ".ckpt.safetensors.otherhost.123.abc.tmp"
    other_new = tmp_path / ".ckpt.safetensors.otherhost.124.abc.tmp"
    unrelated = tmp_path / ".ckpt.safetensors.notes.tmp"
    for p in (live, dead, other_old, other_new, unrelated):
        p.write_bytes(b"partial")
    week_ago = time.time() - 7 * 86400
    os.utime(other_old, (week_ago, week_ago))
    removed = remove_stale_temporaries(target)
    assert sorted(removed) == sorted([dead, other_old])
    assert live.exists() and other_new.exists() and unrelated.exists()


@pytest.mark.parametrize("reader", ["save_state", "embedding cache read"])
def test_a_temporary_of_another_pid_space_with_our_host_name_is_kept(tmp_path, reader):
    """Two containers with one host name share a volume: a process ID of the other's temporary means
    nothing here (before: taken for a dead writer of this host, and deleted while it was writing)."""
    import socket

    from adaptive_rollouts.embeddings import SentenceTransformerEncoder

    same_name = socket.gethostname().replace(".", "_")
    folder = tmp_path / "cache" / "fake" if reader != "save_state" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    target = "chunk-0.npz" if reader != "save_state" else "ckpt.safetensors"
    theirs = [
        folder / f".{target}.{same_name}-b0123456789abcdef-ns4026532000.{_dead_pid()}.abc.tmp",
        folder / f".{target}.{same_name}.{_dead_pid()}.abd.tmp",  # a writer without a PID space in its name
    ]
    for t in theirs:
        t.write_bytes(b"in flight")
    if reader == "save_state":
        save_state(tmp_path / target, {"v": 1})
    else:
        enc = SentenceTransformerEncoder(model="fake", cache_dir=tmp_path / "cache")
        enc._load_cache()
    assert all(t.exists() for t in theirs)
    day_ago = time.time() - 2 * 86400  # abandoned for longer than STALE_AFTER_S: removed
    for t in theirs:
        os.utime(t, (day_ago, day_ago))
    remove_stale_temporaries(folder / target)
    assert not any(t.exists() for t in theirs)


# ------------------------------------------------------------------------------------------------
# prompts a checkpoint cannot hold: refused when first seen
# ------------------------------------------------------------------------------------------------
UNSAVEABLE = [b"raw bytes", frozenset({"a", "b"}), ("ok", b"nested bytes"), float("nan")]


@pytest.mark.parametrize("bad", UNSAVEABLE, ids=["bytes", "frozenset", "tuple-with-bytes", "nan"])
def test_unsaveable_prompts_are_refused_before_any_rollout(bad):
    """Before: bytes and frozenset prompts were accepted and only failed at save time."""
    prompts = ["q0", bad, "q2"]
    calls = []

    def sample(indices, counts):
        calls.append(1)
        return [np.ones(int(c)) for c in counts]

    for alloc in (make_allocator("vip", predictor="beta"), make_allocator("greso")):
        with pytest.raises(ValueError, match="checkpoint can hold.*" + type(bad).__name__):
            alloc.run(prompts, 12, sample)
        assert calls == []
    with pytest.raises(ValueError, match="checkpoint can hold"):
        DiscountedBeta().update(prompts, [np.ones(2)] * 3)


def test_stateless_allocators_and_saveable_prompts_are_unaffected(tmp_path):
    """Uniform keeps nothing per prompt: any hashable prompt is fine. Tuples, ints and numpy
    scalars are keys a checkpoint holds, and they round-trip."""
    make_allocator("uniform").run([b"x", frozenset()], 4, lambda i, c: [np.ones(int(n)) for n in c])
    alloc = make_allocator("vip", predictor="beta")
    prompts = [("math", 3), 7, np.int64(8), "text", None]
    alloc.run(prompts, 10, lambda i, c: [np.ones(int(n)) for n in c])
    save_state(tmp_path / "a.safetensors", alloc.state_dict())
    twin = make_allocator("vip", predictor="beta", seed=9)
    twin.load_state_dict(load_state(tmp_path / "a.safetensors"))
    assert np.allclose(twin.predictor.predict(prompts).mean, alloc.predictor.predict(prompts).mean)


# ------------------------------------------------------------------------------------------------
# the embedding cache
# ------------------------------------------------------------------------------------------------
class _CountingModel:
    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, texts, **kwargs):
        self.encoded += list(texts)
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


def _encoder(folder):
    from adaptive_rollouts.embeddings import SentenceTransformerEncoder

    enc = SentenceTransformerEncoder(model="fake-model", cache_dir=folder)
    enc._model, enc._dim = _CountingModel(), 3
    return enc


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # a crash mid-write (before: BadZipFile naming no file, forever)
        lambda b: b[:-1],
        lambda b: b"",
        lambda b: b.replace(np.float32(2.0).tobytes(), np.float32(np.nan).tobytes(), 1),  # NaN planted
        lambda b: bytes(x ^ 0x01 if 200 < i < 210 else x for i, x in enumerate(b)),  # bits flipped
    ],
    ids=["half", "last-byte", "empty", "nan-vector", "flipped-bits"],
)
def test_corrupt_cache_chunk_is_named_dropped_and_recomputed(damage, tmp_path):
    first = _encoder(tmp_path)
    texts = ["aa", "bbb", "c"]
    want = first.encode(texts)
    first.encode(["other text"])  # a second, intact chunk
    chunks = sorted(first.cache_dir.glob("chunk-*.npz"), key=lambda p: p.stat().st_mtime_ns)
    assert len(chunks) == 2
    bad = chunks[0]
    bad.write_bytes(damage(bad.read_bytes()))
    again = _encoder(tmp_path)
    with pytest.warns(RuntimeWarning, match=f"{bad}.*removed it, its vectors will be recomputed"):
        got = again.encode(texts + ["other text"])
    np.testing.assert_array_equal(got[:3], want)
    assert again._model.encoded == texts  # only the damaged chunk's texts are recomputed
    assert not bad.exists()
    third = _encoder(tmp_path)  # the cache is whole again
    third.encode(texts + ["other text"])
    assert third._model.encoded == []


def test_cache_chunks_honour_the_umask_and_orphans_are_removed(tmp_path):
    host = _host()
    enc = _encoder(tmp_path)
    enc.cache_dir.mkdir(parents=True)
    orphan = enc.cache_dir / f".chunk-0123.npz.{host}.{_dead_pid()}.abcd.tmp"
    orphan.write_bytes(b"x" * 1000)
    old = os.umask(0o022)
    try:
        enc.encode(["hello"])
    finally:
        os.umask(old)
    (chunk,) = enc.cache_dir.glob("chunk-*.npz")
    assert chunk.stat().st_mode & 0o777 == 0o644
    assert not orphan.exists()


# ------------------------------------------------------------------------------------------------
# PaperGP: memory O(N + B^2), a clear error above a configurable batch memory
# ------------------------------------------------------------------------------------------------
def test_paper_gp_refuses_a_batch_too_large_for_its_memory_limit():
    """Before: a 100k-prompt batch asked numpy for 74.5 GiB and died with MemoryError (or the OOM
    killer). Now the update names the batch size and the memory it would need, and changes nothing."""
    from adaptive_rollouts.embeddings import FeatureTable
    from adaptive_rollouts.predictors import PaperGP
    from adaptive_rollouts.predictors.paper_gp import batch_memory_bytes

    keys = [f"q{i}" for i in range(40)]
    table = FeatureTable(keys, np.random.default_rng(0).normal(size=(40, 3)))
    limit = batch_memory_bytes(20, 40) / 2**30  # exactly what a 20-prompt batch needs
    gp = PaperGP(table, prior_mean=0.0, max_batch_memory_gib=limit)
    gp.update(keys[:20], [np.array([1.0, 0.0])] * 20)  # at the limit: fine
    before = gp.state_dict()
    with pytest.raises(ValueError, match=r"batch of 21 prompts needs about .* GiB .*max_batch_memory_gib"):
        gp.update(keys[:21], [np.array([1.0, 0.0])] * 21)
    assert states_equal(gp.state_dict(), before)
    # the default limit (4 GiB) holds batches of about 20,000 prompts, and refuses 100,000
    assert batch_memory_bytes(15_000, 4096) < 4 * 2**30 < batch_memory_bytes(100_000, 4096)
    with pytest.raises(ValueError, match="max_batch_memory_gib"):
        PaperGP(table, max_batch_memory_gib=0)


def test_paper_gp_peak_memory_is_within_its_estimate():
    """tracemalloc peak of an update and a pool-wide predict <= the documented 8 (B^2 + 2 chunk B)
    bytes plus the O(N) arrays, with chunks smaller than the pool."""
    import tracemalloc

    from adaptive_rollouts.embeddings import FeatureTable
    from adaptive_rollouts.predictors import PaperGP
    from adaptive_rollouts.predictors.paper_gp import batch_memory_bytes

    n, b, chunk = 3000, 400, 500
    keys = [f"q{i}" for i in range(n)]
    gp = PaperGP(FeatureTable(keys, np.random.default_rng(0).normal(size=(n, 8))), chunk_size=chunk)
    rewards = [np.array([1.0, 0.0, 1.0])] * b
    tracemalloc.start()
    try:
        gp.update(keys[:b], rewards)
        gp.predict(keys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    pool_arrays = 16 * 8 * n  # a handful of length-N float arrays (mean, variance, prediction)
    assert peak <= batch_memory_bytes(b, chunk) + pool_arrays + 2**20, peak


@pytest.mark.parametrize(
    "failure",
    [OSError(28, "No space left on device"), OSError(30, "Read-only file system"), PermissionError(13, "denied")],
    ids=["ENOSPC", "EROFS", "EACCES"],
)
def test_a_failed_cache_write_warns_and_encode_still_returns_the_vectors(tmp_path, monkeypatch, failure):
    """The cache is an optimisation: before, a full disk or a read-only cache folder failed every
    encode() of a VIP/GP run with the default cache location."""
    import adaptive_rollouts.embeddings as embeddings

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(embeddings, "write_chunk", fail)
    enc = _encoder(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"embedding cache {re.escape(str(enc.cache_dir))}: cannot write"):
        got = enc.encode(["a", "bb"])
    np.testing.assert_array_equal(got, _CountingModel().encode(["a", "bb"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per encoder, not at every call
        np.testing.assert_array_equal(enc.encode(["bb", "ccc"])[0], got[1])
    assert enc._model.encoded == ["a", "bb", "ccc"]  # kept in memory: nothing encoded twice


def test_a_read_only_cache_folder_is_read_and_not_written(tmp_path):
    first = _encoder(tmp_path)
    want = first.encode(["a"])
    (chunk,) = first.cache_dir.glob("chunk-*.npz")
    os.chmod(first.cache_dir, 0o555)
    try:
        if os.access(first.cache_dir, os.W_OK):
            pytest.skip("running as a user that can write anywhere")
        again = _encoder(tmp_path)
        with pytest.warns(RuntimeWarning, match="cannot write"):
            got = again.encode(["a", "new"])
    finally:
        os.chmod(first.cache_dir, 0o755)
    np.testing.assert_array_equal(got[0], want[0])
    assert again._model.encoded == ["new"]


def test_a_lone_surrogate_names_the_prompt(tmp_path):
    enc = _encoder(tmp_path)
    with pytest.raises(ValueError, match=r"prompt 'ok \\ud800' is not valid Unicode text"):
        enc.encode(["fine", "ok \ud800"])

"""Save and load state dicts: arrays in safetensors (or npz), everything else as JSON. No pickle.

The package holds all state I/O: this module (`save_state`, `load_state`), `tree` (the JSON side
of a state), `checks` (`StateReader`: every value a `load_state_dict` reads, checked before
anything changes) and `atomic` (atomic, durable file writes).

A state is a nested structure of dicts (string keys), lists, tuples, numpy arrays, numpy scalars,
ints, floats, strings, bools and None - what every `state_dict()` in the package returns, including
`numpy.random.Generator.bit_generator.state`.

File format (one file, so that one `os.replace` makes the write atomic):

- ``"safetensors"`` (default): a safetensors file whose arrays are the state's numeric arrays, named
  ``t0, t1, ...``; the rest of the state is JSON in the header metadata under ``adaptive_rollouts``.
- ``"npz"``: an uncompressed ``np.savez`` archive (written with ``allow_pickle=False``), the JSON in
  a uint8 array named ``__json__``. Used when safetensors is not importable or an array's dtype is
  one safetensors cannot hold (complex).

In the JSON an array is ``{"__ndarray__": "t3"}``, a string array ``{"__strarray__": [...],
"shape": [...]}`` and a tuple ``{"__tuple__": [...]}``, so loading gives back the same types.
Loading parses JSON and raw array buffers only; it never executes code.

Integrity: every file carries the SHA-256 of its contents (the JSON text and every array's name,
dtype, shape and bytes) - under ``adaptive_rollouts_sha256`` in the safetensors metadata, or an
entry ``__sha256__`` of the npz. `load_state` recomputes it, so a flipped byte anywhere in the data
raises `CorruptStateError` naming the file instead of silently changing a resumed run. Writes go
through `adaptive_rollouts.state.atomic.atomic_write`: atomic, fsynced, honouring the umask, and
removing temporaries left by killed writers.

>>> import numpy as np, tempfile, os
>>> rng = np.random.default_rng(0)
>>> state = {"step": 3, "mean": np.array([0.5, 0.25]), "rng": rng.bit_generator.state}
>>> path = os.path.join(tempfile.mkdtemp(), "predictor.safetensors")
>>> save_state(path, state)
>>> back = load_state(path)
>>> back["step"], back["mean"].tolist(), back["rng"] == state["rng"]
(3, [0.5, 0.25], True)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from ..checks.validation import check_choice
from .atomic import atomic_write
from .tree import CorruptStateError, LoadedDict, check_savable_keys, decode, describe, encode, savable_key

__all__ = [
    "save_state",
    "load_state",
    "describe",
    "check_savable_keys",
    "savable_key",
    "CorruptStateError",
    "LoadedDict",
    "STATE_FORMATS",
]

STATE_FORMATS = ("safetensors", "npz")
_METADATA_KEY = "adaptive_rollouts"
_CHECKSUM_KEY = "adaptive_rollouts_sha256"
_JSON_ARRAY_NAME = "__json__"
_CHECKSUM_ARRAY_NAME = "__sha256__"
# dtypes safetensors can store (numpy kind + itemsize)
_SAFETENSORS_DTYPES = {
    np.dtype(t)
    for t in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
}


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy as st_numpy
    except ImportError:  # optional dependency: npz fallback
        return None
    return st_numpy


def _digest(text: str, arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the JSON text and of every array (name, dtype, shape, little-endian bytes)."""
    h = hashlib.sha256(text.encode("utf-8"))
    for name in sorted(arrays, key=lambda n: (len(n), n)):
        a = np.ascontiguousarray(arrays[name])
        little = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(f"\0{name}\0{a.dtype.kind}{a.dtype.itemsize}\0{list(a.shape)}\0".encode())
        h.update(little.tobytes())
    return h.hexdigest()


# safetensors refuses a header (JSON metadata + tensor index) above 100,000,000 bytes; keep a margin
_SAFETENSORS_HEADER_LIMIT = 95_000_000


def _fits_safetensors_header(text: str, arrays: dict[str, np.ndarray]) -> bool:
    index = sum(len(name) + 40 + 12 * a.ndim for name, a in arrays.items())  # per-tensor dtype/shape/offsets
    return len(text.encode("utf-8")) + index + 1024 <= _SAFETENSORS_HEADER_LIMIT


def save_state(path: str | os.PathLike, state: dict, format: str | None = None) -> None:
    """Write `state` to the single file `path`, atomically (temporary file, then rename).

    format: "safetensors" (default when importable), "npz", or None for automatic choice
    (npz when safetensors is missing, an array is complex, or the JSON part is too large for a
    safetensors header, e.g. 100,000 prompts with long text keys; `load_state` reads either).
    """
    if not isinstance(state, dict):
        raise ValueError(f"state must be a dict, got {type(state).__name__}")
    if format is not None:
        check_choice("format", format, STATE_FORMATS)
    arrays: dict[str, np.ndarray] = {}
    tree = encode(state, arrays, "")
    text = json.dumps(tree, allow_nan=True, separators=(",", ":"))
    st_numpy = _safetensors_numpy()
    fits = _fits_safetensors_header(text, arrays)
    if format is None:
        storable = all(a.dtype in _SAFETENSORS_DTYPES for a in arrays.values())
        format = "safetensors" if st_numpy is not None and storable and fits else "npz"
    digest = _digest(text, arrays)
    if format == "safetensors":
        if st_numpy is None:
            raise ValueError("format='safetensors' but the safetensors package is not installed")
        bad = {k: str(a.dtype) for k, a in arrays.items() if a.dtype not in _SAFETENSORS_DTYPES}
        if bad:
            raise ValueError(f"format='safetensors' cannot store array dtypes {bad}; use 'npz'")
        if not fits:
            raise ValueError(
                f"{path}: this state's JSON part ({len(text.encode()) / 2**20:.0f} MiB: e.g. many long prompt "
                f"keys) exceeds the safetensors header limit ({_SAFETENSORS_HEADER_LIMIT / 2**20:.0f} MiB); "
                "save it with format='npz' or format=None"
            )
        data = st_numpy.save(arrays, metadata={_METADATA_KEY: text, _CHECKSUM_KEY: digest})
    else:
        buffer = io.BytesIO()
        payload = dict(arrays)
        payload[_JSON_ARRAY_NAME] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        payload[_CHECKSUM_ARRAY_NAME] = np.frombuffer(digest.encode("ascii"), dtype=np.uint8)
        np.savez(buffer, allow_pickle=False, **payload)
        data = buffer.getvalue()
    atomic_write(Path(path), data)


def _read_npz(path: Path) -> tuple[str, str | None, dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    if _JSON_ARRAY_NAME not in arrays:
        raise CorruptStateError(f"{path}: npz file has no {_JSON_ARRAY_NAME} entry (not a state file)")
    text = arrays.pop(_JSON_ARRAY_NAME).tobytes().decode("utf-8")
    digest = arrays.pop(_CHECKSUM_ARRAY_NAME, None)
    return text, None if digest is None else digest.tobytes().decode("ascii"), arrays


def _read_safetensors(path: Path) -> tuple[str, str | None, dict[str, np.ndarray]]:
    """(JSON text, checksum, arrays) of a safetensors state file, read with safetensors' own reader."""
    if _safetensors_numpy() is None:
        raise ValueError(f"{path}: safetensors file but the safetensors package is not installed")
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        metadata = handle.metadata() or {}
        arrays = {name: handle.get_tensor(name) for name in handle.keys()}
    if _METADATA_KEY not in metadata:
        raise CorruptStateError(f"{path}: safetensors file has no adaptive_rollouts state metadata")
    return metadata[_METADATA_KEY], metadata.get(_CHECKSUM_KEY), arrays


def load_state(path: str | os.PathLike, verify: bool = True) -> dict:
    """Read a state written by `save_state`. Parses JSON and raw arrays only; never unpickles.

    The file's checksum is checked first (``verify=False`` skips it, to rescue a damaged file by
    hand); a truncated, altered or foreign file raises `CorruptStateError` naming it. The dicts of
    the result are `LoadedDict`, so a `load_state_dict` that refuses a value names the file and
    the entry.
    """
    path = Path(path)
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):  # a FIFO or device would block or never end
        raise ValueError(f"{path}: not a regular file, so not a state file")
    with open(path, "rb") as handle:
        magic = handle.read(8)
    try:
        if len(magic) < 8:
            raise CorruptStateError(f"{path}: not a state file (too short: {len(magic)} bytes)")
        reader = _read_npz if magic[:4] == b"PK\x03\x04" else _read_safetensors
        text, digest, arrays = reader(path)
        tree = json.loads(text)
    except CorruptStateError:
        raise
    except Exception as err:  # zip, npy, safetensors, UTF-8 and JSON errors of a damaged file
        if isinstance(err, ValueError) and "pickle" in str(err):
            raise ValueError(f"{path}: refused: {err}") from None
        raise CorruptStateError(
            f"{path}: cannot read this state file ({type(err).__name__}: {err}); "
            "it is truncated, corrupted or was not written by save_state"
        ) from None
    if verify:
        if digest is None:
            raise CorruptStateError(
                f"{path}: the state file has no checksum (written by an older version?); "
                "load_state(path, verify=False) reads it unchecked"
            )
        actual = _digest(text, arrays)
        if actual != digest:
            raise CorruptStateError(
                f"{path}: checksum mismatch: the contents changed after the file was written "
                f"(stored sha256 {digest[:16]}..., contents {actual[:16]}...)"
            )
    if not isinstance(tree, dict):
        raise CorruptStateError(f"{path}: the state is a {type(tree).__name__}, not a dict")
    return decode(tree, arrays, str(path))

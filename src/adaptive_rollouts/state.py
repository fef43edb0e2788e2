"""Save and load state dicts: arrays in safetensors (or npz), everything else as JSON. No pickle.

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
through `adaptive_rollouts.atomic.atomic_write`: atomic, fsynced, honouring the umask, and
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
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import atomic_write
from .validation import check_choice

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
_MARKERS = ("__ndarray__", "__strarray__", "__tuple__")
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


class CorruptStateError(ValueError):
    """A state file that cannot be read back as written: truncated, altered, or not a state file."""


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy as st_numpy
    except ImportError:  # optional dependency: npz fallback
        return None
    return st_numpy


def _encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """Replace arrays by references into `arrays`; convert numpy scalars to Python values."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "US":
            return {"__strarray__": obj.astype(str).ravel().tolist(), "shape": list(obj.shape)}
        if obj.dtype.kind not in "biufc":
            raise ValueError(
                f"state at {where!r}: array dtype {obj.dtype} cannot be saved "
                "(only bool, integer, float, complex and string arrays)"
            )
        name = f"t{len(arrays)}"
        arrays[name] = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return {"__ndarray__": name}
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ValueError(
                    f"state at {where!r}: dict key {key!r} is a {type(key).__name__}, keys must be strings"
                )
            if key in _MARKERS:
                raise ValueError(f"state at {where!r}: dict key {key!r} is reserved")
            out[key] = _encode(value, arrays, f"{where}/{key}")
        return out
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, arrays, f"{where}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, arrays, f"{where}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return _encode(obj.item(), arrays, where)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise ValueError(
        f"state at {where!r}: value of type {type(obj).__name__} cannot be saved "
        "(allowed: dict, list, tuple, numpy array, int, float, str, bool, None)"
    )


_PLAIN_KEY_TYPES = (str, int)


def savable_key(key: Any) -> bool:
    """Whether a prompt key survives `save_state` / `load_state` as an equal, equally hashed key:
    str, int, bool, None, a finite float, numpy scalars of those, and tuples of savable keys.
    bytes, frozenset and arbitrary objects do not (JSON cannot hold them)."""
    if type(key) in _PLAIN_KEY_TYPES or key is None or isinstance(key, (bool, str, int, np.integer, np.bool_)):
        return True
    if isinstance(key, (float, np.floating)):
        return bool(np.isfinite(key))
    if isinstance(key, tuple):
        return all(savable_key(k) for k in key)
    return False


def check_savable_keys(keys: Any, argname: str = "prompts") -> None:
    """ValueError naming the keys a checkpoint could not hold. Components that keep per-prompt
    state call it when they first see a prompt, so the problem shows then, not at save time."""
    plain = _PLAIN_KEY_TYPES
    bad = [k for k in keys if type(k) not in plain and not savable_key(k)]
    if bad:
        shown = ", ".join(f"{type(k).__name__} {k!r}" for k in bad[:3])
        raise ValueError(
            f"{argname} must be keys a checkpoint can hold (str, int, finite float, bool, None or tuples "
            f"of these); got {shown}{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}"
        )


class LoadedDict(dict):
    """A dict read back by `load_state`: a plain dict that also knows the file it came from
    (``source``) and its place in the state (``entry``, e.g. ``"allocator/predictor"``), so that a
    `load_state_dict` refusing one of its values can name both."""

    source: str | None = None
    entry: str = ""


def describe(state: Any, key: str | None = None) -> str:
    """Where a state value lives, for error messages: ``"entry 'allocator/predictor/alpha' of
    ckpt.safetensors"`` for a loaded state, ``"entry 'alpha'"`` for an in-memory one."""
    entry = getattr(state, "entry", "")
    path = "/".join(x for x in (entry, key) if x)
    where = f"entry {path!r}" if path else "the state"
    source = getattr(state, "source", None)
    return f"{where} of {source}" if source else where


def _decode(obj: Any, arrays: dict[str, np.ndarray], source: str, entry: str = "") -> Any:
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            name = obj["__ndarray__"]
            if not isinstance(name, str) or name not in arrays:
                raise CorruptStateError(f"{source}: entry {entry!r} refers to a missing array {name!r}")
            return arrays[name]
        if "__strarray__" in obj:
            try:
                return np.array(obj["__strarray__"], dtype=str).reshape(obj["shape"])
            except (KeyError, TypeError, ValueError) as err:
                raise CorruptStateError(f"{source}: entry {entry!r} is a malformed string array ({err})") from None
        if "__tuple__" in obj:
            items = obj["__tuple__"]
            if not isinstance(items, list):
                raise CorruptStateError(f"{source}: entry {entry!r} is a malformed tuple")
            return tuple(_decode(v, arrays, source, f"{entry}/{i}".lstrip("/")) for i, v in enumerate(items))
        out = LoadedDict((k, _decode(v, arrays, source, f"{entry}/{k}".lstrip("/"))) for k, v in obj.items())
        out.source, out.entry = source, entry
        return out
    if isinstance(obj, list):
        return [_decode(v, arrays, source, f"{entry}/{i}".lstrip("/")) for i, v in enumerate(obj)]
    return obj


def _digest(text: str, arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the JSON text and of every array (name, dtype, shape, little-endian bytes)."""
    h = hashlib.sha256(text.encode("utf-8"))
    for name in sorted(arrays, key=lambda n: (len(n), n)):
        a = np.ascontiguousarray(arrays[name])
        little = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(f"\0{name}\0{a.dtype.kind}{a.dtype.itemsize}\0{list(a.shape)}\0".encode())
        h.update(little.tobytes())
    return h.hexdigest()


def save_state(path: str | os.PathLike, state: dict, format: str | None = None) -> None:
    """Write `state` to the single file `path`, atomically (temporary file, then rename).

    format: "safetensors" (default when importable), "npz", or None for automatic choice
    (npz when safetensors is missing or an array is complex).
    """
    if not isinstance(state, dict):
        raise ValueError(f"state must be a dict, got {type(state).__name__}")
    if format is not None:
        check_choice("format", format, STATE_FORMATS)
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(state, arrays, "")
    text = json.dumps(tree, allow_nan=True, separators=(",", ":"))
    st_numpy = _safetensors_numpy()
    if format is None:
        storable = all(a.dtype in _SAFETENSORS_DTYPES for a in arrays.values())
        format = "safetensors" if st_numpy is not None and storable else "npz"
    digest = _digest(text, arrays)
    if format == "safetensors":
        if st_numpy is None:
            raise ValueError("format='safetensors' but the safetensors package is not installed")
        bad = {k: str(a.dtype) for k, a in arrays.items() if a.dtype not in _SAFETENSORS_DTYPES}
        if bad:
            raise ValueError(f"format='safetensors' cannot store array dtypes {bad}; use 'npz'")
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
    return _decode(tree, arrays, str(path))

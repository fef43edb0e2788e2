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

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .validation import check_choice

__all__ = ["save_state", "load_state", "STATE_FORMATS"]

STATE_FORMATS = ("safetensors", "npz")
_METADATA_KEY = "adaptive_rollouts"
_JSON_ARRAY_NAME = "__json__"
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


def _decode(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return arrays[obj["__ndarray__"]]
        if "__strarray__" in obj:
            return np.array(obj["__strarray__"], dtype=str).reshape(obj["shape"])
        if "__tuple__" in obj:
            return tuple(_decode(v, arrays) for v in obj["__tuple__"])
        return {k: _decode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, arrays) for v in obj]
    return obj


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    if format == "safetensors":
        if st_numpy is None:
            raise ValueError("format='safetensors' but the safetensors package is not installed")
        bad = {k: str(a.dtype) for k, a in arrays.items() if a.dtype not in _SAFETENSORS_DTYPES}
        if bad:
            raise ValueError(f"format='safetensors' cannot store array dtypes {bad}; use 'npz'")
        data = st_numpy.save(arrays, metadata={_METADATA_KEY: text})
    else:
        buffer = io.BytesIO()
        payload = dict(arrays)
        payload[_JSON_ARRAY_NAME] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        np.savez(buffer, allow_pickle=False, **payload)
        data = buffer.getvalue()
    _atomic_write(Path(path), data)


def _load_safetensors(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """(JSON text, arrays) of a safetensors state file, read with safetensors' own reader."""
    if _safetensors_numpy() is None:
        raise ValueError(f"{path}: safetensors file but the safetensors package is not installed")
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
            arrays = {name: handle.get_tensor(name) for name in handle.keys()}
    except SafetensorError as err:
        raise ValueError(f"{path}: not a state file ({err})") from None
    if _METADATA_KEY not in metadata:
        raise ValueError(f"{path}: safetensors file has no adaptive_rollouts state metadata")
    return metadata[_METADATA_KEY], arrays


def load_state(path: str | os.PathLike) -> dict:
    """Read a state written by `save_state`. Parses JSON and raw arrays only; never unpickles."""
    path = Path(path)
    with open(path, "rb") as handle:
        magic = handle.read(8)
    if magic[:4] == b"PK\x03\x04":  # zip archive: npz
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        if _JSON_ARRAY_NAME not in arrays:
            raise ValueError(f"{path}: npz file has no {_JSON_ARRAY_NAME} entry")
        text = arrays.pop(_JSON_ARRAY_NAME).tobytes().decode("utf-8")
    else:
        if len(magic) < 8:
            raise ValueError(f"{path}: not a state file (too short)")
        text, arrays = _load_safetensors(path)
    return _decode(json.loads(text), arrays)

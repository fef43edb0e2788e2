"""The JSON side of a saved state (`state`): arrays and tuples as references, the dict keys a
checkpoint can hold, and where a loaded value came from (for error messages)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CorruptStateError", "LoadedDict", "check_savable_keys", "decode", "describe", "encode", "savable_key"]

_MARKERS = ("__ndarray__", "__strarray__", "__tuple__")


class CorruptStateError(ValueError):
    """A state file that cannot be read back as written: truncated, altered, or not a state file."""


def encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
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
            out[key] = encode(value, arrays, f"{where}/{key}")
        return out
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, arrays, f"{where}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [encode(v, arrays, f"{where}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return encode(obj.item(), arrays, where)
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


def decode(obj: Any, arrays: dict[str, np.ndarray], source: str, entry: str = "") -> Any:
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
            return tuple(decode(v, arrays, source, f"{entry}/{i}".lstrip("/")) for i, v in enumerate(items))
        out = LoadedDict((k, decode(v, arrays, source, f"{entry}/{k}".lstrip("/"))) for k, v in obj.items())
        out.source, out.entry = source, entry
        return out
    if isinstance(obj, list):
        return [decode(v, arrays, source, f"{entry}/{i}".lstrip("/")) for i, v in enumerate(obj)]
    return obj

"""Checks for `load_state_dict`: every value of a state is validated before anything changes.

A state may come from a damaged or hand-edited file, or from another version. Every
`load_state_dict` in the package reads it through a `StateReader`, which refuses what the
constructor and the update rule would never produce (NaN or negative sufficient statistics, a
hyperparameter out of its range, duplicate or unsaveable keys, wrong shapes) with a ValueError
naming the class, the entry and - for a state read by `load_state` - the file. Loading is atomic:
`restore_on_error` puts the object back as it was if anything raises after validation.

>>> reader = StateReader({"class": "Demo", "alpha": [1.0, -5.0], "keys": ["a", "b"]}, "Demo", ["alpha", "keys"])
>>> reader.array("alpha", shape=(2,), low=0.0, low_open=True)
Traceback (most recent call last):
...
ValueError: Demo state, entry 'alpha': must be > 0.0, got -5.0 at index 1
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from ..checks.validation import check_range, check_real
from .tree import check_savable_keys, describe

__all__ = ["StateReader", "load_together", "restore_on_error", "real_number"]


def real_number(name: str, value: Any) -> float:
    """`checks.validation.check_real` with the name first (the constructors' argument order)."""
    return check_real(value, name)


@contextlib.contextmanager
def restore_on_error(obj: Any) -> Iterator[None]:
    """Put ``obj.__dict__`` back as it was if the block raises (loads replace attributes; they do
    not mutate arrays in place, so a shallow copy is a full snapshot)."""
    saved = dict(obj.__dict__)
    try:
        yield
    except BaseException:
        obj.__dict__.clear()
        obj.__dict__.update(saved)
        raise


def load_together(state: Any, components: dict[str, Any], where: str) -> None:
    """``components[name].load_state_dict(state[name])`` for every name, all or none: a missing
    entry is refused (naming ``where``, the file) before any load, and when one component refuses
    its part, those already loaded get their previous state back - so a trainer resumed from a
    damaged checkpoint is either fully restored or exactly as it was.

    >>> class Box:
    ...     def __init__(self): self.value = 0
    ...     def state_dict(self): return {"value": self.value}
    ...     def load_state_dict(self, state):
    ...         if state["value"] < 0: raise ValueError("Box state: value must be >= 0")
    ...         self.value = state["value"]
    >>> a, b = Box(), Box()
    >>> load_together({"a": {"value": 3}, "b": {"value": -1}}, {"a": a, "b": b}, "ckpt.safetensors")
    Traceback (most recent call last):
    ...
    ValueError: Box state: value must be >= 0
    >>> a.value, b.value
    (0, 0)
    """
    missing = [name for name in components if name not in state]
    if missing:
        raise ValueError(f"{where}: missing entries {missing}")
    before: list[tuple[Any, Any]] = []
    try:
        for name, component in components.items():
            previous = component.state_dict()
            component.load_state_dict(state[name])
            before.append((component, previous))
    except BaseException:
        for component, previous in reversed(before):
            component.load_state_dict(previous)
        raise


class StateReader:
    """Typed, range-checked access to one state dict of class `cls`."""

    def __init__(self, state: Any, cls: str, required: Sequence[str]):
        self.cls = cls
        if not isinstance(state, dict):
            raise ValueError(f"{cls} state must be a dict, got {type(state).__name__}")
        self.state = state
        if state.get("class", cls) != cls:
            raise self.error("class", f"the state is for {state['class']!r}, not {cls!r}")
        missing = [k for k in required if k not in state]
        if missing:
            raise self.error(None, f"missing keys {missing}")

    def error(self, key: str | None, message: str) -> ValueError:
        return ValueError(f"{self.cls} state, {describe(self.state, key)}: {message}")

    def __getitem__(self, key: str) -> Any:
        return self.state[key]

    # -- scalars -------------------------------------------------------------------------------
    def real(self, key: str, low: float | None = None, high: float | None = None, low_open: bool = False) -> float:
        """A finite real number within [low, high] (`checks.validation.check_range`; ``low_open``: > low)."""
        try:
            return check_range(self.state[key], key, low, high, low_closed=not low_open, high_closed=True)
        except ValueError as err:
            raise self.error(key, str(err)) from None

    def integer(self, key: str, low: int | None = None, high: int | None = None) -> int:
        value = self.state[key]
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise self.error(key, f"must be an integer, got {type(value).__name__} {value!r}")
        value = int(value)
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.error(key, f"must be in [{low}, {high}], got {value}")
        return value

    def hyperparameters(self, check: Callable[..., Any], keys: Sequence[str], **extra: Any) -> Any:
        """``check(**{k: state[k]}, **extra)``: the constructor's own validation of its arguments,
        its ValueError re-raised naming this state."""
        try:
            return check(**{k: self.state[k] for k in keys}, **extra)
        except (ValueError, TypeError) as err:
            raise self.error(None, f"hyperparameter refused: {err}") from None

    # -- collections ---------------------------------------------------------------------------
    def keys(self, key: str = "keys") -> list:
        """Prompt keys: a list of distinct hashable values a state file can hold."""
        value = self.state[key]
        if not isinstance(value, (list, tuple)):
            raise self.error(key, f"must be a list of prompt keys, got {type(value).__name__}")
        keys = list(value)
        unhashable = [k for k in keys if not isinstance(k, Hashable)]
        if unhashable:
            raise self.error(key, f"unhashable prompt keys {unhashable[:3]!r}")
        if len(set(keys)) != len(keys):
            seen: set = set()
            dupes = []
            for k in keys:
                if k in seen:
                    dupes.append(k)
                seen.add(k)
            raise self.error(key, f"duplicate prompt keys {dupes[:5]!r}")
        try:
            check_savable_keys(keys, "keys")
        except ValueError as err:
            raise self.error(key, str(err)) from None
        return keys

    def array(
        self,
        key: str,
        shape: tuple[int, ...],
        dtype: type = np.float64,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
    ) -> np.ndarray:
        """A fresh array of `dtype` and `shape`, finite, with every value in the given range."""
        raw = self.state[key]
        try:
            arr = np.asarray(raw)
        except (TypeError, ValueError) as err:
            raise self.error(key, f"is not an array ({err})") from None
        kinds = "iu" if np.dtype(dtype).kind in "iu" else "iuf"
        if arr.dtype.kind not in kinds and not (arr.size == 0 and arr.dtype.kind in "iufb"):
            raise self.error(key, f"must hold {np.dtype(dtype).name} values, got dtype {arr.dtype}")
        arr = np.array(arr, dtype=dtype)
        if arr.shape != tuple(shape):
            raise self.error(key, f"must have shape {tuple(shape)}, got {arr.shape}")
        if arr.dtype.kind == "f":
            bad = ~np.isfinite(arr)
            if bad.any():
                raise self.error(key, f"must be finite, got {arr[bad][0]} at index {_where(bad)}")
        if low is not None:
            bad = arr <= low if low_open else arr < low
            if bad.any():
                raise self.error(
                    key, f"must be {'>' if low_open else '>='} {low}, got {arr[bad][0]} at index {_where(bad)}"
                )
        if high is not None:
            bad = arr > high
            if bad.any():
                raise self.error(key, f"must be <= {high}, got {arr[bad][0]} at index {_where(bad)}")
        return arr


def _where(mask: np.ndarray) -> int | tuple[int, ...]:
    index = tuple(int(i) for i in np.argwhere(mask)[0])
    return index[0] if len(index) == 1 else index

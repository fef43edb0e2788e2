"""`Registry`: a name list whose names stand for objects, filled by `register`.

A registry reads like the tuple of its names wherever a name list is expected (`check_choice`,
argparse ``choices``, ``in``, iteration, printing), and `resolve` turns a user's name into its
object with `check_choice`'s error, which names the input and lists the choices. The registry holds
no knowledge of what it stores: the objects register themselves where they are defined.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

__all__ = ["Registry", "check_choice"]

T = TypeVar("T")


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> Any:
    """`value` if it is one of `allowed`, else a ValueError naming `name` and the choices.

    >>> check_choice("aggregation", "mean", ("seq-mean", "token-mean"))
    Traceback (most recent call last):
    ...
    ValueError: aggregation must be one of ('seq-mean', 'token-mean'), got 'mean'
    """
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


class Registry(Sequence[str], Generic[T]):
    """Names in registration order (a `Sequence` of str), each standing for one object.

    >>> reg: Registry[int] = Registry("colour")
    >>> reg.register("red", 1); reg.register("blue", 2)
    1
    2
    >>> tuple(reg), "red" in reg, reg.resolve("blue")
    (('red', 'blue'), True, 2)
    >>> reg.resolve("green")
    Traceback (most recent call last):
    ...
    ValueError: colour must be one of ('red', 'blue'), got 'green'
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T) -> T:
        """Add ``obj`` under ``name`` (a new name: registering twice is a mistake, not an update)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        return obj

    def unregister(self, name: str) -> T:
        """Remove ``name`` and return its object (for tests that register a temporary one)."""
        return self._items.pop(self.check(name, self.kind))

    def check(self, value: Any, argname: str) -> str:
        """``value`` if it is a registered name, else `check_choice`'s ValueError naming ``argname``."""
        return check_choice(argname, value, self)

    def resolve(self, value: Any, argname: str | None = None) -> T:
        """The object registered under the name ``value``."""
        return self._items[self.check(value, argname or self.kind)]

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and value in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(self._items)[index]

    def __repr__(self) -> str:
        return repr(tuple(self._items))

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (Registry, tuple, list)) else other)

    __hash__ = None  # type: ignore[assignment]

"""A tqdm progress bar for the benchmark runs, or a silent stand-in (disabled, or no tqdm)."""

from __future__ import annotations

from typing import Any

__all__ = ["progress_bar"]


class _NoBar:
    def set_postfix_str(self, *a, **k): ...
    def update(self, *a): ...
    def close(self): ...


def progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc="bench", unit="run")

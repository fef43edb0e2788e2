"""The package's one progress bar, for every long loop (benchmark runs, the regime map, the demo's
training runs, text embedding): tqdm's when it is wanted and installed, else a silent stand-in with
the same methods, so a caller never tests for a missing bar.

>>> bar = progress_bar(3, enabled=False)
>>> bar.update(1); bar.set_postfix_str("seed 0"); bar.close()
"""

from __future__ import annotations

from typing import Any

__all__ = ["progress_bar", "progress_write"]


class _NoBar:
    def set_postfix_str(self, *a, **k): ...
    def update(self, *a): ...
    def close(self): ...


def progress_bar(total: int, enabled: bool = True, desc: str = "bench", unit: str = "run", initial: int = 0) -> Any:
    """A bar over ``total`` items (``initial`` of them done already), or the silent stand-in when
    ``enabled`` is False or tqdm is not installed."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, initial=initial)


def progress_write(line: str) -> None:
    """Print ``line`` above any open bar (``tqdm.write``; plain print without tqdm)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print(line)
        return
    tqdm.write(line)

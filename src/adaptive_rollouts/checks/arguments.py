"""Command-line input checks: argparse types that check and convert one argument once, at the edge
(the error names the value typed; argparse prints it with the option's name), and `UsageError` for
a bad value found after parsing, reported as argparse reports one (exit status 2, the usage line and
one ``error:`` line, no traceback)."""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from .validation import INT64_MAX, check_integer

__all__ = [
    "HelpFormatter",
    "UsageError",
    "check_output_folder",
    "integer_at_least",
    "name_list",
    "nonnegative_int",
    "positive_float",
    "positive_float_list",
    "positive_int",
    "probability_list",
    "reports_usage_errors",
    "seed_list",
]


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help with its default: ``(default: X)`` appended unless the help already says
    what the default is, or there is none to show (a flag, or None, whose help then says what is used).
    The description keeps its own line breaks (a list of what a command runs stays a list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = "(default" in text or action.default is None or action.default is False
        if shown or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class UsageError(ValueError):
    """A bad command-line value found after parsing (`reports_usage_errors` reports it as argparse would)."""


def reports_usage_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a subcommand so that a `UsageError` prints the usage line and one ``error:`` line, as
    argparse's ``parser.error`` does, and returns exit status 2 (no traceback)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except UsageError as err:
            parser = getattr(args, "parser", None)
            if parser is not None:
                parser.print_usage(sys.stderr)
            prog = parser.prog if parser is not None else f"adaptive-rollouts {getattr(args, 'command', '')}".strip()
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2

    return run


def integer_at_least(text: str, least: int) -> int:
    """The integer typed (decimal text: "8.5" is refused), at least ``least`` and at most the int64
    maximum, by the one integer rule (`validation.check_integer`); argparse names the option."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    try:
        return check_integer(value, "", least=least, most=INT64_MAX)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the error names the value typed)."""
    return integer_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (the error names the value typed)."""
    return integer_at_least(text, 0)


def _items(text: str, example: str) -> list[str]:
    """The one comma-list rule: items split at commas (not at those inside ``[...]``, which hold a
    method's options such as ``default[round_fractions=(0.5,0.5)]``), stripped; an empty list or an
    empty item is refused."""
    items = [t.strip() for t in re.split(r",(?![^\[]*\])", text)]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated {example}, got {text!r}")
    return items


def name_list(example: str) -> Callable[[str], list[str]]:
    """argparse type: comma-separated names (`_items`), none repeated; ``example`` shows a valid
    list in the error.

    >>> name_list("methods such as uniform,default")("uniform, default")
    ['uniform', 'default']
    >>> name_list("methods such as uniform,default")("default,default")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'default' given twice in 'default,default'
    """

    def parse(text: str) -> list[str]:
        items = _items(text, example)
        repeated = sorted({t for t in items if items.count(t) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{', '.join(map(repr, repeated))} given twice in {text!r}")
        return items

    return parse


def _number_list(text: str, example: str, one: Callable[[str], float]) -> list[float]:
    """Comma-separated numbers (`_items`), each read by ``one`` (an argparse type); its error names the list."""
    values = []
    for t in _items(text, example):
        try:
            values.append(one(t))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"{err} (in {text!r})") from None
    return values


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"success probabilities must lie in [0, 1], got {text}")
    return value


def probability_list(text: str) -> list[float]:
    """argparse type: comma-separated probabilities in [0, 1], e.g. ``0.1,0.5``."""
    return _number_list(text, "probabilities such as 0.1,0.5", _probability)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (the error names the value typed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def positive_float_list(text: str) -> list[float]:
    """argparse type: comma-separated finite numbers > 0, e.g. ``0.333,1,3``."""
    return _number_list(text, "numbers such as 0.5,1,2", positive_float)


def seed_list(text: str) -> list[int]:
    """argparse type: seeds (integers >= 0) as a comma list or an inclusive range ``A-B``, none
    repeated.

    >>> seed_list("32-35"), seed_list("1,4")
    ([32, 33, 34, 35], [1, 4])
    >>> seed_list("5-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: seeds: the range '5-3' is empty
    """
    if re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", text):
        first, last = (int(t) for t in text.split("-"))
        if last < first:
            raise argparse.ArgumentTypeError(f"seeds: the range {text!r} is empty")
        return list(range(first, last + 1))
    seeds = [int(v) for v in _number_list(text, "seeds such as 32-47 or 0,1,2", nonnegative_int)]
    if len(set(seeds)) < len(seeds):
        raise argparse.ArgumentTypeError(f"seeds: a seed given twice in {text!r}")
    return seeds


def check_output_folder(path: str | os.PathLike, option: str = "--out") -> Path:
    """``path`` as a folder the run can write into (created if missing), else `UsageError` naming
    ``option`` and the path: an existing file, a folder that cannot be created or written."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option}: {str(folder)!r} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{option}: cannot create {str(folder)!r} ({err.strerror or err})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option}: cannot write into {str(folder)!r} (permission denied)")
    return folder

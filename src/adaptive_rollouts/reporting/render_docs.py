"""Render the number-bearing blocks of README.md and docs/*.md from the committed result files.

A block in the Markdown is delimited by two comments; everything between them is regenerated::

    <!-- results: solver-table -->
    (rendered by the renderer registered as "solver-table", from results/solver/solver.json)
    <!-- /results -->

Every renderer ends its block with the source line of `results.provenance` (files, commit,
command). ``python -m adaptive_rollouts.reporting.render_docs`` (``make docs``) rewrites the files;
``--check`` only reports the files whose blocks differ from what the committed results render
(exit status 1). An indented opening comment indents the block's lines alike (a block inside a
list item). A block naming no registered renderer, an unclosed or nested block, and a
closing comment without an opening one are errors naming the file and line. A result file a
block cannot be rendered from (unreadable, a field missing or of another shape, a value rendered
as NaN, a value out of range) is one error naming the file and the field; from the command
line: ``error: ...`` and exit status 2, with no doc file written.

>>> render_text("a\\n<!-- results: x -->\\nold\\n<!-- /results -->\\nb\\n", {"x": lambda root: "new"}, Path("."))
'a\\n<!-- results: x -->\\nnew\\n<!-- /results -->\\nb\\n'
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from adaptive_rollouts.experiments.results import ResultDataError, ResultFileError, load_result, recording_reads
from adaptive_rollouts.reporting.tables import RENDERERS

__all__ = ["Renderer", "MarkerError", "render_text", "doc_files", "render_docs", "main"]

Renderer = Callable[[Path], str]  # repository root -> the block's Markdown
OPEN = re.compile(r"^<!-- results: (?P<name>[A-Za-z0-9_.-]+) -->\s*$")
CLOSE = "<!-- /results -->"


class MarkerError(ValueError):
    """A malformed results block in a Markdown file."""


def render_text(text: str, renderers: Mapping[str, Renderer], root: Path, source: str = "<text>") -> str:
    """``text`` with the content of every results block replaced by its renderer's output."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == CLOSE:
            raise MarkerError(f"{source}:{i + 1}: '{CLOSE}' without an opening '<!-- results: NAME -->'")
        match = OPEN.match(line.strip())
        out.append(line)
        i += 1
        if not match:
            continue
        name, start = match["name"], i
        if name not in renderers:
            raise MarkerError(f"{source}:{start}: no renderer named {name!r} (known: {', '.join(sorted(renderers))})")
        while i < len(lines) and lines[i].strip() != CLOSE:
            if OPEN.match(lines[i].strip()):
                raise MarkerError(f"{source}:{i + 1}: results block opened inside the block of line {start}")
            i += 1
        if i == len(lines):
            raise MarkerError(f"{source}:{start}: results block {name!r} is not closed by '{CLOSE}'")
        indent = line[: len(line) - len(line.lstrip())]  # a block inside a list item stays inside it
        out.extend(indent + x if x else x for x in _render_block(renderers[name], root, f"{name!r} of {source}"))
        out.append(lines[i])
        i += 1
    return "\n".join(out)


# how Python formats a NaN; never a value a table shows (inf is one: "Uniform did not reach it")
_NOT_A_NUMBER = re.compile(r"(?<![\w.])-?nan(?!\w)")


def _render_block(renderer: Renderer, root: Path, where: str) -> list[str]:
    """The block's lines; a renderer's failure on the data it read becomes one `ResultDataError`
    naming the result files and the field."""
    with recording_reads() as read:
        try:
            text = renderer(root)
        except (ResultFileError, ResultDataError, MarkerError):
            raise
        except KeyError as err:
            raise ResultDataError(f"{_files(read)}: field {err.args[0]!r} is missing (block {where})") from None
        except (TypeError, IndexError, ValueError, AttributeError) as err:
            raise ResultDataError(
                f"{_files(read)}: a field has another shape or type than expected "
                f"({type(err).__name__}: {err}) (block {where})"
            ) from None
    bad = _NOT_A_NUMBER.search(text)
    if bad:
        fields = [f for path in read for f in _non_finite_fields(path)]
        raise ResultDataError(
            f"{_files(read)}: renders {bad.group()!r}; fields holding NaN: {fields[:5] or 'none'} (block {where})"
        )
    return text.strip("\n").split("\n")


def _files(read: list[str]) -> str:
    return "result file " + ", ".join(dict.fromkeys(read)) if read else "result data"


def _non_finite_fields(path: str) -> list[str]:
    found: list[str] = []

    def walk(x: object, at: str) -> None:
        if isinstance(x, float) and math.isnan(x):
            found.append(f"{path}: {at}")
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{at}/{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{at}/{i}")

    walk(load_result(path).data, "data")
    return found


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md of the repository at ``root``."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def render_docs(root: Path, renderers: Mapping[str, Renderer] | None = None, check: bool = False) -> list[Path]:
    """Render every doc file; returns those whose text changed (with ``check``: would change,
    and nothing is written)."""
    if renderers is None:
        renderers = RENDERERS
    changed = {}
    for path in doc_files(root):  # every file rendered before any is written: an error writes nothing
        old = path.read_text()
        new = render_text(old, renderers, root, source=str(path.relative_to(root)))
        if new != old:
            changed[path] = new
    if not check:
        for path, new in changed.items():
            path.write_text(new)
    return list(changed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="repository root (default: the current folder)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        changed = render_docs(root, check=args.check)
    except ValueError as err:  # a malformed block or a damaged result file: one line, no traceback
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    for path in changed:
        verb = "stale" if args.check else "rendered"
        print(f"{verb}: {path.relative_to(root)}")
    if not changed:
        print("docs match the committed results")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())

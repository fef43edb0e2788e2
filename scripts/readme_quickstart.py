"""Run README.md's quick start as a user would: the python block under the quick-start marker, pulled
out of README itself (so the two cannot drift), run by an installed package's Python in a folder
outside the repository.

    python scripts/readme_quickstart.py README.md --python VENV/bin/python --workdir DIR
    python scripts/readme_quickstart.py README.md --print        # the extracted code only

`make test-wheel` builds the wheel, installs it into a fresh venv and runs this with that venv's
Python. It fails (exit status 1, naming the cause) when the block is missing, when
``adaptive_rollouts`` would be imported from anywhere but the venv (the repository's ``src/``), or
when the quick start fails - e.g. because the wheel misses a file it needs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

MARKER = "<!-- quick start: `make test-wheel` runs the block below from an installed wheel -->"
_BLOCK = re.compile(r"```python\n(.*?)\n```", re.DOTALL)


def extract(readme: str) -> str:
    """The python code block that follows ``MARKER`` in ``readme``; ValueError if there is none.

    >>> extract(MARKER + "\\n\\n```python\\nprint(1)\\n```\\n")
    'print(1)\\n'
    """
    at = readme.find(MARKER)
    if at < 0:
        raise ValueError(f"README has no quick-start marker {MARKER!r}")
    match = _BLOCK.search(readme, at + len(MARKER))
    if match is None or readme[at + len(MARKER) : match.start()].strip():
        raise ValueError("README's quick-start marker is not followed by a ```python block")
    return match.group(1) + "\n"


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH (the installed package only), offline for the Hugging Face hub."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def installed_location(python: str, workdir: Path) -> Path:
    """Where ``python`` imports ``adaptive_rollouts`` from, run in ``workdir``."""
    out = subprocess.run(
        [python, "-c", "import adaptive_rollouts; print(adaptive_rollouts.__file__)"],
        cwd=workdir,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{python} cannot import adaptive_rollouts:\n{out.stderr.strip()}")
    return Path(out.stdout.strip()).resolve()


def run_quickstart(readme: Path, python: str, workdir: Path) -> int:
    """Write the quick start into ``workdir`` and run it there with ``python``; its exit status."""
    repo = readme.resolve().parent
    workdir = workdir.resolve()
    if workdir.is_relative_to(repo):
        raise ValueError(f"--workdir {workdir} is inside the repository {repo}: the check must run outside it")
    workdir.mkdir(parents=True, exist_ok=True)
    location = installed_location(python, workdir)
    if location.is_relative_to(repo):
        raise RuntimeError(
            f"adaptive_rollouts is imported from the repository ({location}), not from an installed wheel"
        )
    script = workdir / "quickstart.py"
    script.write_text(extract(readme.read_text()))
    print(f"running README's quick start ({script}) with adaptive_rollouts from {location.parent}", flush=True)
    return subprocess.run([python, str(script)], cwd=workdir, env=_clean_env()).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readme", type=Path, help="README.md")
    parser.add_argument("--python", default=sys.executable, help="the Python of the venv the wheel is installed in")
    parser.add_argument("--workdir", type=Path, help="a folder outside the repository to run in")
    parser.add_argument("--print", action="store_true", help="print the extracted code and exit")
    args = parser.parse_args(argv)
    try:
        if args.print:
            print(extract(args.readme.read_text()), end="")
            return 0
        if args.workdir is None:
            parser.error("--workdir is required unless --print")
        code = run_quickstart(args.readme, args.python, args.workdir)
    except (ValueError, RuntimeError, OSError) as err:
        print(f"readme_quickstart: error: {err}", file=sys.stderr)
        return 1
    if code != 0:
        print(f"readme_quickstart: error: README's quick start failed (exit status {code})", file=sys.stderr)
        return 1
    print("README's quick start ran from the installed wheel")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every measured number in README.md and docs/ comes from a rendered results block: outside the
blocks (and outside code), a speedup ("1.37x") or a percentage ("23%") must be a constant of the
project (a target, a threshold, an interval level, a definition), listed here with what it is."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.\-/])(\d+(?:\.\d+)?[x%])(?![\w.])")

# constants anywhere: the saving targets (1.5x where >= 30% of groups are all-equal, 0.97x
# everywhere), the tiny-LM target (1.3x), "no difference" (1x), interval levels (90%, 95%), the
# shares of the gain the map's statistic reads (50%, 75%, 90%), the coverage its controls must reach
# (85%) and a tolerance of the Monte Carlo tests (2%)
CONSTANTS = {"1x", "1.5x", "0.97x", "1.3x", "30%", "50%", "75%", "85%", "90%", "95%", "2%"}
# constants of one file
PER_FILE = {
    # the scenario mixtures of `sim.problem` and numbers quoted from published reports
    "docs/benchmark.md": {"70%", "30%", "50%", "65%", "40%", "20%", "80%"},
    # the fuzz harness's split of cases
    "docs/reliability.md": {"25%", "15%", "10%", "50%"},
    # P(all of n rollouts fail) at p = 0.1: 0.9^2 and 0.9^4, a formula
    "docs/saving.md": {"81%", "66%"},
    # DeepScaleR's reported ratio of incorrect to correct response lengths, quoted as a source
    "docs/tokens.md": {"3x"},
    # the targets: the policy pass at most 3% of a step, the default's Brier at most 0.8x the history's
    "docs/flatness.md": {"3%", "0.8x"},
}


def numbers_outside_blocks(text: str) -> list[tuple[int, str]]:
    """(line, token) of every speedup or percentage outside results blocks, fenced code and code spans."""
    out, in_block, fenced = [], False, False
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if stripped.startswith("<!-- results:"):
            in_block = True
            continue
        if stripped == "<!-- /results -->":
            in_block = False
            continue
        if in_block or fenced:
            continue
        out += [(number, m.group(1)) for m in NUMBER.finditer(re.sub(r"`[^`]*`", "", line))]
    return out


def test_the_reader_skips_blocks_and_code_and_finds_the_rest():
    text = "a 1.37x gain\n<!-- results: x -->\n2.5x\n<!-- /results -->\n`3.1x` and 23% of it\n```\n9x\n```\n"
    assert numbers_outside_blocks(text) == [(1, "1.37x"), (5, "23%")]


def test_readme_and_docs_hold_no_measured_number_outside_rendered_blocks():
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        name = str(path.relative_to(ROOT))
        allowed = CONSTANTS | PER_FILE.get(name, set())
        found += [
            f"{name}:{line}: {tok}" for line, tok in numbers_outside_blocks(path.read_text()) if tok not in allowed
        ]
    assert not found, "numbers outside rendered blocks (render them from a result file, or list a constant):\n" + (
        "\n".join(found)
    )

"""What a probe buys on the saving map (`reporting.view_tables`): the reading from the paired
intervals, and the block rendered from the committed `saving-view` map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptive_rollouts.reporting.view_tables import VIEW_ARMS, VIEW_MAP, gap_closed, render_flatness_view, view_reading

ROOT = Path(__file__).resolve().parents[1]
UP, LEVEL, DOWN = {"low": 1.2, "high": 1.6}, {"low": 0.9, "high": 1.1}, {"low": 0.6, "high": 0.9}


@pytest.mark.parametrize(
    "gap, bought, left, reading",
    [
        (UP, UP, LEVEL, "information"),  # the exact view closes the gap
        (UP, UP, DOWN, "information"),  # ... and passes the rule
        (UP, LEVEL, UP, "machinery"),  # seeing p buys the default nothing
        (UP, DOWN, UP, "machinery"),
        (UP, UP, UP, "both"),  # the exact view helps, the rule stays ahead
        (LEVEL, UP, LEVEL, "no gap"),
        (DOWN, LEVEL, DOWN, "no gap"),
        (UP, None, UP, "-"),  # fewer than 3 common seeds
        ({"low": 1.0, "high": 1.4}, UP, UP, "no gap"),  # an interval touching 1 is not ahead
    ],
)
def test_view_reading(gap, bought, left, reading):
    assert view_reading(gap, bought, left) == reading


def test_gap_closed_by_hand():
    assert gap_closed({"speedup": 3.0, "low": 1.5}, {"speedup": 3.0}) == pytest.approx(1.0)  # the whole gap
    assert gap_closed({"speedup": 9.0, "low": 1.5}, {"speedup": 3.0}) == pytest.approx(0.5)  # log 3 / log 9
    assert gap_closed({"speedup": 2.0, "low": 1.5}, {"speedup": 0.5}) == pytest.approx(-1.0)  # the view hurt
    assert gap_closed({"speedup": 2.0, "low": 1.0}, {"speedup": 1.5}) is None  # no gap: not ahead
    assert gap_closed(None, {"speedup": 1.5}) is None


def test_render_on_the_committed_map_has_every_cell_and_arm():
    text = render_flatness_view(ROOT)
    cells = [row["key"] for row in json.loads((ROOT / VIEW_MAP).read_text())["data"]["rows"]]
    tables = [
        [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("| cell")]
        for part in text.split("\n\n")
        if part.startswith("| cell")
    ]
    assert len(tables) == 2 and all([line.split(" | ")[0][2:] for line in t] == cells for t in tables)
    header = next(line for line in text.splitlines() if line.startswith("| cell"))
    assert all(f"{label} over Uniform" in header for _, label in VIEW_ARMS)
    assert f"Readings over the {len(cells)} cells" in text and "nan" not in text
    counts = text.split("Readings over the ")[1].split(".")[0]
    assert sum(int(x.split(": ")[1]) for x in counts.split(": ", 1)[1].split("; ")) == len(cells)

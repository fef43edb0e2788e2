"""README's account of the default allocator (its class, kind and pilot size) is the code's."""

from __future__ import annotations

import re
from pathlib import Path

from adaptive_rollouts.allocators import make_allocator

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_names_the_defaults_class_kind_and_pilot_size():
    default = make_allocator()
    text = " ".join(README.split())  # the sentence may wrap anywhere
    found = re.search(
        r"Its default \(`(\w+)`, kind \"(\w+)\"\) treats the budget as a ceiling: it pilots every "
        r"prompt it keeps with (\d+) rollouts",
        text,
    )
    assert found, "README no longer states the default's class, kind and pilot size in one sentence"
    name, kind, pilot = found.groups()
    assert (name, kind, int(pilot)) == (type(default).__name__, default.kind, default.pilot)
    assert kind == "save" and "ceiling" in found.group(0)  # "save" spends at most the budget

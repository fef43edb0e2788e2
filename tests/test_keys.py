"""Prompt keys: one per dataset row, whatever its text."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.keys import row_key


def test_row_key_rule():
    assert row_key({"prompt": "x"}, source="a.parquet", index=3) != row_key(
        {"prompt": "x"}, source="b.parquet", index=3
    )
    same_text = row_key({"prompt": "x", "answer": 1}) != row_key({"prompt": "x", "answer": 2})
    assert same_text
    assert row_key({"prompt": "x", "v": np.arange(3)}) == row_key({"v": [0, 1, 2], "prompt": "x"})
    with pytest.raises(ValueError, match="source"):
        row_key(index=1)
    with pytest.raises(ValueError, match="index"):
        row_key(source="a", index=-1)

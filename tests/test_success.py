"""The success signal allocators see: each mapping of trainer rewards to [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_rollouts.success import SuccessSignal


def test_success_signal_modes():
    auto = SuccessSignal()
    assert auto.to_success([0.0, 0.5, 1.0]).tolist() == [0.0, 0.5, 1.0]  # [0, 1] rewards unchanged
    assert auto.to_success([-1.0, 1.0]).tolist() == [0.0, 1.0]
    assert auto.to_success([3.0, -1.0]).tolist() == [1.0, 0.0]  # range only widens: now [-1, 3]
    twin = SuccessSignal()
    twin.load_state_dict(auto.state_dict())
    assert twin.to_success([1.0]).tolist() == auto.to_success([1.0]).tolist() == [0.5]
    ten = np.float32(0.1) * np.ones(10, dtype=np.float32)
    summed = float(ten.sum(dtype=np.float32))  # 1.0000001 in float32
    assert SuccessSignal(reward_range=(0, 1)).to_success([summed]).tolist() == [1.0]
    with pytest.raises(ValueError, match="prompt 'q'.*reward_range"):
        SuccessSignal(reward_range=(0, 1)).to_success([1.67], prompt="q")
    got = SuccessSignal(success_fn=lambda r: r > 0).to_success([None, -2.0, 5.0])
    assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 1.0] and SuccessSignal.unscored(got) == 1
    with pytest.raises(ValueError, match="at most one"):
        SuccessSignal(reward_range=(0, 1), threshold=0.5)
    with pytest.raises(ValueError, match="outside"):
        SuccessSignal(success_fn=lambda r: 2.0).to_success([1.0])

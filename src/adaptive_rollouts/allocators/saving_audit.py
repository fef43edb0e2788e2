"""What the saving default's losses really cost: a random share of the options it gives up (a
skipped prompt, a cut group) is completed anyway, and their realised signal against the value the
rule priced them at measures how far that value understates what is given up (docs/saving.md,
"The audit")."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..state.checks import StateReader
from ..types import StateDict

__all__ = ["LossAudit"]


class LossAudit:
    """The run's audited options: the sum of their realised signal a(k; n) and the sum of the
    expected signal V the rule priced them at when it would have given them up. The options are a
    random sample of those given up (each with the same chance, independent of everything else), so

        R = (sum realised + w) / (sum priced + w)

    is a ratio estimate of (what the given-up options carry) / (what the rule says they carry),
    shrunk toward 1 by ``w``, the evidence the belief's own prices count for (the caller passes one
    step's allowance: the audit overrules the belief once it has measured about that much signal).
    The rule spends its allowance in units of R V.

    >>> audit = LossAudit()
    >>> audit.ratio(1.0)                       # nothing audited: the belief's prices stand
    1.0
    >>> audit.observe(np.array([1.5, 0.0, 0.0]), np.array([0.2, 0.3, 0.5]))
    >>> round(audit.ratio(1.0), 2)             # (1.5 + 1) / (1.0 + 1)
    1.25
    """

    def __init__(self) -> None:
        self.realised = 0.0
        self.priced = 0.0
        self.count = 0

    def observe(self, realised: Any, priced: Any) -> None:
        """Add audited options: their realised signal and the value they were priced at (>= 0 each)."""
        r, v = np.asarray(realised, dtype=float).reshape(-1), np.asarray(priced, dtype=float).reshape(-1)
        if r.shape != v.shape or np.any(~np.isfinite(r)) or np.any(~np.isfinite(v)) or np.any(r < 0) or np.any(v < 0):
            raise ValueError(f"realised and priced must be finite, >= 0 and of one shape, got {r.shape}, {v.shape}")
        self.realised += float(r.sum())
        self.priced += float(v.sum())
        self.count += int(r.size)

    def ratio(self, weight: float) -> float:
        """R, shrunk toward 1 by ``weight`` (> 0; with weight <= 0 and nothing priced: 1)."""
        w = max(float(weight), 0.0)
        if self.priced + w <= 0.0:
            return 1.0
        return (self.realised + w) / (self.priced + w)

    def state_dict(self) -> StateDict:
        return {"class": "LossAudit", "realised": self.realised, "priced": self.priced, "count": self.count}

    def load_state_dict(self, state: StateDict) -> None:
        """Checked first (sums finite and >= 0, count a whole number >= 0); a refused state changes nothing."""
        reader = StateReader(state, "LossAudit", ["realised", "priced", "count"])
        realised, priced = reader.real("realised", 0.0), reader.real("priced", 0.0)
        count = reader.integer("count", low=0)
        self.realised, self.priced, self.count = realised, priced, count

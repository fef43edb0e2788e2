"""The saving default's checkpoint: what `SavingProgressive` writes beside the base state, and the
checks a loaded state passes before anything changes (JSON-able values, no pickle; a resumed run
matches an uninterrupted one bit for bit)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..fingerprints import RegimeTracker
from ..predictors.discounted_beta import DiscountedBeta
from ..predictors.lengths import LengthBelief
from ..state import load_state
from ..state.checks import StateReader
from ..types import StateDict
from .round_plan import RoundPlanner

__all__ = ["ENTRIES", "OPTIONAL", "carried_belief", "saving_state", "load_saving_state", "skip_unseen_state"]

ENTRIES = (
    "predictor",
    "belief",
    "belief_history",
    "tracker",
    "history_signal",
    "history_spent",
    "lengths",
    "round_plan",
    "skip_unseen",
)
OPTIONAL = ("belief_history", "lengths", "round_plan", "skip_unseen")
"""The entries `saving_state` writes; the `OPTIONAL` ones may be absent from older states."""


def carried_belief(source: Any) -> StateDict:
    """The learned belief to start a run from (``SavingProgressive(belief_from=...)``): a state file
    written by `state.save_state` (a path) or a dict: a `FlatnessPredictor` state, a saving
    allocator's state (its ``belief`` entry), or a TRL or verl checkpoint's adaptive state (its
    allocator's). Only what the belief learned about prompts' features comes along, never the
    prompt history.

    >>> carried_belief({"allocator": "SavingProgressive", "belief": {"class": "FlatnessPredictor"}})
    {'class': 'FlatnessPredictor'}
    """
    if isinstance(source, (str, os.PathLike)):
        source = load_state(source)
    if not isinstance(source, dict):
        raise ValueError(f"belief_from must be a state file or a state dict, got {type(source).__name__}")
    state: Any
    if source.get("class") == "FlatnessPredictor":
        state = source
    elif isinstance(source.get("allocator"), dict):  # a trainer's checkpoint state: its allocator's
        state = source["allocator"].get("belief")
    else:
        state = source.get("belief")
    if not isinstance(state, dict) or state.get("class") != "FlatnessPredictor":
        raise ValueError(
            "belief_from: neither a FlatnessPredictor state nor a saving allocator's or trainer checkpoint's state "
            "with a 'belief' entry"
        )
    return {k: v for k, v in state.items() if k not in ("history", "text")}


def own_history(alloc: Any) -> DiscountedBeta | None:
    """The belief's own history when the predictor is its text source (else the history is the
    predictor itself, saved as the predictor)."""
    history = alloc.belief.history
    return None if history is None or history is alloc.predictor else history


def saving_state(alloc: Any) -> StateDict:
    """The allocator's own entries (`ENTRIES`): the predictor, the belief (without its sources), the
    belief's own history, the regime tracker, the last steps' realised signal and spend, the length
    belief, the round planner, the evidence on skipping unseen (``bound_skips="measured"``).

    >>> from adaptive_rollouts.allocators.saving import SavingProgressive
    >>> sorted(saving_state(SavingProgressive())) == sorted(ENTRIES)
    True
    """
    own = own_history(alloc)
    return {
        "predictor": alloc.slot.state_dict(),
        "belief": alloc.belief.state_dict(sources=False),
        "belief_history": None if own is None else own.state_dict(),
        "tracker": alloc.tracker.state_dict(),
        "history_signal": [float(v) for v, _ in alloc.history],
        "history_spent": [int(c) for _, c in alloc.history],
        "lengths": alloc.lengths.state_dict(),
        "round_plan": alloc.round_plan.state_dict(),
        "skip_unseen": {"evidence": [float(x) for x in alloc.skip_evidence], "skipping": alloc.skipping_unseen},
    }


def skip_unseen_state(reader: StateReader, saved: Any) -> tuple[np.ndarray, bool]:
    """The ``skip_unseen`` entry checked: four evidence numbers >= 0 and whether the run skips."""
    if saved is None:
        return np.zeros(4), False
    if not isinstance(saved, dict) or set(saved) != {"evidence", "skipping"}:
        raise reader.error("skip_unseen", "must be {'evidence': 4 numbers >= 0, 'skipping': a bool}")
    if not isinstance(saved["skipping"], (bool, np.bool_)):
        raise reader.error("skip_unseen", f"'skipping' must be a bool, got {saved['skipping']!r}")
    evidence = StateReader(saved, "skip_unseen", ["evidence"]).array("evidence", (4,), dtype=float, low=0.0)
    return evidence, bool(saved["skipping"])


def load_saving_state(alloc: Any, state: StateDict) -> None:
    """Checks everything before anything changes, as the constructor and the step would produce
    it: no unknown entries; at most ``alloc.HISTORY`` steps of history, each with
    0 <= signal <= spent / 2 (a group of n carries at most n / 2); the tracker, the belief and the
    predictor check their own parts (the tracker into a fresh object, so a refused one changes
    nothing; the belief's own state before the predictor's, put back if a later part refuses).
    ValueError naming the entry otherwise."""
    reader = StateReader(state, type(alloc).__name__, [n for n in ENTRIES if n not in OPTIONAL])
    unknown = sorted(set(state) - {"allocator", "rng", "class", *ENTRIES}, key=str)
    if unknown:
        raise reader.error(None, f"unknown entries {unknown} (a state this version never writes)")
    raw = reader["history_signal"]
    if not isinstance(raw, (list, tuple, np.ndarray)):
        raise reader.error("history_signal", f"must be a list, got {type(raw).__name__}")
    if len(raw) > alloc.HISTORY:
        raise reader.error("history_signal", f"holds at most {alloc.HISTORY} steps, got {len(raw)}")
    signal = reader.array("history_signal", (len(raw),), dtype=float, low=0.0)
    spent = reader.array("history_spent", (signal.size,), dtype=np.int64, low=0)
    over = np.flatnonzero(signal > spent / 2.0 * (1.0 + 1e-9))
    if over.size:
        i = int(over[0])
        raise reader.error(
            "history_signal",
            f"a step's signal is at most half its rollouts, got {signal[i]} for {spent[i]} at index {i}",
        )
    # a state saved before skipping unseen was measured has no evidence: none gathered, not skipping
    evidence, skipping = skip_unseen_state(reader, state.get("skip_unseen"))
    tracker = RegimeTracker()
    tracker.load_state_dict(state["tracker"])
    lengths = LengthBelief()  # a state saved before lengths were weighed has none: nothing known
    if "lengths" in state:
        try:
            lengths.load_state_dict(state["lengths"])
        except ValueError as err:
            raise reader.error("lengths", str(err)) from None
    round_plan = RoundPlanner()  # a state saved before rounds were priced has no timings
    if "round_plan" in state:
        try:
            round_plan.load_state_dict(state["round_plan"])
        except ValueError as err:
            raise reader.error("round_plan", str(err)) from None
    own, saved = own_history(alloc), state.get("belief_history")
    if (own is None) != (saved is None):
        raise reader.error("belief_history", "saved with another predictor than this allocator has")
    # each part checks before it changes; the ones loaded first are put back if a later one refuses
    before = alloc.belief.state_dict(sources=False), None if own is None else own.state_dict()
    try:
        try:
            alloc.belief.load_state_dict(state["belief"])
            if own is not None and saved is not None:
                own.load_state_dict(saved)
        except ValueError as err:
            raise reader.error("belief", str(err)) from None
        alloc.slot.load_state_dict(state["predictor"])
    except ValueError:
        alloc.belief.load_state_dict(before[0])
        if own is not None and before[1] is not None:
            own.load_state_dict(before[1])
        raise
    alloc.tracker = tracker
    alloc.lengths = lengths
    alloc.round_plan = round_plan
    alloc.history = [(float(v), int(c)) for v, c in zip(signal, spent)]
    alloc.skip_evidence, alloc.skipping_unseen = evidence, skipping

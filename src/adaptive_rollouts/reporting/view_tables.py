"""What a probe buys on the saving map (docs/flatness.md, "What a probe buys on the map"): per cell
of the `saving-view` map, the default with no view of the policy, with the simulator's probe
analog at AUROC 0.8 (its own setting), 0.9 and the exact margin (`map_config.VIEW_MARK`), and the
known-p skip rule, each over Uniform; then, paired on common seeds, how much the exact view buys
over the default's own view and how far the known-p rule stays ahead of the exact view, with
`view_reading`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.map_config import DEFAULT, VIEW_MARK
from adaptive_rollouts.experiments.map_records import read_run_records, records_path
from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.versus_tables import _over_uniform, _paired, head_to_head

__all__ = ["VIEW_MAP", "VIEW_ARMS", "view_reading", "gap_closed", "render_flatness_view"]

VIEW_MAP = "results/map/saving-view.json"
EXACT = f"{DEFAULT}{VIEW_MARK}view1"
KNOWN = "oracle-skip"
VIEW_ARMS = (
    (f"{DEFAULT}{VIEW_MARK}noview", "no view"),
    (DEFAULT, "view 0.8 (the default)"),
    (f"{DEFAULT}{VIEW_MARK}view0.9", "view 0.9"),
    (EXACT, "exact view"),
    (KNOWN, "known-p rule"),
)


def view_reading(
    known_over_default: dict | None, exact_over_default: dict | None, known_over_exact: dict | None
) -> str:
    """What limits the default in one cell, from paired comparisons (90% intervals; `head_to_head`):
    no gap where the known-p rule is not ahead of the default (interval not wholly above 1); else
    *information* where the exact view is ahead of the default and the known-p rule not ahead of
    the exact view (the exact margin closes the gap); *machinery* where the exact view is not ahead
    of the default (seeing p buys the default nothing it can use); *both* where the exact view is
    ahead of the default and the known-p rule still ahead of it.

    >>> up, level = {"low": 1.2, "high": 2.0}, {"low": 0.9, "high": 1.1}
    >>> view_reading(up, up, level), view_reading(up, level, up), view_reading(up, up, up)
    ('information', 'machinery', 'both')
    >>> view_reading(level, up, level)
    'no gap'
    """
    if known_over_default is None or exact_over_default is None or known_over_exact is None:
        return "-"
    if known_over_default["low"] <= 1.0:
        return "no gap"
    if exact_over_default["low"] <= 1.0:
        return "machinery"
    return "information" if known_over_exact["low"] <= 1.0 else "both"


def gap_closed(known_over_default: dict | None, exact_over_default: dict | None) -> float | None:
    """The share of the default's gap to the known-p rule that the exact view closes, on the log
    scale: log(exact view over the default) / log(known-p rule over the default), point estimates;
    None where the known-p rule is not ahead (no gap to share) or a comparison is missing.

    >>> gap_closed({"speedup": 4.0, "low": 2.0}, {"speedup": 2.0}), gap_closed({"speedup": 1.1, "low": 0.9}, {"speedup": 2.0})
    (0.5, None)
    """
    if known_over_default is None or exact_over_default is None or known_over_default["low"] <= 1.0:
        return None
    return float(np.log(exact_over_default["speedup"]) / np.log(known_over_default["speedup"]))


def render_flatness_view(root: Path) -> str:
    """The block: the arms over Uniform per cell, then the paired comparisons and `view_reading`."""
    result = load_relative(root, VIEW_MAP)
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in read_run_records(records_path(root / result.path)):
        runs[(r["cell"], r["method"])].append(r)
    over, paired, readings = [], [], []
    for row in result.data["rows"]:
        key, methods = row["key"], row["methods"]
        over.append((key, *(_over_uniform(methods.get(m)) for m, _ in VIEW_ARMS)))
        gap = head_to_head(runs[(key, DEFAULT)], runs[(key, KNOWN)])
        bought = head_to_head(runs[(key, DEFAULT)], runs[(key, EXACT)])
        left = head_to_head(runs[(key, EXACT)], runs[(key, KNOWN)])
        readings.append(view_reading(gap, bought, left))
        closed = gap_closed(gap, bought)
        share = "-" if closed is None else f"{closed:.0%}"
        paired.append((key, _paired(gap), _paired(bought), _paired(left), share, readings[-1]))
    counts = "; ".join(f"{r}: {readings.count(r)}" for r in dict.fromkeys(readings))
    seeds = result.data["config"]
    lines = [
        "Per cell, every arm at Uniform's tuned rate. Over Uniform: rollouts to 50/75/90% of the gain, "
        "Uniform's over the arm's (90% jackknife-t interval over the arm's seeds), and the arm's share of "
        f"Uniform's rollouts. The default ran {len(seeds['paired_seeds'])} paired seeds, the other arms the "
        f"{len(seeds['report_seeds'])} report seeds; the view's AUROC is the simulator's probe analog's "
        "(`sim.policy_view`), exact = the policy's own margin logit(p).",
        "",
        *table(["cell", *(f"{label} over Uniform" for _, label in VIEW_ARMS)], over),
        "",
        "Paired on the seeds both arms ran (the same statistic, the first arm in Uniform's place). Reading: "
        "*information* where the exact view is ahead of the default and the known-p rule is not ahead of "
        "the exact view; *machinery* where the exact view is not ahead of the default; *both* where the "
        "exact view is ahead and the known-p rule still ahead of it; *no gap* where the known-p rule is "
        "not ahead of the default. Gap closed: log(exact view over the default) / log(known-p rule over the "
        "default), the share of the gap (log scale) that seeing p exactly closes, where there is a gap.",
        "",
        *table(
            [
                "cell",
                "known-p rule over the default",
                "exact view over the default",
                "known-p rule over the exact view",
                "gap closed",
                "reading",
            ],
            paired,
        ),
        "",
        f"Readings over the {len(paired)} cells: {counts}.",
        "",
        provenance([result]),
    ]
    return "\n".join(lines)

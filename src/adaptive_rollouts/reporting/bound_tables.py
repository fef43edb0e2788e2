"""The bound per group against the rule without it on the saving map (docs/saving.md, "A bound per
group on the map"). The maps `BOUND_MAPS` and `FRESH_MAPS` ran before the bound on pilots became the
default: their arm ``default`` is the rule without the bound (labelled "no bound"), their arm
``default[flat_chance=0.1;bound_skips=False]`` today's default. `render_saving_bound`: per cell of
the `saving-bound` maps, no bound, ``flat_chance=0.1`` (`SavingProgressive`: give up, whatever the
allowance, any option whose chance of carrying any signal is at most 1/10), ``0.05``, the bound on
flat pilots only (``bound_skips=False``), Pilot-Commit and the known-p skip rule (the same bound on
the true p) over Uniform; then each bound over no bound seed for seed with `bound_reading`, the
final accuracy at equal cost, and the pooled effect over every cell. `render_fresh_bound`: the bound
on pilots against no bound on fresh seeds (`FRESH_MAPS`). `render_default_bound`: the default
(the bound on pilots) against ``flat_chance=None`` and Pilot-Commit on seeds fixed after the switch
(`DEFAULT_MAPS`). `render_short_pilots`: the default with short pilots against full pilots and
Pilot-Commit (`SHORT_MAPS`). `render_group_four`: the default at 4 rollouts a prompt against full
pilots, the rule that bounds flat pilots only, Pilot-Commit and the known-p rule (`GROUP_FOUR_MAPS`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.experiments.map_config import DEFAULT, NULL
from adaptive_rollouts.experiments.map_records import read_run_records, records_path
from adaptive_rollouts.experiments.map_summary import pooled_arm
from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import left_out_reason, load_relative, pooled_interval
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.versus_tables import _over_uniform, _paired, head_to_head

__all__ = [
    "BOUND_MAPS",
    "FRESH_MAPS",
    "BOUND",
    "TIGHTER",
    "ON_PILOTS",
    "BOUNDS",
    "BOUND_ARMS",
    "bound_reading",
    "map_runs",
    "paired_check_block",
    "render_saving_bound",
    "render_fresh_bound",
    "render_default_bound",
    "DEFAULT_MAPS",
    "GROUP_FOUR_MAPS",
    "SHORT_MAPS",
    "FULL_PILOTS",
    "render_short_pilots",
    "NO_BOUND",
    "render_group_four",
    "render_fresh_pilot_commit",
]

BOUND_MAPS = ("results/map/saving-bound-a.json", "results/map/saving-bound-b.json")
# the bound on pilots against the default on fresh seeds, chosen before the run (`bench --map-seeds`)
FRESH_MAPS = ("results/map/fresh-bound-a.json", "results/map/fresh-bound-b.json")
# the default (the bound on pilots) against the rule without it, on seeds 48-79 fixed after the switch
DEFAULT_MAPS = ("results/map/default-bound-a.json", "results/map/default-bound-b.json")
# the saving map's cells at 4 rollouts a prompt (`bench --map --per-prompt 4`), and its two recurring cells:
# the default against full pilots and the bound on flat pilots only, which has no pilot left to cut there
GROUP_FOUR_MAPS = ("results/map/group4.json", "results/map/group4-recurring.json")
# the default with short pilots against full pilots of 4 (the rule before), on seeds fixed after the switch
SHORT_MAPS = ("results/map/short-pilots.json",)
# the bound also before any rollout at every group size (`bound_skips=True`) against the default, fresh seeds
SKIP_UNSEEN_MAPS = ("results/map/skip-unseen.json",)
FULL_PILOTS = f"{DEFAULT}[short_pilots=False]"
NO_BOUND = f"{DEFAULT}[flat_chance=None]"
BOUND = f"{DEFAULT}[flat_chance=0.1]"
TIGHTER = f"{DEFAULT}[flat_chance=0.05]"  # half the bound: fewer options given up whatever the allowance
ON_PILOTS = f"{DEFAULT}[flat_chance=0.1;bound_skips=False]"  # the bound on each prompt's own flat pilot only
BOUNDS = ((BOUND, "bound 0.1"), (TIGHTER, "bound 0.05"), (ON_PILOTS, "bound 0.1 on pilots"))
BOUND_ARMS = (
    (DEFAULT, "no bound"),
    *BOUNDS,
    ("pilot-commit", "Pilot-Commit"),
    ("oracle-skip", "known-p rule"),
)


def bound_reading(bound_over_default: dict | None, other: str = "no bound", this: str = "bound") -> str:
    """Which of the two is ahead in one cell, from the paired comparison (`head_to_head`, 90%
    interval): ``this`` (the bound) where the interval lies wholly above 1, ``other`` where wholly
    below.

    >>> bound_reading({"low": 1.1, "high": 1.6}), bound_reading({"low": 0.7, "high": 0.95})
    ('bound ahead', 'no bound ahead')
    >>> bound_reading({"low": 0.9, "high": 1.3}), bound_reading(None)
    ('not separated', '-')
    """
    if bound_over_default is None:
        return "-"
    if bound_over_default["low"] > 1.0:
        return f"{this} ahead"
    if bound_over_default["high"] < 1.0:
        return f"{other} ahead"
    return "not separated"


def _equal_cost(entry: dict | None) -> str:
    if not entry or entry.get("final_gap_equal_cost") is None:
        return "-"
    lo, hi = entry["final_gap_equal_cost_ci90"]
    return f"{entry['final_gap_equal_cost']:+.3f} ({lo:+.3f}, {hi:+.3f})"


def _pooled_line(label: str, pooled: dict[str, float]) -> str:
    if not np.isfinite(pooled["effect"]):
        return f"- {label}: undefined"
    left = f"; {pooled['left_out']} left out ({left_out_reason(pooled)})" if pooled["left_out"] else ""
    return f"- {label}: {pooled['effect']:.2f} ({pooled_interval(pooled)}) over {pooled['cells']} cells{left}"


def map_runs(root: Path, result: Any) -> dict[tuple[str, str], list[dict]]:
    """A map result's run records by (cell, method)."""
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in read_run_records(records_path(root / result.path)):
        runs[(r["cell"], r["method"])].append(r)
    return runs


def _cells(
    root: Path, results: list[Any], arms: dict[str, str], entries: dict[str, list[dict | None]]
) -> Iterator[tuple[str, dict, dict[tuple[str, str], list[dict]]]]:
    """Each cell of the maps ``results``: its key, its arms' entries by method and the maps' runs by
    (cell, method); the entry of every arm the map ran (and the null control's) is also appended to
    ``entries``, for the pooled effects (an arm a map did not run is not counted as left out)."""
    for result in results:
        runs = map_runs(root, result)
        ran = set(result.data["config"]["methods"])
        for row in result.data["rows"]:
            for m in (NULL, *arms):
                if m in ran:
                    entries[m].append(row["methods"].get(m))
            yield row["key"], row["methods"], runs


def render_saving_bound(root: Path) -> str:
    """The block: the arms over Uniform per cell; each bound against the default and two of them
    against Pilot-Commit, paired, with `bound_reading`; the final accuracy at equal cost; the pooled
    effects and how often each reading occurs."""
    results = [load_relative(root, rel) for rel in BOUND_MAPS]
    over, paired, equal_cost = [], [], []
    readings: dict[str, list[str]] = {b: [] for b, _ in BOUNDS}
    entries: dict[str, list[dict | None]] = defaultdict(list)
    against_pilot = (BOUND, ON_PILOTS)
    for key, methods, runs in _cells(root, results, dict(BOUND_ARMS), entries):
        over.append((key, *(_over_uniform(methods.get(m)) for m, _ in BOUND_ARMS)))
        versus = {b: head_to_head(runs[(key, DEFAULT)], runs[(key, b)]) for b in readings}
        for b in readings:
            readings[b].append(bound_reading(versus[b]))
        paired.append(
            (
                key,
                *(_paired(versus[b]) for b in readings),
                *(_paired(head_to_head(runs[(key, "pilot-commit")], runs[(key, b)])) for b in against_pilot),
                *(readings[b][-1] for b in against_pilot),
            )
        )
        equal_cost.append((key, *(_equal_cost(methods.get(m)) for m in (DEFAULT, *readings))))
    labels = {NULL: "null control (reads 1 in truth)", **dict(BOUND_ARMS)}
    counts = "; ".join(
        f"{labels[b]}: " + ", ".join(f"{r} {found.count(r)}" for r in dict.fromkeys(found))
        for b, found in readings.items()
    )
    config = results[0].data["config"]
    lines = [
        "Per cell, every arm at Uniform's tuned rate. Over Uniform: rollouts to 50/75/90% of the gain, "
        "Uniform's over the arm's (90% jackknife-t interval over the arm's seeds), and the arm's share of "
        f"Uniform's rollouts. No bound (the rule without the bound, the default when these maps ran) and the "
        f"bounds ran the {len(config['paired_seeds'])} paired seeds, Pilot-Commit and the known-p rule the "
        f"{len(config['report_seeds'])} report seeds. The bound 0.1 on pilots became the default (short pilots came later).",
        "",
        *table(["cell", *(f"{label} over Uniform" for _, label in BOUND_ARMS)], over),
        "",
        "Head to head on the seeds both arms ran (the same statistic, the first arm in Uniform's place). "
        "Reading: a bound or no bound ahead where the head-to-head interval lies wholly above or below 1.",
        "",
        *table(
            [
                "cell",
                *(f"{label} over no bound" for _, label in BOUNDS),
                *(f"{labels[b]} over Pilot-Commit" for b in against_pilot),
                *(f"reading ({labels[b]})" for b in against_pilot),
            ],
            paired,
        ),
        "",
        f"Readings over the {len(paired)} cells, {counts}.",
        "",
        "Final accuracy minus Uniform's at equal cost (Uniform's curve read at the arm's cumulative "
        "rollouts, mean over the paired seeds, 90% interval):",
        "",
        *table(["cell", *(f"{labels[m]}" for m in (DEFAULT, *readings))], equal_cost),
        "",
        "Pooled over the cells (geometric mean of the cells' statistics over Uniform, 90% t interval):",
        "",
        *(_pooled_line(label, pooled_arm(entries[m])) for m, label in labels.items()),
        "",
        *(provenance([r]) for r in results),  # two maps, two commands
    ]
    return "\n".join(lines)


def paired_check_block(
    root: Path,
    maps: tuple[str, ...],
    bases: tuple[tuple[str, str], ...],
    bound: tuple[str, str],
    intro: str,
    rates: str = "the rates as tuned above",
    after: Sequence[str] = (),
) -> str:
    """One check of a bound against base arms: per cell of ``maps``, each arm over Uniform, the bound
    over each base the maps ran, paired, with `bound_reading`; the pooled effects of the null control
    and every arm, then the lines ``after`` (before the source lines). ``rates`` says where the rates
    were tuned."""
    results = [load_relative(root, rel) for rel in maps]
    ran = set(results[0].data["config"]["methods"])
    bases = tuple(b for b in bases if b[0] in ran)
    arms = (*bases, bound)
    body = []
    readings: dict[str, list[str]] = {m: [] for m, _ in bases}
    entries: dict[str, list[dict | None]] = defaultdict(list)
    for key, methods, runs in _cells(root, results, dict(arms), entries):
        versus = {m: head_to_head(runs[(key, m)], runs[(key, bound[0])]) for m, _ in bases}
        for m, label in bases:
            readings[m].append(bound_reading(versus[m], label, bound[1]))
        cells = [_over_uniform(methods.get(m)) for m, _ in arms]
        body.append((key, *cells, *(x for m, _ in bases for x in (_paired(versus[m]), readings[m][-1]))))
    seeds = list(results[0].data["config"]["paired_seeds"])
    counts = "; ".join(
        f"against {label}: "
        + ", ".join(f"{'no statistic' if r == '-' else r} {readings[m].count(r)}" for r in dict.fromkeys(readings[m]))
        for m, label in bases
    )
    labels = {NULL: "null control (reads 1 in truth)", **dict(arms)}
    header = ["cell", *(f"{label} over Uniform" for _, label in arms)]
    header += [x for _, label in bases for x in (f"{bound[1]} over {label}", f"reading ({label})")]
    lines = [
        f"Seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}, paired, chosen before the run; {rates}), "
        f"every arm at Uniform's rate; the same statistics as above. {intro}",
        "",
        *table(header, body),
        "",
        f"Readings over the {len(body)} cells, {counts}.",
        "",
        *(_pooled_line(label, pooled_arm(entries[m])) for m, label in labels.items()),
        "",
        *([*after, ""] if after else []),
        *(provenance([r]) for r in results),
    ]
    return "\n".join(lines)


def render_fresh_bound(root: Path) -> str:
    """The check on fresh seeds before the switch: per cell of the `fresh-bound` maps, no bound (then
    the default) and the bound on pilots (the default now)."""
    intro = "No bound: the rule without the bound, the default when these maps ran."
    return paired_check_block(root, FRESH_MAPS, ((DEFAULT, "no bound"),), (ON_PILOTS, "bound 0.1 on pilots"), intro)


def render_default_bound(root: Path) -> str:
    """The default (the bound on pilots) against the rule without the bound (``flat_chance=None``)
    and against Pilot-Commit (where the maps ran it) on the `default-bound` maps, seeds fixed after
    the switch."""
    intro = (
        "The default here is the bound 0.1 on pilots with full pilots of 4 (the default when these maps ran, "
        "`default[short_pilots=False]` today); no bound: `flat_chance=None`, the rule without it."
    )
    bases = ((NO_BOUND, "no bound"), ("pilot-commit", "Pilot-Commit"))
    return paired_check_block(root, DEFAULT_MAPS, bases, (DEFAULT, "default"), intro)


def render_group_four(root: Path) -> str:
    """The default at 4 rollouts a prompt (the bound per group before generating, where the full
    pilot would be the whole group, and short pilots) against the same with full pilots, the rule
    that bounds flat pilots only (``bound_skips=False``: at n = 4 only its allowance skips),
    Pilot-Commit and the known-p skip rule, on the `GROUP_FOUR_MAPS`."""
    intro = (
        "The default bounds each group before generating where the full pilot would be the whole group "
        "(here every group), and pilots the rest with 2 or 3 where its belief is sure; full pilots: the same "
        "with `short_pilots=False`; pilots only: also `bound_skips=False`, the rule before both, whose bound "
        "waits for a flat pilot and so never acts at 4 rollouts a prompt. The null control draws Uniform's "
        "groups of 4 in the default's rounds (a short pilot where the default's would be short, then the rest)."
    )
    bases = (
        (FULL_PILOTS, "full pilots"),
        (f"{DEFAULT}[bound_skips=False;short_pilots=False]", "pilots only"),
        ("pilot-commit", "Pilot-Commit"),
        ("oracle-skip", "known-p rule"),
    )
    rates = "Uniform's rate tuned per cell on the map's tune seeds at 4 rollouts a prompt"
    return paired_check_block(root, GROUP_FOUR_MAPS, bases, (DEFAULT, "default"), intro, rates)


def render_short_pilots(root: Path) -> str:
    """The default (short pilots, `saving_rule.settling_pilot`) against the rule before it (full
    pilots of 4, ``short_pilots=False``) and Pilot-Commit on the `SHORT_MAPS`, seeds fixed after the
    switch."""
    intro = "The default shortens the pilots its belief is sure of; full pilots: `short_pilots=False`, the rule before."
    bases = ((FULL_PILOTS, "full pilots"), ("pilot-commit", "Pilot-Commit"))
    return paired_check_block(root, SHORT_MAPS, bases, (DEFAULT, "default"), intro)


def render_fresh_pilot_commit(root: Path) -> str:
    """The default against Pilot-Commit on the `SKIP_UNSEEN_MAPS` (fresh seeds, Pilot-Commit added to
    the map after its other arms): where Pilot-Commit is ahead, by how much."""
    intro = "Pilot-Commit ran on the same seeds, added to the map after the arms above."
    return paired_check_block(root, SKIP_UNSEEN_MAPS, (("pilot-commit", "Pilot-Commit"),), (DEFAULT, "default"), intro)

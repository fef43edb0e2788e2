"""The docs' blocks of the share study (``benchmarks/saving_share.py``): the saving default at several
shares epsilon of the step's expected signal it may give up, its allocation ledger (rollouts spent,
signal kept) and its learning speed against Uniform beside Pilot-Commit's; and of the pool's beliefs
(``benchmarks/pool_beliefs.py``): the same rule with a belief that knows more, across shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.allocators.saving_rule import LOSS_SHARE
from adaptive_rollouts.experiments.map_config import DEFAULT
from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.bound_tables import paired_check_block
from adaptive_rollouts.reporting.equal_cost_tables import equal_cost_line, mean_final_gaps
from adaptive_rollouts.reporting.markdown import table

__all__ = [
    "SAVING_SHARE",
    "SPEND_TARGET",
    "KEEP_TARGET",
    "meets_signal_target",
    "render_saving_share",
    "POOL_BELIEFS",
    "render_pool_beliefs",
    "SHARE_ARM",
    "SHARE_CHECK_MAPS",
    "render_share_check",
    "render_share_group4",
    "render_share_versus_pilot",
    "shipped_mark",
    "SHARE_GROUP4_MAPS",
    "SHARE_PILOT_MAPS",
]

SAVING_SHARE = "results/saving_share/saving_share.json"
SPEND_TARGET, KEEP_TARGET = 0.6, 0.9  # the saving-signal target: >= 0.9 of the signal at <= 0.6 of the rollouts


def meets_signal_target(ledger: dict, spend: float = SPEND_TARGET) -> bool:
    """Whether a ledger entry (``spent``, ``kept``: shares of Uniform's rollouts and expected signal)
    keeps at least `KEEP_TARGET` at no more than ``spend`` (the cells' target, or the pool's).

    >>> meets_signal_target({"spent": 0.5, "kept": 0.92}), meets_signal_target({"spent": 0.5, "kept": 0.92}, 0.4)
    (True, False)
    """
    return ledger["spent"] <= spend and ledger["kept"] >= KEEP_TARGET


def shipped_mark(share: float, shipped_then: float) -> str:
    """The column mark of a share: the one shipped when the study ran, and whether it still is.

    >>> shipped_mark(0.1, 0.1), shipped_mark(0.05, 0.1)
    (' (shipped then)', '')
    >>> shipped_mark(LOSS_SHARE, LOSS_SHARE)
    ' (shipped)'
    """
    if share != shipped_then:
        return ""
    return " (shipped)" if share == LOSS_SHARE else " (shipped then)"


def _speed(x: dict | None) -> str:
    if not x or x.get("gain_speedup") is None:
        return "not run"
    lo, hi = x.get("ci90") or x.get("gain_ci90") or (float("nan"), float("nan"))
    return f"{x['gain_speedup']:.2f}x ({lo:.2f}-{hi:.2f}), {x['spend']:.2f}, {x['final_gap']:+.3f}"


def render_saving_share(root: Path) -> str:
    if not (root / SAVING_SHARE).exists():
        return f"No result file yet: `python benchmarks/saving_share.py` writes `{SAVING_SHARE}`."
    r = load_relative(root, SAVING_SHARE)
    d = r.data
    shares = list(d["shares"])
    heads = [f"epsilon = {s:g}" + shipped_mark(s, d["shipped"]) for s in shares]
    led = {(x["cell"], x["share"]): x for x in d["ledger"]}
    cells = list(dict.fromkeys(x["cell"] for x in d["ledger"]))
    body = [[c, *(f"{led[c, s]['spent']:.2f} / {led[c, s]['kept']:.2f}" for s in shares)] for c in cells]
    pool = {(x["n"], x["share"]): x for x in d["pool"]}
    body += [
        [f"recurring pool, n = {n}", *(f"{pool[n, s]['spent']:.2f} / {pool[n, s]['kept']:.2f}" for s in shares)]
        for n in sorted({x["n"] for x in d["pool"]})
    ]
    met = [sum(meets_signal_target(led[c, s]) for c in cells) for s in shares]
    body.append(
        [f"cells at <= {SPEND_TARGET:g} spent and >= {KEEP_TARGET:g} kept", *(f"{m} of {len(cells)}" for m in met)]
    )
    speed = {(x["cell"], x["share"]): x for x in d["speed"]}
    speed_cells = list(dict.fromkeys(x["cell"] for x in d["speed"]))
    pc = d["pilot_commit"]
    speed_body = [[c, *(_speed(speed.get((c, s))) for s in shares), _speed(pc.get(c))] for c in speed_cells]
    pc_seeds = sorted({len(x.get("seeds") or []) for x in pc.values()})
    lines = [
        f"The default with the share epsilon of each step's expected signal it may give up set to each value; "
        f"everything else is the shipped rule. Allocation ledger (`benchmarks/saving_signal.py`): share of "
        f"Uniform's rollouts generated / share of Uniform's expected signal kept, mean of {d['ledger_seeds']} seeds, "
        f"60 steps at lr 0.4:",
        "",
        *table(["cell", *heads], body),
        "",
        f"Learning speed at Uniform's tuned rate (read from {', '.join(f'`{m}`' for m in d['rates_from'])}), "
        f"{d['seeds']} paired seeds, {d['steps']} steps: rollouts to 50/75/90% of the gain over Uniform's "
        f"(90% {d['interval']} interval), share of Uniform's rollouts, final accuracy minus Uniform's after the "
        f"same number of steps (at equal steps, when the arm has generated that share of Uniform's rollouts; the "
        f"saving map's tables in docs/benchmark.md give the gap at equal cost too). "
        f"Pilot-Commit: its row of the same map ({'/'.join(map(str, pc_seeds))} seeds).",
        "",
        *table(["cell", *heads, "Pilot-Commit"], speed_body),
    ]
    return block(lines, [r])


POOL_BELIEFS = "results/pool_beliefs/pool_beliefs.json"
POOL_SPEND_TARGETS = {4: 0.5, 8: 0.4}  # the recurring pool's targets: this share of the budget at >= 0.9 kept


def _along(rows: list[dict], spent: float) -> float | None:
    """The signal kept at ``spent`` on the line through ``rows`` (piecewise linear in the spend;
    None outside their range)."""
    line = sorted(rows, key=lambda r: r["spent"])
    x, y = [r["spent"] for r in line], [r["kept"] for r in line]
    return float(np.interp(spent, x, y)) if line and x[0] <= spent <= x[-1] else None


def render_pool_beliefs(root: Path) -> str:
    if not (root / POOL_BELIEFS).exists():
        return f"No result file yet: `python benchmarks/pool_beliefs.py` writes `{POOL_BELIEFS}`."
    r = load_relative(root, POOL_BELIEFS)
    d = r.data
    shares, rows = list(d["shares"]), d["rows"]
    beliefs = list(dict.fromkeys(x["belief"] for x in rows))
    at = {(x["n"], x["belief"], x["share"]): x for x in rows}
    heads = [f"epsilon = {s:g}" + shipped_mark(s, d["shipped"]) for s in shares]
    body = [
        [str(n), b, *(f"{at[n, b, s]['spent']:.2f} / {at[n, b, s]['kept']:.2f}" for s in shares)]
        for n in d["sizes"]
        for b in beliefs
    ]
    lines = [
        f"The default's rule with its belief replaced, on the recurring pool ({d['pool']['size']} prompts, "
        f"{d['pool']['extreme']:.0%} at p within 0.02 of 0 or 1, p fixed, {d['pool']['batch']} a step for "
        f"{d['pool']['steps']} steps, no policy view): share of the budget spent / share of Uniform's expected "
        f"signal kept, mean of {d['seeds']} seeds:",
        "",
        *table(["n", "belief", *heads], body),
        "",
    ]
    for n in d["sizes"]:
        spend = POOL_SPEND_TARGETS.get(n)
        if spend is None:
            continue
        met = [f"{b} at {s:g}" for b in beliefs for s in shares if meets_signal_target(at[n, b, s], spend)]
        own = at.get((n, beliefs[0], d["shipped"]))
        cmp = ""
        if own is not None:
            others = [
                (b, _along([x for x in rows if x["n"] == n and x["belief"] == b], own["spent"])) for b in beliefs[1:]
            ]
            said = [f"{b} {k:.2f}" for b, k in others if k is not None]
            if said:
                cmp = (
                    f" At the {beliefs[0]} belief's spend ({own['spent']:.2f}, the share shipped when run), the other lines keep "
                    f"(interpolated): {', '.join(said)}; it keeps {own['kept']:.2f}."
                )
        bound = {b["keep"]: b["spent"] for b in d.get("bound", []) if b["n"] == n}
        least = (
            " With p known and nothing explored, keeping "
            + ", ".join(f"{k:g} takes at least {v:.2f}" for k, v in sorted(bound.items()))
            + " of the budget (the prompts worth most kept whole, the others skipped)."
            if bound
            else ""
        )
        lines.append(
            f"- n = {n}, target <= {spend:g} of the budget at >= {KEEP_TARGET:g} kept: "
            f"{'met by ' + ', '.join(met) if met else 'met by no belief at any share'}.{cmp}{least}"
        )
    honest = [
        f"{b} {at[n, b, d['shipped']]['given']:.3f} / {at[n, b, d['shipped']]['claimed']:.3f} at n = {n}"
        for n in d["sizes"]
        for b in beliefs
        if "given" in at.get((n, b, d["shipped"]), {})
    ]
    if honest:
        lines.append(
            "- Signal given up (priced with the true p at what the rule had seen) / what the rule says it "
            f"gave up, at the share shipped when run ({d['shipped']:g}): {'; '.join(honest)}."
        )
    lines += [
        "",
        "![Signal kept against budget spent on the recurring pool](../results/pool_beliefs/pool_frontier.png)",
    ]
    return block(lines, [r])


SHARE_CHECK_MAPS = ("results/map/share-0.2.json",)  # the share 0.2 against 0.1 (then shipped), fresh seeds
SHARE_ARM = f"{DEFAULT}[share=0.2]"


def render_share_check(root: Path) -> str:
    """The share 0.2 against 0.1 (then shipped) on the `SHARE_CHECK_MAPS` (fresh seeds, the adoption rule
    fixed before the run, docs/saving.md): per cell each over Uniform and head to head, the pooled
    effects, and each arm's final accuracy minus Uniform's at equal cost and at equal steps, with the
    mean equal-cost gap over the cells."""
    if not (root / SHARE_CHECK_MAPS[0]).exists():
        return f"No result file yet: the command in docs/saving.md writes `{SHARE_CHECK_MAPS[0]}`."
    intro = "The share 0.2 (`default[share=0.2]`, the default since) against 0.1 (then the default), head to head."
    intro += " In this map `default` is the rule with the share 0.1."
    rows = load_relative(root, SHARE_CHECK_MAPS[0]).data["rows"]
    gaps = [
        f"{line} Mean at equal cost over the cells: {mean_final_gaps(rows, arm)[0]:+.3f}."
        for arm in (DEFAULT, SHARE_ARM)
        if (line := equal_cost_line(rows, arm))
    ]
    after = ["Final accuracy minus Uniform's:", "", *gaps]
    bases, arm = ((DEFAULT, "share 0.1"),), (SHARE_ARM, "share 0.2")
    return paired_check_block(root, SHARE_CHECK_MAPS, bases, arm, intro, after=after)


SHARE_PILOT_MAPS = ("results/map/versus-pilot-2.json",)  # the default with a fifth and Pilot-Commit, fresh seeds
SHARE_GROUP4_MAPS = ("results/map/group4-share.json",)  # a fifth against a tenth at 4 rollouts a prompt, fresh seeds


def render_share_versus_pilot(root: Path) -> str:
    """The default with a fifth against Pilot-Commit in one map on fresh seeds (`SHARE_PILOT_MAPS`),
    with the null control: where Pilot-Commit is ahead, by how much."""
    if not (root / SHARE_PILOT_MAPS[0]).exists():
        return f"No result file yet: the command in docs/saving.md writes `{SHARE_PILOT_MAPS[0]}`."
    intro = "The default with a fifth and Pilot-Commit in one map, on seeds not used before."
    return paired_check_block(root, SHARE_PILOT_MAPS, (("pilot-commit", "Pilot-Commit"),), (DEFAULT, "default"), intro)


def render_share_group4(root: Path) -> str:
    """At 4 rollouts a prompt (`SHARE_GROUP4_MAPS`, fresh seeds): the default with a fifth against
    the rule with a tenth (`default[share=0.1]`), head to head, checked after the switch."""
    if not (root / SHARE_GROUP4_MAPS[0]).exists():
        return f"No result file yet: the command in docs/saving.md writes `{SHARE_GROUP4_MAPS[0]}`."
    intro = (
        "At 4 rollouts a prompt, after the switch: the default (a fifth) against the rule with a tenth "
        "(`default[share=0.1]`), head to head."
    )
    tenth = f"{DEFAULT}[share=0.1]"
    return paired_check_block(root, SHARE_GROUP4_MAPS, ((tenth, "a tenth"),), (DEFAULT, "a fifth"), intro)

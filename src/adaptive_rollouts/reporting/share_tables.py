"""The docs' block of the share study (``benchmarks/saving_share.py``): the saving default at several
shares epsilon of the step's expected signal it may give up, its allocation ledger (rollouts spent,
signal kept) and its learning speed against Uniform beside Pilot-Commit's."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["SAVING_SHARE", "SPEND_TARGET", "KEEP_TARGET", "render_saving_share"]

SAVING_SHARE = "results/saving_share/saving_share.json"
SPEND_TARGET, KEEP_TARGET = 0.6, 0.9  # the saving-signal target: >= 0.9 of the signal at <= 0.6 of the rollouts


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
    heads = [f"epsilon = {s:g}" + (" (shipped)" if s == d["shipped"] else "") for s in shares]
    led = {(x["cell"], x["share"]): x for x in d["ledger"]}
    cells = list(dict.fromkeys(x["cell"] for x in d["ledger"]))
    body = [[c, *(f"{led[c, s]['spent']:.2f} / {led[c, s]['kept']:.2f}" for s in shares)] for c in cells]
    pool = {(x["n"], x["share"]): x for x in d["pool"]}
    body += [
        [f"recurring pool, n = {n}", *(f"{pool[n, s]['spent']:.2f} / {pool[n, s]['kept']:.2f}" for s in shares)]
        for n in sorted({x["n"] for x in d["pool"]})
    ]
    met = [sum(led[c, s]["spent"] <= SPEND_TARGET and led[c, s]["kept"] >= KEEP_TARGET for c in cells) for s in shares]
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

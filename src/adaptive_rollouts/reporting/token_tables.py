"""The tokens benchmark's tables (``benchmarks/tokens.py``, results/tokens/tokens.json): per length
cell the measured lengths; per arm the primary statistic on the rollout and token axes and its
rounds; per engine the modelled step time and time speedup of the default with its own rounds and of
the default timed by that engine; where the saved rollouts would have fallen; and the targets read
off them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.regime_map import ENGINE_MARK
from adaptive_rollouts.experiments.results import short_commit
from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import fmt, table

__all__ = ["TOKENS", "TOKENS_OVER_ROLLOUTS", "render_tokens"]

TOKENS = "results/tokens/tokens.json"
TOKENS_OVER_ROLLOUTS = 1.2  # the default's token speedup asked for, as a multiple of its rollout speedup


def _ci(x: dict) -> str:
    return f"{fmt(x['speedup'])} ({fmt(x['ci90'][0])}-{fmt(x['ci90'][1])})"


def overhead_text(c: float) -> str:
    """A break-even overhead per round (`sim.step_time.break_even_overhead`) as the tables print it."""
    if np.isposinf(c):
        return "any"
    if c < 0:
        return "none (slower at 0)"
    return f"< {c:,.0f}"


def _timed(arms: dict, engine: str) -> dict | None:
    """The arm of the default timed by ``engine`` (``default~<engine>``), if the file has it."""
    return arms.get(f"default{ENGINE_MARK}{engine}")


def _time_rows(d: dict) -> tuple[list[str], list[list[str]], dict[str, list[float]]]:
    """Per cell and engine: Uniform's step; each arm that plans its own rounds (no round times) as
    step time over Uniform's and time speedup; the default timed by the engine. And per engine the
    timed default's step ratios (all steps), for the targets."""
    arms = list(d["rows"][0]["arms"]) if d["rows"] else []
    untimed = [a for a in arms if ENGINE_MARK not in a]
    header = ["cell", "engine", "Uniform's step", *(f"{a}: step / Uniform; time speedup" for a in untimed)]
    header += ["timed: rounds / step", "timed: step / Uniform", "timed: from step 2", "timed: time speedup"]
    rows: list[list[str]] = []
    ratios: dict[str, list[float]] = {}
    for x in d["rows"]:
        for engine, e in x["arms"]["default"]["engines"].items():
            timed = _timed(x["arms"], engine)
            t = None if timed is None else timed["engines"][engine]
            if t is not None:
                ratios.setdefault(engine, []).append(t["step_time"]["ratio"])
            own = [x["arms"][a]["engines"][engine] for a in untimed]
            rows.append(
                [
                    x["cell"],
                    engine,
                    f"{e['step_time']['uniform']:,.0f}",
                    *(f"{o['step_time']['ratio']:.2f}; {_ci(o)}" for o in own),
                    "-" if timed is None else f"{timed['rounds_per_step']['method']:.2f}",
                    "-" if t is None else f"{t['step_time']['ratio']:.2f}",
                    "-" if t is None else f"{t['later_step_ratio']:.2f}",
                    "-" if t is None else _ci(t),
                ]
            )
    return header, rows, ratios


def _composition_rows(d: dict, arms: list[str]) -> list[list[str]]:
    rows = []
    for x in d["rows"]:
        for arm in arms:
            c = x["arms"][arm].get("composition")
            if c is None:
                continue
            share = " / ".join(f"{v:.0%}" for v in c["saved_share_by_class"])
            rows.append(
                [
                    x["cell"],
                    arm,
                    " / ".join(f"{v:.0%}" for v in np.asarray(c["uniform_rollouts"]) / sum(c["uniform_rollouts"])),
                    " / ".join(f"{v:.2f}" for v in c["uniform_length_by_class"]),
                    f"{c['saved_share']:.0%}",
                    share,
                    f"{c['saved_length']:.2f}",
                    f"{c['length_needed']:.2f}",
                    f"{c['step_ratio']:.2f}",
                    f"{c['flat_rule_ratio']:.2f}" if "flat_rule_ratio" in c else "-",
                ]
            )
    return rows


def _attainable(d: dict) -> list[str]:
    """The bullet on what tokens / rollouts rules that know p, or pilot every prompt, reach (when the
    file has those arms)."""
    rows = d["rows"]
    others = [a for a in ("oracle-skip", "pilot-commit") if rows and all(a in x["arms"] for x in rows)]
    if not others:
        return []
    flat = [x["arms"]["default"]["composition"].get("flat_rule_ratio") for x in rows]
    bound = (
        f"; saving exactly the flat prompts' rollouts (every hopeless and solved one) would give "
        f"{_span([float(v) for v in flat])} per step (Uniform's mean length over the mixed prompts')"
        if all(v is not None for v in flat)
        else ""
    )
    return [
        "- what is attainable: tokens / rollouts "
        + "; ".join(
            f"`{a}` {_span([x['arms'][a]['tokens_over_rollouts'] for x in rows])} (solved prompts "
            f"{_span([x['arms'][a]['composition']['saved_share_by_class'][2] for x in rows], '.0%')} of its saving)"
            for a in others
        )
        + f", `default` {_span([x['arms']['default']['tokens_over_rollouts'] for x in rows])}{bound}."
    ]


def _span(values: list[float], fmt_: str = ".2f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt_}}" if f"{lo:{fmt_}}" == f"{hi:{fmt_}}" else f"{lo:{fmt_}}-{hi:{fmt_}}"


def _summary(d: dict) -> list[str]:
    """The ranges over the cells that docs/tokens.md reads, as bullet lines."""
    rows = d["rows"]
    if not rows or any(_timed(x["arms"], e) is None for x in rows for e in ("synchronous", "slots-64", "slots-16")):
        return []

    def eng(arm: str, engine: str, key: str = "ratio") -> list[float]:
        return [
            x["arms"][arm]["engines"][engine]["step_time"][key]
            if key == "ratio"
            else x["arms"][arm]["engines"][engine][key]
            for x in rows
            if arm in x["arms"]
        ]

    sync, s64, s16 = (f"default{ENGINE_MARK}{e}" for e in ("synchronous", "slots-64", "slots-16"))
    speed = [x["arms"][sync]["engines"]["synchronous"] for x in rows]
    below = sum(t["ci90"][1] < 1.0 for t in speed)
    one_round = [x["arms"][sync]["engines"]["slots-16"]["step_time"]["ratio"] for x in rows]
    own16 = eng("default", "slots-16")
    split_best = sum(t < min(a, b) for t, a, b in zip(eng(s16, "slots-16"), own16, one_round))
    cont = f"default{ENGINE_MARK}continuous"
    same = all(x["arms"][cont]["engines"] == x["arms"]["default"]["engines"] for x in rows if cont in x["arms"])
    comp = [x["arms"]["default"]["composition"] for x in rows]
    arms = [a for a in rows[0]["arms"] if a.startswith("default")]
    ratios = [x["arms"][a]["tokens_over_rollouts"] for x in rows for a in arms]
    untimed = [a for a in rows[0]["arms"] if ENGINE_MARK not in a]
    return [
        "Over the length cells:",
        "",
        "- synchronous engine, own rounds: step "
        + "; ".join(f"`{a}` {_span(eng(a, 'synchronous'))}x" for a in untimed)
        + f" Uniform's; timed: {_span([x['arms'][sync]['rounds_per_step']['method'] for x in rows])} rounds a "
        f"step, step {_span(eng(sync, 'synchronous'))}x Uniform's over all steps and "
        f"{_span(eng(sync, 'synchronous', 'later_step_ratio'))}x from the second step, time speedup "
        f"{_span([t['speedup'] for t in speed])} (interval below 1 in {below} of {len(rows)} cells; own rounds "
        f"{_span([x['arms']['default']['engines']['synchronous']['speedup'] for x in rows])});",
        f"- 64 slots: own rounds {_span(eng('default', 'slots-64'))}x Uniform's step; timed "
        f"{_span(eng(s64, 'slots-64'))}x, time speedup {_span(eng(s64, 'slots-64', 'speedup'))};",
        f"- 16 slots: timed {_span([x['arms'][s16]['rounds_per_step']['method'] for x in rows])} rounds a step, "
        f"step {_span(eng(s16, 'slots-16'))}x Uniform's, below both the default's own rounds and one round a "
        f"step (the synchronous-timed default) in {split_best} of {len(rows)} cells;",
        f"- continuous batching: the timed default's times {'equal' if same else 'differ from'} those of its "
        f"own rounds; step {_span(eng(cont, 'continuous'))}x Uniform's;",
        f"- tokens / rollouts {_span(ratios)} over every default arm; of what the default saves, "
        f"{_span([c['saved_share_by_class'][2] for c in comp], '.0%')} falls on solved prompts "
        f"({_span([c['uniform_length_by_class'][2] for c in comp])}x the mean length; "
        f"{_span([c['uniform_rollouts'][2] / sum(c['uniform_rollouts']) for c in comp], '.0%')} of Uniform's "
        f"rollouts) and {_span([c['saved_share_by_class'][0] for c in comp], '.0%')} on hopeless ones "
        f"({_span([c['hopeless_length'] for c in comp])}x; "
        f"{_span([c['uniform_rollouts'][0] / sum(c['uniform_rollouts']) for c in comp], '.0%')} of Uniform's "
        f"rollouts); a saved rollout is {_span([c['saved_length'] for c in comp])}x the mean, against "
        f"{_span([c['length_needed'] for c in comp])}x needed for {TOKENS_OVER_ROLLOUTS:g}"
        + (";" if _attainable(d) else "."),
        *_attainable(d),
    ]


def render_tokens(root: Path) -> str:
    if not (root / TOKENS).exists():
        return f"No result file yet: `nice python benchmarks/tokens.py` writes `{TOKENS}`."
    r = load_relative(root, TOKENS)
    d = r.data
    lengths = [
        [
            x["cell"],
            f"{x['failure_ratio']:g}",
            f"{x['uniform_lengths']['success_tokens']:,.0f}",
            f"{x['uniform_lengths']['failure_tokens']:,.0f}",
            f"{x['uniform_lengths']['failure_over_success']:.2f}",
            f"{x['uniform_lengths']['truncated_share']:.1%}",
        ]
        for x in d["rows"]
    ]
    arms = list(d["rows"][0]["arms"]) if d["rows"] else []
    body = [
        [
            x["cell"],
            arm,
            _ci(x["arms"][arm]["rollouts"]),
            _ci(x["arms"][arm]["tokens"]),
            f"{x['arms'][arm]['tokens_over_rollouts']:.2f}",
            _ci(x["arms"][arm]["steps"]) if "steps" in x["arms"][arm] else "-",
            f"{x['arms'][arm]['rounds_per_step']['method']:.2f}",
            f"{x['arms'][arm]['rollouts_per_round']:.0f}",
            f"{x['arms'][arm]['rounds_at_cap']['method']:.0%}" if "rounds_at_cap" in x["arms"][arm] else "-",
            overhead_text(x["arms"][arm]["break_even_overhead"]),
        ]
        for x in d["rows"]
        for arm in arms
    ]
    time_header, time_rows, ratios = _time_rows(d)
    defaults = [a for a in arms if a == "default" or a.startswith(f"default{ENGINE_MARK}")]
    ratio_met = {
        a: sum(x["arms"][a]["tokens_over_rollouts"] >= TOKENS_OVER_ROLLOUTS for x in d["rows"]) for a in defaults
    }
    n = len(d["rows"])
    sync = [
        (t["step_time"]["ratio"], t["later_step_ratio"])
        for x in d["rows"]
        if (a := _timed(x["arms"], "synchronous")) is not None
        for t in [a["engines"]["synchronous"]]
    ]
    lines = [
        f"Runs at {', '.join(short_commit(c) for c in d.get('run_commits', [])) or 'the commit below'}; "
        f"{len(d['seeds'])} paired seeds, {d['steps']} steps, every arm at Uniform's rate (tuned on seeds "
        f"{d['tune_seeds']}), the default being `{d['default_allocator']}`; `default` plans its own rounds "
        f"(no round times), `default{ENGINE_MARK}<engine>` runs where that engine times every round. Measured "
        "lengths over Uniform's rollouts (tokens; cap 8,192):",
        "",
        *table(
            ["cell", "failure ratio (hardest prompts)", "success", "failure", "failure / success", "cut at cap"],
            lengths,
        ),
        "",
        f"Against Uniform: speedup to 50/75/90% of the gain in rollouts and in tokens (90% interval over the "
        f"paired seeds, {d.get('interval', 'percentile')}), and in steps (the time speedup of an engine whose "
        "every step lasts the same, as a synchronous one's step of one round at the cap); rounds per step, rollouts per round, the share of "
        "rounds whose longest rollout ran to the cap, and the overhead per round (token-times) below which a "
        "synchronous step is no slower than Uniform's:",
        "",
        *table(
            ["cell", "arm", "rollouts", "tokens", "tokens / rollouts", "steps", "rounds / step", "rollouts / round"]
            + ["rounds at the cap", "break-even overhead"],
            body,
        ),
        "",
        "Modelled generation time per engine (`sim.step_time.ENGINES`; token-times): Uniform's mean step; each "
        "arm that plans its own rounds (no round times) and the default timed by that engine, as step time "
        "over Uniform's (the timed default's also from the second step on, the first being planned before "
        "any round was timed) and as the speedup to 50/75/90% of the gain on that engine's time axis:",
        "",
        *table(time_header, time_rows),
        "",
        "Where the saved rollouts would have fallen, per step (prompts by their true chance of success p: "
        "hopeless p < 0.05, mixed, solved p > 0.95): Uniform's rollouts per class and their mean length over "
        "Uniform's mean; the share of Uniform's rollouts the arm does not generate (f), how they split over "
        "the classes, their mean length over Uniform's mean (x), the x a token speedup 1.2x the rollout "
        "speedup needs at that f, (1 - (1 - f) / 1.2) / f, the per-step tokens / rollouts they give, "
        "(1 - f) / (1 - f x), and the per-step tokens / rollouts were exactly the flat prompts' rollouts "
        "saved (hopeless and solved; Uniform's mean length over the mixed prompts'):",
        "",
        *table(
            ["cell", "arm", "Uniform's rollouts (hopeless / mixed / solved)", "their length / mean", "saved f"]
            + ["saved (hopeless / mixed / solved)", "saved length x", "x needed for 1.2", "per-step ratio"]
            + ["flat prompts saved: ratio"],
            _composition_rows(
                d,
                [
                    a
                    for a in ("default", f"default{ENGINE_MARK}synchronous", "oracle-skip", "pilot-commit")
                    if a in arms
                ],
            ),
        ),
        "",
        *_summary(d),
        "",
        f"Targets: tokens speedup >= {TOKENS_OVER_ROLLOUTS:g}x the rollout speedup: met in "
        + "; ".join(f"{ratio_met[a]} of {n} cells by `{a}`" for a in defaults)
        + (
            f" (`default` short of it by {_span([TOKENS_OVER_ROLLOUTS - x['arms']['default']['tokens_over_rollouts'] for x in d['rows']])})"
            if n
            else ""
        )
        + ". Synchronous step time no worse than Uniform's for the default timed by that engine: met in "
        f"{sum(a <= 1.0 for a, _ in sync)} of {len(sync)} cells over all steps"
        + (f" (at most {max(a for a, _ in sync) - 1:.0%} above)" if sync and max(a for a, _ in sync) > 1 else "")
        + ", "
        f"{sum(b <= 1.0 for _, b in sync)} of {len(sync)} from the second step on. "
        + "Step time no worse than Uniform's, timed default: "
        + "; ".join(f"{e} {sum(v <= 1.0 for v in vals)} of {len(vals)}" for e, vals in ratios.items())
        + ".",
    ]
    return block(lines, [r])

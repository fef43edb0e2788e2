"""The tokens benchmark's tables (``benchmarks/tokens.py``, results/tokens/tokens.json): per length
cell the measured lengths; per arm the primary statistic on the rollout and token axes and its
rounds; per engine the modelled step time and time speedup of the default with its own rounds and of
the default timed by that engine; where the saved rollouts would have fallen; and the targets read
off them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.regime_map import ENGINE_MARK
from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.markdown import fmt, table

__all__ = ["TOKENS", "TOKENS_OVER_ROLLOUTS", "render_tokens"]

TOKENS = "results/tokens/tokens.json"
TOKENS_OVER_ROLLOUTS = 1.2  # the default's token speedup asked for, as a multiple of its rollout speedup


def _ci(x: dict) -> str:
    return f"{fmt(x['speedup'])} ({fmt(x['ci90'][0])}-{fmt(x['ci90'][1])})"


def _overhead(c: float) -> str:
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
                ]
            )
    return rows


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
            f"{x['arms'][arm]['rounds_per_step']['method']:.2f}",
            f"{x['arms'][arm]['rollouts_per_round']:.0f}",
            f"{x['arms'][arm]['rounds_at_cap']['method']:.0%}" if "rounds_at_cap" in x["arms"][arm] else "-",
            _overhead(x["arms"][arm]["break_even_overhead"]),
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
        f"Runs at {', '.join(c[:10] for c in d.get('run_commits', [])) or 'the commit below'}; "
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
        f"paired seeds, {d.get('interval', 'percentile')}); rounds per step, rollouts per round, the share of "
        "rounds whose longest rollout ran to the cap, and the overhead per round (token-times) below which a "
        "synchronous step is no slower than Uniform's:",
        "",
        *table(
            ["cell", "arm", "rollouts", "tokens", "tokens / rollouts", "rounds / step", "rollouts / round"]
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
        "speedup needs at that f, (1 - (1 - f) / 1.2) / f, and the per-step tokens / rollouts they give, "
        "(1 - f) / (1 - f x):",
        "",
        *table(
            ["cell", "arm", "Uniform's rollouts (hopeless / mixed / solved)", "their length / mean", "saved f"]
            + ["saved (hopeless / mixed / solved)", "saved length x", "x needed for 1.2", "per-step ratio"],
            _composition_rows(d, [a for a in ("default", f"default{ENGINE_MARK}synchronous") if a in arms]),
        ),
        "",
        f"Targets: tokens speedup >= {TOKENS_OVER_ROLLOUTS:g}x the rollout speedup: met in "
        + "; ".join(f"{ratio_met[a]} of {n} cells by `{a}`" for a in defaults)
        + ". Synchronous step time no worse than Uniform's for the default timed by that engine: met in "
        f"{sum(a <= 1.0 for a, _ in sync)} of {len(sync)} cells over all steps, "
        f"{sum(b <= 1.0 for _, b in sync)} of {len(sync)} from the second step on. "
        + "Step time no worse than Uniform's, timed default: "
        + "; ".join(f"{e} {sum(v <= 1.0 for v in vals)} of {len(vals)}" for e, vals in ratios.items())
        + ".",
    ]
    return block(lines, [r])

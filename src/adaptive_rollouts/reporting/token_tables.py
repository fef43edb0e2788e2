"""The tokens benchmark's tables (``benchmarks/tokens.py``, results/tokens/tokens.json): per length
cell the measured lengths, and per arm the primary statistic on the rollout, token and synchronous-
time axes beside the modelled step time of both engines, with the two targets read off them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
    body = []
    for x in d["rows"]:
        for arm in arms:
            a = x["arms"][arm]
            body.append(
                [
                    x["cell"],
                    arm,
                    _ci(a["rollouts"]),
                    _ci(a["tokens"]),
                    f"{a['tokens_over_rollouts']:.2f}",
                    _ci(a["sync_time"]),
                    f"{a['rounds_per_step']['method']:.2f}",
                    f"{a['rollouts_per_round']:.0f}",
                    f"{a['round_time_ratio']:.2f}" if "round_time_ratio" in a else "-",
                    f"{a['rounds_at_cap']['method']:.0%}" if "rounds_at_cap" in a else "-",
                    f"{a['sync_step_time']['ratio']:.2f}",
                    f"{a['continuous_step_time_ratio']:.2f}",
                    _overhead(a["break_even_overhead"]),
                ]
            )
    default = [x["arms"]["default"] for x in d["rows"] if "default" in x["arms"]]
    ratio_met = sum(a["tokens_over_rollouts"] >= TOKENS_OVER_ROLLOUTS for a in default)
    sync_met = sum(a["sync_step_time"]["ratio"] <= 1.0 for a in default)
    cont_met = sum(a["continuous_step_time_ratio"] <= 1.0 for a in default)
    n = len(default)
    lines = [
        f"Runs at {', '.join(c[:10] for c in d.get('run_commits', [])) or 'the commit below'}; "
        f"{len(d['seeds'])} paired seeds, {d['steps']} steps, every arm at Uniform's rate (tuned on seeds "
        f"{d['tune_seeds']}), the default being `{d['default_allocator']}`. Measured lengths over Uniform's "
        "rollouts (tokens; cap 8,192):",
        "",
        *table(
            ["cell", "failure ratio (hardest prompts)", "success", "failure", "failure / success", "cut at cap"],
            lengths,
        ),
        "",
        f"Against Uniform: speedup to 50/75/90% of the gain on each axis (90% interval over the paired seeds, "
        f"{d.get('interval', 'percentile')}); rounds per step, "
        "rollouts per round, how long a round lasts against Uniform's single round, and the share of rounds "
        "whose longest rollout ran to the cap; "
        "modelled step time over Uniform's per step (synchronous: rounds x longest rollout; continuous "
        "batching: tokens / throughput); the overhead per round (token-times) below which the synchronous "
        "step is no slower than Uniform's:",
        "",
        *table(
            ["cell", "arm", "rollouts", "tokens", "tokens / rollouts", "sync time", "rounds / step"]
            + ["rollouts / round", "round / Uniform's round", "rounds at the cap"]
            + ["sync step / Uniform", "continuous step / Uniform", "break-even overhead"],
            body,
        ),
        "",
        f"Targets for the default: tokens speedup >= {TOKENS_OVER_ROLLOUTS:g}x its rollout speedup: met in "
        f"{ratio_met} of {n} cells; synchronous step time no worse than Uniform's: met in {sync_met} of {n}; "
        f"continuous-batching step time no worse than Uniform's: met in {cont_met} of {n}.",
    ]
    return block(lines, [r])

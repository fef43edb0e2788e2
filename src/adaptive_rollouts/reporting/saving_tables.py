"""The docs' block of the saving-signal benchmark (``benchmarks/saving_signal.py``): per cell and
method, the share of Uniform's rollouts generated and the share of Uniform's gradient signal kept."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.allocators import saving_allocators
from adaptive_rollouts.experiments.map_config import DEFAULT, map_method
from adaptive_rollouts.experiments.results import short_commit
from adaptive_rollouts.experiments.token_summary import SYNCHRONOUS_TIME as TIME_AXIS
from adaptive_rollouts.reporting.blocks import block, load_relative
from adaptive_rollouts.reporting.bound_tables import FULL_PILOTS, NO_BOUND
from adaptive_rollouts.reporting.gain_report import gap_cell
from adaptive_rollouts.reporting.markdown import fmt, table
from adaptive_rollouts.reporting.skip_tables import SKIP_UNSEEN
from adaptive_rollouts.reporting.token_tables import overhead_text

__all__ = [
    "SAVING_SIGNAL",
    "LOSS_ROWS",
    "demo_saving_arms",
    "render_demo_saving",
    "speedup_interval",
    "render_saving_signal",
    "render_saving_given",
    "render_loss_rows",
    "render_loss_rows_summary",
]

SAVING_SIGNAL = "results/saving_signal/saving_signal.json"


def render_saving_signal(root: Path) -> str:
    r = load_relative(root, SAVING_SIGNAL)
    d = r.data
    methods: list[str] = list(d["methods"])
    by = {(x["cell"], x["method"]): x for x in d["rows"]}
    body = []
    for cell in d["cells"]:
        cells = [f"{by[cell, m]['spent']:.2f} / {by[cell, m]['kept']:.2f} ({by[cell, m]['lost']:.2f})" for m in methods]
        body.append([cell, *cells])
    lines = [
        f"Share of Uniform's rollouts generated / share of Uniform's expected signal kept (share lost to "
        f"prompts given fewer than Uniform's group size), mean of {d['seeds']} seeds, {d['steps']} steps at "
        f"lr {d['lr']:g}, estimator {d['estimator']}, aggregation {d['aggregation']}.",
        "",
        *table(["cell", *methods], body),
    ]
    return block(lines, [r])


def _bin_names(edges: list[float]) -> list[str]:
    names = [f"p in [{lo:g}, {hi:g})" for lo, hi in zip(edges[:-2], edges[1:-1])]
    return [*names, f"p in [{edges[-2]:g}, {edges[-1]:g}]"]


def _skipped(row: dict) -> str:
    """The given-up share of the prompts that got no rollout ("-" in a run that did not record it)."""
    return "-" if row.get("skipped") is None else f"{row['skipped']:.3f}"


def render_saving_given(root: Path) -> str:
    """The default's own account against the known p: per cell, what it spent and kept, the signal
    its skips and cuts gave up in expectation at what it had seen (``given``), the share it says
    it gave up (``claimed``), and the given-up signal split by the prompts' true p."""
    r = load_relative(root, SAVING_SIGNAL)
    d = r.data
    # the default, then (where the run has them) the rule with full pilots, without the bound per
    # group, and with it also before any rollout
    accounted = {
        DEFAULT: "",
        FULL_PILOTS: " (full pilots)",
        NO_BOUND: " (no bound)",
        SKIP_UNSEEN: " (bound also unseen)",
    }
    rows = [x for m in accounted for x in d["rows"] if x["method"] == m and x.get("given") is not None]
    if not rows or "p_bins" not in d:
        return block(["The committed saving-signal result holds no given-up ledger (an older benchmark)."], [r])
    body = [
        [
            x["cell"] + accounted[x["method"]],
            f"{x['spent']:.2f}",
            f"{x['kept']:.2f}",
            f"{x['given']:.3f}",
            _skipped(x),
            f"{x['claimed']:.3f}",
            f"{x['given'] / x['claimed']:.2f}x" if x["claimed"] else "-",
            *[f"{v:.3f}" for v in x["by_p"]],
        ]
        for x in rows
    ]
    for x in d.get("pool_rows", []):
        if x["method"] in accounted and x.get("given") is not None:
            claimed = x["claimed"]
            body.append(
                [
                    f"recurring pool, n = {x['n']}{accounted[x['method']]}",
                    f"{x['spent']:.2f}",
                    f"{x['kept']:.2f}",
                    f"{x['given']:.3f}",
                    _skipped(x),
                ]
                + [f"{claimed:.3f}", f"{x['given'] / claimed:.2f}x" if claimed else "-"]
                + ["" for _ in d["p_bins"][1:]]
            )
    header = [
        "cell",
        "spent",
        "kept",
        "given up (known p)",
        "of it, skipped unseen",
        "claimed",
        "given / claimed",
        *_bin_names(d["p_bins"]),
    ]
    lines = [
        f"The default (and, marked, with full pilots, `short_pilots=False`, without the bound per group, "
        f"`flat_chance=None`, and with it also before "
        f"any rollout, `bound_skips=True`), mean of "
        f"{d['seeds']} seeds: share of Uniform's rollouts spent; share of Uniform's expected "
        "signal kept; given up: the expected signal (with the true p) of what its skips and cuts gave up, at what "
        "it had seen when it stopped, as a share of Uniform's, and the part of it given up by prompts that got no "
        "rollout (older runs: -); claimed: the share of its belief's expected signal "
        "it says it gave up (`signal_given_up`, mean over the steps); then the given-up share split by the "
        "prompts' true p.",
        "",
        *table(header, body),
    ]
    return block(lines, [r])


DEMO_PROTOCOL_DIRS = (
    "results/demo_protocol_bound",  # the present default (with the bound per group)
    "results/demo_protocol",
    "results/demo_protocol_12seeds",
    "results/demo_protocol_timed",
)


def demo_saving_arms() -> tuple[str, ...]:
    """The demo arms its saving table shows: the null control, the known-p bound of saving and every
    saving allocator of the registry."""
    return ("null", "oracle-skip", *saving_allocators())


def speedup_interval(x: dict) -> str:
    """A demo-protocol speedup and its 95% interval; "never" for an arm that never reaches the
    target, "-" where the bootstrap leaves a bound undefined (too few seeds that reach it).

    >>> speedup_interval({"speedup": 1.5, "ci95": [1.1, float("nan")]})
    '1.50 (95% 1.10--)'
    """
    lo, hi = x["ci95"]
    return f"{fmt(x['speedup'], inf='never')} (95% {fmt(lo, inf='never')}-{fmt(hi, inf='never')})"


def render_demo_saving(root: Path) -> str:
    """Per committed demo-protocol summary (results/demo_protocol*/<regime>/summary.json), its own
    table with its source line: the saving arms against Uniform, in rollouts and completion tokens
    to target."""
    parts = []
    for folder in DEMO_PROTOCOL_DIRS:
        for path in sorted((root / folder).glob("*/summary.json")):
            r = load_relative(root, str(path.relative_to(root)))
            settings = r.header["settings"]
            budget = settings["prompts_per_step"] * settings["mean_rollouts"]
            # an arm with its rounds priced by an engine (``default~synchronous``) shows as its allocator's
            arms = [a for a in r.data["arms"] if map_method(a["arm"])[0] in demo_saving_arms() and "rollouts" in a]
            timed = any(TIME_AXIS in a for a in arms)  # summaries before the generation calls were recorded: none
            header = ["arm", "seeds", "speedup, rollouts", "speedup, tokens"]
            header += ["speedup, modelled time", "break-even overhead"] if timed else []
            header.append(f"rollouts / step (Uniform {budget})")
            body = []
            for arm in arms:
                line = [
                    arm["arm"],
                    str(len(arm["seeds"])),
                    speedup_interval(arm["rollouts"]),
                    speedup_interval(arm["tokens"]),
                ]
                if timed:
                    line += [speedup_interval(arm[TIME_AXIS]) if TIME_AXIS in arm else "-"]
                    line.append(overhead_text(arm["break_even_overhead"]) if "break_even_overhead" in arm else "-")
                body.append([*line, f"{arm['rollouts_per_step']:.1f}"])
            parts.append(block([f"`{folder}`, {path.parent.name}:", "", *table(header, body)], [r]))
    return "\n\n".join(parts) if parts else "No demo-protocol summary is committed yet."


LOSS_ROWS = "results/loss_rows/loss_rows.json"


def _gain(x: dict) -> str:
    lo, hi = x["ci90"]
    return f"{x['gain_speedup']:.2f}x ({lo:.2f}-{hi:.2f})"


def _pooled(x: dict) -> str:
    return f"{x['effect']:.2f}x ({x['low']:.2f}-{x['high']:.2f})"


def render_loss_rows(root: Path) -> str:
    """The no-retune comparison (``benchmarks/loss_rows.py``): per cell, the default at Uniform's
    tuned rate with the loss normalised by its kept rows and by Uniform's rows, against Uniform, the
    two normalisations against each other on the same seeds, and the pooled effects."""
    if not (root / LOSS_ROWS).exists():
        return f"No result file yet: `python benchmarks/loss_rows.py` writes `{LOSS_ROWS}`."
    r = load_relative(root, LOSS_ROWS)
    d = r.data

    def arm(x: dict) -> str:
        text = f"{_gain(x)}, {x['spend']:.2f} of the rollouts, final {x['final_gap']:+.3f}"
        return text + (f" (at equal cost {gap_cell(x)})" if "final_gap_equal_cost" in x else "")

    body = [
        [x["cell"], f"{x['lr']:g}", arm(x["kept"]), arm(x["uniform"]), _gain(x["uniform_over_kept"])] for x in d["rows"]
    ]
    body.append(
        [
            "pooled",
            "",
            _pooled(d["pooled"]["kept"]),
            _pooled(d["pooled"]["uniform"]),
            _pooled(d["pooled"]["uniform_over_kept"]),
        ]
    )
    lines = [
        f"The default against Uniform at Uniform's tuned rate (read from {', '.join(f'`{m}`' for m in d['rates_from'])}), "
        f"{d['seeds']} paired seeds, {d['steps']} steps, runs at {', '.join(short_commit(c) for c in d['run_commits'])}; "
        f"rollouts to 50/75/90% of the gain (90% {d['interval']} interval over the seeds), share of "
        "Uniform's rollouts, final accuracy minus Uniform's at equal steps (and at equal cost where the file holds it). Last column: the loss over Uniform's rows against the loss "
        "over the kept rows, same seeds (above 1: Uniform's rows reach the gain in fewer rollouts). Pooled: geometric "
        "mean over the cells with its pooled 90% interval.",
        "",
        *table(
            [
                "cell",
                "Uniform's rate",
                "loss over the kept rows",
                "loss over Uniform's rows",
                "Uniform's rows / kept rows",
            ],
            body,
        ),
        "",
        f"Decision rule, fixed before the run: {d['decision']}. Result: the default's normalisation is "
        f"**{d['better']}**.",
    ]
    if "own_rate" in d["pooled"]:
        own = [
            [
                x["cell"],
                f"{x['lr']:g}",
                f"{x['own_rate']['lr']:g} (of {', '.join(f'{t:g}' for t in x['own_rate']['tried'])})",
                arm(x["own_rate"]),
                _gain(x["own_over_uniform_rate"]),
            ]
            for x in d["rows"]
        ]
        own.append(["pooled", "", "", _pooled(d["pooled"]["own_rate"]), _pooled(d["pooled"]["own_over_uniform_rate"])])
        lines += [
            "",
            f"What retuning would buy: the default (loss over the kept rows) at its own best rate, tuned as the map "
            f"tuned Uniform's (the same grid and extensions, tune seeds {d['tune_seeds'][0]}-{d['tune_seeds'][-1]}, "
            "the final level), against Uniform, and against itself at Uniform's rate on the same seeds (above 1: its "
            "own rate reaches the gain in fewer rollouts).",
            "",
            *table(
                ["cell", "Uniform's rate", "the default's own rate", "at its own rate", "own rate / Uniform's rate"],
                own,
            ),
        ]
    return block(lines, [r])


def render_loss_rows_summary(root: Path) -> str:
    """One paragraph for README, docs/trl.md and docs/verl.md: does switching to the default need a
    retuned rate, and which loss normalisation is its default."""
    if not (root / LOSS_ROWS).exists():
        return f"No result file yet: `python benchmarks/loss_rows.py` writes `{LOSS_ROWS}`."
    r = load_relative(root, LOSS_ROWS)
    d = r.data
    kept, uniform, ratio = d["pooled"]["kept"], d["pooled"]["uniform"], d["pooled"]["uniform_over_kept"]
    spends = [x[d["better"]]["spend"] for x in d["rows"]]
    gaining = sum(x[d["better"]]["ci90"][0] > 1.0 for x in d["rows"])
    cells = len(d["rows"])
    verdict = (
        "no retune is needed: at the rate tuned for Uniform the default's 90% interval lies above 1 in every cell"
        if gaining == cells
        else f"at the rate tuned for Uniform the default's interval lies above 1 in {gaining} of {cells} cells only: "
        "retune where it does not"
    )
    text = (
        f"Switching from Uniform (stock GRPO) to the default at the same learning rate, in the simulator "
        f"({cells} cells of the saving map, {d['seeds']} paired seeds, Uniform's tuned rate per cell): {verdict}. "
        f"With the loss over the rows it trains on (`kept`) its speedup in rollouts to 50/75/90% of Uniform's gain "
        f"is {_pooled(kept)} pooled (90% interval), at {min(spends):.2f}-{max(spends):.2f} of Uniform's rollouts; with "
        f"the loss over Uniform's rows (`uniform`) {_pooled(uniform)}; `uniform` against `kept` on the same seeds "
        f"{_pooled(ratio)}. The default normalisation is `{d['better']}`."
    )
    if "own_over_uniform_rate" in d["pooled"]:
        retune = d["pooled"]["own_over_uniform_rate"]
        if retune["low"] > 1.0:
            reading = "a retune gains more"
        elif retune["high"] < 1.0:
            reading = "retuning did not help on these seeds"
        else:
            reading = "its interval covers 1: no gain from retuning that these seeds can show"
        same = sum(x["own_rate"]["lr"] == x["lr"] for x in d["rows"])
        text += (
            f" Retuning the rate for the default (tuned as Uniform's was; the same rate in {same} of {cells} cells) "
            f"changes its speedup by {_pooled(retune)} on the same seeds, to {_pooled(d['pooled']['own_rate'])}: "
            f"{reading}."
        )
    lines = [text]
    return block(lines, [r])

"""The docs' blocks of the calibration benchmark of P(all-equal at n)
(``benchmarks/flatness_calibration.py``, on simulator and tiny-LM traces), of the policy-features
pass's cost on the tiny LM (``benchmarks/probe_cost.py``) and of the saving-signal benchmark's
recurring pool."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.reporting.blocks import block, load_note, load_relative
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.saving_tables import SAVING_SIGNAL

__all__ = [
    "FLATNESS_CALIBRATION",
    "FLATNESS_TINYLM",
    "FLATNESS_TINYLM_FRESH",
    "FLATNESS_TINYLM_HELDOUT",
    "PROBE_COST",
    "render_flatness_calibration",
    "render_flatness_tinylm",
    "render_flatness_tinylm_fresh",
    "render_flatness_tinylm_heldout",
    "render_probe_cost",
    "render_saving_pool",
]

FLATNESS_CALIBRATION = "results/flatness_calibration/flatness_calibration.json"
FLATNESS_TINYLM = "results/flatness_calibration/tinylm.json"
FLATNESS_TINYLM_FRESH = "results/flatness_calibration/tinylm_fresh.json"
FLATNESS_TINYLM_HELDOUT = "results/flatness_calibration/tinylm_heldout.json"
PROBE_COST = "results/probe_cost/probe_cost.json"


POOLED_HEADER = [
    "predictor",
    "Brier",
    "Brier / history's",
    "log-loss",
    "ECE",
    "ECE if calibrated (90% range)",
    "AUROC",
    "AUROC of the mean for success",
]


def _floor(score: dict) -> str:
    f = score.get("ece_floor")
    return "-" if f is None else f"{f['median']:.3f} [{f['low']:.3f}, {f['high']:.3f}]"


def _auroc(score: dict) -> str:
    a = score.get("auroc")  # results made before it was scored: none
    return "-" if a is None else f"{a:.3f}"


def _pooled_rows(pooled: dict, names: list[str], success: dict | None = None) -> list[list[str]]:
    """Brier, its ratio to the history-only Beta's, log-loss, ECE, the ECE's noise floor, the
    AUROC and (``success``: results that scored it) the AUROC of the belief's mean for a rollout's
    success, per predictor."""
    history = pooled["history"]["brier"]
    return [
        [
            m,
            f"{pooled[m]['brier']:.3f}",
            f"{pooled[m]['brier'] / history:.2f}x",
            f"{pooled[m]['log_loss']:.3f}",
            f"{pooled[m]['ece']:.3f}",
            _floor(pooled[m]),
            _auroc(pooled[m]),
            "-" if success is None else f"{success[m]:.3f}",
        ]
        for m in names
    ]


def _after_pilot(data: dict, names: list[str]) -> list[str]:
    """The table of each belief's chance that a group repeats its flat pilot (results made before
    it was scored: none)."""
    a = data.get("after_pilot")
    if a is None or not a["groups"]:
        return []
    rows = [
        [m, f"{a[m]['mean']:.3f}", f"{a[m]['brier']:.3f}", f"{a[m]['ece']:.3f}", f"{a[m]['auroc']:.3f}"] for m in names
    ]
    return [
        f"After a flat pilot of {a['pilot']}: on the {a['groups']} groups whose first {a['pilot']} rewards were equal, "
        f"the chance each belief gave that the rest would repeat them, the chance the bound per group cuts by "
        f"(the rest did in {a['repeated_share']:.0%} of them):",
        "",
        *table(["predictor", "mean chance", "Brier", "ECE", "AUROC"], rows),
        "",
    ]


def _by(value: float, target: float, digits: int = 3) -> str:
    """'met by d' when value <= target, else 'missed by d'."""
    return f"{'met' if value <= target else 'missed'} by {abs(target - value):.{digits}f}"


def _targets(pooled: dict, settings: dict) -> list[str]:
    """The default's two targets, met or missed and by how much, beside its ECE's noise floor."""
    t = settings.get("targets")
    if t is None or "default" not in pooled:
        return []
    d = pooled["default"]
    ratio = d["brier"] / pooled["history"]["brier"]
    f = d.get("ece_floor")
    floor = (
        ""
        if f is None
        else f" (a perfectly calibrated predictor making the same predictions reads {f['median']:.3f} on as many "
        f"groups, 90% of {f['draws']} draws in [{f['low']:.3f}, {f['high']:.3f}])"
    )
    return [
        f"The default against its targets: ECE {d['ece']:.3f}, target at most {t['ece']:g}: {_by(d['ece'], t['ece'])}"
        f"{floor}; Brier {ratio:.2f}x the history's, target at most {t['brier_ratio']:g}x: "
        f"{_by(ratio, t['brier_ratio'], 2)}x.",
        "",
    ]


def render_flatness_calibration(root: Path) -> str:
    r = load_relative(root, FLATNESS_CALIBRATION)
    d, s = r.data, r.settings
    names = list(s["predictors"])
    pooled = _pooled_rows(d["pooled"], names, d.get("success_auroc"))
    cells = [[c["cell"], f"{c['all_equal_share']:.2f}", *(f"{c[m]['ece']:.3f}" for m in names)] for c in d["cells"]]
    groups = d["pooled"][names[0]]["n"]
    lines = [
        f"P(all-equal at n = {s['n']}) before each step, scored on {groups} of Uniform's groups "
        f"({s['seeds']} seeds x {s['steps']} steps on each of {len(d['cells'])} cells; the policy view at "
        f"AUROC {s['policy_view_auroc']:g}). Pooled over the cells:",
        "",
        *table(POOLED_HEADER, pooled),
        "",
        *_targets(d["pooled"], s),
        *_after_pilot(d, names),
        "ECE per cell (share of groups that were all-equal in the second column):",
        "",
        *table(["cell", "all-equal", *names], cells),
        "",
        "![Reliability diagram](../results/flatness_calibration/reliability.png)",
    ]
    return block(lines, [r])


def _choices(trace: dict) -> str:
    """The default's (kappa, t) at every fourth step, and the spread of its candidate's mean of p."""
    diag = trace["default"]
    if "choices" not in diag:
        return ""
    picks = ", ".join(f"{k:g}/{t:g}" for k, t in diag["choices"][::4])
    q = "/".join(f"{x:.2f}" for x in diag["mean_quantiles"])
    return f"- {trace['trace']}: kappa/t at steps 1, 5, 9, ...: {picks}; mean of p, 10/25/50/75/90% quantiles: {q}"


def render_flatness_tinylm(root: Path) -> str:
    return _render_traces(root, FLATNESS_TINYLM)


def render_flatness_tinylm_fresh(root: Path) -> str:
    return _render_traces(root, FLATNESS_TINYLM_FRESH)


def render_flatness_tinylm_heldout(root: Path) -> str:
    return _render_traces(root, FLATNESS_TINYLM_HELDOUT)


def _render_traces(root: Path, path: str) -> str:
    r = load_relative(root, path)
    d, s = r.data, r.settings
    png = Path(path).with_name(f"reliability_{Path(path).stem}.png").as_posix()
    names = list(s["predictors"])
    groups = d["pooled"][names[0]]["n"]
    per_trace = [
        [t["trace"], str(t["groups"]), f"{t['all_equal_share']:.2f}", *(f"{t[m]['ece']:.3f}" for m in names)]
        for t in d["traces"]
    ]
    lines = [
        f"P(all-equal at n = {s['group']}) before each step, scored on {groups} of Uniform's groups of the tiny LM "
        f"on the ladder ({len(d['traces'])} trace(s) of {s['steps']} steps, a recurring pool of {s['pool']} "
        f"prompts, {s['prompts_per_step']} a step, lr {s['lr']:g}; warm start {s['weights']}). "
        "The policy view is the trainer model's last-layer hidden state at each prompt's last token; "
        "the text GP reads all-MiniLM-L6-v2 embeddings. Pooled:",
        "",
        *table(POOLED_HEADER, _pooled_rows(d["pooled"], names, d.get("success_auroc"))),
        "",
        *_targets(d["pooled"], s),
        *_after_pilot(d, names),
        "ECE per trace:",
        "",
        *table(["trace", "groups", "all-equal", *names], per_trace),
        "",
        "By half of each run's steps (pooled over the traces; the first half includes every prompt's first visits):",
        "",
        *table(
            ["predictor", *(f"{h} half: {k}" for h in ("first", "second") for k in ("Brier / history's", "ECE"))],
            [
                [
                    m,
                    *(
                        x
                        for h in ("first", "second")
                        for x in (
                            f"{d['halves'][h][m]['brier'] / d['halves'][h]['history']['brier']:.2f}x",
                            f"{d['halves'][h][m]['ece']:.3f}",
                        )
                    ),
                ]
                for m in names
            ],
        ),
        "",
        f"![Reliability diagram, tiny LM ({Path(path).stem})](../{png})",
    ]
    choices = [c for c in (_choices(t) for t in d["traces"]) if c]
    if choices:
        lines += [
            "",
            "The default's choices per trace (spread kappa / history weight t before each step):",
            "",
            *choices,
        ]
    return block(lines, [r])


def render_probe_cost(root: Path) -> str:
    r = load_relative(root, PROBE_COST)
    d, s = r.data, r.settings
    t, m = d["training"], d["training"]["median"]
    lines = [
        f"The demo's configuration ({t['prompts_per_step']} prompts x {t['rollouts_per_prompt']} rollouts a step, "
        f"completions of at most {t['max_completion_length']} tokens, the default allocator, `policy_features=True`), "
        f"{s['steps']} steps, the first left out (warm-up); medians over the other {s['steps'] - 1}:",
        "",
        *table(
            ["quantity", "median"],
            [
                ["optimizer step, wall seconds", f"{m['step_seconds']:.2f}"],
                ["policy-features pass, wall seconds (`adaptive/policy_seconds`)", f"{m['policy_seconds']:.3f}"],
                ["pass / optimizer step", f"{100 * m['policy_share_of_step']:.1f}%"],
                [
                    "pass / (pass + allocation + generation) (`adaptive/policy_share`)",
                    f"{100 * m['policy_share_logged']:.1f}%",
                ],
            ],
        ),
        "",
        f"Over those steps the pass took {100 * t['total_share_of_steps']:.1f}% of the summed step time{load_note(d)}.",
    ]
    if d.get("lengths"):
        rows = [
            [
                str(x["length"]),
                f"{1e3 * x['prefill_seconds']:.0f}",
                f"{x['generate_seconds']:.2f}",
                f"{100 * x['share_of_generation']:.2f}%",
            ]
            for x in d["lengths"]
        ]
        lines += [
            "",
            "Longer completions, the same tiny architecture (fresh weights): one prefill of 16 prompts against "
            "generating 16 x 8 completions of exactly L tokens (the pass's share of generation alone, an upper "
            f"bound on its share of a step that also trains on those tokens; median of {s['repeats']}):",
            "",
            *table(["L (tokens)", "prefill ms", "generation s", "prefill / generation"], rows),
        ]
    return block(lines, [r])


def render_saving_pool(root: Path) -> str:
    r = load_relative(root, SAVING_SIGNAL)
    d = r.data
    pool = d.get("pool") or {}
    rows = [[str(x["n"]), x["method"], f"{x['spent']:.2f}", f"{x['kept']:.2f}"] for x in d.get("pool_rows", [])]
    if not rows:
        return block(["The committed saving-signal result holds no recurring-pool run (`--pool`)."], [r])
    lines = [
        f"A recurring pool of {pool['size']} prompts, {pool['extreme']:.0%} of them at p within 0.02 of 0 or 1 "
        f"(the rest uniform on [0.1, 0.9], p fixed), {pool['batch']} prompts a step for {pool['steps']} steps, "
        f"no policy view; mean of {d['seeds']} seeds:",
        "",
        *table(["rollouts per prompt", "method", "share of the budget spent", "share of Uniform's signal kept"], rows),
    ]
    return block(lines, [r])

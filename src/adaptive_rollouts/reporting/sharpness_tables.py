"""The docs' block comparing the calibration benchmark's scores on the held-out tiny-LM traces
before and after a change of the belief (``benchmarks/flatness_calibration.py --traces``, run at
two commits on the same traces)."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.map_config import DEFAULT
from adaptive_rollouts.experiments.results import provenance
from adaptive_rollouts.reporting.blocks import load_relative
from adaptive_rollouts.reporting.bound_tables import bound_reading, map_runs, paired_check_block
from adaptive_rollouts.reporting.flatness_tables import FLATNESS_TINYLM_HELDOUT
from adaptive_rollouts.reporting.markdown import table
from adaptive_rollouts.reporting.versus_tables import _over_uniform, _paired, head_to_head

__all__ = [
    "FLATNESS_HELDOUT_BEFORE",
    "SHARPER_BEFORE_MAP",
    "SHARPER_MAPS",
    "PROBE_VARIANTS",
    "PRIOR_BEFORE_MAP",
    "PRIOR_MAPS",
    "VIEW_INFORMATION",
    "before_after_block",
    "render_flatness_sharper",
    "render_prior_before",
    "render_prior_map",
    "render_probe_variants",
    "render_sharper_before",
    "render_sharper_map",
    "render_shipped_versus_pilot",
    "render_versus_pilot_again",
    "VERSUS_PILOT_MAPS",
    "across_maps_block",
    "render_view_information",
]

FLATNESS_HELDOUT_BEFORE = "results/flatness_calibration/before/tinylm_heldout.json"
SHARPER_MAPS = ("results/map/sharper.json",)  # the default with the sharper probe, fresh seeds fixed before the run
SHARPER_BEFORE_MAP = "results/map/sharper-before.json"
PRIOR_MAPS = ("results/map/prior10.json",)  # the default with the weaker prior, fresh seeds fixed before the run
PRIOR_BEFORE_MAP = "results/map/prior10-before.json"  # the default before the weaker prior, the same seeds  # the default before the change, the same seeds
VERSUS_PILOT_MAPS = ("results/map/versus-pilot.json",)  # the shipped default and Pilot-Commit, fresh seeds
PROBE_VARIANTS = ("results/probe_variants/tinylm_dev.json", "results/probe_variants/tinylm_heldout.json")
VIEW_INFORMATION = "results/view_information/view_information.json"
SHOWN = ("probe", "combined", "default")  # the predictors the change is about (the others are unchanged)


def render_flatness_sharper(root: Path) -> str:
    before, now = load_relative(root, FLATNESS_HELDOUT_BEFORE), load_relative(root, FLATNESS_TINYLM_HELDOUT)
    if before.settings.get("traces") != now.settings.get("traces"):
        raise ValueError(f"{before.path} and {now.path} scored different traces; the comparison needs the same")
    b, n = before.data, now.data
    rows = []
    for m in SHOWN:
        hist_b, hist_n = b["pooled"]["history"]["brier"], n["pooled"]["history"]["brier"]
        rows.append(
            [
                m,
                *(f"{x['pooled'][m]['auroc']:.3f}" for x in (b, n)),
                *(f"{x['after_pilot'][m]['auroc']:.3f}" for x in (b, n)),
                *(f"{x['pooled'][m]['ece']:.3f}" for x in (b, n)),
                f"{b['pooled'][m]['brier'] / hist_b:.2f}x",
                f"{n['pooled'][m]['brier'] / hist_n:.2f}x",
            ]
        )
    header = ["predictor"] + [
        f"{what}, {when}"
        for what in ("AUROC", "AUROC after a flat pilot", "ECE")
        for when in (f"before ({before.header['commit'][:7]})", "now")
    ]
    header += [f"Brier / history's, before ({before.header['commit'][:7]})", "Brier / history's, now"]
    groups = n["pooled"][SHOWN[0]]["n"]
    lines = [
        f"The same {len(n['traces'])} held-out traces ({groups} groups), scored by the belief before the change and "
        "now (AUROC: how well P(all-equal) tells the all-equal groups from the others, pooled over steps and "
        "traces; after a flat pilot: the same for the chance that the rest of a group repeats its pilot of 2):",
        "",
        *table(header, rows),
    ]
    return "\n".join([*lines, "", provenance([before]), provenance([now])])  # two commits: one line each


def render_sharper_map(root: Path) -> str:
    """The default with the sharper probe against Pilot-Commit on the `SHARPER_MAPS` (fresh seeds):
    per cell each over Uniform, the default over Pilot-Commit paired, and the pooled effects."""
    intro = "The default here has the probe on the whole view and the belief's mean at the regression's estimate."
    return paired_check_block(root, SHARPER_MAPS, (("pilot-commit", "Pilot-Commit"),), (DEFAULT, "default"), intro)


def render_sharper_before(root: Path) -> str:
    """The default before and after the sharper probe on the same seeds (`SHARPER_MAPS`,
    `SHARPER_BEFORE_MAP`)."""
    return before_after_block(root, SHARPER_MAPS[0], SHARPER_BEFORE_MAP)


def render_prior_map(root: Path) -> str:
    """The default with the weaker prior against Pilot-Commit on the `PRIOR_MAPS` (fresh seeds)."""
    intro = "The default here has a weaker prior on the probe's weights (prior variance 10 per weight, the shipped 1)."
    return paired_check_block(root, PRIOR_MAPS, (("pilot-commit", "Pilot-Commit"),), (DEFAULT, "default"), intro)


def render_prior_before(root: Path) -> str:
    """The default before and after the weaker prior on the same seeds (`PRIOR_MAPS`, `PRIOR_BEFORE_MAP`)."""
    return before_after_block(root, PRIOR_MAPS[0], PRIOR_BEFORE_MAP)


def before_after_block(root: Path, now_rel: str, before_rel: str) -> str:
    """The default at two commits on the same seeds and cells (two map files, each at its commit)."""
    intro = (
        "The default before the change (commit {base_commit}) ran again on the same seeds and cells, "
        "beside Uniform; its runs paired with the default's above, seed by seed (the same statistic, "
        "before in Uniform's place):"
    )
    return across_maps_block(root, (before_rel, DEFAULT, "before"), (now_rel, DEFAULT, "now"), intro)


def render_shipped_versus_pilot(root: Path) -> str:
    """The default as shipped (`PRIOR_BEFORE_MAP`) against Pilot-Commit run on the same seeds in the
    other map (`PRIOR_MAPS`): Pilot-Commit does not read the belief, so its runs serve both."""
    intro = (
        "The default as shipped (the unit prior, its runs in `prior10-before`) against Pilot-Commit on the same "
        "fresh seeds (its runs in `prior10`: it reads no belief), paired seed by seed:"
    )
    pilot = (PRIOR_MAPS[0], "pilot-commit", "Pilot-Commit")
    return across_maps_block(root, pilot, (PRIOR_BEFORE_MAP, DEFAULT, "default"), intro)


def render_versus_pilot_again(root: Path) -> str:
    """The default as shipped against Pilot-Commit in one map on fresh seeds (`VERSUS_PILOT_MAPS`),
    with the null control: where Pilot-Commit is ahead, by how much."""
    intro = "The default as shipped and Pilot-Commit in one map, on seeds not used before."
    bases = (("pilot-commit", "Pilot-Commit"),)
    return paired_check_block(root, VERSUS_PILOT_MAPS, bases, (DEFAULT, "default"), intro)


def across_maps_block(root: Path, base: tuple[str, str, str], arm: tuple[str, str, str], intro: str) -> str:
    """One arm of one map file against a base arm of another, on the same seeds and cells: per cell
    each over Uniform (its own map's) and the arm over the base, paired seed by seed (`head_to_head`),
    with `bound_reading`. ``base`` and ``arm``: (map file, arm name, label); ``{base_commit}`` in
    ``intro`` reads the base file's commit."""
    (base_rel, base_arm, base_label), (arm_rel, arm_name, label) = base, arm
    first, second = load_relative(root, base_rel), load_relative(root, arm_rel)
    runs_first, runs_second = map_runs(root, first), map_runs(root, second)
    first_rows = {row["key"]: row["methods"] for row in first.data["rows"]}
    body, readings = [], []
    for row in second.data["rows"]:
        key = row["key"]
        versus = head_to_head(runs_first[(key, base_arm)], runs_second[(key, arm_name)])
        readings.append(bound_reading(versus, base_label, label))
        old = first_rows.get(key, {}).get(base_arm)
        body.append(
            (key, _over_uniform(old), _over_uniform(row["methods"].get(arm_name)), _paired(versus), readings[-1])
        )
    counts = ", ".join(f"{r} {readings.count(r)}" for r in dict.fromkeys(readings))
    header = ["cell", f"{base_label} over Uniform", f"{label} over Uniform", f"{label} over {base_label}", "reading"]
    lines = [
        intro.format(base_commit=first.commit[:7]),
        "",
        *table(header, body),
        "",
        f"Readings over the {len(body)} cells: {counts}.",
        "",
        provenance([second]),
        provenance([first]),
    ]
    return "\n".join(lines)


def render_probe_variants(root: Path) -> str:
    """The probe's belief before the change and the changes one at a time, on the development and
    the held-out traces (``benchmarks/probe_variants.py``): each variant's AUROC, within a step,
    ECE, Brier over the history's, and its AUROC minus the belief before's (paired bootstrap)."""
    results = [load_relative(root, rel) for rel in PROBE_VARIANTS]
    header = ["traces", "source", "variant", "AUROC", "AUROC within a step", "ECE", "Brier / history's"]
    header.append("AUROC minus before's (90% interval)")
    header.append("minus now's (90%)")
    rows = []
    for r in results:
        scores, sources = r.data["scores"], r.settings["sources"]
        name = f"{Path(r.path).stem} ({len(r.settings['traces'])} traces, {r.data['groups']} groups)"
        for source in sources:
            for variant in r.settings["variants"]:
                x = scores[f"{source}/{variant}"]
                d = x["auroc_minus_before"]
                delta = "-" if variant == "before" else f"{d['mean']:+.3f} ({d['low']:+.3f} to {d['high']:+.3f})"
                u = x.get("auroc_minus_now")
                unit = (
                    "-" if u is None or variant == "now" else f"{u['mean']:+.3f} ({u['low']:+.3f} to {u['high']:+.3f})"
                )
                rows.append(
                    [
                        name,
                        source,
                        variant,
                        f"{x['auroc']:.3f}",
                        f"{x['within_step_auroc']:.3f}",
                        f"{x['ece']:.3f}",
                        f"{x['brier_ratio']:.2f}x",
                        delta,
                        unit,
                    ]
                )
    lines = [
        "P(all-equal at n) of the probe alone and of the default (probe and history), replayed through "
        "every recorded step. Variants: before = 32 columns (random projection) and the weights' variance "
        "in the belief; 32 columns = the projection kept, the mean the regression's point estimate; whole "
        "view, weight variance = every column, the variance kept; now = every column, the point estimate "
        "(the weights' prior variance 1); prior 3 to 100 = now with that prior variance on the weights. "
        "The intervals: a paired bootstrap over whole traces.",
        "",
        *table(header, rows),
        "",
        *(provenance([r]) for r in results),
    ]
    return "\n".join(lines)


def render_view_information(root: Path) -> str:
    """What the policy's view can tell against what the online probe learns of it
    (``benchmarks/view_information.py``): each predictor's AUROC, within a step, ECE, and its AUROC
    minus the online probe's (paired bootstrap over traces)."""
    r = load_relative(root, VIEW_INFORMATION)
    d = r.data
    rows = []
    for label, x in d["scores"].items():
        m = x["minus_online"]
        delta = "-" if label == "online probe" else f"{m['mean']:+.3f} ({m['low']:+.3f} to {m['high']:+.3f})"
        rows.append([label, f"{x['auroc']:.3f}", f"{x['within_step_auroc']:.3f}", f"{x['ece']:.3f}", delta])
    header = ["predictor (the view alone)", "AUROC", "AUROC within a step", "ECE", "minus the online probe's (90%)"]
    ridge = d["ridge"]
    lines = [
        f"P(all-equal at n) from the policy's view alone ({d['view_width']} columns), on the "
        f"{len(r.settings['heldout'])} held-out traces ({d['groups']} groups, {d['all_equal_share']:.2f} of them "
        f"all-equal); the regressions' ridge chosen on the {len(r.settings['dev'])} development traces "
        f"(refit {ridge['refit']:g}, other runs {ridge['other runs']:g}). The interval: a paired bootstrap over "
        "whole traces.",
        "",
        *table(header, rows),
        "",
        provenance([r]),
    ]
    return "\n".join(lines)

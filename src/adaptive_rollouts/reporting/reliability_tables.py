"""Renderers of the reliability results: the scale benchmark, the fuzzing soak and the long-run
soak (benchmarks/scale.py, fuzz.py, soak.py), each from its committed result file."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.results import Result, provenance
from adaptive_rollouts.reporting.blocks import load_note, load_relative
from adaptive_rollouts.reporting.markdown import table

__all__ = ["SCALE", "FUZZ", "SOAK", "RELIABILITY_RENDERERS"]

SCALE = "results/scale/scale.json"
FUZZ = "results/fuzz/fuzz.json"
SOAK = "results/soak/soak.json"
ALLOCATE_TARGET_S, RUN_TARGET_S = 1.0, 10.0


def render_scale_table(root: Path) -> str:
    r = load_relative(root, SCALE)
    body = []
    for x in r.data["rows"]:
        c = x["case"]
        bounds = (str(c["lower"]), str(c["upper"])) if c["kind"] == "allocate" else ("-", "-")
        body.append(
            [x["label"], f"{c['q']:,}", f"{x['budget']:,}", *bounds, f"{x['cpu_s']:.3f}", f"{x['wall_s']:.3f}"]
            + [f"{x['peak_mib']:.0f}"]
        )
    lines = table(["case", "Q", "budget", "lower", "upper", "CPU s", "wall s", "peak MiB"], body)
    big = max(x["case"]["q"] for x in r.data["rows"] if x["case"]["kind"] == "allocate")
    alloc = [x["cpu_s"] for x in r.data["rows"] if x["case"]["kind"] == "allocate" and x["case"]["q"] == big]
    runs = {x["case"]["name"]: x for x in r.data["rows"] if x["case"]["kind"] == "run"}
    met = max(alloc) <= ALLOCATE_TARGET_S
    lines += [
        "",
        f"Targets: every objective and bound solved at Q = {big:,} in <= {ALLOCATE_TARGET_S:g} s of CPU: "
        f"{'met' if met else 'not met'} ({min(alloc):.2f}-{max(alloc):.2f} s)"
        + "".join(
            f"; {x['case']['q']:,} prompts through `run` ({name}) in <= {RUN_TARGET_S:g} s of CPU: "
            f"{'met' if x['cpu_s'] <= RUN_TARGET_S else 'not met'} ({x['cpu_s']:.1f} s a step after the first, "
            f"{x['sample_cpu_s']:.1f} s of it the benchmark's own `sample`)"
            for name, x in runs.items()
        )
        + f"{load_note(r.data)}.",
    ]
    return "\n".join([*lines, "", provenance([r])])


def fuzz_summary(r: Result) -> str:
    d = r.data
    bad = [t["target"] for t in d["targets"] if t["violation"]]
    per_alloc = [t["cases"] for t in d["targets"] if t["target"].startswith("allocator:")]
    other = ", ".join(
        f"`{t['target']}` {t['cases']:,}" for t in d["targets"] if not t["target"].startswith("allocator:")
    )
    text = (
        f"{d['total']:,} cases in {d['seconds']:.0f} s{load_note(d)}, "
        f"**{len(bad)} targets with violations**{' (' + ', '.join(bad) + ')' if bad else ''}: {other}"
    )
    if per_alloc:
        spread = f"{min(per_alloc):,}" + (f"-{max(per_alloc):,}" if max(per_alloc) > min(per_alloc) else "")
        text += f", and {spread} for each of {len(per_alloc)} allocator configurations"
    return text + "."


def render_fuzz_summary(root: Path) -> str:
    r = load_relative(root, FUZZ)
    return f"`{r.command}`: {fuzz_summary(r)}\n\n{provenance([r])}"


def render_soak(root: Path) -> str:
    r = load_relative(root, SOAK)
    d = r.data
    body = [
        [f"{w['end_step']:,}", f"{w['rss_mib']:.1f}", f"{w['ms_per_step']:.2f}", f"{w['cpu_ms_per_step']:.2f}"]
        for w in d["windows"]
    ]
    lines = [
        f"{d['allocator']} + {d['predictor']}, {d['steps']:,} steps on {d['pool']:,} prompts, {d['batch']} prompts x "
        f"{d['budget']} rollouts a step, a checkpoint saved and reloaded every "
        f"{r.settings.get('checkpoint_every', '-'):,} steps: resident memory {d['rss_start_mib']:.1f} MiB after "
        f"set-up, {d['rss_end_mib']:.1f} MiB at the end ({d['rss_growth_after_first_pass_mib']:+.1f} MiB after the "
        f"first full pass over the pool); CPU ms per step {d['cpu_ms_per_step_first_full_pool_window']:.2f} in the "
        f"first full-pool window and {d['cpu_ms_per_step_last_window']:.2f} in the last.",
        "",
    ]
    lines += table(["window ending at step", "RSS MiB", "wall ms/step", "CPU ms/step"], body)
    return "\n".join([*lines, "", provenance([r])])


RELIABILITY_RENDERERS = {
    "scale-table": render_scale_table,
    "fuzz-summary": render_fuzz_summary,
    "soak": render_soak,
}

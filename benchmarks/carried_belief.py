"""A belief carried from earlier runs: the default's belief trained on recorded tiny-LM runs, saved,
and loaded at the start of new ones (``SavingProgressive(belief_from=...)``).

    python benchmarks/carried_belief.py

1. The default's belief (`FlatnessPredictor` as `SavingProgressive` builds it: the policy's view and
   the prompt history) replays the development traces (``results/flatness_calibration/tinylm_dev``:
   Uniform runs of the same warm-started model on the ladder, other seeds) step by step, as in a run;
   its learned state without its sources (no prompt history) is saved after the first trace
   (``belief_dev1.npz``: one earlier run) and after all sixteen (``belief_dev16.npz``).
2. Each held-out trace (``tinylm_heldout``) is replayed by the belief fresh and by the belief
   started from each saved state: P(all-equal at n) before each step, scored by AUROC (pooled and
   within a step) and ECE, with each carried belief's pooled AUROC minus the fresh one's and a 90%
   interval from a paired bootstrap over whole traces.

The saved states are what the ladder's ``default[belief_from=...]`` arms load (docs/demo.md).
Writes ``results/carried_belief/carried_belief.json`` and the two state files beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from probe_variants import RESAMPLES, paired_bootstrap, within_step_auroc
from view_information import DEV, HELDOUT, load

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.predictors.calibration import auroc, calibration_scores
from adaptive_rollouts.predictors.flatness import FlatnessPredictor
from adaptive_rollouts.progress import progress_bar
from adaptive_rollouts.state import save_state

OUT = Path(__file__).resolve().parents[1] / "results" / "carried_belief"
STATES = {"one earlier run": ("belief_dev1.npz", 1), "sixteen earlier runs": ("belief_dev16.npz", 16)}


def replay(belief: FlatnessPredictor, run: dict, key: str = "") -> np.ndarray:
    """The run's steps through ``belief`` (its prompts keyed by ``key`` so that runs' prompts stay
    apart): each step's P(all-equal at n) before its groups."""
    out = []
    for ids, rewards, features in run["trace"]:
        prompts = [(key, i) for i in ids.tolist()]
        belief.observe_policy(prompts, features)
        out.append(belief.all_equal(prompts, np.array([r.size for r in rewards]))[0])
        belief.update(prompts, rewards)
    return np.concatenate(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    dev, held = load(DEV), load(HELDOUT)
    bar = progress_bar(len(dev) + len(held) * (1 + len(STATES)), not args.no_progress)
    trained, saved = FlatnessPredictor(), {}
    for i, run in enumerate(dev):
        replay(trained, run, run["name"])
        bar.update(1)
        for label, (name, count) in STATES.items():
            if i + 1 == count:
                saved[label] = trained.state_dict(sources=False)
                save_state(out / name, saved[label])
    for run in held:
        run["fresh"] = replay(FlatnessPredictor(), run)
        bar.update(1)
        for label in STATES:
            belief = FlatnessPredictor()
            belief.load_state_dict(saved[label])
            run[label] = replay(belief, run)
            bar.update(1)
    bar.close()
    y = np.concatenate([r["outcome"] for r in held])
    group = np.concatenate([r["step"] + 1000 * i for i, r in enumerate(held)])
    scores = {}
    for key in ("fresh", *STATES):
        p = np.concatenate([r[key] for r in held])
        scores[key] = {
            "auroc": auroc(p, y),
            "within_step_auroc": within_step_auroc(p, y, group),
            "ece": calibration_scores(p, y)["ece"],
            "minus_fresh": paired_bootstrap(held, key, "fresh") if key != "fresh" else None,
        }
    data = {"scores": scores, "groups": int(y.size), "all_equal_share": float(y.mean())}
    settings = {
        "heldout": [r["name"] for r in held],
        "dev": [r["name"] for r in dev],
        "states": {label: {"file": name, "runs": count} for label, (name, count) in STATES.items()},
        "resamples": RESAMPLES,
    }
    path = write_result(out / "carried_belief.json", data, settings=settings)
    print(f"wrote {path}")
    for key, s in scores.items():
        d = s["minus_fresh"]
        delta = "" if d is None else f" minus fresh {d['mean']:+.3f} ({d['low']:+.3f} to {d['high']:+.3f})"
        print(f"{key:22s} AUROC {s['auroc']:.3f} within a step {s['within_step_auroc']:.3f} ECE {s['ece']:.3f}{delta}")


if __name__ == "__main__":
    main()

"""Record calibration traces of the tiny LM on the ladder task, for benchmarks/flatness_calibration.py.

    python benchmarks/tinylm_traces.py                 # seed 0 (resumes: a finished seed is kept)
    python benchmarks/tinylm_traces.py --seeds 0,1

Per seed, the demo's trainer (`AdaptiveGRPOTrainer`, TRL's GRPO, AdamW at Uniform's tuned rate, one
torch thread) trains the ladder's warm start with Uniform allocation (every group complete) on a
recurring pool of ``--pool`` ladder prompts, ``--prompts-per-step`` a step (each prompt comes back
every pool / prompts-per-step steps), with ``policy_features=True``: before each step the trainer's
model gives each prompt's last-layer hidden state at its last token, as the default would read it.
`demo.traces.TraceRecorder` records each step's groups and those features; each pool prompt's
all-MiniLM-L6-v2 text embedding is added when the encoder is installed. Writes
``results/flatness_calibration/tinylm/seed<k>.npz`` + ``.json`` (`demo.traces.save_trace`), with
the per-step wall time of the policy pass and of the step.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "results" / "flatness_calibration" / "tinylm"


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0", help="comma list of seeds")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--pool", type=int, default=64, help="recurring pool of ladder prompts")
    ap.add_argument("--prompts-per-step", type=int, default=16)
    ap.add_argument("--group", type=int, default=8, help="Uniform's rollouts per prompt")
    ap.add_argument("--lr", type=float, default=1e-4, help="Uniform's tuned rate (demo.allocation.LEARNING_RATES)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.pool % args.prompts_per_step:
        ap.error("--pool must be a multiple of --prompts-per-step (every prompt recurs alike)")
    args.seed_list = [int(x) for x in args.seeds.split(",") if x.strip()]
    return args


def text_embeddings(prompts: list[str]):
    """The prompts' all-MiniLM-L6-v2 vectors, or None (said once) when the encoder is not installed."""
    from adaptive_rollouts.embeddings import default_encoder

    try:
        return default_encoder().encode(prompts)
    except (ImportError, OSError) as err:
        print(f"no text embeddings ({err}); the trace records none", flush=True)
        return None


def record(args: argparse.Namespace, seed: int, settings: dict) -> None:
    from adaptive_rollouts.demo.jobs import problem_sets
    from adaptive_rollouts.demo.run import DemoConfig, run_one
    from adaptive_rollouts.demo.traces import TraceRecorder, save_trace
    from adaptive_rollouts.integrations.trl.layout import KeyedRow, key_of_row

    cfg = DemoConfig(
        methods=("uniform",),
        seeds=(seed,),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.group,
        pool_size=args.pool,
        held_out=16,
        eval_every=args.steps + 1,
        eval_sampled=False,
        task="ladder",
        policy_features=True,
    )
    pool, held_out = problem_sets(cfg)
    recorder = TraceRecorder({key_of_row(KeyedRow({}, i)): i for i in range(len(pool))})
    with tempfile.TemporaryDirectory() as tmp:
        res = run_one("uniform", seed, cfg, None, pool, held_out, Path(tmp), learning_rate=args.lr, allocator=recorder)
    prompts = [p.prompt for p in pool]
    trace = recorder.trace(prompts, text_embeddings(prompts))
    timing = {"step_seconds": res.step_seconds, "policy_seconds": res.policy_seconds}
    path = save_trace(Path(args.out) / f"seed{seed}", trace, settings={**settings, "seed": seed, **timing})
    print(
        f"seed {seed}: {trace.step.size} groups, all-equal share "
        f"{float((trace.rewards.max(1) == trace.rewards.min(1)).mean()):.2f}; wrote {path}",
        flush=True,
    )


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from adaptive_rollouts.demo.jobs import one_thread
    from adaptive_rollouts.demo.protocol import weights_digest
    from adaptive_rollouts.experiments.results import load_result

    keys = ("steps", "pool", "prompts_per_step", "group", "lr")
    settings = {k: getattr(args, k) for k in keys} | {"task": "ladder", "allocator": "uniform"}
    settings["weights"] = weights_digest(task="ladder")
    with one_thread():
        for seed in args.seed_list:
            done = Path(args.out) / f"seed{seed}.json"
            if done.exists() and {k: load_result(done).settings.get(k) for k in settings} == settings:
                print(f"seed {seed}: kept ({done})", flush=True)
                continue
            record(args, seed, settings)


if __name__ == "__main__":
    main()

"""The ladder task: its shape at the warm start, what the known-p skip rule saves there, a short
learning run Uniform vs the known-p skip rule, and how the frontier moves under RL.

    python benchmarks/demo_ladder.py                      # everything (resumes from the result file)
    python benchmarks/demo_ladder.py --seeds 0 --steps 0  # the warm start's shape only

1. Shape: per pool prompt of the ladder (`adaptive_rollouts.demo.tasks.TASKS`), ``--samples``
   completions of the shipped ladder warm start at temperature 1 (the demo's): the histogram of
   per-prompt success, the shares below 0.05 and above 0.95, the mean by list length, and the known-p
   skip rule's share of Uniform's rollouts generated and of its expected signal kept
   (`adaptive_rollouts.demo.ladder`: decided on the first half of the samples, scored on the other).
2. Learning: for each seed, Uniform and ``oracle-skip`` (the demo's arms: the skip rule on p from 16
   fresh samples of the current policy per prompt and step, not charged to the budget) train with the
   demo's trainer at one rate (``--lr``, not tuned on the ladder), single pass over the first
   ``--steps`` x ``--prompts-per-step`` pool prompts; held-out greedy accuracy every ``--eval-every``
   steps; the speedup in rollouts to a common target read as the regime map reads it
   (`experiments.speedup.speedup`, target at half the run), per seed and over the seed means.
3. The frontier moves: part 1's measurement on Uniform's final weights of the first seed.

Writes ``results/demo_ladder/ladder.json`` after each part and each run (a rerun with the same
settings reuses what is there), rendered into docs/demo.md by ``make docs``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "results" / "demo_ladder" / "ladder.json"
ARMS = ("uniform", "oracle-skip")


def measure(model, tokenizer, pool, samples: int, group: int, seed: int) -> dict:
    from adaptive_rollouts.demo.evaluate import sampled_scores
    from adaptive_rollouts.demo.ladder import by_length, skip_rule_savings, success_histogram
    from adaptive_rollouts.demo.tasks import length_of

    start = time.process_time()
    scores = sampled_scores(model, tokenizer, pool, samples, seed=seed)
    half = samples // 2
    p = scores.mean(axis=1)
    decide, score = scores[:, :half].sum(axis=1).astype(int), scores[:, half:].sum(axis=1).astype(int)
    return {
        "histogram": success_histogram(p),
        "by_length": by_length(p, np.array([length_of(x.prompt) for x in pool])),
        "skip_rule": skip_rule_savings(decide, score, half, group),
        "mean": float(p.mean()),
        "successes": scores.sum(axis=1).astype(int).tolist(),
        "cpu_seconds": round(time.process_time() - start, 1),
    }


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", type=int, default=512, help="pool prompts measured (the demo's pool)")
    ap.add_argument("--samples", type=int, default=32, help="completions per prompt (even; half decide, half score)")
    ap.add_argument("--group", type=int, default=8, help="Uniform's group size n (rollouts per prompt)")
    ap.add_argument("--seeds", default="0,1", help="comma list of learning-run seeds")
    ap.add_argument("--steps", type=int, default=24, help="steps of each learning run (0: none)")
    ap.add_argument("--prompts-per-step", type=int, default=8)
    ap.add_argument("--eval-every", type=int, default=3)
    ap.add_argument("--held-out", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.samples < 2 * args.group or args.samples % 2:
        ap.error(f"--samples must be even and >= 2 x --group = {2 * args.group}, got {args.samples}")
    if args.steps * args.prompts_per_step > args.pool:
        ap.error(f"--steps x --prompts-per-step must be <= --pool = {args.pool} (a single pass)")
    args.seed_list = [int(x) for x in args.seeds.split(",") if x.strip()]
    return args


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    from adaptive_rollouts.demo.jobs import one_thread
    from adaptive_rollouts.demo.model import assets_of, load_warm_start
    from adaptive_rollouts.demo.protocol import weights_digest
    from adaptive_rollouts.demo.tasks import make_problems
    from adaptive_rollouts.demo.tokenizer import build_tokenizer
    from adaptive_rollouts.experiments.results import load_result, write_result

    keys = ("pool", "samples", "group", "seeds", "steps", "prompts_per_step", "eval_every", "held_out", "lr")
    settings = {k: getattr(args, k) for k in keys} | {"task": "ladder", "temperature": 1.0}
    settings["weights"] = weights_digest(task="ladder")
    data: dict = {"warm_start": None, "runs": [], "comparison": None, "after_rl": None}
    if Path(args.out).exists() and load_result(args.out).settings == settings:
        data |= load_result(args.out).data  # resume: reuse every finished part
        data.pop("load_average", None)

    def save() -> None:
        write_result(args.out, {**data, "load_average": os.getloadavg()[0]}, settings=settings)

    tokenizer = build_tokenizer()
    pool = make_problems(args.pool, "pool", task="ladder")
    with one_thread():
        if data["warm_start"] is None:
            model = load_warm_start(tokenizer, assets_of("ladder"))
            data["warm_start"] = measure(model, tokenizer, pool, args.samples, args.group, seed=0)
            save()
        print("warm start:", {k: data["warm_start"][k] for k in ("histogram", "skip_rule", "mean")}, flush=True)
        if args.steps < 1:
            return
        held_out = make_problems(args.held_out, "held_out", task="ladder")
        with tempfile.TemporaryDirectory() as tmp:
            for seed in args.seed_list:
                for arm in ARMS:
                    if any(r["arm"] == arm and r["seed"] == seed for r in data["runs"]):
                        continue
                    data["runs"].append(learning_run(args, arm, seed, pool, held_out, Path(tmp)))
                    save()
                    r = data["runs"][-1]
                    print(
                        f"{arm} seed {seed}: held-out {r['held_out'][0]:.3f} -> {r['held_out'][-1]:.3f}, "
                        f"{r['rollouts'][-1]} rollouts",
                        flush=True,
                    )
                    if arm == "uniform" and seed == args.seed_list[0] and data["after_rl"] is None:
                        model = trained_model(tokenizer, Path(tmp) / "models" / f"step-{args.steps}.safetensors")
                        data["after_rl"] = {"steps": args.steps, "seed": seed}
                        data["after_rl"] |= measure(model, tokenizer, pool, args.samples, args.group, seed=0)
                        save()
                done = [
                    s for s in args.seed_list if {(a, s) for a in ARMS} <= {(r["arm"], r["seed"]) for r in data["runs"]}
                ]
                data["comparison"] = comparison(data["runs"], done) if done else None  # seeds finished so far
                save()
    print("comparison:", data["comparison"], flush=True)
    print(f"wrote {args.out}")


def learning_run(args, arm: str, seed: int, pool, held_out, tmp: Path) -> dict:
    """One single-pass run of ``arm`` (the demo's trainer); Uniform's first seed keeps its final weights."""
    from adaptive_rollouts.demo.run import DemoConfig, run_one

    cfg = DemoConfig(
        methods=(arm,),
        seeds=(seed,),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        mean_rollouts=args.group,
        pool_size=args.steps * args.prompts_per_step,
        held_out=args.held_out,
        eval_every=args.eval_every,
        eval_sampled=False,
        task="ladder",
    )
    keep = tmp / "models" if arm == "uniform" and seed == args.seed_list[0] else None
    train_pool = pool[: cfg.pool_size]  # make_problems draws in order: the demo's own pool of this size
    res = run_one(arm, seed, cfg, None, train_pool, held_out, tmp / f"{arm}-{seed}", keep, learning_rate=args.lr)
    counts = np.array(res.counts)
    return {
        "arm": arm,
        "seed": seed,
        "lr": args.lr,
        "rollouts": res.rollouts,
        "tokens": res.tokens,
        "held_out": res.held_out,
        "rollouts_per_step": float(counts.sum(axis=1).mean()),
        "skipped_fraction": float(np.mean(counts == 0)),
        "extra_rollouts": res.extra_rollouts,
        "train_seconds": round(res.train_seconds, 1),
    }


def trained_model(tokenizer, weights: Path):
    from safetensors.torch import load_file

    from adaptive_rollouts.demo.model import assets_of, load_warm_start

    model = load_warm_start(tokenizer, assets_of("ladder"))
    model.load_state_dict(load_file(str(weights)), strict=False)
    model.tie_weights()
    return model


def comparison(runs: list[dict], seeds: list[int]) -> dict:
    """The known-p rule's speedup over Uniform in rollouts to the common target (`experiments.speedup`), over
    the seed means and per seed."""
    from adaptive_rollouts.experiments.speedup import rollouts_needed, speedup

    def curves(arm: str) -> list[dict]:
        by_seed = {r["seed"]: r for r in runs if r["arm"] == arm}
        return [
            {
                "rollouts": by_seed[s]["rollouts"][1:],
                "accuracy": by_seed[s]["held_out"][1:],
                "accuracy0": by_seed[s]["held_out"][0],
            }
            for s in seeds
        ]

    u, m = curves("uniform"), curves("oracle-skip")
    target, need_u, need_m = rollouts_needed(u, m, 0.5)
    return {
        "target": target,
        "uniform_rollouts": need_u,
        "oracle_skip_rollouts": need_m,
        "speedup": speedup(u, m, 0.5),
        "per_seed": [speedup([a], [b], 0.5) for a, b in zip(u, m, strict=True)],
        "seeds": seeds,
    }


if __name__ == "__main__":
    main()

"""Regime fingerprints of the demo from real rollouts and gradients (see `adaptive_rollouts.demo.regime`).

    python benchmarks/demo_fingerprints.py --out runs/demo_fingerprints [--runs runs/demo_speedup/runs]

1. Trains Uniform (seed 0, tuned rate, the default demo run) keeping the weights at every
   evaluation, then at each of those checkpoints measures the noise-to-signal ratio of
   the per-rollout GRPO gradients over ``--batches`` batches of the default size (16 pool prompts x
   8 rollouts, different prompts and sampling seeds per batch).
2. Persistence of p: each pool prompt's success rate (16 samples at temperature 1) at those
   checkpoints, and the correlation between consecutive checkpoints corrected for the sampling
   noise of each rate (`fingerprints.p_persistence`); the 30-step run visits a pool prompt about
   once, so the runs themselves have no revisits to correlate.
3. From the rewards recorded by every run in ``--runs`` (default: this script's Uniform run):
   zero-variance group fraction, all-fail / all-pass shares, histogram of per-group success rates,
   persistence of p across visits.
Writes ``fingerprints.json`` and ``fingerprints.md``; the Uniform run and the per-checkpoint
results are saved as they finish and reused on a rerun.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

import numpy as np

from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.experiments.run_store import read_json, write_json

RATE_SAMPLES = 16


def _per_checkpoint(path: Path, checkpoints: list[int], compute) -> dict[str, object]:
    """{step: compute(step)} for every checkpoint, saved to ``path`` after each one and reused on a rerun."""
    done = read_json(path) or {}
    for step in checkpoints:
        if str(step) not in done:
            done[str(step)] = compute(step)
            write_json(path, done)
    return done


def main(argv=None) -> int:
    from adaptive_rollouts.demo.evaluate import success_rates
    from adaptive_rollouts.demo.jobs import one_thread, problem_sets
    from adaptive_rollouts.demo.model import load_warm_start
    from adaptive_rollouts.demo.regime import gradient_noise_to_signal, reward_fingerprints
    from adaptive_rollouts.demo.run import DemoConfig, RunResult, run_one
    from adaptive_rollouts.demo.tokenizer import build_tokenizer
    from adaptive_rollouts.fingerprints import p_persistence

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/demo_fingerprints")
    parser.add_argument("--runs", default=None, help="folder of saved demo runs (<method>-<seed>.json)")
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = DemoConfig(methods=("uniform",))
    pool, held_out = problem_sets(cfg)
    run_path, models = out / "uniform-0.json", out / "models"
    with one_thread():
        if not run_path.exists():
            res = run_one("uniform", 0, cfg, None, pool, held_out, out, save_models=models)
            write_json(run_path, {"result": asdict(res)})
        checkpoints = sorted({*range(0, cfg.steps + 1, cfg.eval_every), cfg.steps})  # where run_one saved weights

        tok = build_tokenizer()

        def load(step: int):
            from safetensors.torch import load_file

            model = load_warm_start(tok)
            model.load_state_dict(load_file(str(models / f"step-{step}.safetensors")), strict=False)
            model.tie_weights()
            return model

        rng = np.random.default_rng(0)
        batches = [rng.choice(len(pool), cfg.prompts_per_step, replace=False) for _ in range(args.batches)]

        def gradients(model, step: int) -> list[dict]:
            per_batch = [
                gradient_noise_to_signal(model, tok, [pool[i].prompt for i in b], cfg.mean_rollouts, seed=1000 + k)
                for k, b in enumerate(batches)
            ]
            print(f"step {step}: noise-to-signal {[round(x['noise_to_signal'], 1) for x in per_batch]}", flush=True)
            return per_batch

        def pool_rates(model, step: int) -> list[float]:
            import torch

            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(2000 + step)
                return success_rates(model, tok, pool, samples=RATE_SAMPLES).tolist()

        grads = _per_checkpoint(out / "gradients.json", checkpoints, lambda step: gradients(load(step), step))
        rates = _per_checkpoint(out / "pool_rates.json", checkpoints, lambda step: pool_rates(load(step), step))
    persistence = {}
    for a, b in zip(checkpoints, checkpoints[1:]):
        pa, pb = np.array(rates[str(a)]), np.array(rates[str(b)])
        noise = [p * (1 - p) / (RATE_SAMPLES - 1) for p in (pa, pb)]
        persistence[f"{a}->{b}"] = p_persistence(pa, pb, *noise)
    run_files = sorted(Path(args.runs).glob("*.json")) if args.runs else [run_path]
    rewards = {}
    for path in run_files:
        res = RunResult(**read_json(path)["result"])
        rewards[f"{res.method}-{res.seed}"] = reward_fingerprints(res.groups)
    by_method: dict[str, list[dict]] = {}
    for name, fp in rewards.items():
        by_method.setdefault(name.rsplit("-", 1)[0], []).append(fp)
    lines = [
        f"Per-rollout GRPO gradient noise-to-signal (tr Cov / |mean|^2, {cfg.prompts_per_step} prompts x "
        f"{cfg.mean_rollouts} rollouts per batch, {args.batches} batches), Uniform seed 0:",
        "",
        "| step | noise-to-signal (median over batches) | per batch | zero-variance groups |",
        "|---|---|---|---|",
    ]
    for step in checkpoints:
        values = [b["noise_to_signal"] for b in grads[str(step)]]
        zv = np.mean([b["zero_variance_fraction"] for b in grads[str(step)]])
        lines.append(f"| {step} | {np.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} | {zv:.3f} |")
    lines += ["", "Persistence of p between checkpoints (pool, 16 samples per prompt, noise-corrected):", ""]
    lines += [f"- steps {k}: {v:.3f}" for k, v in persistence.items()]
    for step in checkpoints:
        r = np.array(rates[str(step)])
        hist = np.histogram(r, bins=10, range=(0, 1))[0] / len(r)
        lines.append(
            f"- step {step}: mean p {r.mean():.3f}, share at 0 {np.mean(r == 0):.3f}, at 1 {np.mean(r == 1):.3f}, "
            f"histogram (10 bins) {hist.round(3).tolist()}"
        )
    lines += [
        "",
        "From the rewards of every run (mean over seeds):",
        "",
        "| method | seeds | zero-variance groups | all fail | all pass | persistence of p | p histogram (10 bins) |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, fps in by_method.items():
        hist = np.mean([f["p_histogram"] for f in fps], axis=0)
        cells = [np.nanmean([f[k] for f in fps]) for k in ("zero_variance_fraction", "all_fail_fraction")]
        cells += [np.nanmean([f[k] for f in fps]) for k in ("all_pass_fraction", "p_persistence")]
        lines.append(
            f"| {method} | {len(fps)} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {hist.round(3).tolist()} |"
        )
    text = "\n".join(lines)
    (out / "fingerprints.md").write_text(text + "\n")
    write_result(out / "fingerprints.json", {"gradients": grads, "persistence": persistence, "rewards": rewards})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

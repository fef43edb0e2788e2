"""GPU check of `AdaptiveGRPOTrainer` on the demo's task (the tiny warm-started LM sorting digit lists,
exact-match rewards): Uniform, VIGOR and the default allocator, same
seed, bf16 on CUDA.

Asserts, for each method: every logged loss is finite; every step spent exactly the budget
(``generation_batch_size`` rollouts; at most that for a saving allocator) and logged what it
spent (``adaptive/rollouts_spent``);
the last checkpoint holds ``adaptive_rollouts.safetensors`` + ``.json`` whose allocator state loads
into a freshly built allocator of the same class and whose history equals the run's. Writes
``<out>/gpu_check_trl.json`` and ``<out>/gpu_check_trl.md``; exits 1 on the first failed check.

    python scripts/gpu_check_trl.py                          # CUDA, bf16, 30 steps (~1-2 min on one H200)
    python scripts/gpu_check_trl.py --device cpu --steps 2   # smoke mode (fp32), what the CPU test runs

Needs torch, transformers, accelerate, trl, datasets and reasoning-gym; no network, no vLLM.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

METHODS = ("uniform", "vigor", "default")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--steps", type=int, default=None, help="training steps per method (cuda 30, cpu 2)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {METHODS}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="/tmp/gpu_check_trl")
    args = parser.parse_args(argv)
    args.steps = args.steps or (30 if args.device == "cuda" else 2)
    args.methods = tuple(m for m in args.methods.split(",") if m)
    unknown = set(args.methods) - set(METHODS)
    if unknown or not args.methods:
        parser.error(f"--methods must be a subset of {METHODS}, got {args.methods}")
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    return args


class CheckFailed(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def run_method(method: str, args: argparse.Namespace, problems, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOConfig

    from adaptive_rollouts.demo.model import load_warm_start
    from adaptive_rollouts.demo.tasks import Verifier
    from adaptive_rollouts.demo.tokenizer import build_tokenizer
    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer, build_allocator
    from adaptive_rollouts.integrations.trl.checkpoint import STATE_FILE, SUMMARY_FILE
    from adaptive_rollouts.state import load_state

    cuda = args.device == "cuda"
    prompts_per_step, mean_rollouts = (16, 8) if cuda else (4, 4)
    budget = prompts_per_step * mean_rollouts
    set_seed(args.seed)
    tokenizer = build_tokenizer()
    model = load_warm_start(tokenizer)
    if cuda:
        model = model.to(torch.bfloat16)
    config = GRPOConfig(
        output_dir=str(out / method),
        per_device_train_batch_size=budget,
        num_generations=mean_rollouts,
        max_completion_length=6,
        max_steps=args.steps,
        learning_rate=1e-4,
        lr_scheduler_type="constant",
        loss_type="grpo",
        beta=0.0,
        temperature=1.0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=args.steps,
        report_to=[],
        use_cpu=not cuda,
        bf16=cuda,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = AdaptiveGRPOTrainer(
        model=model,
        reward_funcs=Verifier(),
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in problems]}),
        processing_class=tokenizer,
        allocator=None if method == "default" else method,
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start

    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    check(len(losses) == args.steps, f"{method}: {len(losses)} losses logged for {args.steps} steps")
    check(all(math.isfinite(x) for x in losses), f"{method}: non-finite loss in {losses}")
    counts = [c.tolist() for c in trainer.allocation_history]
    check(len(counts) == args.steps, f"{method}: {len(counts)} allocations for {args.steps} steps")
    kind = getattr(trainer.allocator, "kind", "fill")
    within = (lambda n: n == budget) if kind == "fill" else (lambda n: 0 <= n <= budget)
    check(all(within(sum(c)) for c in counts), f"{method} ({kind}): a step spent outside its budget {budget}: {counts}")
    spent = [h["adaptive/rollouts_spent"] for h in trainer.state.log_history if "adaptive/rollouts_spent" in h]
    check(spent == [float(sum(c)) for c in counts], f"{method}: logged rollouts {spent}, allocated {counts}")

    folder = out / method / f"checkpoint-{args.steps}"
    check(
        (folder / STATE_FILE).exists() and (folder / SUMMARY_FILE).exists(), f"{method}: no allocator state in {folder}"
    )
    state = load_state(folder / STATE_FILE)
    fresh = build_allocator(
        None if method == "default" else method, estimator=trainer.estimator, aggregation=trainer.aggregation
    )
    check(state["allocator_class"] == type(fresh).__name__, f"{method}: state of {state['allocator_class']}")
    fresh.load_state_dict(state["allocator"])
    check([c.tolist() for c in state["history"]] == counts, f"{method}: checkpoint history differs from the run")
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    check(summary["global_step"] == args.steps, f"{method}: checkpoint summary at step {summary['global_step']}")

    parameter = next(trainer.model.parameters())
    return {
        "method": method,
        "allocator": type(trainer.allocator).__name__,
        "device": str(parameter.device),
        "dtype": str(parameter.dtype),
        "steps": args.steps,
        "budget": budget,
        "losses": losses,
        "counts": counts,
        "checkpoint": str(folder),
        "train_seconds": round(seconds, 2),
        "allocator_seconds": round(trainer.allocator_seconds, 4),
    }


def report(results: list[dict], environment: dict, out: Path) -> None:
    (out / "gpu_check_trl.json").write_text(json.dumps({"environment": environment, "runs": results}, indent=2))
    lines = [
        "# AdaptiveGRPOTrainer GPU check",
        "",
        " ".join(f"{k}: {v};" for k, v in environment.items()),
        "",
        "| method | allocator | device | dtype | steps | budget/step | last loss | max rollouts/prompt | train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        most = max(max(c) for c in r["counts"])
        lines.append(
            f"| {r['method']} | {r['allocator']} | {r['device']} | {r['dtype']} | {r['steps']} | {r['budget']} "
            f"| {r['losses'][-1]:.4g} | {most} | {r['train_seconds']} |"
        )
    (out / "gpu_check_trl.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    import trl

    from adaptive_rollouts.demo.tasks import make_problems

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check_trl: --device cuda but no CUDA device is available", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    environment = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "trl": trl.__version__,
        "seed": args.seed,
    }
    problems = make_problems(64, "pool")
    results = []
    start = time.perf_counter()
    try:
        for method in args.methods:
            results.append(run_method(method, args, problems, out))
            print(f"gpu_check_trl: {method} ok ({results[-1]['train_seconds']} s)", flush=True)
    except CheckFailed as failure:
        print(f"gpu_check_trl: FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        environment["total_seconds"] = round(time.perf_counter() - start, 1)
        report(results, environment, out)
    print(f"gpu_check_trl: OK ({environment['total_seconds']} s), report in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the policy-features pass costs on the tiny LM: its share of a training step's wall time.

    python benchmarks/probe_cost.py                 # both parts (resumes from the result file)
    python benchmarks/probe_cost.py --lengths ""    # part 1 only

1. Training steps: the demo's configuration (the ``sort`` task, 16 prompts x 8 rollouts a step, the
   default arm at its tuned rate, AdamW, one torch thread) with ``policy_features=True``, for
   ``--steps`` steps. Per step: the pass's seconds (`bridge.StepResult.policy_seconds`, logged as
   ``adaptive/policy_seconds``), its logged share ``adaptive/policy_share`` (of the step object's
   time: the pass, the allocator and the generation rounds) and its share of the whole optimizer
   step (generation, scoring, the replay's log-probs, backward and the AdamW update; measured from
   the trainer's step-begin to step-end callbacks). The first step (warm-up: first calls allocate
   and compile kernels) is reported apart and left out of the medians.
2. Longer completions (``--lengths``): the demo's answers are at most 9 tokens, so one forward pass
   over the prompts is large next to generating them. The same tiny architecture (fresh weights,
   positions widened) is timed on one prefill of 16 prompts (`integrations.trl.policy.
   last_token_hidden_states`) and on generating 16 x 8 completions of exactly L tokens (sampling,
   KV cache), for each L: the pass's share of generation alone, an upper bound on its share of a
   step (which also trains on those tokens).

Writes ``results/probe_cost/probe_cost.json``, rendered into docs/flatness.md by ``make docs``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "results" / "probe_cost" / "probe_cost.json"


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="training steps (the first is warm-up)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lengths", default="9,64,256", help="completion lengths of part 2 (empty: skip it)")
    ap.add_argument("--repeats", type=int, default=2, help="timings per length in part 2 (the median is kept)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.steps < 2:
        ap.error(f"--steps must be >= 2 (the first is warm-up), got {args.steps}")
    args.length_list = [int(x) for x in args.lengths.split(",") if x.strip()]
    return args


def training_steps(steps: int, seed: int) -> dict:
    """Part 1: the demo's trainer with the policy-features pass, per-step timings."""
    import tempfile

    from adaptive_rollouts.demo.jobs import problem_sets
    from adaptive_rollouts.demo.run import DemoConfig, run_one

    cfg = DemoConfig(
        methods=("default",),
        seeds=(seed,),
        steps=steps,
        held_out=16,
        eval_every=steps + 1,
        eval_sampled=False,
        policy_features=True,
        pool_size=steps * DemoConfig().prompts_per_step,  # single pass: every step's prompts are new
    )
    pool, held_out = problem_sets(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        res = run_one("default", seed, cfg, None, pool, held_out, Path(tmp))
    if len(res.policy_seconds) != steps:
        raise RuntimeError(f"the pass ran in {len(res.policy_seconds)} of {steps} steps")
    step_s, policy_s = np.array(res.step_seconds), np.array(res.policy_seconds)
    share_of_step = policy_s / step_s
    return {
        "prompts_per_step": cfg.prompts_per_step,
        "rollouts_per_prompt": cfg.mean_rollouts,
        "max_completion_length": cfg.completion_length(),
        "step_seconds": step_s.tolist(),
        "policy_seconds": policy_s.tolist(),
        "policy_share_logged": res.policy_share,
        "policy_share_of_step": share_of_step.tolist(),
        "median": {
            "step_seconds": float(np.median(step_s[1:])),
            "policy_seconds": float(np.median(policy_s[1:])),
            "policy_share_logged": float(np.median(res.policy_share[1:])),
            "policy_share_of_step": float(np.median(share_of_step[1:])),
        },
        "total_share_of_steps": float(policy_s[1:].sum() / step_s[1:].sum()),
        "rollouts": int(sum(map(sum, res.counts))),
    }


def longer_completions(lengths: list[int], repeats: int, seed: int) -> list[dict]:
    """Part 2: one prefill of 16 prompts vs generating 16 x 8 completions of L tokens, tiny model."""
    import torch

    from adaptive_rollouts.demo.model import build_model
    from adaptive_rollouts.demo.tasks import make_problems
    from adaptive_rollouts.demo.tokenizer import build_tokenizer
    from adaptive_rollouts.integrations.trl.policy import last_token_hidden_states

    tokenizer = build_tokenizer()
    prompts = [p.prompt for p in make_problems(16, "pool")]
    enc = tokenizer(prompts, padding=True, return_tensors="pt")
    rows = []
    for length in lengths:
        model = build_model(tokenizer, seed=seed, max_position_embeddings=enc["input_ids"].shape[1] + length).eval()
        ids, mask = enc["input_ids"].repeat_interleave(8, 0), enc["attention_mask"].repeat_interleave(8, 0)

        def generate(tokens: int, r: int):
            torch.manual_seed(seed + r)
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=True,
                    temperature=1.0,
                    min_new_tokens=tokens,
                    max_new_tokens=tokens,
                )
            if out.shape[1] - ids.shape[1] != tokens:
                raise RuntimeError(f"generated {out.shape[1] - ids.shape[1]} tokens, asked for {tokens}")

        last_token_hidden_states(model, enc["input_ids"], enc["attention_mask"])  # warm-up, not timed
        generate(2, 0)
        prefill, generation = [], []
        for r in range(repeats):
            start = time.perf_counter()
            last_token_hidden_states(model, enc["input_ids"], enc["attention_mask"])
            prefill.append(time.perf_counter() - start)
            start = time.perf_counter()
            generate(length, r)
            generation.append(time.perf_counter() - start)
        p, g = float(np.median(prefill)), float(np.median(generation))
        rows.append({"length": length, "prefill_seconds": p, "generate_seconds": g, "share_of_generation": p / g})
        print(f"L={length}: prefill {p * 1e3:.1f} ms, generation {g:.2f} s, share {100 * p / g:.2f}%", flush=True)
    return rows


def main(argv=None) -> None:
    args = parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from adaptive_rollouts.demo.jobs import one_thread
    from adaptive_rollouts.experiments.results import load_result, write_result

    settings = {"steps": args.steps, "seed": args.seed, "lengths": args.length_list, "repeats": args.repeats}
    data: dict = {"training": None, "lengths": None}
    if Path(args.out).exists():  # resume: reuse each finished part made with this part's settings
        old = load_result(args.out)
        if all(old.settings.get(k) == settings[k] for k in ("steps", "seed")):
            data["training"] = old.data["training"]
        if all(old.settings.get(k) == settings[k] for k in ("lengths", "repeats", "seed")):
            data["lengths"] = old.data["lengths"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        write_result(args.out, {**data, "load_average": os.getloadavg()[0]}, settings=settings)

    with one_thread():
        if data["training"] is None:
            data["training"] = training_steps(args.steps, args.seed)
            save()
        print("training:", data["training"]["median"], flush=True)
        if args.length_list and data["lengths"] is None:
            data["lengths"] = longer_completions(args.length_list, args.repeats, args.seed)
            save()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Supervised warm start of the demo model on reasoning-gym arithmetic (run once; weights ship).

    python -m adaptive_rollouts.demo.warm_start   # 1000 steps of 64, ~6 min on one loaded core

Trains the tiny Qwen2 on ``prompt + answer + <eos>`` (loss on the answer only) with problems
drawn from seeds disjoint from the demo's RL pool and held-out set, then saves
``demo/assets/warm_start.safetensors`` and ``config.json`` (model shape, training settings,
held-out greedy accuracy and the spread of per-prompt success rates).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SFT_SEED = 7_000  # RL pool uses seed 1, held-out seed 2: SFT problems are a different draw


def train(
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    log_every: int = 100,
    sft_problems: int = 4_000,
    **model_overrides,
):
    import torch

    from .evaluate import greedy_accuracy, success_rates
    from .model import build_model
    from .tasks import Verifier, make_problems
    from .tokenizer import build_tokenizer

    torch.manual_seed(seed)
    torch.set_num_threads(1)  # a tiny model: extra threads only spin on a shared CPU (10x slower here)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed, **model_overrides)
    problems = make_problems(sft_problems, seed=SFT_SEED)
    held_out = make_problems(256, seed=SFT_SEED + 1, exclude={p.prompt for p in problems})
    verifier = Verifier(held_out)
    texts = [p.prompt + p.answer for p in problems]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    ids = torch.cat([enc["input_ids"], torch.full((len(texts), 1), tokenizer.pad_token_id)], dim=1)
    mask = torch.cat([enc["attention_mask"], torch.zeros(len(texts), 1, dtype=torch.long)], dim=1)
    # left padding: append <eos> after the last real token, i.e. at the end of each row
    ids[:, -1] = tokenizer.eos_token_id
    mask[:, -1] = 1
    prompt_lens = torch.tensor([len(p.prompt) for p in problems])
    answer_lens = torch.tensor([len(p.answer) for p in problems]) + 1  # + eos
    width = ids.shape[1]
    pos = torch.arange(width).unsqueeze(0)
    labels = ids.clone()
    labels[pos < width - answer_lens.unsqueeze(1)] = -100  # learn the answer only
    del prompt_lens
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    start = time.time()
    for step in range(1, steps + 1):
        idx = torch.randint(0, len(texts), (batch_size,), generator=gen)
        out = model(input_ids=ids[idx], attention_mask=mask[idx], labels=labels[idx])
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps:
            acc = greedy_accuracy(model, tokenizer, held_out, verifier)
            print(
                f"step {step:5d} loss {out.loss.item():.3f} held-out greedy acc {acc:.3f} ({time.time() - start:.0f}s)",
                flush=True,
            )
    rates = success_rates(model, tokenizer, held_out, verifier, samples=16)
    meta = {
        "training": dict(steps=steps, batch_size=batch_size, lr=lr, seed=seed, sft_problems=len(problems)),
        "held_out_greedy_accuracy": greedy_accuracy(model, tokenizer, held_out, verifier),
        "held_out_success_rate_quantiles": {str(q): float(np.quantile(rates, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
        "held_out_fraction_mixed": float(((rates > 0) & (rates < 1)).mean()),
    }
    return model, meta


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-problems", type=int, default=4_000, help="distinct SFT problems")
    parser.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    parser.add_argument("--out", default=None, help="asset folder (default: the package's demo/assets)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    from .model import save_warm_start

    overrides = {} if args.layers is None else {"num_hidden_layers": args.layers}
    model, meta = train(args.steps, args.batch_size, args.lr, args.seed, sft_problems=args.sft_problems, **overrides)
    print(meta)
    if not args.no_save:
        from pathlib import Path

        from .model import ASSETS

        save_warm_start(model, meta, ASSETS if args.out is None else Path(args.out))


if __name__ == "__main__":
    main()

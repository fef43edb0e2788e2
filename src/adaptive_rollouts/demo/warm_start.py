"""Supervised warm start of the demo model on digit sorting (run once; the weights ship).

    python scripts/train_warm_start.py                                   # the default task
    python scripts/train_warm_start.py --task ladder --steps 750 --work runs/warm_start_ladder

Trains the tiny Qwen2 on ``prompt + answer + <eos>`` (loss on the answer only) over SFT-split
problems (disjoint from the RL pool and the held-out set by construction, `tasks.split_of`),
AdamW with linear warm-up then a constant rate, one torch thread. Deliberately partial: it stops
while long lists are still mostly wrong, so per-prompt success spreads over [0, 1]. Writes a
checkpoint (safetensors + JSON, model, AdamW moments and the batch sampler's state) every
``--checkpoint-every`` steps and resumes from it, bit for bit; at the end saves
``demo/assets/warm_start.safetensors`` and ``config.json`` (shape, training settings, run time,
held-out accuracy by list length, spread of per-prompt success rates on the RL pool). ``--task
ladder`` trains on the same supervised problems (the ladder's ``sft_task``: lists of 3-8) for longer
and writes ``demo/assets/ladder/``, whose ``config.json`` also records the task and the shares of
its pool below 0.05 and above 0.95.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from adaptive_rollouts.state.atomic import atomic_write

from .evaluate import greedy_scores, success_rates
from .ladder import success_histogram
from .model import assets_of, build_model, save_warm_start
from .tasks import TASKS, length_of, make_problems, task_of
from .tokenizer import build_tokenizer

SFT_PROBLEMS = 200_000
EVAL_PROBLEMS = 512


def lr_at(step: int, lr: float, warmup: int, steps: int = 0, cooldown: int = 0) -> float:
    """Linear warm-up over ``warmup`` steps, then constant (so a shorter run is a prefix of a longer
    one); with ``cooldown`` > 0, the last ``cooldown`` of ``steps`` steps decay linearly towards 0
    (lr x (steps - step + 1) / cooldown): a run is then a constant-rate run up to
    ``steps - cooldown``, and can be resumed from that run's checkpoint there.

    >>> lr_at(1, 1e-3, 100), lr_at(100, 1e-3, 100), lr_at(5000, 1e-3, 100)
    (1e-05, 0.001, 0.001)
    >>> lr_at(750, 1e-3, 100, 1250, 500), lr_at(751, 1e-3, 100, 1250, 500), lr_at(1250, 1e-3, 100, 1250, 500)
    (0.001, 0.001, 2e-06)
    """
    if cooldown < 0 or cooldown > steps:
        raise ValueError(f"cooldown must lie in [0, steps = {steps}], got {cooldown}")
    return lr * min(1.0, step / warmup, (steps - step + 1) / cooldown if cooldown else 1.0)


def _batches(tokenizer, problems):
    """Token ids, attention mask and labels (answer + eos only) of ``prompt + answer + <eos>``, left-padded."""
    import torch

    texts = [p.prompt + p.answer for p in problems]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    ids = torch.cat([enc["input_ids"], torch.full((len(texts), 1), tokenizer.eos_token_id)], dim=1)
    mask = torch.cat([enc["attention_mask"], torch.ones(len(texts), 1, dtype=torch.long)], dim=1)
    answer_lens = torch.tensor([len(p.answer) for p in problems]) + 1
    pos = torch.arange(ids.shape[1]).unsqueeze(0)
    labels = ids.clone()
    labels[pos < ids.shape[1] - answer_lens.unsqueeze(1)] = -100
    return ids, mask, labels


def save_checkpoint(path: Path, step: int, model, opt, gen) -> None:
    """One safetensors file holding the model, the optimiser moments, the generator and the step,
    replaced atomically (`atomic_write`): a run killed mid-save resumes from the previous one."""
    from safetensors.torch import save

    path.mkdir(parents=True, exist_ok=True)
    state = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    for i, p in enumerate(model.parameters()):
        for key, value in opt.state.get(p, {}).items():
            state[f"opt.{i}.{key}"] = value.detach().clone().contiguous().reshape(value.shape)
    state["generator"] = gen.get_state()
    atomic_write(path / "checkpoint.safetensors", save(state, metadata={"step": str(int(step))}))
    atomic_write(path / "checkpoint.json", (json.dumps({"step": step}) + "\n").encode())  # for people


def load_checkpoint(path: Path, model, opt, gen) -> int:
    """Restore a checkpoint written by `save_checkpoint`; returns its step (0 if there is none)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if not (path / "checkpoint.safetensors").exists():
        return 0
    with safe_open(str(path / "checkpoint.safetensors"), framework="pt") as handle:
        saved_step = (handle.metadata() or {}).get("step")
    state = load_file(str(path / "checkpoint.safetensors"))
    model.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("model.")})
    for i, p in enumerate(model.parameters()):
        moments = {k.split(".")[2]: v for k, v in state.items() if k.startswith(f"opt.{i}.")}
        if moments:
            opt.state[p] = moments
    gen.set_state(state["generator"])
    if saved_step is not None:  # the step saved with the weights (older checkpoints: checkpoint.json)
        return int(saved_step)
    return int(json.loads((path / "checkpoint.json").read_text())["step"])


def accuracy_by_length(model, tokenizer, problems) -> dict[str, float]:

    scores = greedy_scores(model, tokenizer, problems)
    lengths = np.array([length_of(p.prompt) for p in problems])
    out = {str(n): float(scores[lengths == n].mean()) for n in sorted(set(lengths.tolist()))}
    return {"all": float(scores.mean()), **out}


def train(
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    warmup: int,
    work: Path,
    log_every: int,
    ckpt_every: int,
    sft_problems: int = SFT_PROBLEMS,
    eval_problems: int = EVAL_PROBLEMS,
    task: str = "sort",
    cooldown: int = 0,
    **model_overrides,
):
    import torch

    torch.set_num_threads(1)  # reproducible bit for bit, and a tiny model gains nothing from more
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed, **model_overrides)
    ids, mask, labels = _batches(tokenizer, make_problems(sft_problems, "sft", task=task_of(task).sft_task))
    held_out = make_problems(eval_problems, "held_out", task=task)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    first = load_checkpoint(work, model, opt, gen) + 1
    model.train()
    start = time.process_time()
    for step in range(first, steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, lr, warmup, steps, cooldown)
        idx = torch.randint(0, len(ids), (batch_size,), generator=gen)
        loss = model(input_ids=ids[idx], attention_mask=mask[idx], labels=labels[idx]).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == steps:
            acc = accuracy_by_length(model, tokenizer, held_out)
            print(f"step {step} loss {loss.item():.3f} held-out greedy {json.dumps(acc)}", flush=True)
        if step % ckpt_every == 0 or step == steps:
            save_checkpoint(work, step, model, opt, gen)
    pool = make_problems(eval_problems, "pool", task=task)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rates = success_rates(model, tokenizer, pool, samples=16)
    meta = {
        "training": dict(steps=steps, batch_size=batch_size, lr=lr, warmup=warmup, seed=seed, sft_problems=sft_problems)
        | ({"cooldown": cooldown} if cooldown else {}),  # the default warm start's config keeps its fields
        "cpu_seconds_this_session": round(time.process_time() - start, 1),
        "held_out_greedy_accuracy_by_length": accuracy_by_length(model, tokenizer, held_out),
        "pool_success_rate_t1": {
            "mean": float(rates.mean()),
            "at_0": float((rates == 0).mean()),
            "at_1": float((rates == 1).mean()),
            "quantiles": {str(q): float(np.quantile(rates, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
        },
    }
    if task != "sort":  # the default task's config.json keeps the fields it was made with
        shape = success_histogram(rates)
        meta["task"] = task
        meta["pool_success_shape_t1"] = {k: shape[k] for k in ("below_0.05", "above_0.95", "shares")}
    return model, meta


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--cooldown", type=int, default=0, help="last steps with the rate decaying linearly to 0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", default="sort", choices=sorted(TASKS), help="the task to train on (default sort)")
    parser.add_argument("--work", default="runs/warm_start", help="checkpoint folder (resumed if present)")
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument("--checkpoint-every", type=int, default=250)
    parser.add_argument("--out", default=None, help="asset folder (default: the package's demo/assets)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)

    model, meta = train(
        args.steps,
        args.batch_size,
        args.lr,
        args.seed,
        args.warmup,
        Path(args.work),
        args.log_every,
        args.checkpoint_every,
        task=args.task,
        cooldown=args.cooldown,
    )
    print(json.dumps(meta), flush=True)
    if not args.no_save:
        save_warm_start(model, meta, assets_of(args.task) if args.out is None else Path(args.out))


if __name__ == "__main__":
    main()

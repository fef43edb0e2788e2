"""Held-out accuracy of the demo model: greedy, or sampled pass@1 at temperature 1 (what RL trains),
and per-prompt success rates (sampled)."""

from __future__ import annotations

import numpy as np

MAX_NEW_TOKENS = 6


def _complete(model, tokenizer, prompts: list[str], do_sample: bool, batch_size: int = 512) -> list[str]:
    import torch

    out: list[str] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True)
            gen = model.generate(
                **enc,
                max_new_tokens=MAX_NEW_TOKENS,
                do_sample=do_sample,
                temperature=1.0 if do_sample else None,
                top_k=0 if do_sample else None,
                top_p=1.0 if do_sample else None,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            out.extend(tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    model.train(was_training)
    return out


def greedy_accuracy(model, tokenizer, problems, verifier) -> float:
    """Mean verifier score of the greedy answer over ``problems``."""
    prompts = [p.prompt for p in problems]
    return float(np.mean(verifier(prompts, _complete(model, tokenizer, prompts, do_sample=False))))


def success_rates(model, tokenizer, problems, verifier, samples: int = 16) -> np.ndarray:
    """Per-problem success rate of ``samples`` completions at temperature 1."""
    prompts = [p.prompt for p in problems for _ in range(samples)]
    scores = np.asarray(verifier(prompts, _complete(model, tokenizer, prompts, do_sample=True)))
    return scores.reshape(len(problems), samples).mean(axis=1)


def sampled_accuracy(model, tokenizer, problems, verifier, samples: int = 4, seed: int = 0) -> float:
    """Mean verifier score of ``samples`` completions per problem at temperature 1 (pass@1).

    Sampled with a fixed torch seed inside ``fork_rng``: every method and checkpoint is scored on the
    same random numbers (less noise between runs), and the training RNG stream is left untouched.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return float(success_rates(model, tokenizer, problems, verifier, samples=samples).mean())

"""Held-out evaluation of the demo model: greedy accuracy, and pass@k / mean@k from sampled completions.

pass@k is the unbiased estimator of Chen et al. (2021) from n samples with c correct,
``1 - C(n - c, k) / C(n, k)``; mean@k is the mean score of the first k of the n samples (the
accuracy averaged over k attempts, whose expectation is pass@1 for every k). Both are averaged
over problems. Sampling runs at temperature 1 (what RL trains) under a fixed torch seed inside
``fork_rng``: every method and checkpoint is scored on the same random numbers, and the training
RNG stream is left untouched.
"""

from __future__ import annotations

from math import comb

import numpy as np

from .tasks import Verifier, length_of

MAX_NEW_TOKENS = 9  # the default task's longest answer (8 digits) + <eos>: the least any batch gets
KS = (1, 2, 4, 8)


def new_token_cap(prompts) -> int:
    """Tokens to generate for ``prompts``: the longest answer among them + ``<eos>`` (an answer has
    as many digits as its prompt sorts), never fewer than ``MAX_NEW_TOKENS``, so that the default
    task's batches generate exactly as before while longer ladder lists are scored in full.

    >>> new_token_cap(["a312="]), new_token_cap(["a312=", "d" + "7" * 14 + "="])
    (9, 15)
    """
    return max(MAX_NEW_TOKENS, *(length_of(p) + 1 for p in prompts))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 4), pass_at_k(4, 3, 2)
    (0.25, 0.5, 0.0, 1.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def sampled_metrics(scores: np.ndarray, ks=KS) -> dict[str, float]:
    """pass@k and mean@k averaged over problems, from a (problems, n) array of 0/1 scores.

    >>> sampled_metrics(np.array([[1, 0, 0, 0], [0, 0, 0, 0]]), ks=(1, 2))
    {'pass@1': 0.125, 'pass@2': 0.25, 'mean@1': 0.5, 'mean@2': 0.25}
    """
    scores = np.asarray(scores)
    if scores.ndim != 2 or max(ks) > scores.shape[1]:
        raise ValueError(f"scores must be (problems, n >= {max(ks)}), got shape {scores.shape}")
    n = scores.shape[1]
    correct = (scores > 0.5).sum(axis=1)
    out = {f"pass@{k}": float(np.mean([pass_at_k(n, int(c), k) for c in correct])) for k in ks}
    out.update({f"mean@{k}": float(scores[:, :k].mean()) for k in ks})
    return out


def complete(model, tokenizer, prompts: list[str], do_sample: bool, batch_size: int = 512) -> list[str]:
    """Completions of ``prompts`` (greedy, or sampled at temperature 1 with no top-k/top-p)."""
    import torch

    out: list[str] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True)
            gen = model.generate(
                **enc,
                max_new_tokens=new_token_cap(prompts[start : start + batch_size]),
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


def greedy_scores(model, tokenizer, problems) -> np.ndarray:
    """0/1 score of the greedy answer to each problem."""

    prompts = [p.prompt for p in problems]
    return np.asarray(Verifier()(prompts, complete(model, tokenizer, prompts, do_sample=False)))


def sampled_scores(model, tokenizer, problems, samples: int, seed: int = 0) -> np.ndarray:
    """(problems, samples) 0/1 scores of completions at temperature 1, under torch seed ``seed``."""
    import torch

    prompts = [p.prompt for p in problems for _ in range(samples)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        scores = np.asarray(Verifier()(prompts, complete(model, tokenizer, prompts, do_sample=True)))
    return scores.reshape(len(problems), samples)


def success_rates(model, tokenizer, problems, samples: int = 16) -> np.ndarray:
    """Per-problem success rate of ``samples`` completions at temperature 1 (uses the global torch RNG)."""

    prompts = [p.prompt for p in problems for _ in range(samples)]
    scores = np.asarray(Verifier()(prompts, complete(model, tokenizer, prompts, do_sample=True)))
    return scores.reshape(len(problems), samples).mean(axis=1)

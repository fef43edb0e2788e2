"""Regime fingerprints of the demo, measured from its real rollouts and gradients.

- From the rewards every run records (`RunResult.groups`): the zero-variance group fraction, the
  all-fail / all-pass shares, the histogram of per-group success rates, and the persistence of a
  prompt's success rate between consecutive visits (epochs), all via `adaptive_rollouts.fingerprints`.
- From per-rollout policy gradients at a checkpoint (`gradient_noise_to_signal`): the gradient of
  rollout i's term of TRL's ``grpo`` loss, ``A_i * (1/|y_i|) sum_t grad log pi(y_t | x, y_<t)`` (on
  policy, so the importance ratio is 1), with A_i the group-normalised advantage
  ``(r_i - mean) / (std + 1e-4)``; then ``noise_to_signal`` of those gradients (trace of their
  covariance over the squared norm of their mean). The ~10^6-dimensional gradients are compressed by
  a count sketch (each coordinate hashed to one of ``sketch_dim`` buckets with a random sign), which
  preserves inner products in expectation, so both the trace and the squared mean norm are unbiased.
"""

from __future__ import annotations

import numpy as np

from adaptive_rollouts.fingerprints import RegimeTracker, batch_variance_stats, noise_to_signal

from .evaluate import new_token_cap
from .tasks import Verifier


def group_rewards(step: list[list[int]]) -> tuple[list[int], list[np.ndarray]]:
    """Prompt indices and 0/1 reward arrays of one step's recorded groups ``[index, rollouts, successes]``.

    >>> group_rewards([[3, 4, 1]])[1][0].tolist()
    [1.0, 0.0, 0.0, 0.0]
    """
    keys = [g[0] for g in step]
    return keys, [np.array([1.0] * g[2] + [0.0] * (g[1] - g[2])) for g in step]


def reward_fingerprints(groups: list[list[list[int]]]) -> dict:
    """Zero-variance fraction (mean over steps), all-fail / all-pass shares, persistence of p across
    visits, and the histogram of per-group success rates (10 bins over [0, 1]) of one run."""
    tracker = RegimeTracker()
    zv: list[float] = []
    fail: list[float] = []
    passed: list[float] = []
    rates: list[float] = []
    for step in groups:
        keys, rewards = group_rewards(step)
        tracker.update(keys, rewards)
        m = tracker.metrics()
        zv.append(m["regime/zero_variance_fraction"])
        fail.append(m["regime/all_fail_fraction"])
        passed.append(m["regime/all_pass_fraction"])
        rates.extend(float(r.mean()) for r in rewards if r.size)
    hist, _ = np.histogram(rates, bins=10, range=(0.0, 1.0))
    return {
        "zero_variance_fraction": float(np.nanmean(zv)),
        "all_fail_fraction": float(np.mean(fail)),
        "all_pass_fraction": float(np.mean(passed)),
        "p_persistence": float(tracker.metrics()["regime/p_persistence"]),
        "p_histogram": (hist / max(hist.sum(), 1)).tolist(),
    }


def sketch_maps(sizes: list[int], dim: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A count sketch of vectors split into pieces of ``sizes``: per piece, each coordinate's bucket and sign."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, dim, n), rng.choice([-1.0, 1.0], n)) for n in sizes]


def count_sketch(pieces: list[np.ndarray], maps, dim: int) -> np.ndarray:
    """The ``dim``-vector sketch of the concatenation of ``pieces``; E<Sx, Sy> = <x, y> over sketches.

    >>> maps = sketch_maps([3], 2, seed=0)
    >>> float(count_sketch([np.zeros(3)], maps, 2) @ count_sketch([np.ones(3)], maps, 2))
    0.0
    """
    out = np.zeros(dim)
    for (h, s), x in zip(maps, pieces, strict=True):
        out += np.bincount(h, weights=s * np.asarray(x, dtype=float).ravel(), minlength=dim)
    return out


def _sample_group(model, tokenizer, prompts: list[str], rollouts: int, seed: int):
    """``rollouts`` completions per prompt at temperature 1 under torch seed ``seed``: the token ids,
    the prompt width, the 0/1 rewards [Q, rollouts] and the GRPO advantages ``(r - mean) / (std + 1e-4)``."""
    import torch

    model.eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        enc = tokenizer([p for p in prompts for _ in range(rollouts)], return_tensors="pt", padding=True)
        with torch.no_grad():
            seqs = model.generate(
                **enc,
                max_new_tokens=new_token_cap(prompts),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
    width = enc["input_ids"].shape[1]
    texts = tokenizer.batch_decode(seqs[:, width:], skip_special_tokens=True)
    rewards = np.asarray(Verifier()([p for p in prompts for _ in range(rollouts)], texts)).reshape(-1, rollouts)
    adv = (rewards - rewards.mean(1, keepdims=True)) / (rewards.std(1, ddof=1, keepdims=True) + 1e-4)
    return seqs, width, rewards, adv


def _completion_length(completion, eos_id: int) -> int:
    done = (completion == eos_id).nonzero()
    return int(done[0]) + 1 if len(done) else len(completion)


def per_rollout_gradients(model, tokenizer, prompts: list[str], rollouts: int, seed: int, sketch_dim: int = 65_536):
    """[len(prompts) * rollouts, sketch_dim] count-sketched per-rollout gradients of the GRPO loss
    (rollouts sampled at temperature 1 under torch seed ``seed``), and the 0/1 rewards."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    maps = sketch_maps([p.numel() for p in params], sketch_dim, seed)
    seqs, width, rewards, adv = _sample_group(model, tokenizer, prompts, rollouts, seed)
    out = np.zeros((seqs.shape[0], sketch_dim))
    for i in range(seqs.shape[0]):
        a = float(adv.flat[i])
        if a == 0.0:
            continue  # a zero-advantage rollout contributes a zero gradient
        length = _completion_length(seqs[i, width:], tokenizer.eos_token_id)
        ids = seqs[i : i + 1, : width + length]
        mask = (ids != tokenizer.pad_token_id).long()
        logits = model(input_ids=ids, attention_mask=mask).logits[0, width - 1 : width + length - 1]
        logp = torch.log_softmax(logits.float(), -1).gather(1, ids[0, width:, None]).mean()
        model.zero_grad()
        (a * logp).backward()
        out[i] = count_sketch([p.grad.detach().double().numpy() for p in params], maps, sketch_dim)
    model.zero_grad()
    return out, rewards


def batch_gradient(model, tokenizer, prompts: list[str], rollouts: int, seed: int) -> np.ndarray:
    """The exact gradient of one GRPO step's loss (``rollouts`` fresh completions per prompt under
    torch seed ``seed``; the mean over completions of A_i times the token-mean log-probability, as
    TRL's ``grpo`` loss on policy): one flat float vector over every trainable parameter."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    seqs, width, _, adv = _sample_group(model, tokenizer, prompts, rollouts, seed)
    completion = seqs[:, width:]
    keep = torch.zeros_like(completion, dtype=torch.float32)
    for i in range(seqs.shape[0]):
        keep[i, : _completion_length(completion[i], tokenizer.eos_token_id)] = 1.0
    mask = torch.cat([(seqs[:, :width] != tokenizer.pad_token_id).long(), keep.long()], dim=1)
    logits = model(input_ids=seqs, attention_mask=mask).logits[:, width - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1).gather(2, completion[..., None])[..., 0]
    per_rollout = (logp * keep).sum(1) / keep.sum(1).clamp(min=1.0)
    model.zero_grad()
    (torch.as_tensor(adv.reshape(-1), dtype=torch.float32) * per_rollout).mean().backward()
    out = np.concatenate([p.grad.detach().double().numpy().ravel() for p in params])
    model.zero_grad()
    return out


def step_probe(model, tokenizer, prompts: list[str], rollouts: int, resamples: int, seed: int) -> dict:
    """The regime map's probes of one step, on the demo: the batch gradient of ``resamples`` fresh
    samples of the Uniform step on ``prompts`` (`batch_gradient`) as (trace of the covariance,
    debiased squared mean) (`fingerprints.batch_variance_stats`), and the noise/signal of the
    per-rollout gradients of one sample (`per_rollout_gradients`, `fingerprints.noise_to_signal`)."""

    grads = np.array([batch_gradient(model, tokenizer, prompts, rollouts, seed + k) for k in range(resamples)])
    trace, signal = batch_variance_stats(grads)
    per_rollout, _ = per_rollout_gradients(model, tokenizer, prompts, rollouts, seed + resamples)
    return {"probe_var": trace, "probe_signal": signal, "nsr_rollout": float(noise_to_signal(per_rollout))}


def gradient_noise_to_signal(model, tokenizer, prompts: list[str], rollouts: int, seed: int) -> dict:
    """Noise-to-signal of the per-rollout GRPO gradients of one batch, with the batch's zero-variance fraction."""
    grads, rewards = per_rollout_gradients(model, tokenizer, prompts, rollouts, seed)
    flat = (rewards.max(1) == rewards.min(1)).mean()
    return {"noise_to_signal": float(noise_to_signal(grads)), "zero_variance_fraction": float(flat)}

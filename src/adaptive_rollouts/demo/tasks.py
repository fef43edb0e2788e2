"""Procedural arithmetic tasks from reasoning-gym, in a compact prompt format for a char-level LM.

A problem is a reasoning-gym entry (``chain_sum``: sums/differences of 2-3 one-digit numbers;
``products``: a product of two numbers, both of 1 digit or both of 2 digits). The prompt is its
expression without spaces plus ``=`` (``"7+2-3="``); the model answers with the number;
reasoning-gym's own verifier (``score_answer``) gives the reward. Mixed difficulty (one-digit
facts, three-term chains, two-digit products) makes success rates spread over [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

TASKS = {
    "chain_sum": dict(min_terms=2, max_terms=3, min_digits=1, max_digits=1),
    "products": dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2),
}


@dataclass(frozen=True)
class Problem:
    task: str
    seed: int
    index: int
    prompt: str
    answer: str
    size: int


@lru_cache(maxsize=16)
def _dataset(task: str, seed: int, size: int):
    import reasoning_gym

    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    return reasoning_gym.create_dataset(task, seed=seed, size=size, **TASKS[task])


def make_problems(n: int, seed: int, exclude: set[str] | frozenset[str] = frozenset()) -> list[Problem]:
    """``n`` distinct problems (distinct prompts), half from each task, none in ``exclude``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    out: list[Problem] = []
    seen = set(exclude)
    size = 20 * n + 4000
    for k, task in enumerate(sorted(TASKS)):
        want = n // len(TASKS) + (1 if k < n % len(TASKS) else 0)
        ds, got = _dataset(task, seed + 1000 * k, size), 0
        for index in range(size):
            entry = ds[index]
            prompt = entry["metadata"]["expression"].replace(" ", "") + "="
            if prompt in seen:
                continue
            seen.add(prompt)
            out.append(Problem(task, seed + 1000 * k, index, prompt, str(entry["answer"]), size))
            got += 1
            if got == want:
                break
        if got < want:
            raise ValueError(f"could not draw {want} distinct {task} problems with seed {seed}")
    return out


def entry_of(problem: Problem) -> dict:
    return _dataset(problem.task, problem.seed, problem.size)[problem.index]


class Verifier:
    """Reward function for TRL: looks the prompt up and scores the completion with
    reasoning-gym's verifier (``score_answer``) for that entry.

    >>> problems = make_problems(2, seed=0)
    >>> Verifier(problems)([problems[0].prompt], [problems[0].answer])
    [1.0]
    """

    __name__ = "verifier"

    def __init__(self, problems: list[Problem]):
        self.entries = {p.prompt: (p, entry_of(p)) for p in problems}

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        out = []
        for prompt, completion in zip(prompts, completions, strict=True):
            if prompt not in self.entries:
                raise KeyError(f"unknown prompt {prompt!r}")
            problem, entry = self.entries[prompt]
            ds = _dataset(problem.task, problem.seed, problem.size)
            out.append(float(ds.score_answer(completion.strip(), entry)))
        return out

"""The demo's tasks: sort a list of digits (reasoning-gym's ``number_sorting``), in a compact format.

A problem is a reasoning-gym ``number_sorting`` entry of one-digit numbers (values 0-9, no
decimals), ascending or descending: 3-8 numbers in the default task ``sort``, 3-12 in ``ladder``,
a difficulty ladder on which the ladder's own warm start solves short lists almost always, long
ones almost never, with a frontier between (docs/demo.md measures it). Its prompt is the direction letter, the digits and ``=``
(``"a2786185="``: sort 2,7,8,6,1,8,5 ascending); the answer is the sorted digits (``"1256788"``).
The answer is *computed* by a rule, and the space is far too large to memorise: about 2.2 x 10^8
distinct prompts in ``sort`` (`space_size`).

Splits are disjoint by construction: a prompt's split is fixed by a hash of its text
(`split_of`), and the SFT set, the RL pool and the held-out set only keep prompts of their own
split (they also draw from different reasoning-gym seeds). The reward is an exact match of the
sorted digits (`Verifier`); reasoning-gym's own ``score_answer`` is more lenient (it accepts each
number within +-1 of the right one) and gives an exact answer 1.0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from adaptive_rollouts.checks.validation import check_choice

TASK = "number_sorting"
TASK_OPTIONS = dict(min_numbers=3, max_numbers=8, min_decimals=0, max_decimals=0, min_value=0, max_value=9)
SPLITS = ("held_out", "pool", "sft")
SPLIT_SEEDS = {"held_out": 2, "pool": 1, "sft": 7_000}  # reasoning-gym seeds of each split's draws
_BUCKETS = 16  # hash bucket 0: held-out, 1: RL pool, 2..15: SFT


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str


@dataclass(frozen=True)
class Task:
    """A demo task: reasoning-gym ``number_sorting`` over ``min_numbers``..``max_numbers`` one-digit
    numbers, with its warm start in ``demo/assets/<assets>`` (``""``: the folder itself), trained on
    the supervised split of ``sft_task``."""

    name: str
    min_numbers: int
    max_numbers: int
    assets: str
    sft_task: str

    @property
    def options(self) -> dict[str, int]:
        """reasoning-gym ``number_sorting`` options of the task."""
        return {**TASK_OPTIONS, "min_numbers": self.min_numbers, "max_numbers": self.max_numbers}

    @property
    def max_new_tokens(self) -> int:
        """The longest answer + ``<eos>``: what generation needs to score every prompt of the task.

        >>> TASKS["sort"].max_new_tokens, TASKS["ladder"].max_new_tokens
        (9, 13)
        """
        return self.max_numbers + 1


TASKS = {
    "sort": Task("sort", TASK_OPTIONS["min_numbers"], TASK_OPTIONS["max_numbers"], "", "sort"),
    # supervised on lists of 3-8 only: the longer rungs are beyond what supervision showed
    "ladder": Task("ladder", 3, 12, "ladder", "sort"),
}


def task_of(name: str) -> Task:
    """The `Task` named ``name`` (ValueError naming it if unknown).

    >>> task_of("ladder").max_numbers
    12
    """
    return TASKS[check_choice("task", name, tuple(TASKS))]


def split_of(prompt: str) -> str:
    """The split a prompt belongs to, from a hash of its text (so the splits never share a prompt).

    >>> split_of("a123=") in SPLITS
    True
    """
    bucket = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "little") % _BUCKETS
    return SPLITS[min(bucket, 2)]


def space_size(task: str = "sort") -> int:
    """Distinct prompts: two directions x 10^n digit strings for n = 3..8 (``sort``; 3..12 ``ladder``).

    >>> space_size()
    222222000
    """
    spec = task_of(task)
    return 2 * sum(10**n for n in range(spec.min_numbers, spec.max_numbers + 1))


def answer_of(prompt: str) -> str:
    """The sorted digits a prompt asks for; ValueError names a malformed prompt.

    >>> answer_of("d2786185="), answer_of("a2786185=")
    ('8876521', '1256788')
    """
    if len(prompt) < 3 or prompt[0] not in "ad" or prompt[-1] != "=" or not prompt[1:-1].isdigit():
        raise ValueError(f"prompt must look like 'a512=' or 'd512=', got {prompt!r}")
    return "".join(sorted(prompt[1:-1], reverse=prompt[0] == "d"))


def length_of(prompt: str) -> int:
    """How many digits a prompt sorts (its difficulty)."""
    return len(prompt) - 2


@lru_cache(maxsize=8)
def _dataset(seed: int, size: int, task: str = "sort"):
    import reasoning_gym

    return reasoning_gym.create_dataset(TASK, seed=seed, size=size, **task_of(task).options)


def prompt_of(entry: dict) -> str:
    """The compact prompt of a reasoning-gym ``number_sorting`` entry."""
    digits = "".join(str(int(float(x))) for x in entry["metadata"]["original_numbers"])
    return ("a" if entry["metadata"]["direction"] == "ascending" else "d") + digits + "="


def make_problems(
    n: int, split: str, exclude: frozenset[str] | set[str] = frozenset(), task: str = "sort"
) -> list[Problem]:
    """``n`` distinct problems of ``split`` (``"held_out"``, ``"pool"`` or ``"sft"``) of ``task``
    (`TASKS`), none in ``exclude``, drawn in order from reasoning-gym with the split's seed
    (deterministic)."""
    check_choice("split", split, SPLITS)
    task_of(task)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    size = 40 * n + 10_000
    ds, seen, out = _dataset(SPLIT_SEEDS[split], size, task), set(exclude), []
    for index in range(size):
        prompt = prompt_of(ds[index])
        if prompt in seen or split_of(prompt) != split:
            continue
        seen.add(prompt)
        out.append(Problem(prompt, answer_of(prompt)))
        if len(out) == n:
            return out
    raise ValueError(f"could not draw {n} distinct {split} problems")


def rg_score(prompt: str, completion: str) -> float:
    """reasoning-gym's own ``score_answer`` for a compact prompt and completion (lenient: +-1 per number)."""
    digits = prompt[1:-1]
    direction = "ascending" if prompt[0] == "a" else "descending"
    expected = [f"{float(d)}" for d in answer_of(prompt)]
    entry = {"answer": str(expected), "metadata": {"direction": direction, "original_numbers": list(digits)}}
    return float(_dataset(0, 1).score_answer(str(list(completion.strip())), entry))


class Verifier:
    """Reward function for TRL: 1.0 if the completion is exactly the sorted digits, else 0.0.

    >>> Verifier()(["a312=", "d312="], ["123", "123"])
    [1.0, 0.0]
    """

    __name__ = "verifier"

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        return [float(c.strip() == answer_of(p)) for p, c in zip(prompts, completions, strict=True)]

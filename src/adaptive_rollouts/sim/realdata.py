"""Optional: real MiniLM embeddings of reasoning-gym questions as the simulator's prompt features.

Lazy and offline: needs the ``[demo]`` extra (reasoning-gym, sentence-transformers and the packaged
all-MiniLM-L6-v2). The 384-d embeddings are projected on their top ``dim`` principal components
and re-normalised, so the policy stays small; the task a question comes from is its natural
cluster. Difficulty is then assigned by the scenario, as for synthetic features.
"""

from __future__ import annotations

import numpy as np

from adaptive_rollouts.embeddings import default_encoder

__all__ = ["TASKS", "reasoning_gym_features"]

TASKS = (
    "basic_arithmetic",
    "chain_sum",
    "gcd",
    "lcm",
    "leg_counting",
    "letter_counting",
    "number_sorting",
    "spell_backward",
    "word_sorting",
    "fraction_simplification",
    "count_bits",
    "simple_equations",
)


def reasoning_gym_features(
    n_prompts: int, n_test: int, dim: int = 16, seed: int = 0, tasks: tuple[str, ...] = TASKS, encoder=None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(train features [n_prompts, dim], test features [n_test, dim], questions) from reasoning-gym.

    Raises ImportError with the extra to install when reasoning-gym or the encoder is missing.
    """
    try:
        import reasoning_gym
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("real features need reasoning-gym: pip install 'adaptive-rollouts[demo]'") from err
    if encoder is None:
        encoder = default_encoder()
    total = n_prompts + n_test
    per_task = -(-total // len(tasks))
    questions: list[str] = []
    for i, task in enumerate(tasks):
        data = reasoning_gym.create_dataset(task, size=per_task, seed=seed * 1000 + i)
        questions.extend(str(data[j]["question"]) for j in range(per_task))
    order = np.random.default_rng(seed).permutation(len(questions))[:total]
    questions = [questions[j] for j in order]
    emb = np.asarray(encoder.encode(questions), dtype=float)
    centred = emb - emb.mean(axis=0)
    _, _, vt = np.linalg.svd(centred[:n_prompts], full_matrices=False)
    x = centred @ vt[:dim].T
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x[:n_prompts], x[n_prompts:], questions

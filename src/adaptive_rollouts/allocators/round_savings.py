"""What a round may save, and when no round can: the expected tokens a pilot or a split leaves
ungenerated (`pilot_saving`, `split_saving`; `allocators.round_plan` prices them against a round's
latency) and the flat groups no later round could cut (`cannot_cut`). Formulas in
`allocators.round_plan` and docs/tokens.md ("Pricing a round"); pure numpy.
"""

from __future__ import annotations

import numpy as np

from ..objectives.beta import beta_mean_var, beta_moment

__all__ = ["pilot_saving", "split_saving", "cannot_cut"]


def _outcome_moments(alpha: np.ndarray, beta: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[p^h] and E[(1 - p)^h] per prompt under Beta(alpha, beta), h = ``power`` (whole numbers)."""
    mean, var = beta_mean_var(alpha, beta)
    up, down = np.zeros(mean.size), np.zeros(mean.size)
    for h in np.unique(power).tolist():
        at = power == h
        up[at] = beta_moment(mean[at], var[at], float(h), 0.0)
        down[at] = beta_moment(mean[at], var[at], 0.0, float(h))
    return up, down


def pilot_saving(
    n: np.ndarray,
    m: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    fail_tokens: np.ndarray,
    success_tokens: np.ndarray,
) -> np.ndarray:
    """Per prompt, the tokens a flat pilot of ``m`` leaves ungenerated of a group of ``n`` when it is
    cut: (n - m) (E[p^m] L1 + E[(1 - p)^m] L0) (0 where m >= n)."""
    n, m = np.asarray(n, dtype=np.int64), np.minimum(np.asarray(m, dtype=np.int64), n)
    up, down = _outcome_moments(np.asarray(alpha, float), np.asarray(beta, float), m)
    return (n - m) * (up * np.asarray(success_tokens, float) + down * np.asarray(fail_tokens, float))


def split_saving(
    lack: np.ndarray,
    chunk: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    succeeded: np.ndarray,
    fail_tokens: np.ndarray,
    success_tokens: np.ndarray,
) -> np.ndarray:
    """Per still-flat group lacking ``lack`` rollouts, given ``chunk`` of them now: the tokens of the
    other lack - chunk left ungenerated if the chunk comes back like the group so far (all
    successes where ``succeeded``, else all failures), under the posterior Beta(alpha, beta)."""
    lack, chunk = np.asarray(lack, dtype=np.int64), np.asarray(chunk, dtype=np.int64)
    up, down = _outcome_moments(np.asarray(alpha, float), np.asarray(beta, float), chunk)
    succeeded = np.asarray(succeeded, dtype=bool)
    same = np.where(succeeded, up * np.asarray(success_tokens, float), down * np.asarray(fail_tokens, float))
    return np.maximum(lack - chunk, 0) * same


def cannot_cut(
    alpha: np.ndarray,
    beta: np.ndarray,
    target: np.ndarray,
    scored: np.ndarray,
    lack: np.ndarray,
    cost: np.ndarray,
    probed: np.ndarray,
) -> bool:
    """Whether no later round can cut any of the still-flat groups given: they are alike (the same
    posterior Beta(alpha, beta), group size, rollouts scored, rollouts lacking and cost of them) and
    none is an exploration probe. A cut gives up only groups worth less per unit of cost than the
    average of the flat groups (`saving_rule.affordable_losses`); alike groups are all average, and
    those a round leaves flat are alike again (the same chunk came back the same way). Their halves
    would only add rounds, so they get all they lack at once: the first step of a run, whose prompts
    the belief cannot yet tell apart, takes two rounds instead of three.

    >>> same = dict(target=np.array([8, 8]), scored=np.array([4, 4]), lack=np.array([4, 4]),
    ...             cost=np.array([4.0, 4.0]), probed=np.array([False, False]))
    >>> cannot_cut(np.array([1.0, 1.0]), np.array([5.0, 5.0]), **same)
    True
    >>> cannot_cut(np.array([1.0, 5.0]), np.array([5.0, 1.0]), **same)
    False
    """
    if np.asarray(probed, dtype=bool).any():
        return False
    columns = [np.asarray(x, dtype=float) for x in (alpha, beta, target, scored, lack, cost)]
    return all(np.allclose(c, c[0], rtol=1e-12, atol=0.0) for c in columns if c.size)

"""A simulated RLVR problem: a linear-softmax policy over K candidate answers per prompt.

Each prompt q has a feature vector x_q (clustered synthetic embeddings, or real MiniLM embeddings),
one correct answer c_q given by a linear teacher, and fixed per-prompt logit offsets b_q that set
its difficulty (a *distractor* answer that attracts probability, and a bonus or penalty on the
correct answer). The policy is

    pi(k | q) = softmax_k( s_shared x_q . W[:, k] + s_own E[q, k] + b_q[k] )

with W shared by all prompts and E a per-prompt table (both learned; E only when s_own > 0) and
b_q fixed. ``reasoning_tokens`` L > 0 adds what makes an LLM's policy gradient noisy: before
its answer, every rollout emits L reasoning tokens from the same head pi(. | q); the reward
depends on the answer only, so their score terms (counts c of each symbol minus L pi) are pure
noise in the gradient of log pi(rollout), on the same parameters the answer needs.
``transfer`` t in (0, 1] sets s_shared = sqrt(t), s_own = sqrt(1 - t): how much of a
rollout's learning signal goes to parameters every prompt shares (held-out prompts have no E, so
only W generalises). Verifier reward of answer k:
R[q, k] (binary: 1 for the correct answer; graded: partial credit in [0, 1] for wrong answers).
Success probability p_q = sum_k pi(k|q) R[q, k]; it drifts as W trains, and prompts of one
cluster move together, which is what an embedding-based predictor can exploit.

Scenarios differ in the initial success distribution (W = 0):

* ``easy-heavy``  most clusters easy (p0 around 0.7-0.9), a hard minority;
* ``hard-heavy``  most clusters hard (p0 around 0.05), an easier minority;
* ``bimodal``     half very easy, half very hard: few informative prompts;
* ``cold-start``  almost every prompt hard at the start (mean p about 0.08, most below 0.1): where a
                  rule that favours the prompts that already varied starves the rare successes;
* ``pareto``      the reward std sigma_q = sqrt(p0 (1 - p0)) is Pareto(k = 2)-tailed (VIGOR Thm 2);
* ``graded``      graded rewards (fraction of unit tests passed), middling difficulty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import softmax

from adaptive_rollouts.checks.validation import check_choice
from adaptive_rollouts.sim.lengths import LengthModel

SCENARIOS = ("easy-heavy", "hard-heavy", "bimodal", "pareto", "graded", "cold-start")

__all__ = ["SCENARIOS", "Problem", "make_problem"]

_DISTRACTOR_LOGIT = 2.0
PARETO_TAIL_INDEX = 2.0
PARETO_SIGMA_MIN = 0.04


@dataclass
class Problem:
    """Fixed data of one simulated task; the learned weights live in ``W``.

    Arrays for the train pool (prefix none) and the held-out set (``test_`` prefix):
    features [N, d], offsets [N, K], rewards [N, K] (R), lengths [N, K] (tokens of each answer).
    """

    scenario: str
    features: np.ndarray
    offsets: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    cluster: np.ndarray
    test_features: np.ndarray
    test_offsets: np.ndarray
    test_rewards: np.ndarray
    graded: bool
    W: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    shared_scale: float = 1.0
    own_scale: float = 0.0
    E: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    reasoning_tokens: int = 0
    # completion lengths of the rollouts (tokens they cost, `sim.lengths`); None: not modelled
    length_model: LengthModel | None = None

    def __post_init__(self) -> None:
        if self.W.size == 0:
            self.W = np.zeros((self.features.shape[1], self.rewards.shape[1]))
        if self.E.size == 0 and self.own_scale:
            self.E = np.zeros((self.features.shape[0], self.rewards.shape[1]))

    @property
    def n_params(self) -> int:
        return int(self.W.size + (self.E.size if self.own_scale else 0))

    def parameters(self) -> np.ndarray:
        """Learned parameters, flat: W, then E when there is a per-prompt component."""
        return np.concatenate([self.W.ravel(), self.E.ravel()]) if self.own_scale else self.W.ravel().copy()

    def set_parameters(self, theta: np.ndarray) -> None:
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},), got {theta.shape}")
        self.W = theta[: self.W.size].reshape(self.W.shape).copy()
        if self.own_scale:
            self.E = theta[self.W.size :].reshape(self.E.shape).copy()

    def reset_parameters(self) -> None:
        self.set_parameters(np.zeros(self.n_params))

    def _logits(self, idx: np.ndarray | None, W: np.ndarray) -> np.ndarray:
        x = self.features if idx is None else self.features[idx]
        b = self.offsets if idx is None else self.offsets[idx]
        z = self.shared_scale * (x @ W) + b
        if self.own_scale:
            z = z + self.own_scale * (self.E if idx is None else self.E[idx])
        return z

    @property
    def n_prompts(self) -> int:
        return self.features.shape[0]

    @property
    def n_answers(self) -> int:
        return self.rewards.shape[1]

    def initial_success(self, idx: np.ndarray | None = None) -> np.ndarray:
        """p0_q: success of train prompts ``idx`` (all when None) before training (W = 0, E = 0), fixed
        data of the problem; 1 - p0_q is the hardness the length model reads."""
        b = self.offsets if idx is None else self.offsets[idx]
        R = self.rewards if idx is None else self.rewards[idx]
        return (softmax(b, axis=-1) * R).sum(axis=1)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max())

    def probs(self, idx: np.ndarray | None = None, W: np.ndarray | None = None) -> np.ndarray:
        """Policy pi(. | q) for train prompts ``idx`` (all when None): [len(idx), K]."""
        return softmax(self._logits(idx, self.W if W is None else W), axis=-1)

    def success(self, idx: np.ndarray | None = None, W: np.ndarray | None = None) -> np.ndarray:
        """True expected reward p_q of train prompts (success probability for binary rewards)."""
        R = self.rewards if idx is None else self.rewards[idx]
        return (self.probs(idx, W) * R).sum(axis=1)

    def reward_variance(self, idx: np.ndarray | None = None) -> np.ndarray:
        """True per-rollout reward variance: p (1 - p) for binary rewards."""
        R = self.rewards if idx is None else self.rewards[idx]
        pi = self.probs(idx)
        m = (pi * R).sum(axis=1)
        return np.maximum((pi * R * R).sum(axis=1) - m * m, 0.0)

    def test_accuracy(self, W: np.ndarray | None = None) -> float:
        """Held-out expected reward (pass@1 accuracy for binary rewards), exact, no sampling."""
        W = self.W if W is None else W
        pi = softmax(self.shared_scale * (self.test_features @ W) + self.test_offsets, axis=-1)
        return float((pi * self.test_rewards).sum(axis=1).mean())

    def sample(self, idx: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One rollout for each entry of ``idx`` (repeats allowed): (answers, rewards)."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        cdf = np.cumsum(self.probs(idx), axis=1)
        u = rng.random(idx.size)[:, None]
        answers = np.minimum((u > cdf).sum(axis=1), self.n_answers - 1)
        return answers, self.rewards[idx, answers]

    def sample_reasoning(self, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """Counts [len(idx), K] of each symbol among the ``reasoning_tokens`` tokens every rollout of
        ``idx`` emits before its answer (None when there are none): multinomial(L, pi(. | q))."""
        if self.reasoning_tokens <= 0:
            return None
        idx = np.asarray(idx, dtype=np.int64)
        return rng.multinomial(self.reasoning_tokens, self.probs(idx)).astype(float)


def _cluster_hardness(scenario: str, n_clusters: int, rng: np.random.Generator) -> np.ndarray:
    """Per-cluster chance that a prompt is hard (Beta with the scenario's mean share)."""
    if scenario == "pareto":
        # Probability of the hard side of p(1-p); most low-variance prompts are hard ones.
        return np.where(rng.random(n_clusters) < 0.35, 0.0, 1.0)
    hard_share = {"easy-heavy": 0.3, "hard-heavy": 0.7, "bimodal": 0.5, "graded": 0.5, "cold-start": 0.85}[scenario]
    conc = 2.0
    return rng.beta(hard_share * conc, (1 - hard_share) * conc, size=n_clusters)


def _initial_success(
    scenario: str, cluster: np.ndarray, cluster_hard: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Per-prompt p0 (success at W = 0); cluster membership shifts the odds of being hard."""
    n = cluster.size
    hard = rng.random(n) < cluster_hard[cluster]
    if scenario == "pareto":
        u = rng.random(n)
        sigma = np.minimum(PARETO_SIGMA_MIN * u ** (-1.0 / PARETO_TAIL_INDEX), 0.5)
        low = 0.5 * (1.0 - np.sqrt(np.maximum(1.0 - 4.0 * sigma**2, 0.0)))
        return np.where(hard, low, 1.0 - low)
    if scenario == "easy-heavy":
        easy_p, hard_p = rng.beta(6, 2, n), rng.beta(1, 10, n)
    elif scenario == "hard-heavy":
        easy_p, hard_p = rng.beta(2, 3, n), rng.beta(1, 15, n)
    elif scenario == "bimodal":
        easy_p, hard_p = rng.beta(12, 1.5, n), rng.beta(1, 25, n)
    elif scenario == "cold-start":
        easy_p, hard_p = rng.beta(2, 5, n), rng.beta(1, 20, n)
    else:  # graded
        easy_p, hard_p = rng.beta(3, 2, n), rng.beta(1.5, 6, n)
    return np.where(hard, hard_p, easy_p)


def _offsets_for(p0: np.ndarray, correct: np.ndarray, distractor: np.ndarray, K: int) -> np.ndarray:
    """Offsets b_q: distractor at logit 2, correct answer at the logit giving success p0 at W=0."""
    p0 = np.clip(p0, 1e-4, 1 - 1e-4)
    rest = np.exp(_DISTRACTOR_LOGIT) + (K - 2)
    b = np.zeros((p0.size, K))
    rows = np.arange(p0.size)
    b[rows, distractor] = _DISTRACTOR_LOGIT
    b[rows, correct] = np.log(p0 * rest / (1 - p0))
    return b


def _clustered_features(
    n: int, dim: int, centers: np.ndarray, rng: np.random.Generator, spread: float
) -> tuple[np.ndarray, np.ndarray]:
    cluster = rng.integers(0, centers.shape[0], size=n)
    x = centers[cluster] + spread * rng.standard_normal((n, dim)) / np.sqrt(dim)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, cluster


def make_problem(
    scenario: str = "hard-heavy",
    *,
    n_prompts: int = 4000,
    n_test: int = 1000,  # held-out prompts, for the accuracy
    n_answers: int = 6,  # K
    dim: int = 16,
    n_clusters: int = 24,
    spread: float = 0.6,  # of a prompt's features around its cluster centre
    seed: int = 0,
    features: np.ndarray | None = None,
    test_features: np.ndarray | None = None,
    transfer: float = 1.0,
    reasoning_tokens: int = 0,
    length_model: LengthModel | None = None,
) -> Problem:
    """Build one problem instance; every random choice comes from ``seed``.

    ``transfer`` in (0, 1]: share of the learning signal on parameters all prompts share (1: W
    only, the model of earlier versions). ``reasoning_tokens``: score-noise tokens per rollout (see
    `Problem`). ``features`` / ``test_features`` (optional, [N, d]) replace the synthetic clustered
    embeddings (for example MiniLM embeddings of real questions, see ``sim.realdata``).
    ``length_model``: completion lengths of the rollouts (`sim.lengths`; drawn by the `Simulator` from
    a generator of their own, so rewards and learning are the same with or without it).

    >>> pb = make_problem("bimodal", n_prompts=200, n_test=100, seed=1)
    >>> pb.features.shape, pb.rewards.shape
    ((200, 16), (200, 6))
    >>> 0.0 < pb.test_accuracy() < 1.0
    True
    """
    check_choice("scenario", scenario, SCENARIOS)
    if n_answers < 3:
        raise ValueError(f"n_answers must be >= 3 (correct, distractor, others), got {n_answers}")
    if n_prompts < 1 or n_test < 1:
        raise ValueError(f"n_prompts and n_test must be >= 1, got {n_prompts}, {n_test}")
    if not 0.0 < transfer <= 1.0:
        raise ValueError(f"transfer must be in (0, 1], got {transfer}")
    if reasoning_tokens < 0:
        raise ValueError(f"reasoning_tokens must be >= 0, got {reasoning_tokens}")
    rng = np.random.default_rng(seed)
    K = n_answers
    if features is None:
        centers = rng.standard_normal((n_clusters, dim))
        centers /= np.linalg.norm(centers, axis=1, keepdims=True)
        x, cl = _clustered_features(n_prompts, dim, centers, rng, spread)
        xt, clt = _clustered_features(n_test, dim, centers, rng, spread)
    else:
        x = np.asarray(features, dtype=float)
        xt = np.asarray(test_features if test_features is not None else features, dtype=float)
        if x.ndim != 2 or xt.ndim != 2 or x.shape[1] != xt.shape[1]:
            raise ValueError(f"features must be [N, d] and test_features [M, d], got {x.shape}, {xt.shape}")
        dim = x.shape[1]
        # Clusters of real embeddings: nearest of a few random prompts (cheap k-centres).
        centers = x[rng.choice(x.shape[0], size=min(n_clusters, x.shape[0]), replace=False)]
        n_clusters = centers.shape[0]
        cl = np.argmax(x @ centers.T, axis=1)
        clt = np.argmax(xt @ centers.T, axis=1)
    teacher = rng.standard_normal((dim, K))
    # The distractor: a wrong answer, the same one for most of a cluster (a shared misconception).
    cluster_wrong = rng.integers(1, K, size=n_clusters)
    cluster_hard = _cluster_hardness(scenario, n_clusters, rng)

    def side(xs: np.ndarray, cls: np.ndarray, p0: np.ndarray) -> tuple[np.ndarray, ...]:
        correct = np.argmax(xs @ teacher, axis=1)
        shift = np.where(rng.random(xs.shape[0]) < 0.8, cluster_wrong[cls], rng.integers(1, K, xs.shape[0]))
        distractor = (correct + shift) % K
        offsets = _offsets_for(p0, correct, distractor, K)
        R = np.zeros((xs.shape[0], K))
        R[np.arange(xs.shape[0]), correct] = 1.0
        if scenario == "graded":
            partial = rng.uniform(0.0, 0.7, size=R.shape) * (rng.random(R.shape) < 0.5)
            R = np.where(R == 1.0, 1.0, partial)
        lengths = np.where(R == 1.0, 1 + rng.poisson(4, R.shape), 1 + rng.poisson(8, R.shape))
        return offsets, R, lengths

    p0 = _initial_success(scenario, cl, cluster_hard, rng)
    p0t = _initial_success(scenario, clt, cluster_hard, rng)
    offsets, R, lengths = side(x, cl, p0)
    toffsets, tR, _ = side(xt, clt, p0t)
    return Problem(
        scenario=scenario,
        features=x,
        offsets=offsets,
        rewards=R,
        lengths=lengths,
        cluster=cl,
        test_features=xt,
        test_offsets=toffsets,
        test_rewards=tR,
        graded=scenario == "graded",
        shared_scale=float(np.sqrt(transfer)),
        own_scale=float(np.sqrt(1.0 - transfer)),
        reasoning_tokens=int(reasoning_tokens),
        length_model=length_model,
    )

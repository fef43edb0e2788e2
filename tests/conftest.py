"""Helpers shared by the test modules (and by benchmarks/fuzz.py): a known-p predictor stub, seeded
Bernoulli samplers and environments with saveable state, every registry allocator built small, deep
state comparison, and the invariants every allocation must satisfy. Test modules import them with
``from conftest import ...`` (pytest puts this folder on the path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptive_rollouts.allocators import ALLOCATORS, PosteriorProgressive, make_allocator
from adaptive_rollouts.bridge import build_allocator as bridge_build_allocator
from adaptive_rollouts.embeddings import FeatureTable
from adaptive_rollouts.predictors import CumulativeMean, DiscountedBeta, GaussianProcess, PaperGP, Ridge, WindowedMean
from adaptive_rollouts.types import Prediction, allocator_kind

POOL = [f"q{i}" for i in range(12)]
DIM = 4
REGISTRY = sorted(ALLOCATORS)
# allocators whose predictor needs prompt features (they raise KeyError for a prompt without any)
FEATURE_BACKED = ("vip", "vip-paper", "posterior-progressive", "inverse-accuracy", "inverse-variance")
PREDICTORS = ("gp", "paper-gp", "ridge", "beta", "windowed", "cumulative")


def feature_table(pool: list | None = None, dim: int = DIM) -> FeatureTable:
    pool = POOL if pool is None else pool
    return FeatureTable(pool, np.random.default_rng(123).normal(size=(len(pool), dim)))


def small_gp(features: Any = None) -> GaussianProcess:
    """Our GP with few random features: fast enough for many tiny runs."""
    return GaussianProcess(feature_table() if features is None else features, n_features=16, seed=0)


def build_predictor(name: str, features: Any = None):
    features = feature_table() if features is None else features
    return {
        "gp": lambda: small_gp(features),
        "paper-gp": lambda: PaperGP(features, prior_mean=0.0),
        "ridge": lambda: Ridge(features),
        "beta": lambda: DiscountedBeta(),
        "windowed": lambda: WindowedMean(window=2),
        "cumulative": lambda: CumulativeMean(),
    }[name]()


def build_allocator(name: str, seed: int = 0, features: Any = None):
    """Registry allocator `name`, as trainers build it (`bridge.build_allocator`), with small predictors."""
    features = feature_table() if features is None else features
    kwargs: dict[str, Any] = {"seed": seed}
    if name in ("vip", "posterior-progressive", "inverse-accuracy", "inverse-variance"):
        kwargs["predictor"] = small_gp(features)
    if name == "vip-paper":
        kwargs["features"] = features
    return bridge_build_allocator(name, kwargs)


# non-default configurations the fuzzing also covers (skipping, caps, fixed group sizes)
VARIANTS = {
    "vip+skip+token-mean": lambda seed: make_allocator(
        "vip", predictor="beta", aggregation="token-mean", allow_skip=True, upper=20, seed=seed
    ),
    "vip+drgrpo+bounds": lambda seed: make_allocator(
        "vip", predictor="windowed", estimator="drgrpo", lower=3, upper=12, seed=seed
    ),
    "posterior-progressive+skip": lambda seed: make_allocator(
        "posterior-progressive",
        predictor="beta",
        allow_skip=True,
        upper=16,
        round_fractions=(0.4, 0.3, 0.2, 0.1),
        seed=seed,
    ),
    "posterior-progressive+variance": lambda seed: make_allocator(
        "posterior-progressive", predictor="cumulative", objective="variance", estimator="rloo", seed=seed
    ),
    "vigor+capped": lambda seed: make_allocator("vigor", alpha=0.3, gamma=3, upper=12, seed=seed),
    "vigor+drop-zero": lambda seed: make_allocator("vigor", drop_zero_variance=True, seed=seed),
    "dynamic-sampling+g4": lambda seed: make_allocator("dynamic-sampling", group_size=4, seed=seed),
    "knapsack+upper16": lambda seed: make_allocator("knapsack", upper=16, seed=seed),
    "dynamo+capped": lambda seed: make_allocator("dynamo", upper=12, seed=seed),
}


def build_variant(name: str, seed: int = 0):
    return VARIANTS[name](seed) if name in VARIANTS else build_allocator(name, seed)


def predictor_of(alloc):
    slot = getattr(alloc, "slot", None)
    return None if slot is None else slot.predictor


class BernoulliEnv:
    """Prompts with fixed success probabilities (or graded rewards with those means); its own
    seeded generator, saved with the run so that a resumed run draws the same rollouts."""

    def __init__(self, pool: list | None = None, seed: int = 0, graded: bool = False):
        self.pool = list(POOL if pool is None else pool)
        self.p = dict(zip(self.pool, np.linspace(0.0, 1.0, len(self.pool)) ** 1.5))
        self.graded = graded
        self.rng = np.random.default_rng(seed)
        self.log: list[tuple[list, list]] = []

    def batch(self, size: int) -> list:
        return [self.pool[i] for i in self.rng.choice(len(self.pool), size=size, replace=False)]

    def sampler(self, prompts: list):
        def sample(indices, counts):
            indices, counts = np.asarray(indices), np.asarray(counts)
            self.log.append(([prompts[i] for i in indices], counts.tolist()))
            out = []
            for i, c in zip(indices, counts):
                p = self.p[prompts[i]]
                if self.graded:  # mean p, values spread over [0, 1]
                    out.append(np.clip(p + self.rng.uniform(-0.3, 0.3, int(c)), 0.0, 1.0))
                else:
                    out.append((self.rng.random(int(c)) < p).astype(float))
            return out

        return sample

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def states_equal(a: Any, b: Any) -> bool:
    """Deep equality of two state dicts (arrays compared exactly, NaN == NaN)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return (
            a.shape == b.shape
            and a.dtype.kind == b.dtype.kind
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(states_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(states_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b


def budget_for(alloc, q: int, extra: int) -> int:
    """A feasible budget: the smallest one plus `extra`, capped by the largest."""
    low, high = alloc.budget_range(q)
    budget = low + extra if high is None else min(low + extra, high)
    if alloc.allow_skip and 0 < budget < alloc.lower:
        budget = alloc.lower
    return int(budget)


def effective_upper(alloc, q: int, budget: int) -> int | None:
    if isinstance(alloc, PosteriorProgressive):
        return alloc.effective_upper(q, budget)
    return alloc.upper


def check_step_invariants(alloc, prompts: list, budget: int, log: list, rewards: list) -> list[str]:
    """Violations of the allocation contract in one `run` (empty list = all good).

    exact budget ("fill") or at most the budget ("save"); bounds (lower / upper, zero only when skipping is allowed); one reward array per
    prompt, empty or the full group (never partial); rewards finite in [0, 1]; metrics report the
    rollouts and the skipped prompts; the predictor's beliefs are finite probabilities."""
    problems = []
    index = {p: i for i, p in enumerate(prompts)}
    counts = np.zeros(len(prompts), dtype=np.int64)
    for names, cs in log:
        for p, c in zip(names, cs):
            counts[index[p]] += c
    if counts.sum() > budget or (allocator_kind(alloc) == "fill" and counts.sum() != budget):
        problems.append(f"spent {counts.sum()} vs budget {budget} ({allocator_kind(alloc)})")
    used = counts > 0
    if not alloc.allow_skip and not used.all():
        problems.append(f"skipped prompts without allow_skip: {counts.tolist()}")
    if np.any(counts[used] < alloc.lower):
        problems.append(f"count below lower={alloc.lower}: {counts.tolist()}")
    upper = effective_upper(alloc, len(prompts), budget)
    if upper is not None and np.any(counts > upper):
        problems.append(f"count above upper={upper}: {counts.tolist()}")
    if len(rewards) != len(prompts):
        problems.append(f"{len(rewards)} reward arrays for {len(prompts)} prompts")
    for r, c in zip(rewards, counts):
        r = np.asarray(r)
        if r.ndim != 1 or r.size not in (0, c):
            problems.append(f"reward array of shape {r.shape} for a group of {c}")
        elif r.size and not (np.all(np.isfinite(r)) and np.all((r >= 0) & (r <= 1))):
            problems.append(f"rewards not finite in [0, 1]: {r.tolist()}")
    m = alloc.last_metrics or {}
    spent_ok = (
        m.get("rollouts_spent") == budget if allocator_kind(alloc) == "fill" else m.get("rollouts_spent") <= budget
    )
    if not spent_ok or m.get("rollouts_spent") != int(counts.sum()):
        problems.append(f"metrics rollouts_spent {m.get('rollouts_spent')} vs budget {budget}, counts {counts.sum()}")
    if m.get("skipped") != int(np.sum(counts == 0)):
        problems.append(f"metrics skipped {m.get('skipped')} != {int(np.sum(counts == 0))}")
    for key, value in m.items():
        # metrics documents mean_reward = nan when nothing was scored (budget 0, or a saving allocator
        # that skipped every prompt); NaN anywhere else is a bug
        if isinstance(value, float) and np.isnan(value) and not (key == "mean_reward" and counts.sum() == 0):
            problems.append(f"metric {key} is NaN")
    predictor = predictor_of(alloc)
    if predictor is not None:
        pred = predictor.predict(prompts)
        mean, var = np.asarray(pred.mean), np.asarray(pred.var)
        if mean.shape != (len(prompts),) or var.shape != (len(prompts),):
            problems.append(f"prediction shapes {mean.shape} / {var.shape}")
        elif not (
            np.all(np.isfinite(mean))
            and np.all(np.isfinite(var))
            and np.all((mean >= 0) & (mean <= 1))
            and np.all(var >= 0)
        ):
            problems.append(f"prediction not finite probabilities: {mean.tolist()} {var.tolist()}")
    return problems


def check_solution_invariants(
    costs: np.ndarray, counts: np.ndarray, budget: int, lower: int, upper: int, allow_skip: bool
) -> list[str]:
    """Violations of `solve_table`'s contract: exact budget, bounds, finite cost, and no improving
    transfer of any number of rollouts from one prompt to another (a necessary optimality condition)."""
    problems = []
    counts = np.asarray(counts)
    q = costs.shape[0]
    if counts.shape != (q,) or counts.dtype.kind not in "iu":
        return [f"counts shape/dtype {counts.shape} {counts.dtype}"]
    if counts.sum() != budget:
        problems.append(f"sum {counts.sum()} != budget {budget}")
    allowed = np.zeros(upper + 1, dtype=bool)
    allowed[lower:] = True
    if allow_skip:
        allowed[0] = True
    if np.any(counts < 0) or np.any(counts > upper) or not allowed[counts].all():
        return problems + [f"counts {counts.tolist()} outside the allowed set [{lower}, {upper}] skip={allow_skip}"]
    rows = np.arange(q)
    value = costs[rows, counts]
    if not np.all(np.isfinite(value)):
        problems.append(f"infinite cost at the solution {counts.tolist()}")
        return problems
    total = value.sum()
    tol = 1e-9 * max(1.0, float(np.abs(value).sum()))
    for i in range(q):
        for j in range(q):
            if i == j:
                continue
            for d in range(1, counts[i] + 1):
                ni, nj = counts[i] - d, counts[j] + d
                if nj > upper:
                    break
                if not (allowed[ni] and allowed[nj]):
                    continue
                new = total - value[i] - value[j] + costs[i, ni] + costs[j, nj]
                if new < total - tol:
                    problems.append(f"moving {d} from prompt {i} to {j} lowers the cost {total} -> {new}")
                    return problems
    return problems


# -- allocator tests: a predictor stub that knows p, a seeded sampler ------------------------------


class KnownP:
    """Predictor stub: fixed success probabilities (var given or 0); records updates."""

    def __init__(self, p: dict, var: float = 0.0):
        self.p = dict(p)
        self.var = var
        self.updates: list = []

    def predict(self, prompts):
        mean = np.array([self.p.get(x, 0.5) for x in prompts], dtype=float)
        return Prediction(mean, np.full(mean.size, self.var))

    def update(self, prompts, rewards):
        self.updates.append((list(prompts), [np.asarray(r).copy() for r in rewards]))

    def state_dict(self):
        return {"n_updates": len(self.updates)}

    def load_state_dict(self, state):
        self.updates = [None] * int(state["n_updates"])


def bernoulli_sampler(p_by_index, seed: int = 0, log: list | None = None):
    rng = np.random.default_rng(seed)
    p_by_index = np.asarray(p_by_index, dtype=float)

    def sample(indices, counts):
        if log is not None:
            log.append((np.asarray(indices).copy(), np.asarray(counts).copy()))
        return [(rng.random(int(c)) < p_by_index[i]).astype(float) for i, c in zip(indices, counts)]

    return sample


class Trained(Exception):
    """Raised by `capture_train`, a stand-in for `sim.train.train`: what a run would have trained on
    (problem, allocator, config), without training."""

    def __init__(self, problem, allocator, config):
        super().__init__("trained")
        self.problem, self.allocator, self.config = problem, allocator, config


def capture_train(problem, allocator, config, **_):
    raise Trained(problem, allocator, config)

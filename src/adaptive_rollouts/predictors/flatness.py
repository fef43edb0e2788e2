"""P(a group of n rollouts is all-equal) for every prompt, before generating, from three sources
combined online: the policy's own view of the prompt, the prompt's history, similar prompts
(docs/flatness.md derives and measures it)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from scipy.special import expit, logit

from ..checks.rewards import all_equal
from ..checks.validation import check_integer, check_prompts, check_range, names
from ..objectives.beta import all_equal_beta, beta_from_moments
from ..state.checks import StateReader, restore_on_error
from ..types import Prediction, StateDict
from ._common import check_batch, logistic_normal_moments
from .discounted_beta import DiscountedBeta
from .probe import OnlineLogistic, RunningScaler
from .recalibration import AllEqualCalibration, match_all_equal

__all__ = ["FlatnessPredictor", "PRIOR_VAR", "STRENGTHS", "TEMPERS"]

STRENGTHS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""Candidate spreads of p around the model's mean: Beta strength kappa (pseudo-rollouts)."""
TEMPERS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
"""Candidate weights of a prompt's own (discounted) history in its belief."""
PRIOR_VAR = 1.0
"""The prior variance of each weight of the regression (its inputs standardised). A weaker prior (10)
ranked the tiny LM's groups better on recorded traces but learned slower on the simulator's map,
ahead of the unit prior in one cell and behind it in six, and did not separate on the tiny-LM
ladder (docs/flatness.md, "A weaker prior, tried"): kept at 1."""
_SCORE_DECAY = 0.99  # per update: the candidates are scored on the recent run
_TEXT_CLIP = 1e-3  # the text model's mean enters as logit(clip(mean)): finite at 0 and 1


class FlatnessPredictor:
    """A Beta belief about each prompt's p, hence P(all-equal at n) = E[p^n + (1 - p)^n], exact
    under it (`objectives.beta.all_equal_beta`), with how sure that is.

    Sources (each can be off):

    - **policy**: a feature vector per prompt from the policy itself (the trainer's hidden state at
      the prompt's last token; the simulator's noisy view of its own logit margin), given each step
      by `observe_policy` before the prompts are predicted; projected to ``rank`` columns when
      wider (a fixed Gaussian random projection; narrower features enter whole) and standardised
      by a running scaler;
    - **text**: any predictor of p from the prompt (e.g. `GaussianProcess` on text embeddings,
      VIP's similar prompts); its mean enters as one input, logit(mean), whose weight starts at 1
      (the source taken at its word until the groups say otherwise, as the recalibration starts
      from the identity; the policy's columns start at 0);
    - **history**: the prompt's own visits, `DiscountedBeta` (discounted per visit), as pseudo-counts
      (s_h, f_h) capped at ``max_history_strength`` rollouts.

    Model: an `OnlineLogistic` regression (forgetting ``forget`` per step, prior variance
    ``prior_var`` per weight, `PRIOR_VAR`) of successes on
    z = [1, text logit, policy columns] gives each prompt's mean of p, mu = sigmoid(z . w) at the
    weights' mean w; prompts that share z still differ in p, by a spread kappa: the belief before
    history is the Beta with mean mu and variance mu (1 - mu) / (kappa + 1), and the prompt's
    history enters by Bayes' rule, tempered by t:

        p ~ Beta(alpha_0 + t s_h, beta_0 + t f_h).

    Each candidate pair (kappa in `STRENGTHS`, t in `TEMPERS`) has its own online recalibration of
    the chance it gives (`AllEqualCalibration`, fitted on the run's (chance, all-equal?) pairs).
    Each update scores every pair by the log-likelihood of whether the groups just seen were
    all-equal under its recalibrated P(all-equal at n) from before seeing them (prequential; scores
    decay by 0.99 per update); the best pair is used, its Beta re-strengthened, mean kept, so that
    its P(all-equal at n) is the recalibrated chance (`match_all_equal`). So the spread, the weight
    of history and the map are whatever has predicted the next groups best in this run - a history
    that stopped predicting (p drifted) loses its weight. A group of n counts
    (kappa + 1) / (kappa + n) rollouts' worth in the regression (rollouts that share a p carry less
    information about the mean than independent ones). With every source off the model is the
    population: the mean and spread of p across prompts. The weights' own posterior variance is
    left out of the belief: with many policy columns under forgetting it stays near the prior in the
    directions little seen, so it measures how unusual a prompt's features are rather than how
    uncertain its p is, and on the tiny LM's traces adding it ranked the groups worse
    (docs/flatness.md); the spread kappa the candidates fit carries the belief's uncertainty.
    ``weight_variance=True`` adds it back (mean and variance of p by Gauss-Hermite over the latent
    logit's N(z . w, z Sigma z)), the belief as it was, for comparisons.

    >>> model = FlatnessPredictor(text=None)
    >>> rng = np.random.default_rng(0)
    >>> p = np.where(np.arange(64) % 2 == 0, 0.02, 0.6)            # half the prompts almost never pass
    >>> for step in range(30):
    ...     model.observe_policy(range(64), (np.log(p / (1 - p)) + rng.normal(0, 0.5, 64))[:, None])
    ...     model.update(range(64), [rng.binomial(1, x, 8).astype(float) for x in p])
    >>> model.observe_policy(range(64), np.log(p / (1 - p))[:, None])
    >>> prob, sd = model.all_equal(range(64), 8)
    >>> bool(prob[::2].mean() > 0.7 > 0.1 > prob[1::2].mean())
    True
    """

    def __init__(
        self,
        *,
        history: Any = True,
        text: Any = None,
        policy: bool = True,
        rank: int = 256,
        forget: float = 0.95,
        prior_var: float = PRIOR_VAR,
        max_history_strength: float = 32.0,
        seed: int = 0,
        weight_variance: bool = False,
    ):
        if history is True:
            history = DiscountedBeta()
        if history not in (None, False) and not isinstance(history, DiscountedBeta):
            raise ValueError(f"history must be True, False, None or a DiscountedBeta, got {type(history).__name__}")
        if text is not None and not all(hasattr(text, m) for m in ("predict", "update", "state_dict")):
            raise ValueError(f"text must be None or a predictor (predict/update/state_dict), got {type(text).__name__}")
        self.history: DiscountedBeta | None = history or None
        self.text = text
        self.policy = bool(policy)
        self.rank = check_integer(rank, "rank", least=1)
        self.forget = check_range(forget, "forget", 0.0, 1.0, high_closed=True)
        self.prior_var = check_range(prior_var, "prior_var", 0.0)
        self.max_history_strength = check_range(max_history_strength, "max_history_strength", 0.0)
        self.seed = int(seed)
        self.weight_variance = bool(weight_variance)
        start = np.zeros(1 + (1 if text is not None else 0))
        if text is not None:  # the text logit's weight is 1: p = the source's mean, a priori
            start[1] = 1.0
        # the policy's columns join the regression (last) when the first features give their width
        self.model = OnlineLogistic(start.size, forget=self.forget, prior_var=self.prior_var, initial_mean=start)
        self.scaler: RunningScaler | None = None
        self.width: int | None = None
        self.scores = np.zeros((len(STRENGTHS), len(TEMPERS)))
        self.calibration = AllEqualCalibration(self.scores.size, forget=self.forget)
        self.group_size: int | None = None  # the largest group of the last update: what `belief` matches at
        self._pending: dict[Hashable, np.ndarray] = {}
        self._projection: np.ndarray | None = None

    # -- the policy's view ----------------------------------------------------------------------
    def observe_policy(self, prompts: Sequence[Hashable], features: Any) -> None:
        """This step's feature vector per prompt ([Q, width], the same width every step): kept
        until the next `update`. Refused (ValueError naming the input) when off, of another width
        than before, of the wrong row count, or not finite; a refused call changes nothing."""
        if not self.policy:
            raise ValueError("features: this FlatnessPredictor has the policy source off (policy=False)")
        prompts = check_prompts(prompts)
        x = np.asarray(features, dtype=float)
        if x.ndim != 2 or x.shape[0] != len(prompts):
            raise ValueError(f"features must be [{len(prompts)} prompts, width], got shape {x.shape}")
        if self.width is not None and x.shape[1] != self.width:
            raise ValueError(f"features have width {x.shape[1]}, earlier steps had {self.width}")
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        if bad.size:
            raise ValueError(f"features of prompts {names([prompts[i] for i in bad])} contain NaN/inf")
        if self.width is None:
            self.width = int(x.shape[1])
            self.model.add_inputs(self.columns)
            self.scaler = RunningScaler(self.columns)
        assert self.scaler is not None  # set with the width
        cols = self._project(x)
        self.scaler.observe(cols)
        self._pending = dict(zip(prompts, self.scaler.transform(cols)))

    @property
    def columns(self) -> int:
        """The policy's columns in the regression: min(width, ``rank``), 0 before the first features."""
        return 0 if self.width is None else min(self.width, self.rank)

    def _project(self, x: np.ndarray) -> np.ndarray:
        """At most ``rank`` columns: a fixed Gaussian random projection (seeded) when wider, the
        columns themselves otherwise."""
        width = x.shape[1]
        if width <= self.rank:
            return x
        if self._projection is None:
            rng = np.random.default_rng([self.seed, width])
            self._projection = rng.standard_normal((width, self.rank)) / np.sqrt(self.rank)
        return x @ self._projection

    # -- belief ---------------------------------------------------------------------------------
    def _inputs(self, prompts: list) -> np.ndarray:
        parts = [np.ones((len(prompts), 1))]
        if self.text is not None:
            mean = np.asarray(self.text.predict(prompts).mean, dtype=float)
            parts.append(logit(np.clip(mean, _TEXT_CLIP, 1.0 - _TEXT_CLIP))[:, None])
        if self.columns:  # a prompt without this step's features sits at the features' mean (0)
            zero = np.zeros(self.columns)
            parts.append(np.array([self._pending.get(p, zero) for p in prompts]).reshape(len(prompts), self.columns))
        return np.hstack(parts)

    def _history(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        """(s_h, f_h): the history's discounted successes and failures, capped in total."""
        if self.history is None:
            return np.zeros(len(prompts)), np.zeros(len(prompts))
        pred = self.history.predict(prompts)
        a, b = beta_from_moments(pred.mean, pred.var, min_strength=1e-9)
        s = np.clip(a - self.history.prior_alpha, 0.0, None)
        f = np.clip(b - self.history.prior_beta, 0.0, None)
        scale = np.minimum(1.0, self.max_history_strength / np.maximum(s + f, 1e-12))
        return s * scale, f * scale

    def _candidates(self, prompts: list) -> tuple[np.ndarray, np.ndarray]:
        """alpha, beta of every (kappa, t) candidate: arrays [kappa, t, prompt]."""
        z = self._inputs(prompts)
        kappa = np.asarray(STRENGTHS)[:, None]
        if self.weight_variance:  # the belief before: the weights' variance widens p, pulls mu to 1/2
            mu, var_param = logistic_normal_moments(*self.model.predict(z))
            mu = np.clip(mu, 1e-6, 1.0 - 1e-6)
            var = np.minimum(mu * (1.0 - mu) / (kappa + 1.0) + var_param, 0.999 * mu * (1.0 - mu))
        else:
            mu = np.clip(expit(self.model.logit_mean(z)), 1e-6, 1.0 - 1e-6)
            var = mu * (1.0 - mu) / (kappa + 1.0)
        a0, b0 = beta_from_moments(np.broadcast_to(mu, var.shape), var, min_strength=1e-3)
        s, f = self._history(prompts)
        t = np.asarray(TEMPERS)[None, :, None]
        return a0[:, None, :] + t * s, b0[:, None, :] + t * f

    def _best(self) -> tuple[int, int]:
        """Indices of the best-scored (kappa, t) pair (on ties, the first: the widest spread, no history)."""
        i, j = np.unravel_index(int(np.argmax(self.scores)), self.scores.shape)
        return int(i), int(j)

    def choice(self) -> tuple[float, float]:
        """(kappa, t) in use: the best-scored pair."""
        i, j = self._best()
        return STRENGTHS[i], TEMPERS[j]

    def belief(
        self, prompts: Sequence[Hashable], n: Any = None, recalibrate: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Beta(alpha, beta) of p per prompt: the best candidate's, of the strength at which its
        P(all-equal at n) is the recalibrated chance (`match_all_equal`). ``n``: one size or one per
        prompt; by default the largest group of the last update. Without ``n`` before any update,
        where n < 2, and with ``recalibrate=False`` (a diagnostic), the best candidate itself."""
        prompts = check_prompts(prompts, nonempty=False, distinct=False)
        a, b = self._candidates(prompts)
        i, j = self._best()
        a, b = a[i, j], b[i, j]
        size = self.group_size if n is None else n
        if size is None or not a.size or not recalibrate:
            return a, b
        size = np.broadcast_to(np.asarray(size), a.shape)
        raw = all_equal_beta(a, b, size)[0]  # refuses a size that is not a whole number >= 0
        # the map of candidate (i, j) is row i * len(TEMPERS) + j, as `update` lays them out
        chance = self.calibration.predict(np.broadcast_to(raw, (self.calibration.maps, a.size)))[i * len(TEMPERS) + j]
        many = size >= 2
        a_m, b_m = match_all_equal(a[many] / (a[many] + b[many]), chance[many], size[many])
        a, b = a.copy(), b.copy()
        a[many], b[many] = a_m, b_m
        return a, b

    def predict(self, prompts: Sequence[Hashable]) -> Prediction:
        a, b = self.belief(prompts)
        total = a + b
        return Prediction(a / total, a * b / (total * total * (total + 1.0)))

    def all_equal(self, prompts: Sequence[Hashable], n: Any) -> tuple[np.ndarray, np.ndarray]:
        """P(all-equal at n) per prompt and its sd over the belief (``n``: one size or one per prompt)."""
        a, b = self.belief(prompts, n)
        return all_equal_beta(a, b, np.broadcast_to(np.asarray(n), a.shape))

    # -- learning -------------------------------------------------------------------------------
    def update(self, prompts: Sequence[Hashable], rewards: Sequence[np.ndarray]) -> None:
        """Score the candidates on these groups, then learn from them (prompts with no rollouts
        are ignored); the step's policy features are used and cleared."""
        prompts, successes, counts = check_batch(prompts, rewards)
        seen = np.flatnonzero(counts > 0)
        if seen.size:
            kept = [prompts[i] for i in seen.tolist()]
            s, n = successes[seen], counts[seen]
            a, b = self._candidates(kept)
            groups = [np.asarray(rewards[i], dtype=float) for i in seen.tolist()]
            flat = all_equal(np.array([g.min() for g in groups]), np.array([g.max() for g in groups])).astype(float)
            raw = all_equal_beta(a, b, np.broadcast_to(n, a.shape))[0].reshape(-1, n.size)
            many = n >= 2  # a group of one is all-equal for certain: no candidate is scored or recalibrated on it
            chance = np.where(many, self.calibration.predict(raw), 1.0).reshape(a.shape)
            prob = np.clip(chance, 1e-6, 1.0 - 1e-6)
            loglik = (flat * np.log(prob) + (1.0 - flat) * np.log1p(-prob)).sum(axis=-1)
            z = self._inputs(kept)
            i, _ = self._best()
            kappa = a[i, 0] + b[i, 0]  # the belief's strength before history (TEMPERS[0] = 0)
            self.scores = _SCORE_DECAY * self.scores + loglik
            self.model.update(z, s, n, weight=(kappa + 1.0) / (kappa + n))
            if many.any():
                self.calibration.update(raw[:, many], flat[many])
                self.group_size = int(n.max())
            for source in (self.history, self.text):
                if source is not None:
                    source.update(kept, groups)
        self._pending = {}

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self, sources: bool = True) -> StateDict:
        """Everything learned (npz/JSON-safe). ``sources=False`` leaves out the history and text
        predictors' own states (for an owner that saves them itself)."""
        state: StateDict = {
            "class": "FlatnessPredictor",
            "policy": self.policy,
            "rank": self.rank,
            "forget": self.forget,
            "seed": self.seed,
            "weight_variance": self.weight_variance,
            "width": -1 if self.width is None else self.width,
            "scores": self.scores.copy(),
            "calibration": self.calibration.state_dict(),
            "group_size": -1 if self.group_size is None else self.group_size,
            "model": self.model.state_dict(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
        }
        if sources:
            state["history"] = None if self.history is None else self.history.state_dict()
            state["text"] = None if self.text is None else self.text.state_dict()
        return state

    def load_state_dict(self, state: StateDict) -> None:
        """Replace the learned state; every part is checked first, and a refused state changes nothing."""
        reader = StateReader(state, "FlatnessPredictor", ["policy", "rank", "width", "scores", "model", "scaler"])
        if bool(state["policy"]) != self.policy or reader.integer("rank") != self.rank:
            raise reader.error("policy", "saved with another policy source or rank than this predictor has")
        if bool(state.get("weight_variance", False)) != self.weight_variance:
            raise reader.error("weight_variance", f"saved with weight_variance={not self.weight_variance}")
        width = reader.integer("width", low=-1)
        seed = reader.integer("seed") if "seed" in state else self.seed  # the projection's seed
        scores = reader.array("scores", self.scores.shape)
        # a state saved before the recalibration existed loads with an untrained one
        calibration = AllEqualCalibration(self.scores.size, forget=self.forget)
        if "calibration" in state:
            calibration.load_state_dict(state["calibration"])
        group_size = reader.integer("group_size", low=-1) if "group_size" in state else -1
        columns = 0 if width < 0 else min(width, self.rank)
        dim = 1 + (1 if self.text is not None else 0) + columns
        if not isinstance(state["model"], dict) or state["model"].get("dim") != dim:
            raise reader.error(
                "model", f"needs {dim} inputs (1, the text logit if any, min(width, rank) policy columns)"
            )
        model = OnlineLogistic(dim)
        model.load_state_dict(state["model"])  # with the prior it was learned under (a state before
        # the weaker prior continues under its own: a resumed run goes on as it would have)
        scaler = None if not columns else RunningScaler(columns)
        if scaler is not None:
            scaler.load_state_dict(state["scaler"])
        with restore_on_error(self):
            for key, source in (("history", self.history), ("text", self.text)):
                if key in state and (state[key] is None) != (source is None):
                    raise reader.error(key, "saved with this source " + ("off" if state[key] is None else "on"))
                if source is not None and state.get(key) is not None:
                    source.load_state_dict(state[key])
            self.width, self.seed = (None if width < 0 else width), seed
            self.scores, self.model, self.scaler = scores, model, scaler
            self.prior_var = model.prior_var
            self.calibration, self.group_size = calibration, (None if group_size < 0 else group_size)
            self._pending, self._projection = {}, None

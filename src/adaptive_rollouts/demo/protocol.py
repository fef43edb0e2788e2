"""The demo's full protocol: every arm in two regimes, rates tuned on unreported seeds, resumable.

Per regime (`REGIMES`) and arm, in order (Uniform first, so the null control can use its rate):

1. learning rate: each rate of ``lr_grid`` runs on the tune seeds; the best is the highest mean
   over tune seeds of the held-out accuracy over the last third of the run (`experiments.speedup.final_level`,
   the map's criterion); a best at the grid's edge extends the grid (`experiments.tuning.tune_grid`), and
   an arm whose best stays at an edge is reported as failed, with no number. Arms in ``same_rate``
   (the null control) run at Uniform's tuned rate: they allocate like Uniform. With ``rates_from``
   every arm takes the rate tuned in that regime instead (its tune runs are read, never made here).
2. the report seeds run at that rate; speedups and their paired bootstrap intervals are read off
   the seed-mean curves as the regime map reads them (`protocol_report`).

Every run is written as it finishes to ``<out>/<regime>/runs/<arm>/lr<rate>-seed<seed>.json`` with
the settings that change its numbers (`run_settings`) and the commit it ran on. A rerun with the
same settings reuses it; a folder made with other settings is refused, naming the setting.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_rollouts.allocators import saving_allocators
from adaptive_rollouts.checks.validation import check_choice
from adaptive_rollouts.embeddings import FeatureTable, default_encoder
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.experiments.run_store import check_settings, read_json
from adaptive_rollouts.experiments.speedup import final_level
from adaptive_rollouts.experiments.tuning import LearningRateAtEdge, tune_grid
from adaptive_rollouts.progress import progress_bar

from .allocation import arm_of, uses_oracle
from .jobs import one_thread, problem_sets
from .model import WEIGHTS, assets_of
from .run import DemoConfig, run_one
from .tasks import task_of

REGIMES = ("single-pass", "multi-epoch")
ARMS = ("uniform", "null", "oracle", "default", "uniform-drgrpo", "vip-paper", "oracle-skip")
SAVING_BASELINES = tuple(name for name in saving_allocators() if name not in ARMS)  # every other saving allocator
SRC = Path(__file__).resolve().parents[1]  # src/adaptive_rollouts


@dataclass(frozen=True)
class ProtocolConfig:
    regime: str = "single-pass"
    arms: tuple[str, ...] = ARMS
    steps: int = 24
    prompts_per_step: int = 8
    mean_rollouts: int = 8
    visits: int = 4  # multi-epoch: every pool prompt is seen this many times
    eval_every: int = 3
    held_out: int = 256
    lr_grid: tuple[float, ...] = (3e-5, 1e-4, 3e-4)
    lr_step: float = 10**0.5
    max_extensions: int = 2
    tune_seeds: tuple[int, ...] = (100, 101)
    report_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    same_rate: tuple[str, ...] = ("null",)
    rates_from: str | None = None  # take each arm's rate from this regime's tuning instead of tuning here
    oracle_samples: int = 16
    probe_every: int = 12
    probe_resamples: int = 6
    target_at: float = 0.5
    bootstrap: int = 1000
    extra: dict = field(default_factory=dict)
    task: str = "sort"  # `tasks.TASKS`; runs of another task than the default record it in their settings

    def pool_size(self) -> int:
        """single-pass: one prompt per visit (none recurs); multi-epoch: ``visits`` visits per prompt.

        >>> ProtocolConfig().pool_size(), ProtocolConfig(regime="multi-epoch").pool_size()
        (192, 48)
        """
        visits = self.steps * self.prompts_per_step
        if self.regime == "single-pass":
            return visits
        if visits % self.visits or visits // self.visits < self.prompts_per_step:
            raise ValueError(f"steps x prompts_per_step = {visits} is not a whole number of {self.visits} visits")
        return visits // self.visits


def check_config(cfg: ProtocolConfig) -> ProtocolConfig:
    """ValueError naming the first setting that cannot run."""

    check_choice("regime", cfg.regime, REGIMES)
    if cfg.rates_from is not None and (cfg.rates_from == cfg.regime or cfg.rates_from not in REGIMES):
        raise ValueError(f"rates_from must name another regime of {REGIMES}, got {cfg.rates_from!r}")
    task_of(cfg.task)
    for name in cfg.arms:
        arm_of(name)
    if "uniform" not in cfg.arms:
        raise ValueError("arms must include 'uniform' (every speedup is against it)")
    for name in cfg.same_rate:
        arm_of(name)
        if name == "uniform" or (name in cfg.arms and cfg.arms.index(name) < cfg.arms.index("uniform")):
            raise ValueError(f"same_rate: {name!r} must come after 'uniform' in arms (it runs at Uniform's tuned rate)")
    for key in ("steps", "prompts_per_step", "eval_every", "held_out", "oracle_samples", "bootstrap"):
        if getattr(cfg, key) < 1:
            raise ValueError(f"{key} must be >= 1, got {getattr(cfg, key)}")
    if cfg.mean_rollouts < 2 or cfg.visits < 1 or cfg.probe_resamples < 2:
        raise ValueError("mean_rollouts and probe_resamples must be >= 2 and visits >= 1")
    if len(cfg.tune_seeds) < 2 or len(cfg.report_seeds) < 1 or set(cfg.tune_seeds) & set(cfg.report_seeds):
        raise ValueError(
            f"need >= 2 tune seeds disjoint from the report seeds, got {cfg.tune_seeds} / {cfg.report_seeds}"
        )
    if len(cfg.lr_grid) < 3 or min(cfg.lr_grid) <= 0:
        raise ValueError(f"lr_grid needs >= 3 positive rates, got {cfg.lr_grid}")
    cfg.pool_size()
    return cfg


def demo_config(cfg: ProtocolConfig):
    """The `DemoConfig` every run of the protocol shares (no pass@k: held-out greedy accuracy only)."""

    return DemoConfig(
        methods=tuple(cfg.arms),
        steps=cfg.steps,
        prompts_per_step=cfg.prompts_per_step,
        mean_rollouts=cfg.mean_rollouts,
        pool_size=cfg.pool_size(),
        held_out=cfg.held_out,
        eval_every=cfg.eval_every,
        eval_sampled=False,
        oracle_samples=cfg.oracle_samples,
        probe_every=cfg.probe_every,
        probe_resamples=cfg.probe_resamples,
        task=cfg.task,
    )


def weights_digest(model_dir: Path | None = None, task: str = "sort") -> str:
    """SHA-256 (first 16 hex digits) of the warm-start weights the runs start from (``model_dir``,
    or the shipped weights of ``task``)."""

    path = (assets_of(task) if model_dir is None else Path(model_dir)) / WEIGHTS.name
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def task_settings(cfg: ProtocolConfig) -> dict[str, str]:
    """``{"task": name}`` for a task other than the default, else nothing (so the default task's
    saved runs keep the settings they were made with)."""
    return {} if cfg.task == "sort" else {"task": cfg.task}


def run_settings(cfg: ProtocolConfig, arm: str, seed: int, lr: float) -> dict[str, Any]:
    """Every setting that changes a run's numbers (what a saved run must match to be reused)."""
    a = arm_of(arm)
    out: dict[str, Any] = {
        "regime": cfg.regime,
        "arm": arm,
        "seed": int(seed),
        "lr": float(lr),
        "loss_type": a.loss_type,
        "scale_rewards": a.scale_rewards,
        "steps": cfg.steps,
        "prompts_per_step": cfg.prompts_per_step,
        "mean_rollouts": cfg.mean_rollouts,
        "pool_size": cfg.pool_size(),
        "eval_every": cfg.eval_every,
        "held_out": cfg.held_out,
        "weights": weights_digest(task=cfg.task),
        **task_settings(cfg),
    }
    if uses_oracle(arm):
        out["oracle_samples"] = cfg.oracle_samples
    if a.policy_features:  # only where set, so runs made before the mark keep their settings
        out["policy_features"] = True
    if arm == "uniform":
        out["probe_every"], out["probe_resamples"] = cfg.probe_every, cfg.probe_resamples
    return out


def code_version(root: Path = SRC) -> dict[str, str]:
    """The commit the code runs on: ``commit`` (HEAD) and ``code`` (the git tree of the package
    source, ``+dirty`` when it has uncommitted changes); ``unknown`` outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        tree = git("rev-parse", "HEAD:" + git("rev-parse", "--show-prefix").rstrip("/"))
        dirty = bool(git("status", "--porcelain", "--", "."))
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "code": "unknown"}
    return {"commit": commit[:12], "code": tree[:12] + ("+dirty" if dirty else "")}


class RunStore:
    """The runs of one regime under ``folder``, as result files (`experiments.results`: a header with
    command, commit, settings and time, then the data): ``protocol.json`` (the settings every run
    shares) and ``runs/<arm>/lr<rate>-seed<seed>.json`` (one per finished run)."""

    SHARED: tuple[str, ...] = ("regime", "steps", "prompts_per_step", "mean_rollouts", "visits", "eval_every")
    SHARED += ("held_out", "oracle_samples", "probe_every", "probe_resamples")

    def __init__(self, folder: Path, cfg: ProtocolConfig, command: str = "python benchmarks/demo_protocol.py"):
        self.folder, self.cfg, self.command = Path(folder), cfg, command
        shared = {k: getattr(cfg, k) for k in self.SHARED} | {"pool_size": cfg.pool_size()}
        shared |= {"weights": weights_digest(task=cfg.task), **task_settings(cfg)}
        path = self.folder / "protocol.json"
        saved = read_json(path)
        if saved is not None:
            check_settings(str(path), (saved.get("header") or {}).get("settings"), shared)
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_result(
                path, {"regime": cfg.regime}, command=command, settings=shared, commit=code_version()["commit"]
            )

    def path(self, arm: str, seed: int, lr: float) -> Path:
        return self.folder / "runs" / arm / f"lr{lr:.6g}-seed{seed}.json"

    def get(self, arm: str, seed: int, lr: float) -> dict | None:
        """The saved run (``settings``, ``commit``, ``code``, ``result``), or None; ValueError naming
        the file and the setting if it was made otherwise."""
        path = self.path(arm, seed, lr)
        saved = read_json(path)  # None when missing, or (with a warning) when cut by a crash: rerun
        if saved is None:
            return None
        header, data = saved.get("header"), saved.get("data")
        if not isinstance(header, dict) or not isinstance(data, dict) or "result" not in data:
            raise ValueError(f"{path} is not a protocol run file (a header and data with a result)")
        check_settings(str(path), header.get("settings"), run_settings(self.cfg, arm, seed, lr))
        return {
            "settings": header["settings"],
            "commit": header["commit"],
            "code": data["code"],
            "result": data["result"],
        }

    def add(self, run: dict) -> None:
        s = run["settings"]
        path = self.path(s["arm"], s["seed"], s["lr"])
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"code": run["code"], "result": run["result"]}
        write_result(path, data, command=self.command, settings=s, commit=run["commit"])


def run_record(res, settings: dict, version: dict) -> dict:
    """One finished run in memory: its settings, commit and source tree, curves and per-step groups
    (small: no rollouts)."""
    keep = {"rollouts", "tokens", "held_out", "counts", "groups", "train_seconds", "allocator_seconds"}
    keep |= {"objective", "extra_rollouts", "probes", "round_max_tokens", "round_tokens", "evaluated_at"}
    return {"settings": settings, **version, "result": {k: v for k, v in asdict(res).items() if k in keep}}


class NotRunYet(Exception):
    """A run the protocol needs has no saved result (read-only mode)."""


@dataclass
class ProtocolState:
    best_lr: dict[str, float] = field(default_factory=dict)
    tried: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  # arm -> runs still to do
    runs: dict[tuple[str, int, float], dict] = field(default_factory=dict)


def run_protocol(
    cfg: ProtocolConfig,
    out: Path,
    run_missing: bool = True,
    progress: bool = True,
    command: str = "python benchmarks/demo_protocol.py",
) -> ProtocolState:
    """Run (or resume, or with ``run_missing=False`` only read) one regime of the protocol into
    ``out/<regime>``; returns the tuned rates, failures, the runs still missing, and every run. An
    arm whose run raises is recorded in ``errors`` (with no number) and the next arm runs."""

    check_config(cfg)
    store = RunStore(Path(out) / cfg.regime, cfg, command)
    dcfg = demo_config(cfg)
    state = ProtocolState()
    version = code_version()
    context: dict[str, Any] = {}
    bar = _progress(cfg, progress)

    def run(arm: str, seed: int, lr: float) -> dict:
        saved = store.get(arm, seed, lr)
        if saved is None and not run_missing:
            state.missing.setdefault(arm, []).append(f"seed {seed} at lr {lr:g}")
            raise NotRunYet
        if saved is None:
            res = _train(arm, seed, lr, dcfg, context, bar)
            saved = run_record(res, run_settings(cfg, arm, seed, lr), version)
            store.add(saved)
        elif (arm, seed, lr) not in state.runs:
            bar.update(cfg.steps)
        state.runs[arm, seed, lr] = saved
        return saved

    tuned = None
    if cfg.rates_from is not None:  # the rates another regime's tune seeds chose (read only)
        tuned = run_protocol(replace(cfg, regime=cfg.rates_from, rates_from=None), out, False, False).best_lr
    for arm in cfg.arms:
        try:
            if arm in cfg.same_rate and "uniform" in state.best_lr:
                lr, tried = state.best_lr["uniform"], [state.best_lr["uniform"]]
            elif tuned is not None:
                if arm not in tuned:
                    state.missing.setdefault(arm, []).append(f"learning rate not tuned in {cfg.rates_from} yet")
                    continue
                lr, tried = tuned[arm], [tuned[arm]]
            else:
                lr, tried = tune_grid(
                    lambda lr: float(
                        np.mean([final_level(run(arm, s, lr)["result"]["held_out"][1:]) for s in cfg.tune_seeds])
                    ),
                    cfg.lr_grid,
                    cfg.lr_step,
                    cfg.max_extensions,
                )
            state.best_lr[arm], state.tried[arm] = lr, tried
            for seed in cfg.report_seeds:
                try:
                    run(arm, seed, lr)
                except NotRunYet:
                    continue
        except LearningRateAtEdge as err:
            state.errors[arm] = str(err)
        except NotRunYet:
            todo = [f"{s} at {lr:g}" for lr in cfg.lr_grid for s in cfg.tune_seeds if store.get(arm, s, lr) is None]
            state.missing[arm] = [
                f"learning-rate tuning incomplete (tune seed at rate: {', '.join(todo) or 'extensions'})"
            ]
        except Exception as err:  # a run that cannot train (e.g. a trainer without saving allocators)
            if not run_missing:
                raise
            state.errors[arm] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
    bar.close()
    return state


def _progress(cfg: ProtocolConfig, show: bool):
    runs = len(cfg.arms) * (len(cfg.tune_seeds) * len(cfg.lr_grid) + len(cfg.report_seeds))
    return progress_bar(runs * cfg.steps, show, desc=f"protocol {cfg.regime}", unit="step")


def _train(arm: str, seed: int, lr: float, dcfg, context: dict, bar):
    """One run (problem sets and the pool's features made once per process, in ``context``); the
    trainer's own output folder is a temporary one (nothing of it is kept)."""

    if "sets" not in context:
        context["sets"] = problem_sets(dcfg)
    pool, held_out = context["sets"]
    features = None
    if arm == "vip-paper":
        if "features" not in context:
            texts = [p.prompt for p in pool]
            context["features"] = FeatureTable(texts, default_encoder().encode(texts))
        features = context["features"]
    bar.set_postfix_str(f"{arm} seed {seed} lr {lr:g}")
    with one_thread(), tempfile.TemporaryDirectory() as tmp:
        cfg = replace(dcfg, methods=(arm,))
        return run_one(arm, seed, cfg, features, pool, held_out, Path(tmp), on_step=bar.update, learning_rate=lr)

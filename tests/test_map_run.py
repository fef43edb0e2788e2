"""One run on a map's cell (`experiments.map_run`): the builder every map run and every benchmark
that reruns a map cell calls, and the map's probes per method."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from conftest import Trained, capture_train

from adaptive_rollouts.experiments import map_run
from adaptive_rollouts.experiments.map_config import NULL, REPLICATE, REPLICATE_SEED_OFFSET
from adaptive_rollouts.experiments.map_presets import QUICK_MAP, SAVING_MAP
from adaptive_rollouts.experiments.map_run import cell_run, one_run
from adaptive_rollouts.experiments.map_store import run_settings
from adaptive_rollouts.sim.regimes import TOKEN_CELLS, select_cells
from adaptive_rollouts.sim.train import TrainConfig


@pytest.mark.parametrize("cell", [*SAVING_MAP.cells[:3], SAVING_MAP.cells[10], TOKEN_CELLS[0]], ids=lambda c: c.key)
def test_a_cells_run_has_the_cells_step_and_the_maps_settings(cell):
    run = cell_run(cell, SAVING_MAP, seed=5, lr=0.3)
    knobs, settings = cell.as_dict(), run_settings(SAVING_MAP, cell, "uniform")
    c = run.config
    assert (c.batch_prompts, c.budget) == (knobs["batch_prompts"], knobs["batch_prompts"] * knobs["per_prompt"])
    assert (c.steps, c.estimator, c.aggregation) == (settings["steps"], settings["estimator"], settings["aggregation"])
    assert (c.lr, c.seed, c.optimizer, c.grad_var_every, c.engine) == (0.3, 5, "adamw", 0, None)
    # everything else is TrainConfig's default
    rest = {f.name for f in dataclasses.fields(TrainConfig)} - {
        "batch_prompts", "budget", "steps", "estimator", "aggregation", "lr", "seed", "grad_var_every"
    }  # fmt: skip
    assert all(getattr(c, k) == getattr(TrainConfig(), k) for k in rest)
    same = cell.problem(5, settings["n_test"])
    assert np.array_equal(run.problem.success(), same.success())
    assert np.array_equal(run.problem.features, same.features)
    assert run.problem.n_prompts == same.n_prompts


def test_options_change_the_run_and_what_is_the_cells_is_refused():
    cell = SAVING_MAP.cells[0]
    run = cell_run(cell, SAVING_MAP, 1, 0.2, train_seed=9, steps=7, loss_rows="uniform", fingerprint_every=3)
    assert (run.config.steps, run.config.loss_rows, run.config.fingerprint_every, run.config.seed) == (
        7,
        "uniform",
        3,
        9,
    )
    # the instance is the seed's, not the training seed's
    assert np.array_equal(run.problem.success(), cell.problem(1, SAVING_MAP.n_test).success())
    other = dataclasses.replace(SAVING_MAP, steps=11, estimator="rloo", n_test=40)
    assert (cell_run(cell, other, 1, 0.2).config.steps, cell_run(cell, other, 1, 0.2).config.estimator) == (11, "rloo")
    for bad in ({"budget": 64}, {"batch_prompts": 4}):
        with pytest.raises(ValueError, match=f"{next(iter(bad))} is the cell's"):
            cell_run(cell, SAVING_MAP, 1, 0.2, **bad)
    with pytest.raises(ValueError, match="'learning_rate'.*not TrainConfig fields"):
        cell_run(cell, SAVING_MAP, 1, 0.2, learning_rate=0.1)


def test_the_allocator_is_seeded_and_configured_as_the_run():
    other = dataclasses.replace(SAVING_MAP, estimator="rloo", aggregation="prompt-mean")
    run = cell_run(SAVING_MAP.cells[0], other, 2, 0.2, train_seed=2 + REPLICATE_SEED_OFFSET)
    assert type(run.allocator("uniform")).__name__ == "Uniform"
    default = run.allocator("default")
    assert (default.seed, default.estimator, default.aggregation) == (2 + REPLICATE_SEED_OFFSET, "rloo", "prompt-mean")


@pytest.mark.parametrize(
    "method, probes, fingerprint, offset",
    [("uniform", True, True, 0), ("default", True, False, 0), (NULL, False, False, 0), (REPLICATE, False, False, 1)],
)
def test_the_map_probes_uniform_and_the_default_and_offsets_the_replicate(
    monkeypatch, method, probes, fingerprint, offset
):
    cfg = dataclasses.replace(QUICK_MAP, grad_var_every=4, grad_var_resamples=3, fingerprint_every=5)
    monkeypatch.setattr(map_run, "train", capture_train)
    with pytest.raises(Trained) as got:
        one_run(cfg.cells[0], method, 7, 0.1, cfg)
    c = got.value.config
    assert (c.grad_var_every, c.grad_var_resamples, c.fingerprint_every) == (
        4 if probes else 0,
        3,
        5 if fingerprint else 0,
    )
    assert c.seed == 7 + offset * REPLICATE_SEED_OFFSET
    assert np.array_equal(got.value.problem.success(), cfg.cells[0].problem(7, cfg.n_test).success())


def test_a_timed_method_runs_with_its_engine(monkeypatch):
    monkeypatch.setattr(map_run, "train", capture_train)
    with pytest.raises(Trained) as got:
        one_run(TOKEN_CELLS[0], "default~synchronous", 0, 0.1, SAVING_MAP)
    assert got.value.config.engine == "synchronous"
    assert type(got.value.allocator).__name__ == "SavingProgressive"


ROOT = Path(__file__).resolve().parents[1]
CELL = select_cells(SAVING_MAP.cells, ["easy-heavy/d16-Q32"])[0]


def _bench_config(monkeypatch, path: str, call: str, *args):
    """What a benchmark's run would train with (problem, allocator, TrainConfig), its `train` replaced."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # saving_share imports saving_signal
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "train", capture_train)
    with pytest.raises(Trained) as got:
        getattr(bench, call)(*args)
    return got.value


def test_the_benchmarks_runs_are_the_maps_runs_but_for_what_they_pass(monkeypatch):
    base = cell_run(CELL, SAVING_MAP, 3, 0.4).config
    got = _bench_config(monkeypatch, "benchmarks/loss_rows.py", "_run", CELL, "default", "uniform", 3, 0.4)
    assert got.config == dataclasses.replace(base, loss_rows="uniform")
    got = _bench_config(monkeypatch, "benchmarks/saving_share.py", "speed_run", CELL, 0.25, 3, 0.4)
    assert got.config == base and got.allocator.share == 0.25
    got = _bench_config(monkeypatch, "benchmarks/saving_signal.py", "one_run", CELL, "uniform", 3, 0.4, 9)
    assert got.config == dataclasses.replace(base, steps=9)
    got = _bench_config(monkeypatch, "benchmarks/flatness_calibration.py", "one_trace", CELL, 3, 5)
    assert got.config == dataclasses.replace(base, steps=5)

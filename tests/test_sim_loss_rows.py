"""The simulator's loss normalisation by Uniform's rows (`TrainConfig.loss_rows="uniform"`): a cut or
skipped group counts as rows of zero advantage, so a step that trains on fewer rows keeps Uniform's
scale."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adaptive_rollouts.allocators import Uniform
from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.sim.regimes import Cell
from adaptive_rollouts.sim.simulator import Simulator, TrainConfig
from adaptive_rollouts.sim.train import train


def _padded_gradient(sim, q, a, r, cfg, kept_prompts):
    """Brute force: the kept rows plus zero-advantage rows up to Uniform's budget and prompts, with the
    plain ("kept") normalisation over that padded batch, whose padding contributes nothing."""
    n_rows = q.size
    scale = {
        "seq-mean": n_rows / max(n_rows, cfg.budget),
        "prompt-mean": kept_prompts / max(kept_prompts, cfg.batch_prompts),
    }[cfg.aggregation]
    return scale * sim.batch_gradient(q, a, r, cfg)


@pytest.mark.parametrize("aggregation", ["seq-mean", "prompt-mean"])
def test_uniform_rows_equal_a_batch_padded_with_zero_advantage_rows(aggregation):
    pb = Cell(scenario="hard-heavy", dim=8, batch_prompts=8, n_prompts=40).problem(0, 20)
    sim = Simulator(pb, seed=0)
    cfg = TrainConfig(budget=64, batch_prompts=8, aggregation=aggregation)
    idx = np.arange(5)  # three of the eight prompts cut
    q = np.repeat(idx, 8)
    a, r = pb.sample(q, np.random.default_rng(1))
    got = sim.batch_gradient(q, a, r, dataclasses.replace(cfg, loss_rows="uniform"))
    assert np.allclose(got, _padded_gradient(sim, q, a, r, cfg, kept_prompts=5))
    assert np.linalg.norm(got) < np.linalg.norm(sim.batch_gradient(q, a, r, cfg))


def test_uniform_rows_change_nothing_under_uniform_and_refuse_an_unknown_name():
    cell = Cell(scenario="bimodal", dim=8, batch_prompts=6, n_prompts=60)
    cfg = TrainConfig(steps=6, batch_prompts=6, budget=48, grad_var_every=0)
    runs = [train(cell.problem(0, 30), Uniform(), dataclasses.replace(cfg, loss_rows=x)) for x in ("kept", "uniform")]
    assert runs[0]["accuracy"] == runs[1]["accuracy"]
    cut = [
        train(
            cell.problem(0, 30),
            build_allocator("oracle-skip", cell.problem(0, 30), 0)[0],
            dataclasses.replace(cfg, loss_rows=x),
        )
        for x in ("kept", "uniform")
    ]
    assert cut[0]["accuracy"] != cut[1]["accuracy"]
    with pytest.raises(ValueError, match="loss_rows"):
        train(cell.problem(0, 30), Uniform(), dataclasses.replace(cfg, loss_rows="budget"))


def test_the_defaults_follow_the_committed_measurement():
    """The saving default's loss rows (TRL, verl: `bridge.settings.DEFAULT_LOSS_ROWS`; the simulator's
    `TrainConfig`) are the ones the no-retune benchmark found better by its own decision rule."""
    from pathlib import Path

    from adaptive_rollouts.bridge.settings import DEFAULT_LOSS_ROWS, loss_rows_for
    from adaptive_rollouts.experiments.results import load_result

    result = load_result(Path(__file__).resolve().parents[1] / "results" / "loss_rows" / "loss_rows.json").data
    ratio = result["pooled"]["uniform_over_kept"]
    assert result["better"] == ("uniform" if ratio["low"] > 1.0 else "kept")
    assert DEFAULT_LOSS_ROWS["save"] == loss_rows_for(None, "save") == TrainConfig().loss_rows == result["better"]
    assert DEFAULT_LOSS_ROWS["fill"] == "kept"  # a filling allocator trains on Uniform's rows anyway

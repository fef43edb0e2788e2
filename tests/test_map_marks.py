"""A map method name's marks (`experiments.map_config.map_method`): the engine that times a run's
rounds and the policy's view of its own margin; what they set in the run (`map_run.one_run`), what
the bench command refuses and at which rate the saving map runs a marked arm."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from conftest import Trained, capture_train
from scipy.special import logit

import adaptive_rollouts.commands.bench as bench_cli
from adaptive_rollouts.checks.arguments import UsageError
from adaptive_rollouts.commands.bench_checks import check_methods
from adaptive_rollouts.experiments import map_run
from adaptive_rollouts.experiments.map_config import ENGINE_MARK, VIEW_MARK, map_method, seeds_for
from adaptive_rollouts.experiments.map_presets import SAVING_MAP
from adaptive_rollouts.experiments.map_run import cell_run, one_run
from adaptive_rollouts.sim.policy_view import PolicyView, view_auroc
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.sim.regimes import TOKEN_CELLS, select_cells
from adaptive_rollouts.sim.train import TrainConfig, train


@pytest.mark.parametrize(
    "name, expected",
    [
        ("default", ("default", {})),
        ("default^view0.9", ("default", {"policy_view_auroc": 0.9})),
        ("default^view1", ("default", {"policy_view_auroc": 1.0})),
        ("default^view0.5", ("default", {"policy_view_auroc": 0.5})),
        ("default^noview", ("default", {"policy_view_auroc": None})),
        ("default~synchronous", ("default", {"engine": "synchronous"})),
        ("default~slots-16^noview", ("default", {"engine": "slots-16", "policy_view_auroc": None})),
        ("default^view0.8~continuous", ("default", {"policy_view_auroc": 0.8, "engine": "continuous"})),
        ("default[pilot=2]^view1", ("default[pilot=2]", {"policy_view_auroc": 1.0})),
        ("default@true-p", ("default@true-p", {})),  # the true-p variant is the allocator's, no mark
    ],
)
def test_marks_parse_into_the_runs_settings(name, expected):
    assert map_method(name) == expected


@pytest.mark.parametrize(
    "name, match",
    [
        ("default^view0.3", r"view<AUROC in \[0.5, 1\]> or noview, got 'view0.3'"),
        ("default^view1.2", r"got 'view1.2'"),
        ("default^viewnan", r"got 'viewnan'"),
        ("default^view", r"got 'view'"),
        ("default^0.9", r"got '0.9'"),
        ("default^", r"got ''"),
        ("default^view0.9^noview", r"the mark '\^' is given twice"),
        ("default~synchronous~slots-64", r"the mark '~' is given twice"),
        ("default~warp", r"unknown engine 'warp' after '~' \(known: synchronous"),
        ("^view0.9", r"no allocator method before its marks"),
    ],
)
def test_bad_marks_are_refused_naming_the_method(name, match):
    with pytest.raises(ValueError, match=match) as err:
        map_method(name)
    assert repr(name) in str(err.value)


@pytest.mark.parametrize(
    "method, auroc", [("default", 0.8), ("default^view0.9", 0.9), ("default^view1", 1.0), ("default^noview", None)]
)
def test_the_view_mark_reaches_the_runs_train_config(monkeypatch, method, auroc):
    monkeypatch.setattr(map_run, "train", capture_train)
    with pytest.raises(Trained) as got:
        one_run(SAVING_MAP.cells[1], method, 3, 0.4, SAVING_MAP)
    assert got.value.config.policy_view_auroc == auroc
    assert type(got.value.allocator).__name__ == "SavingProgressive"  # the default's allocator, whatever the view
    # the run is the unmarked run's but for the view
    base = cell_run(SAVING_MAP.cells[1], SAVING_MAP, 3, 0.4, **map_run._probes(SAVING_MAP, "default")).config
    assert got.value.config == TrainConfig(**{**vars(base), "policy_view_auroc": auroc})


def test_both_marks_reach_the_run(monkeypatch):
    monkeypatch.setattr(map_run, "train", capture_train)
    with pytest.raises(Trained) as got:
        one_run(TOKEN_CELLS[0], f"default{ENGINE_MARK}slots-64{VIEW_MARK}noview", 0, 0.1, SAVING_MAP)
    assert (got.value.config.engine, got.value.config.policy_view_auroc) == ("slots-64", None)


def _observed(method: str) -> tuple[int, list]:
    """How often a short real run of ``method`` hands its allocator the policy's view, and what."""
    cell = select_cells(SAVING_MAP.cells, ["pareto/d16-Q32"])[0]
    name, marks = map_method(method)
    run = cell_run(cell, SAVING_MAP, 0, 0.4, steps=3, **marks)
    alloc = run.allocator(name)
    seen: list = []
    real = alloc.observe_policy

    def spy(prompts, features):
        seen.append((list(prompts), np.array(features)))
        return real(prompts, features)

    alloc.observe_policy = spy
    train(run.problem, alloc, run.config)
    return len(seen), seen


def test_noview_gives_the_default_no_view_and_a_view_mark_gives_one_each_step():
    assert _observed("default^noview")[0] == 0
    calls, _ = _observed("default^view0.9")
    assert calls == 3


def test_the_exact_view_is_the_margin():
    pb = make_problem("pareto", n_prompts=500, n_test=10, seed=2)
    view = PolicyView(pb, auroc=1.0, seed=2)
    idx = np.arange(40)
    assert view.sigma == 0.0
    np.testing.assert_allclose(view.features(idx)[:, 0], logit(np.clip(pb.success(idx), 1e-6, 1 - 1e-6)))
    # and the calibrated views order as their AUROCs: less noise, higher AUROC
    sigmas = [PolicyView(pb, auroc=a, seed=2).sigma for a in (0.7, 0.8, 0.9)]
    assert sigmas[0] > sigmas[1] > sigmas[2] > 0
    assert view_auroc(pb.success(), sigmas[2]) == pytest.approx(0.9, abs=1e-3)


def test_the_bench_checks_the_marks():
    check_methods(["default^view0.9", "default^noview", "oracle-skip"], batch_prompts=8, budget=64, map_marks=True)
    with pytest.raises(ValueError, match=r"'default\^view2'.*view<AUROC"):
        check_methods(["default^view2"], batch_prompts=8, budget=64, map_marks=True)
    with pytest.raises(ValueError, match=r"'oracle-skip\^view1': 'oracle-skip' takes no view of the policy"):
        check_methods(["oracle-skip^view1"], batch_prompts=8, budget=64, map_marks=True)
    with pytest.raises(ValueError, match=r"unknown method 'default\^view1'"):  # the per-scenario sweep has no marks
        check_methods(["default^view1"], batch_prompts=8, budget=64)


def _map_args(methods: str, saving: bool) -> argparse.Namespace:
    return argparse.Namespace(methods=methods.split(","), saving=saving, cells=["pareto/d16-Q32"])


def test_the_saving_map_runs_a_marked_arm_at_uniforms_rate():
    cfg = bench_cli._map_config(_map_args("uniform,default,default^noview,default^view1", saving=True))
    assert {"default", "default^noview", "default^view1"} <= set(cfg.untuned) and "uniform" not in cfg.untuned
    assert set(SAVING_MAP.untuned) <= set(cfg.untuned)  # the preset's arms keep their rule
    quick = bench_cli._map_config(_map_args("uniform,default^noview", saving=False))
    assert "default^noview" not in quick.untuned  # the other maps tune every arm


def test_the_bench_refuses_a_bad_mark_as_a_usage_error():
    with pytest.raises(UsageError, match=r"--methods: 'default\^view0.1'"):
        bench_cli._map_config(_map_args("uniform,default^view0.1", saving=True))


def test_paired_runs_a_named_arm_on_the_paired_seeds_and_refuses_an_arm_not_run():
    args = _map_args("uniform,default,default[flat_chance=0.1],oracle-skip", saving=True)
    args.paired = ["default[flat_chance=0.1]"]
    cfg = bench_cli._map_config(args)
    assert seeds_for(cfg, "default[flat_chance=0.1]") == list(SAVING_MAP.paired_seeds)
    assert seeds_for(cfg, "oracle-skip") == list(SAVING_MAP.report_seeds) != list(SAVING_MAP.paired_seeds)
    assert seeds_for(cfg, "uniform-rounds") == list(SAVING_MAP.paired_seeds)  # the preset's paired arms stay
    args.paired = ["vigor"]
    with pytest.raises(UsageError, match=r"--paired: vigor not among the map's methods"):
        bench_cli._map_config(args)


def test_a_result_file_that_names_no_paired_arms_reads_with_the_old_rule():
    stored = {"paired_seeds": [0, 1, 2], "report_seeds": [0, 1]}  # written before maps named them
    assert seeds_for(stored, "default") == [0, 1, 2] and seeds_for(stored, "default[flat_chance=0.1]") == [0, 1]


def test_map_seeds_run_every_arm_on_fresh_seeds_and_refuse_the_tune_seeds():
    args = _map_args("uniform,default,uniform-rounds", saving=True)
    args.map_seeds = [32, 33, 34]
    cfg = bench_cli._map_config(args)
    assert seeds_for(cfg, "default") == seeds_for(cfg, "oracle-skip") == [32, 33, 34]
    assert cfg.tune_seeds == SAVING_MAP.tune_seeds  # the rates are tuned as in the map
    args.map_seeds = [100, 200]
    with pytest.raises(UsageError, match=r"--map-seeds: the map tunes its rates on seeds \[100"):
        bench_cli._map_config(args)


def test_per_prompt_sets_every_cells_group_size_and_marks_the_cells():
    args = _map_args("uniform,default", saving=True)
    args.cells = ["hard-heavy/d16-Q32", "pareto/d128-Q16-L16"]
    args.per_prompt = 4
    cfg = bench_cli._map_config(args)
    assert [c.key for c in cfg.cells] == ["hard-heavy/d16-Q32-n4", "pareto/d128-Q16-n4-L16"]
    assert [c.budget for c in cfg.cells] == [128, 64]  # 32 and 16 prompts x 4
    assert [c.key for c in SAVING_MAP.cells[:1]] == ["hard-heavy/d16-Q32"]  # 8: the maps' keys as they were
    args.per_prompt = 1
    with pytest.raises(UsageError, match=r"--per-prompt 1: a group needs 2 rollouts"):
        bench_cli._map_config(args)

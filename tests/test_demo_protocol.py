"""The demo protocol: run keys and refusals, resume and missing runs, commits in one table, the
oracle's uncharged samples, the known-p skip rule, the map's probes on the demo, the report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("reasoning_gym")

from adaptive_rollouts.demo.model import build_model  # noqa: E402
from adaptive_rollouts.demo.protocol import (  # noqa: E402
    ProtocolConfig,
    RunStore,
    check_config,
    run_protocol,
    run_settings,
)
from adaptive_rollouts.demo.tokenizer import build_tokenizer  # noqa: E402
from adaptive_rollouts.experiments.results import write_result  # noqa: E402
from adaptive_rollouts.sim.oracle import TruePredictor  # noqa: E402

SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1)
CFG = ProtocolConfig(
    regime="multi-epoch",
    arms=("uniform", "null", "default"),
    steps=6,
    prompts_per_step=4,
    visits=2,
    eval_every=1,
    held_out=16,
    tune_seeds=(100, 101),
    report_seeds=(0, 1),
    bootstrap=50,
)


def fake_run(
    cfg: ProtocolConfig,
    arm: str,
    seed: int,
    lr: float,
    commit: str = "aaaaaaa",
    slope: float = 0.01,
    calls: list[int] | None = None,
) -> dict:
    """A saved run whose held-out curve rises by ``slope`` per evaluation (best at lr 1e-4); ``calls``:
    the longest completion of each generation call of every step (recorded only when given)."""
    evals = cfg.steps // cfg.eval_every + 1
    budget = cfg.prompts_per_step * cfg.mean_rollouts
    height = 0.5 - abs(np.log10(lr / 1e-4)) / 10
    acc = [0.5 + height * slope * 10 * k / evals + 0.001 * seed for k in range(evals)]
    groups = [[[i, cfg.mean_rollouts, i % 3 * 4] for i in range(cfg.prompts_per_step)] for _ in range(cfg.steps)]
    result = {
        "rollouts": [k * cfg.eval_every * budget for k in range(evals)],
        "tokens": [k * cfg.eval_every * budget * 5 for k in range(evals)],
        "held_out": acc,
        "counts": [[cfg.mean_rollouts] * cfg.prompts_per_step] * cfg.steps,
        "groups": groups,
        "train_seconds": 1.0,
        "allocator_seconds": 0.0,
        "objective": "equal groups",
        "extra_rollouts": 0,
        "probes": {"probe_var": [2.0], "probe_signal": [1.0], "nsr_rollout": [80.0], "probe_step": [0]},
    }
    if calls is not None:
        result["round_max_tokens"] = [list(calls)] * cfg.steps
        result["round_tokens"] = [[4 * c for c in calls]] * cfg.steps
        result["evaluated_at"] = [k * cfg.eval_every for k in range(evals)]
    return {
        "settings": run_settings(cfg, arm, seed, lr),
        "commit": "c0" + commit,
        "code": "tree-" + commit,
        "result": result,
    }


def fill(store: RunStore, cfg: ProtocolConfig, arms, commit: str = "aaaaaaa", skip=(), calls=None) -> None:
    for arm in arms:
        for lr in cfg.lr_grid:
            for seed in cfg.tune_seeds:
                store.add(fake_run(cfg, arm, seed, lr, commit))
        for seed in cfg.report_seeds:
            if (arm, seed) not in skip:
                slope = 0.02 if arm == "default" else 0.01
                store.add(
                    fake_run(cfg, arm, seed, 1e-4, commit, slope=slope, calls=None if calls is None else calls[arm])
                )


def test_config_checks_name_the_setting():
    with pytest.raises(ValueError, match="regime"):
        check_config(replace(CFG, regime="both"))
    with pytest.raises(ValueError, match="tune seeds"):
        check_config(replace(CFG, tune_seeds=(0, 1)))  # overlaps the report seeds
    with pytest.raises(ValueError, match="unknown arm 'nope'"):
        check_config(replace(CFG, arms=("uniform", "nope")))
    with pytest.raises(ValueError, match="visits"):
        check_config(replace(CFG, visits=5))  # 24 visits are not a whole number of 5
    with pytest.raises(ValueError, match="same_rate: 'null' must come after 'uniform'"):
        check_config(replace(CFG, arms=("null", "uniform")))  # would be tuned, not run at Uniform's rate
    with pytest.raises(ValueError, match="same_rate: 'uniform'"):
        check_config(replace(CFG, same_rate=("uniform",)))
    check_config(replace(CFG, arms=("default", "uniform", "oracle-skip"), same_rate=("null", "oracle-skip")))
    assert CFG.pool_size() == 12 and replace(CFG, regime="single-pass").pool_size() == 24


def test_resume_with_other_settings_is_refused_naming_the_setting(tmp_path):
    RunStore(tmp_path / CFG.regime, CFG)
    with pytest.raises(ValueError, match=r"protocol.json was made with other settings \(eval_every: 1 -> 3"):
        RunStore(tmp_path / CFG.regime, replace(CFG, eval_every=3))
    store = RunStore(tmp_path / CFG.regime, CFG)
    run = fake_run(CFG, "uniform", 0, 1e-4)
    run["settings"]["weights"] = "other"
    store.add(run)
    from adaptive_rollouts.experiments.results import load_result

    assert load_result(store.path("uniform", 0, 1e-4)).settings["arm"] == "uniform"  # a result file
    with pytest.raises(ValueError, match=r"uniform/lr0.0001-seed0.json was made with other settings \(weights"):
        store.get("uniform", 0, 1e-4)


def test_read_only_protocol_lists_what_is_missing_and_trains_nothing(tmp_path):
    state = run_protocol(CFG, tmp_path, run_missing=False, progress=False)
    assert set(state.missing) == {"uniform", "null", "default"} and not state.runs
    assert state.missing["uniform"] == [
        "learning-rate tuning incomplete (tune seed at rate: 100 at 3e-05, 101 at 3e-05, 100 at 0.0001, "
        "101 at 0.0001, 100 at 0.0003, 101 at 0.0003)"
    ]
    store = RunStore(tmp_path / CFG.regime, CFG)
    fill(store, CFG, ["uniform", "default"], skip={("default", 1)})
    state = run_protocol(CFG, tmp_path, run_missing=False, progress=False)
    assert state.best_lr == {"uniform": 1e-4, "null": 1e-4, "default": 1e-4}  # interior best; null: Uniform's
    assert state.missing["default"] == ["seed 1 at lr 0.0001"]
    assert state.missing["null"][0] == "seed 0 at lr 0.0001"  # the null control runs at Uniform's rate


def test_report_reads_the_map_way_and_says_when_commits_differ(tmp_path):
    from adaptive_rollouts.demo.protocol_report import write_regime_report
    from adaptive_rollouts.demo.protocol_speed import arm_rows

    store = RunStore(tmp_path / CFG.regime, CFG)
    fill(store, CFG, ["uniform", "null"])
    fill(store, CFG, ["default"], commit="bbbbbbb")
    state = run_protocol(CFG, tmp_path, run_missing=False, progress=False)
    rows = {r["arm"]: r for r in arm_rows(CFG, state)}
    assert rows["null"]["rollouts"]["speedup"] == pytest.approx(1.0, abs=0.05)
    # target: the pooled curve at half the run; Uniform reaches it after 4.5 evaluations, default after 2.25
    assert rows["default"]["rollouts"]["speedup"] == pytest.approx(2.0)
    assert rows["default"]["tokens"]["speedup"] == pytest.approx(rows["default"]["rollouts"]["speedup"])
    lo, hi = rows["default"]["rollouts"]["ci95"]
    assert lo <= rows["default"]["rollouts"]["ci90"][0] <= hi
    # the map's statistic on the same curves: 50/75/90% of the gain, jackknife-t intervals
    from adaptive_rollouts.demo.protocol_speed import curve, report_runs
    from adaptive_rollouts.experiments.gain_speedup import gain_interval, gain_speedup

    gain = rows["default"]["rollouts"]["gain"]
    u = [curve(r) for r in report_runs(CFG, state, "uniform").values()]
    m = [curve(r) for r in report_runs(CFG, state, "default").values()]
    assert gain["fractions"] == [0.5, 0.75, 0.9] and gain["speedup"] == pytest.approx(gain_speedup(u, m))
    if len(m) >= 3:
        x = gain_interval(u, m, interval="jackknife-t", level=0.95)
        assert gain["ci95"] == pytest.approx([x["low"], x["high"]], nan_ok=True)
    else:  # the jackknife needs three seeds
        assert all(np.isnan(gain["ci95"]))
    assert rows["null"]["rollouts"]["gain"]["speedup"] == pytest.approx(1.0, abs=0.05)
    text = write_regime_report(CFG, state, tmp_path, "cmd", tmp_path / "no-map")
    assert "Runs from 2 code versions" in text and "tree-bbbbbbb" in text and "c0bbbbbbb" in text
    assert "No regime-map results" in text
    assert "| this regime | 2.00 |" in text  # batch noise/signal: sum of traces over sum of signals
    summary = json.loads((tmp_path / CFG.regime / "summary.json").read_text())
    header = summary["header"]
    assert header["command"] == "cmd" and header["settings"]["steps"] == CFG.steps and "commit" in header
    assert summary["data"]["arms"][0]["arm"] == "uniform" and summary["data"]["missing"] == {}


def test_modelled_time_prices_each_generation_call_by_its_longest_completion(tmp_path):
    from adaptive_rollouts.demo.protocol_report import write_regime_report
    from adaptive_rollouts.demo.protocol_speed import TIME_AXIS, arm_rows

    store = RunStore(tmp_path / CFG.regime, CFG)
    # Uniform: one call a step whose longest completion is 5 tokens; the default: two calls of 2.
    fill(store, CFG, ["uniform", "null", "default"], calls={"uniform": [5], "null": [5], "default": [2, 2]})
    state = run_protocol(CFG, tmp_path, run_missing=False, progress=False)
    rows = {r["arm"]: r for r in arm_rows(CFG, state)}
    # rollouts: Uniform needs 4.5 evaluations, the default 2.25 (2x); a step costs 5 and 4 token-times
    assert rows["default"]["rollouts"]["speedup"] == pytest.approx(2.0)
    assert rows["default"][TIME_AXIS]["speedup"] == pytest.approx(2.0 * 5 / 4)
    # one more call a step, 1 token-time faster at no overhead: even at an overhead of 1 per call
    assert rows["default"]["break_even_overhead"] == pytest.approx(1.0)
    assert rows["null"][TIME_AXIS]["speedup"] == pytest.approx(1.0, abs=0.05)
    assert rows["null"]["break_even_overhead"] == np.inf  # no more calls than Uniform, not slower
    text = write_regime_report(CFG, state, tmp_path, "cmd", tmp_path / "no-map")
    assert "speedup, modelled time (synchronous)" in text and "| < 1 |" in text


def test_runs_without_generation_calls_get_no_modelled_time(tmp_path):
    from adaptive_rollouts.demo.protocol_speed import TIME_AXIS, arm_rows

    store = RunStore(tmp_path / CFG.regime, CFG)
    fill(store, CFG, ["uniform", "null", "default"])
    rows = arm_rows(CFG, run_protocol(CFG, tmp_path, run_missing=False, progress=False))
    assert all(TIME_AXIS not in r and "break_even_overhead" not in r for r in rows)
    assert all("rollouts" in r and "tokens" in r for r in rows)


def test_no_revisits_instead_of_nan():
    from adaptive_rollouts.demo.protocol_report import markdown

    prints = {
        "noise_to_signal_batch": 0.5,
        "noise_to_signal_rollout_over_budget": 1.0,
        "zero_variance_fraction": 0.4,
        "p_persistence": float("nan"),
    }
    from adaptive_rollouts.demo.protocol import ProtocolState

    text = markdown(CFG, ProtocolState(), [], prints, None, "note")
    assert "no revisits" in text and "nan" not in text


def test_oracle_skip_arm_skips_on_the_sampled_p():
    from adaptive_rollouts.demo.allocation import make_arm_allocator
    from adaptive_rollouts.types import Prediction

    class Sampled:  # stands in for SampledSuccess
        def predict(self, prompts):
            return Prediction(np.array([0.0, 0.02, 0.3, 0.5, 0.97, 1.0])[: len(prompts)], np.zeros(len(prompts)))

    skip = make_arm_allocator("oracle-skip", 0, 8, oracle=Sampled())
    # P(all equal at 8): 1, 0.85, 0.06, 0.008, 0.78, 1 -> skip above 0.9
    assert skip.plan(list("abcdef"), 48).counts.tolist() == [0, 8, 8, 8, 8, 0]
    assert skip.kind == "save"
    with pytest.raises(ValueError, match="needs the sampled-p predictor"):
        make_arm_allocator("oracle", 0, 8)


def test_default_true_p_arm_reads_the_sampled_p_through_its_belief():
    from adaptive_rollouts.demo.allocation import make_arm_allocator, uses_oracle
    from adaptive_rollouts.demo.protocol import run_settings

    p_of = {"e": 1.0, "h": 0.0, "m": 0.5}  # easy, hard, middle
    oracle = TruePredictor(lambda prompts: (np.array([p_of[str(q)[0]] for q in prompts]), None))  # as SampledSuccess
    alloc = make_arm_allocator("default@true-p", 0, 8, oracle=oracle)
    assert type(alloc).__name__ == "SavingProgressive" and alloc.belief.text is oracle
    rng = np.random.default_rng(0)

    def sample(idx, counts):
        return [(rng.random(c) < p_of[prompts[i][0]]).astype(float) for i, c in zip(idx, counts)]

    for step in range(8):  # new prompts each step: only the sampled p can tell them apart
        prompts = [f"{k}{step}-{i}" for i in range(4) for k in "ehm"]
        alloc.run(prompts, 96, sample)
    assert alloc.last_metrics["pre_skipped"] >= 4
    assert uses_oracle("default@true-p") and not uses_oracle("default")
    assert run_settings(CFG, "default@true-p", 0, 1e-4)["oracle_samples"] == CFG.oracle_samples
    with pytest.raises(ValueError, match="needs the sampled-p predictor"):
        make_arm_allocator("default@true-p", 0, 8)


def test_sampled_success_is_uncharged_and_leaves_training_rng_alone():
    from adaptive_rollouts.demo.oracle import SampledSuccess, row_index

    tok = build_tokenizer()
    model = build_model(tok, seed=0, **SMALL)
    oracle = SampledSuccess(model, tok, ["a21=", "d5190=", "a7="], samples=4, seed=3)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    pred = oracle.predict(["train#2", "train#0"])
    assert torch.rand(1) == before  # the training RNG stream did not move
    assert pred.mean.shape == (2,) and np.all((pred.mean >= 0) & (pred.mean <= 1)) and not pred.var.any()
    assert oracle.extra_rollouts == 8 and oracle.calls == 1
    again = oracle.predict(["train#0", "train#1"])  # the policy has not changed: no new samples for row "train#0"
    assert again.mean[0] == pred.mean[1] and oracle.extra_rollouts == 12
    with torch.no_grad():
        next(model.parameters()).add_(0.0)  # an in-place write, as an optimizer step: p is sampled again
    oracle.predict(["train#0"])
    assert (oracle.extra_rollouts, oracle.calls) == (16, 3)
    with pytest.raises(ValueError, match="outside the pool"):
        oracle.predict(["train#3"])
    with pytest.raises(ValueError, match="'a12='"):
        row_index("a12=")


def test_batch_gradient_is_the_mean_of_per_rollout_gradients():
    from adaptive_rollouts.demo.regime import batch_gradient, count_sketch, per_rollout_gradients, sketch_maps

    tok = build_tokenizer()
    model = build_model(tok, seed=0, **SMALL)
    prompts = ["a312=", "d5190=", "a77="]
    sizes = [p.numel() for p in model.parameters() if p.requires_grad]
    exact = batch_gradient(model, tok, prompts, 4, seed=1)
    per_rollout, _ = per_rollout_gradients(model, tok, prompts, 4, seed=1, sketch_dim=512)
    sketched = count_sketch(np.split(exact, np.cumsum(sizes)[:-1]), sketch_maps(sizes, 512, 1), 512)
    assert exact.shape == (sum(sizes),)
    np.testing.assert_allclose(sketched, per_rollout.mean(axis=0), rtol=1e-4, atol=1e-9)


def test_recording_verifier_counts_every_rollout_and_token():
    from adaptive_rollouts.demo.run import RecordingVerifier

    v = RecordingVerifier({"a21=": 0, "d31=": 1})
    assert v(["a21=", "a21=", "d31="], ["12", "21", "31"], completion_ids=[[1, 2, 3], [1, 2, 3], [4, 5]]) == [
        1.0,
        0.0,
        1.0,
    ]
    assert (v.rollouts, v.tokens) == (3, 8)
    assert sorted(v.flush()) == [[0, 2, 1], [1, 1, 1]]
    v(["d31="], ["31"], completion_ids=[[4, 5, 6, 7]])
    assert v.flush_calls() == ([3, 4], [8, 4])  # each call: its longest completion, its tokens
    assert v.flush_calls() == ([], [])


@pytest.mark.slow
def test_protocol_runs_resumes_and_reports(tmp_path, monkeypatch):
    """Two tiny arms end to end on the shipped model; a rerun trains nothing."""
    import adaptive_rollouts.demo.run as run_module

    cfg = replace(CFG, arms=("uniform", "oracle"), steps=2, prompts_per_step=2, mean_rollouts=2, visits=1)
    cfg = replace(cfg, eval_every=1, held_out=4, report_seeds=(0,), oracle_samples=2, probe_every=1, probe_resamples=2)
    state = run_protocol(cfg, tmp_path, progress=False)
    assert set(state.best_lr) | set(state.errors) == {"uniform", "oracle"}
    saved = sorted(p.relative_to(tmp_path) for p in Path(tmp_path).rglob("*.json"))
    assert Path("multi-epoch/protocol.json") in saved and len(saved) >= 13
    one = json.loads((tmp_path / "multi-epoch/runs/oracle/lr0.0001-seed100.json").read_text())
    run = one["data"]["result"]  # a result file: header (command, commit, settings), then the data
    assert one["header"]["command"] and run["rollouts"] == [0, 4, 8] and run["extra_rollouts"] == 2 * 2 * 2
    assert run["evaluated_at"] == [0, 1, 2] and len(run["round_max_tokens"]) == len(run["round_tokens"]) == 2
    assert sum(map(sum, run["round_tokens"])) == run["tokens"][-1]
    monkeypatch.setattr(run_module, "run_one", lambda *a, **k: pytest.fail("a finished run was run again"))
    again = run_protocol(cfg, tmp_path, progress=False)
    assert again.best_lr == state.best_lr


def test_an_arm_that_cannot_train_is_reported_and_the_next_arm_runs(tmp_path, monkeypatch):
    import adaptive_rollouts.demo.protocol as protocol

    store = RunStore(tmp_path / CFG.regime, CFG)
    fill(store, CFG, ["uniform", "default"])

    def refuse(arm, *args, **kwargs):
        raise ValueError(f"allocator of {arm} spent 40 rollouts, budget was 64")

    monkeypatch.setattr(protocol, "_train", refuse)
    state = run_protocol(CFG, tmp_path, progress=False)
    assert state.errors == {"null": "ValueError: allocator of null spent 40 rollouts, budget was 64"}
    assert state.best_lr["default"] == 1e-4 and ("default", 1, 1e-4) in state.runs  # the arm after it ran


def test_regime_is_placed_on_the_nearest_map_cell_from_a_map_result_file(tmp_path):
    from adaptive_rollouts.demo.protocol_report import write_regime_report

    store = RunStore(tmp_path / CFG.regime, CFG)
    fill(store, CFG, ["uniform"])
    state = run_protocol(CFG, tmp_path, run_missing=False, progress=False)
    rows = [
        {"cell": "calm", "fingerprints": {"noise_to_signal_batch": 0.4, "zero_variance_fraction": 0.7}, "methods": {}},
        {
            "cell": "noisy",
            "fingerprints": {"noise_to_signal_batch": 2.5, "zero_variance_fraction": 0.7, "p_persistence": 0.9},
            "methods": {"default": {"speedup": 1.3, "ci90": [1.1, 1.5]}},
        },
    ]
    (tmp_path / "map").mkdir()
    write_result(tmp_path / "map" / "map.json", {"rows": rows}, command="cmd", commit="unknown")
    text = write_regime_report(CFG, state, tmp_path, "cmd", tmp_path / "map")
    assert "nearest map cell noisy" in text and "The cell's other methods: default 1.30" in text
    assert "| uniform | (not on the map) | 1.00 (90% 1.00-1.00) | - |" in text
    (tmp_path / "map" / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="bad.json: not readable JSON"):
        write_regime_report(CFG, state, tmp_path, "cmd", tmp_path / "map")


def test_rates_from_another_regime_are_read_not_tuned(tmp_path):
    single = replace(CFG, regime="single-pass")
    fill(RunStore(tmp_path / "single-pass", single), single, ["uniform"])
    cfg = replace(CFG, rates_from="single-pass")
    state = run_protocol(cfg, tmp_path, run_missing=False, progress=False)
    assert state.best_lr == {"uniform": 1e-4, "null": 1e-4}
    assert state.missing["uniform"] == ["seed 0 at lr 0.0001", "seed 1 at lr 0.0001"]  # no tune runs asked for
    assert state.missing["default"] == ["learning rate not tuned in single-pass yet"]
    with pytest.raises(ValueError, match="rates_from"):
        check_config(replace(CFG, rates_from="multi-epoch"))


def test_each_arm_names_its_objective():
    from adaptive_rollouts.allocators import Uniform
    from adaptive_rollouts.demo.allocation import make_arm_allocator, objective_of
    from adaptive_rollouts.demo.oracle import SampledSuccess

    assert objective_of(make_arm_allocator("null", 0, 8)) == "SavingProgressive (estimator grpo, saving off)"
    assert objective_of(make_arm_allocator("vip-paper", 0, 8)) == "drgrpo variance (paper)"
    tok = build_tokenizer()
    sampled = SampledSuccess(build_model(tok, seed=0, **SMALL), tok, ["a21="], samples=2)
    oracle = make_arm_allocator("oracle", 0, 8, oracle=sampled)
    assert objective_of(oracle) == "expected improvement, seq-mean"
    assert objective_of(Uniform()) == "equal groups"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--regimes", "both"], "regime must be one of"),
        (["--arms", "uniform,nope"], "unknown arm 'nope'"),
        (["--lr-grid", "1e-4,x"], "--lr-grid: expected a comma list of float values"),
        (["--lr-grid", "1e-4,3e-4"], "lr_grid needs >= 3 positive rates"),
        (["--tune-seeds", "0,1"], "tune seeds disjoint from the report seeds"),
        (["--regimes", ","], "--regimes: give at least one"),
        (["--rates-from", "single-pass", "--regimes", "single-pass"], "rates_from must name another regime"),
        (["--arms", "oracle-skip,uniform", "--same-rate", "oracle-skip"], "'oracle-skip' must come after 'uniform'"),
    ],
)
def test_protocol_command_names_a_bad_setting_before_any_run(args, message, capsys, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "demo_protocol", Path(__file__).parents[1] / "benchmarks/demo_protocol.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--out", str(tmp_path), *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_arm_options_build_the_registry_allocator_with_them():
    from adaptive_rollouts.demo.allocation import arm_of, make_arm_allocator

    arm = arm_of("default[predictor='gp';pilot=2]+view")
    assert (arm.base, arm.spec, arm.policy_features) == ("default", "default[predictor='gp';pilot=2]", True)
    alloc = make_arm_allocator(arm.name, 3, 8)
    assert type(alloc).__name__ == "SavingProgressive" and alloc.slot.spec == "gp" and alloc.pilot == 2
    assert make_arm_allocator("default", 3, 8) is None  # without options the trainer builds it

    oracle = TruePredictor(lambda prompts: (np.full(len(prompts), 0.5), None))  # as SampledSuccess
    assert make_arm_allocator("default@true-p[share=0.3]", 0, 8, oracle=oracle).share == 0.3
    with pytest.raises(ValueError, match="only a registry allocator or default@true-p takes"):
        arm_of("oracle-skip[flat_above=0.5]")
    with pytest.raises(ValueError, match="unknown arm"):
        arm_of("default[predictor=gp")
    with pytest.raises(ValueError, match="not a Python literal"):
        arm_of("default[predictor=gp]")


def test_a_variant_is_read_head_to_head_against_the_same_arm_without_its_options(tmp_path):
    from adaptive_rollouts.demo.protocol_speed import arm_rows, curve, report_runs
    from adaptive_rollouts.experiments.gain_speedup import gain_speedup

    variant = "default[share=0.3]"
    cfg = replace(CFG, arms=("uniform", "null", "default", variant), report_seeds=(0, 1, 2))
    store = RunStore(tmp_path / cfg.regime, cfg)
    fill(store, cfg, ["uniform", "null", "default"])
    for lr in cfg.lr_grid:
        for seed in cfg.tune_seeds:
            store.add(fake_run(cfg, variant, seed, lr))
    for seed in cfg.report_seeds:
        store.add(fake_run(cfg, variant, seed, 1e-4, slope=0.04))  # twice as fast as the default
    state = run_protocol(cfg, tmp_path, run_missing=False, progress=False)
    rows = {r["arm"]: r for r in arm_rows(cfg, state)}
    (versus,) = rows[variant]["versus"]
    plain = [curve(r) for r in report_runs(cfg, state, "default").values()]
    faster = [curve(r) for r in report_runs(cfg, state, variant).values()]
    assert versus["arm"] == "default" and versus["seeds"] == 3
    assert versus["speedup"] == pytest.approx(gain_speedup(plain, faster)) and versus["speedup"] > 1.5
    assert all("versus" not in rows[a] for a in ("uniform", "null", "default"))  # no options: nothing to pair

"""Demo pieces: tokenizer, task splits (disjointness), metrics against hand computation, warm-start
checkpoint resume, a 2-step end-to-end run with resume, the report."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("reasoning_gym")

from adaptive_rollouts.demo.evaluate import pass_at_k, sampled_metrics  # noqa: E402
from adaptive_rollouts.demo.model import ASSETS, build_model, load_warm_start, save_warm_start  # noqa: E402
from adaptive_rollouts.demo.tasks import (  # noqa: E402
    Verifier,
    answer_of,
    make_problems,
    rg_score,
    space_size,
    split_of,
)
from adaptive_rollouts.demo.tokenizer import ALPHABET, build_tokenizer  # noqa: E402
from adaptive_rollouts.experiments.results import load_result  # noqa: E402

SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1)


def test_tokenizer_round_trip_one_token_per_char():
    tok = build_tokenizer()
    text = "a31415=11345"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text) and tok.decode(ids) == text
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    assert len(tok) == len(ALPHABET) + 3 and tok.padding_side == "left"


def test_task_answers_verifier_and_reasoning_gym_agree():
    problems = make_problems(50, "pool")
    assert all(p.answer == answer_of(p.prompt) for p in problems)
    assert all(sorted(p.answer) == sorted(p.prompt[1:-1]) for p in problems)
    assert Verifier()([p.prompt for p in problems], [p.answer for p in problems]) == [1.0] * 50
    assert Verifier()(["a312="], ["132"]) == [0.0] and Verifier()(["d312="], [" 321 "]) == [1.0]
    # reasoning-gym's own scorer gives the exact answer full credit (it is more lenient, not stricter)
    assert [rg_score(p.prompt, p.answer) for p in problems[:10]] == [1.0] * 10
    assert rg_score("a312=", "321") == 0.0
    with pytest.raises(ValueError, match="prompt must look like"):
        answer_of("312=")
    assert space_size() > 10**8


def test_splits_are_disjoint_by_construction_and_in_fact():
    held_out, pool = make_problems(512, "held_out"), make_problems(512, "pool")
    sft = make_problems(20_000, "sft")
    sets = {name: {p.prompt for p in ps} for name, ps in (("held_out", held_out), ("pool", pool), ("sft", sft))}
    assert len(sets["held_out"]) == 512 and len(sets["pool"]) == 512 and len(sets["sft"]) == 20_000
    for a, b in itertools.combinations(sets, 2):
        assert not sets[a] & sets[b], (a, b)
    for name, prompts in sets.items():
        assert {split_of(p) for p in prompts} == {name}
    assert len({len(p) - 2 for p in sets["held_out"]}) == 6  # every list length 3..8 is held out
    with pytest.raises(ValueError, match="split must be one of"):
        make_problems(3, "test")


def test_pass_at_k_matches_enumeration():
    """pass@k = share of the k-subsets of the n samples that contain a correct one."""
    for n in (1, 4, 8):
        for c in range(n + 1):
            samples = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                assert pass_at_k(n, c, k) == pytest.approx(np.mean([max(s) for s in subsets]))
    with pytest.raises(ValueError, match="need 0 <= c <= n"):
        pass_at_k(4, 5, 1)


def test_sampled_metrics_by_hand():
    scores = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
    m = sampled_metrics(scores, ks=(1, 2, 4))
    # pass@1 = mean c/n = (2/4 + 0 + 1)/3; pass@2: 1 - C(2,2)/C(4,2) = 5/6 for the first problem
    assert m["pass@1"] == pytest.approx(0.5)
    assert m["pass@2"] == pytest.approx((5 / 6 + 0 + 1) / 3)
    assert m["pass@4"] == pytest.approx(2 / 3)
    # mean@k: mean score of the first k samples
    assert m["mean@1"] == pytest.approx(2 / 3) and m["mean@2"] == pytest.approx(0.5)
    assert m["mean@4"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="scores must be"):
        sampled_metrics(scores, ks=(8,))


def test_t_interval_and_rollouts_to_reach():
    from scipy import stats

    from adaptive_rollouts.demo.stats import rollouts_to_reach, t_interval

    x = [0.41, 0.45, 0.38, 0.50]
    m, h = t_interval(x)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert m == pytest.approx(np.mean(x)) and h == pytest.approx((hi - lo) / 2)
    assert np.isnan(t_interval([0.3])[1])
    assert rollouts_to_reach([0, 10, 20], [0.1, 0.2, 0.4], 0.3) == pytest.approx(15)
    assert rollouts_to_reach([0, 10], [0.5, 0.6], 0.3) == 0 and rollouts_to_reach([0, 10], [0.1, 0.2], 0.3) == np.inf


def test_vip_bounds_are_respected():
    from adaptive_rollouts.demo.allocation import make_arm_allocator, vip_bounds

    lower, upper = vip_bounds(8)
    assert (lower, upper) == (4, 32)

    class Features:
        pass

    from adaptive_rollouts.allocators import VIP

    vip = make_arm_allocator("vip-paper", 0, 8)
    assert isinstance(vip, VIP) and (vip.lower, vip.upper) == (4, 32)
    assert vip.estimator == "drgrpo" and vip.aggregation is None  # VIP as published: the Dr. GRPO variance
    with pytest.raises(ValueError, match="unknown arm 'ours'"):
        make_arm_allocator("ours", 0, 8)


def test_an_arm_takes_the_maps_engine_mark_and_nothing_else():
    """``<arm>~<engine>``: the arm's allocator with its rounds priced by that engine (the trainer's
    ``time_rounds``); an unknown engine or the simulator's view mark is refused naming the arm."""
    from adaptive_rollouts.demo.allocation import arm_of, make_arm_allocator

    arm = arm_of("default~synchronous")
    assert (arm.base, arm.round_clock, arm.loss_type) == ("default", "synchronous", "grpo")
    assert arm_of("vip-paper~slots-64").loss_type == "dr_grpo" and arm_of("uniform").round_clock is None
    assert make_arm_allocator("default~synchronous", 0, 8) is None  # the trainer builds the default
    for bad in ("default~nope", "default^view1", "default~", "nope~synchronous", "default+view~synchronous"):
        with pytest.raises(ValueError, match=re.escape(f"unknown arm '{bad}'")):
            arm_of(bad)


def test_an_arm_with_the_policy_view_mark_gets_the_trainers_features():
    """``<arm>+view`` (last): the same allocator and loss, with the trainer's policy-features pass on;
    its protocol runs record it, so they never stand in for the arm without it."""
    from adaptive_rollouts.demo.allocation import arm_of, make_arm_allocator
    from adaptive_rollouts.demo.protocol import ProtocolConfig, run_settings

    arm = arm_of("default~slots-16+view")
    assert (arm.base, arm.round_clock, arm.policy_features, arm.loss_type) == ("default", "slots-16", True, "grpo")
    assert not arm_of("default").policy_features and make_arm_allocator("default+view", 0, 8) is None
    cfg = ProtocolConfig()
    assert run_settings(cfg, "default+view", 0, 1e-4)["policy_features"] is True
    assert "policy_features" not in run_settings(cfg, "default", 0, 1e-4)


def test_save_load_round_trip(tmp_path):
    tok = build_tokenizer()
    model = build_model(tok, seed=1, **SMALL)
    save_warm_start(model, {"note": "test"}, tmp_path)
    loaded = load_warm_start(tok, tmp_path)
    for (k, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    with pytest.raises(FileNotFoundError, match="warm-start asset missing"):
        load_warm_start(tok, tmp_path / "none")


def test_warm_start_resume_is_bit_for_bit(tmp_path):
    from adaptive_rollouts.demo.warm_start import train

    kw = dict(batch_size=8, lr=1e-3, seed=3, warmup=2, log_every=100, sft_problems=300, eval_problems=8, **SMALL)
    straight, _ = train(6, work=tmp_path / "a", ckpt_every=100, **kw)
    train(3, work=tmp_path / "b", ckpt_every=3, **kw)  # stops at 3 with a checkpoint
    resumed, _ = train(6, work=tmp_path / "b", ckpt_every=100, **kw)
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


def test_a_cooldown_resumes_from_the_constant_rate_runs_checkpoint(tmp_path):
    """The ladder's warm start: a constant-rate run's checkpoint at steps - cooldown, continued with
    the decaying rate, is bit for bit a straight run with the cooldown; the rate does decay."""
    from adaptive_rollouts.demo.warm_start import lr_at, train

    kw = dict(batch_size=8, lr=1e-3, seed=3, warmup=2, log_every=100, sft_problems=300, eval_problems=8, **SMALL)
    straight, meta = train(6, work=tmp_path / "a", ckpt_every=100, cooldown=3, **kw)
    train(3, work=tmp_path / "b", ckpt_every=3, **kw)  # constant rate, checkpoint at 3
    resumed, _ = train(6, work=tmp_path / "b", ckpt_every=100, cooldown=3, **kw)
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    constant, _ = train(6, work=tmp_path / "c", ckpt_every=100, **kw)
    assert any(not torch.equal(a, b) for a, b in zip(straight.state_dict().values(), constant.state_dict().values()))
    assert meta["training"]["cooldown"] == 3 and [lr_at(s, 1.0, 2, 6, 3) for s in (3, 4, 5, 6)] == [1, 1, 2 / 3, 1 / 3]
    with pytest.raises(ValueError, match="cooldown must lie in"):
        lr_at(1, 1.0, 2, 6, 7)


def test_shipped_warm_start_is_partial():
    if not (ASSETS / "warm_start.safetensors").exists():
        pytest.fail("demo/assets/warm_start.safetensors is missing: run scripts/train_warm_start.py")
    from adaptive_rollouts.demo.evaluate import greedy_scores

    tok = build_tokenizer()
    model = load_warm_start(tok)
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 3e6
    acc = greedy_scores(model, tok, make_problems(64, "held_out")).mean()
    assert 0.1 < acc < 0.9  # warm, not solved: RL has something to do
    meta = json.loads((ASSETS / "config.json").read_text())
    rates = meta["pool_success_rate_t1"]
    assert rates["at_0"] > 0.05 and rates["at_1"] > 0.05


class HashEncoder:
    """Deterministic stand-in for MiniLM (keeps the test offline and fast)."""

    dim = 8

    def encode(self, prompts):
        return np.stack([np.random.default_rng(abs(hash(p)) % 2**32).normal(size=8) for p in prompts])


def test_demo_runs_two_steps_resumes_and_reports(tmp_path):
    from adaptive_rollouts.demo.jobs import run_all
    from adaptive_rollouts.demo.report import write_report
    from adaptive_rollouts.demo.run import DemoConfig

    tok = build_tokenizer()
    save_warm_start(build_model(tok, seed=0, **SMALL), {}, tmp_path / "model")
    cfg = DemoConfig(
        methods=("uniform", "vip-paper", "vigor"),
        steps=2,
        prompts_per_step=4,
        mean_rollouts=8,
        pool_size=16,
        held_out=8,
        eval_every=1,
        learning_rates={"uniform": 1e-4, "vip-paper": 1e-4, "vigor": 3e-4},
        model_dir=str(tmp_path / "model"),
    )
    results = run_all(cfg, tmp_path, log=lambda *a: None, encoder=HashEncoder())
    assert [r.method for r in results] == ["uniform", "vip-paper", "vigor"]
    for r in results:
        assert r.rollouts == [0, 32, 64] and len(r.held_out) == 3 and len(r.pool) == 2
        assert all(0.0 <= a <= 1.0 for a in r.held_out + r.pool)
        assert [sum(c) for c in r.counts] == [32, 32]
        assert [sum(g[1] for g in step) for step in r.groups] == [32, 32]  # every rollout's reward recorded
        assert set(r.sampled_final) == {f"{m}@{k}" for m in ("pass", "mean") for k in (1, 2, 4, 8)}
        assert 0.0 <= r.allocator_seconds < r.train_seconds
    assert results[0].counts[0] == [8, 8, 8, 8] and results[2].learning_rate == 3e-4
    assert all(4 <= n <= 32 for c in results[1].counts for n in c)
    assert len(set(results[2].counts[0])) > 1  # VIGOR's rounds give unequal groups
    again = run_all(cfg, tmp_path, log=lambda *a: pytest.fail("a finished run was run again"), encoder=HashEncoder())
    assert [r.held_out for r in again] == [r.held_out for r in results]
    text = write_report(results, {}, tmp_path / "report")
    assert "vigor" in text and "pass@8" in text and "of Uniform's gain" in text and "of Uniform's rollouts" in text
    summary = load_result(tmp_path / "report" / "results.json").data["summary"]
    assert {"held_out_start", "held_out_final", "mean@8_final", "accuracy_at_uniform_spend"} <= set(summary[0])
    from adaptive_rollouts.demo.reading import ONE_SEED_NOTE

    assert ONE_SEED_NOTE in (tmp_path / "report" / "report.md").read_text()  # one seed: said so
    for name in ("held_out.png", "pass_at_k.png", "allocation.png", "report.md"):
        assert (tmp_path / "report" / name).exists()


def test_demo_cli_imports_no_torch_and_rejects_bad_input():
    import argparse
    import subprocess
    import sys

    code = (
        "import sys, adaptive_rollouts.demo.cli as c, argparse; c.add_demo_arguments(argparse.ArgumentParser()); "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    from adaptive_rollouts.demo.cli import add_demo_arguments, run_demo

    parser = add_demo_arguments(argparse.ArgumentParser())
    with pytest.raises(ValueError, match="nope"):
        run_demo(parser.parse_args(["--methods", "uniform,nope"]))
    with pytest.raises(ValueError, match="--lr"):
        run_demo(parser.parse_args(["--lr", "-1"]))


def test_count_sketch_preserves_inner_products_in_expectation():
    from adaptive_rollouts.demo.regime import count_sketch, sketch_maps

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=40), rng.normal(size=40)
    est = []
    for seed in range(3000):
        maps = sketch_maps([25, 15], 8, seed)
        est.append(count_sketch([x[:25], x[25:]], maps, 8) @ count_sketch([y[:25], y[25:]], maps, 8))
    assert np.mean(est) == pytest.approx(x @ y, abs=4 * np.std(est) / np.sqrt(len(est)))


def test_reward_fingerprints_by_hand():
    from adaptive_rollouts.demo.regime import reward_fingerprints

    # step 1: prompt 0 all fail, prompt 1 half, prompt 2 all pass; step 2: same prompts, same rates
    steps = [[[0, 4, 0], [1, 4, 2], [2, 4, 4]], [[0, 4, 0], [1, 4, 2], [2, 4, 4]]]
    fp = reward_fingerprints(steps)
    assert fp["zero_variance_fraction"] == pytest.approx(2 / 3)
    assert fp["all_fail_fraction"] == pytest.approx(1 / 3) and fp["all_pass_fraction"] == pytest.approx(1 / 3)
    assert fp["p_histogram"][0] == pytest.approx(1 / 3) and fp["p_histogram"][5] == pytest.approx(1 / 3)
    assert fp["p_persistence"] == pytest.approx(1.0)


def test_per_rollout_gradients_shape_and_zero_advantage_rows():
    from adaptive_rollouts.demo.regime import per_rollout_gradients

    tok = build_tokenizer()
    model = build_model(tok, seed=0, **SMALL)
    grads, rewards = per_rollout_gradients(model, tok, ["a312=", "d5190="], rollouts=3, seed=0, sketch_dim=64)
    assert grads.shape == (6, 64) and rewards.shape == (2, 3)
    flat = np.repeat(rewards.max(1) == rewards.min(1), 3)
    assert np.all(grads[flat] == 0) and np.all(np.abs(grads[~flat]).sum(1) > 0)


@pytest.mark.parametrize(
    "name",
    [
        "tasks",
        "evaluate",
        "stats",
        "allocation",
        "regime",
        "warm_start",
        "tokenizer",
        "oracle",
        "protocol",
        "protocol_report",
        "report",
    ],
)
def test_demo_docstring_examples_run(name):
    import doctest
    import importlib

    module = importlib.import_module(f"adaptive_rollouts.demo.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_make_demos_rates_are_the_committed_grids_best():
    """`LEARNING_RATES` holds, for every method the tune ran, its best rate in
    results/demo_tune/tune.json (the file docs/demo.md renders), and `make demo` runs Uniform
    against the default with the policy's view, each at a tuned rate."""
    from pathlib import Path

    from adaptive_rollouts.demo.allocation import LEARNING_RATES
    from adaptive_rollouts.demo.run import DemoConfig

    tune = json.loads((Path(__file__).resolve().parents[1] / "results/demo_tune/tune.json").read_text())["data"]
    assert {m: b["lr"] for m, b in tune["best"].items()} == LEARNING_RATES
    assert DemoConfig().methods == ("uniform", "default+view")
    assert all(m in LEARNING_RATES for m in DemoConfig().methods)

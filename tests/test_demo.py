"""Demo pieces: tokenizer round trip, warm-start assets, a 2-step end-to-end run."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("reasoning_gym")

from adaptive_rollouts.demo.model import ASSETS, build_model, load_warm_start, save_warm_start  # noqa: E402
from adaptive_rollouts.demo.tasks import Verifier, make_problems  # noqa: E402
from adaptive_rollouts.demo.tokenizer import ALPHABET, build_tokenizer  # noqa: E402


def test_tokenizer_round_trip_one_token_per_char():
    tok = build_tokenizer()
    text = "12+7-3=(4*5)/6"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    assert len(tok) == len(ALPHABET) + 3 and tok.padding_side == "left"


def test_problems_distinct_and_verified():
    problems = make_problems(20, seed=3)
    assert len({p.prompt for p in problems}) == 20
    verifier = Verifier(problems)
    assert verifier([p.prompt for p in problems], [p.answer for p in problems]) == [1.0] * 20
    assert verifier([problems[0].prompt], ["x"]) == [0.0]
    with pytest.raises(KeyError, match="unknown prompt"):
        verifier(["nope="], ["1"])


def test_save_load_round_trip(tmp_path):
    tok = build_tokenizer()
    model = build_model(
        tok,
        seed=1,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
    )
    save_warm_start(model, {"note": "test"}, tmp_path)
    loaded = load_warm_start(tok, tmp_path)
    for (k, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    with pytest.raises(FileNotFoundError, match="warm-start asset missing"):
        load_warm_start(tok, tmp_path / "none")


def test_shipped_warm_start_loads_and_answers_some():
    if not (ASSETS / "warm_start.safetensors").exists():
        pytest.fail("demo/assets/warm_start.safetensors is missing: run scripts/train_warm_start.py")
    from adaptive_rollouts.demo.evaluate import greedy_accuracy

    tok = build_tokenizer()
    model = load_warm_start(tok)
    problems = make_problems(64, seed=2)
    acc = greedy_accuracy(model, tok, problems, Verifier(problems))
    assert 0.05 < acc < 0.95  # warm, not solved: RL has something to do


class HashEncoder:
    """Deterministic stand-in for MiniLM (keeps the test offline and fast)."""

    dim = 8

    def encode(self, prompts):
        return np.stack([np.random.default_rng(abs(hash(p)) % 2**32).normal(size=8) for p in prompts])


def test_demo_runs_two_steps_variable_groups(tmp_path):
    from adaptive_rollouts.demo.report import write_report
    from adaptive_rollouts.demo.run import DemoConfig, run_all

    tok = build_tokenizer()
    model = build_model(
        tok,
        seed=0,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
    )
    save_warm_start(model, {}, tmp_path / "model")
    cfg = DemoConfig(
        methods=("uniform", "vigor"),
        steps=2,
        prompts_per_step=4,
        mean_rollouts=8,
        pool_size=16,
        held_out=8,
        eval_every=1,
        model_dir=str(tmp_path / "model"),
    )
    results = run_all(cfg, tmp_path, log=lambda *a: None, encoder=HashEncoder())
    assert [r.method for r in results] == ["uniform", "vigor"]
    for r in results:
        assert r.rollouts == [0, 32, 64] and len(r.accuracy) == 3 and len(r.held_out) == 3
        assert all(0.0 <= a <= 1.0 for a in r.accuracy + r.held_out)
        assert [sum(c) for c in r.counts] == [32, 32]
        assert 0.0 <= r.allocator_seconds < r.train_seconds
    assert results[0].counts[0] == [8, 8, 8, 8]
    assert len(set(results[1].counts[0])) > 1  # VIGOR's rounds give unequal groups
    text = write_report(results, {}, tmp_path / "report")
    assert "vigor" in text and (tmp_path / "report" / "allocation.png").exists()
    assert (tmp_path / "report" / "accuracy.png").exists() and (tmp_path / "report" / "report.md").exists()


def test_demo_cli_imports_no_torch_and_rejects_bad_methods():
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

    args = add_demo_arguments(argparse.ArgumentParser()).parse_args(["--methods", "uniform,nope"])
    with pytest.raises(ValueError, match="nope"):
        run_demo(args)


def test_rollouts_to_reach_and_summary():
    from adaptive_rollouts.demo.report import rollouts_to_reach, summarise
    from adaptive_rollouts.demo.run import RunResult

    assert rollouts_to_reach([0, 10, 20], [0.1, 0.2, 0.4], 0.3) == 20
    assert rollouts_to_reach([0, 10], [0.1, 0.2], 0.3) == float("inf")
    uni = RunResult(
        "uniform", 0, [0, 10, 20], [0.1, 0.2, 0.3], [0.5, 0.5, 0.4], train_seconds=10, allocator_seconds=0.1
    )
    fast = RunResult("vip", 0, [0, 10, 20], [0.1, 0.3, 0.35], [0.5, 0.5, 0.5], train_seconds=10, allocator_seconds=1)
    rows = {r["method"]: r for r in summarise([uni, fast])}
    assert rows["vip"]["rollouts_to_uniform_final"] == 10 and rows["uniform"]["rollouts_to_uniform_final"] == 20
    assert rows["vip"]["allocator_overhead_pct"] == pytest.approx(10.0)
    assert rows["vip"]["held_out_final"] == 0.5

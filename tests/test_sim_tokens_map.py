"""A length cell through the map: runs record tokens, the summary reads the primary statistic on the
token axis with the same function, the map report shows it beside rollouts, and the tokens
benchmark's renderer reads its result file."""

from __future__ import annotations

import dataclasses
import json

import pytest

from adaptive_rollouts.experiments.gain_speedup import gain_speedup
from adaptive_rollouts.experiments.regime_map import NULL, QUICK_MAP, run_map
from adaptive_rollouts.experiments.results import write_result
from adaptive_rollouts.experiments.token_summary import length_stats, token_comparison
from adaptive_rollouts.reporting.map_report import write_map_report
from adaptive_rollouts.reporting.tables import RENDERERS
from adaptive_rollouts.reporting.token_tables import TOKENS, render_tokens
from adaptive_rollouts.sim.regimes import Cell


def _tiny_length_map():
    return dataclasses.replace(
        QUICK_MAP,
        cells=[Cell(scenario="hard-heavy", dim=8, batch_prompts=6, n_prompts=60, failure_ratio=4.0)],
        methods=("uniform", NULL, "default", "default~synchronous", "oracle-skip"),
        untuned=(NULL, "default", "default~synchronous", "oracle-skip"),
        same_rate=("default",),
        tune_seeds=(100,),
        report_seeds=(0, 1, 2),
        paired_seeds=(0, 1, 2),
        steps=8,
        n_test=30,
        grad_var_every=0,
        fingerprint_every=0,
        max_extensions=6,
        fractions=(0.5, 0.75, 0.9),
        bootstrap=50,
    )


def test_length_cell_map_reads_tokens_beside_rollouts(tmp_path):
    cfg = _tiny_length_map()
    result = run_map(cfg, tmp_path, progress=False)
    cell = cfg.cells[0].key
    lr = result["lr"][cell]["uniform"]
    uni = [result["runs"][(cell, "uniform", s, lr)] for s in (0, 1, 2)]
    dft = [result["runs"][(cell, "default", s, lr)] for s in (0, 1, 2)]
    timed = [result["runs"][(cell, "default~synchronous", s, lr)] for s in (0, 1, 2)]
    known_p = [result["runs"][(cell, "oracle-skip", s, lr)] for s in (0, 1, 2)]
    assert all(len(r["tokens"]) == cfg.steps for r in uni + dft + timed)
    # timed by a synchronous engine, the default runs one round a step once rounds are timed
    assert all(len(rounds) == 1 for r in timed for rounds in r["round_max_tokens"][1:])
    assert any(len(rounds) > 1 for r in dft for rounds in r["round_max_tokens"][1:])
    write_map_report(result, tmp_path, plots=False)
    data = json.loads((tmp_path / "map.json").read_text())["data"]
    e = data["rows"][0]["methods"]["default"]
    assert e["same_rate_token_gain_speedup"] == pytest.approx(gain_speedup(uni, dft, cfg.fractions, cost="tokens"))
    lo, hi = e["same_rate_token_gain_ci90"]
    assert lo <= e["same_rate_token_gain_speedup"] <= hi
    text = (tmp_path / "map.md").read_text()
    assert "Rollouts and tokens to target" in text

    rows = [
        {
            "cell": cell,
            "failure_ratio": 4.0,
            "lr": lr,
            "arms": {
                "default": token_comparison(uni, dft, cfg.fractions, resamples=20, interval=cfg.interval),
                "default~synchronous": token_comparison(uni, timed, cfg.fractions, resamples=20, interval=cfg.interval),
                "oracle-skip": token_comparison(uni, known_p, cfg.fractions, resamples=20, interval=cfg.interval),
            },
            "uniform_lengths": length_stats(uni),
        }
    ]
    settings = {"seeds": [0, 1, 2], "steps": cfg.steps, "tune_seeds": [100], "default_allocator": "saving-progressive"}
    write_result(
        tmp_path / TOKENS, {"rows": rows, **settings}, command="python benchmarks/tokens.py", settings=settings
    )
    block = render_tokens(tmp_path)
    assert RENDERERS["tokens"] is render_tokens
    assert cell in block and "tokens / rollouts" in block and "met in" in block
    assert "| synchronous |" in block and "default~synchronous" in block
    assert "Source: " in block or "results/tokens/tokens.json" in block
    # the known-p rule's composition row, the flat-prompt ratio and the speedup in steps
    flat = rows[0]["arms"]["default"]["composition"]["flat_rule_ratio"]
    assert f"| {cell} | oracle-skip |" in block and "flat prompts saved: ratio" in block
    assert f"| {flat:.2f} |" in block and "| steps |" in block


def test_committed_tokens_file_recomputes_from_its_run_records():
    """Every number of results/tokens/tokens.json follows from the committed run records."""
    from pathlib import Path

    from adaptive_rollouts.experiments.map_records import read_run_records, records_path
    from adaptive_rollouts.experiments.results import load_result
    from adaptive_rollouts.sim.lengths import LengthModel

    root = Path(__file__).resolve().parents[1]
    data = load_result(root / TOKENS).data
    records = read_run_records(records_path(root / TOKENS))
    seeds = data["seeds"]
    for row in data["rows"]:

        def runs(method: str, row: dict = row) -> list[dict]:
            by_seed = {
                r["seed"]: r for r in records if (r["cell"], r["method"], r["lr"]) == (row["cell"], method, row["lr"])
            }
            return [by_seed[s] for s in seeds]

        uni = runs("uniform")
        assert length_stats(uni) == pytest.approx(row["uniform_lengths"], rel=1e-12)
        for arm, saved in row["arms"].items():
            again = token_comparison(
                uni, runs(arm), data["fractions"], cap=LengthModel().max_tokens, interval=data["interval"]
            )
            for axis in ("rollouts", "tokens"):
                assert again[axis]["speedup"] == pytest.approx(saved[axis]["speedup"], rel=1e-12)
                assert again[axis]["ci90"] == pytest.approx(saved[axis]["ci90"], rel=1e-12)
            assert set(again["engines"]) == set(saved["engines"])
            for name, engine in saved["engines"].items():
                assert again["engines"][name]["speedup"] == pytest.approx(engine["speedup"], rel=1e-12)
                assert again["engines"][name]["ci90"] == pytest.approx(engine["ci90"], rel=1e-12)
                assert again["engines"][name]["step_time"] == pytest.approx(engine["step_time"], rel=1e-12)
                assert again["engines"][name]["later_step_ratio"] == pytest.approx(
                    engine["later_step_ratio"], rel=1e-12
                )
            for key in ("saved_share", "saved_length", "step_ratio", "length_needed"):
                assert again["composition"][key] == pytest.approx(saved["composition"][key], rel=1e-12, nan_ok=True)


def test_attainable_line_reads_the_known_p_rule_pilot_commit_and_the_flat_ratio():
    from adaptive_rollouts.reporting.token_tables import _attainable

    def arm(ratio, solved, flat=None):
        comp = {"saved_share_by_class": [0.3, 0.0, solved]}
        if flat is not None:
            comp["flat_rule_ratio"] = flat
        return {"tokens_over_rollouts": ratio, "composition": comp}

    rows = [
        {"arms": {"default": arm(1.05, 0.6, 0.92), "oracle-skip": arm(1.02, 0.63), "pilot-commit": arm(1.04, 0.59)}},
        {"arms": {"default": arm(1.09, 0.5, 1.04), "oracle-skip": arm(0.99, 0.73), "pilot-commit": arm(1.06, 0.57)}},
    ]
    (line,) = _attainable({"rows": rows})
    assert "`oracle-skip` 0.99-1.02 (solved prompts 63%-73% of its saving)" in line
    assert "`pilot-commit` 1.04-1.06" in line and "`default` 1.05-1.09" in line and "0.92-1.04 per step" in line
    assert _attainable({"rows": [{"arms": {"default": arm(1.05, 0.6)}}]}) == []

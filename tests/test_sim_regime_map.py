"""AdamW update, learning-rate grid extension, the transfer knob and a tiny regime map end to end."""

import dataclasses
import json

import numpy as np
import pytest

from adaptive_rollouts.experiments.regime_map import QUICK_MAP, LearningRateAtEdge, run_map, tune_grid
from adaptive_rollouts.experiments.results import AVX512_TAG, MixedResultsError, kernel_tag
from adaptive_rollouts.reporting.map_report import write_map_report
from adaptive_rollouts.sim.optim import SGD, AdamW, clip_by_norm
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.sim.regimes import Cell, measured_transfer
from adaptive_rollouts.sim.train import Simulator, TrainConfig


def test_adamw_matches_hand_computation():
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 0.01
    opt = AdamW(lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    theta = np.array([1.0, -2.0])
    g1, g2 = np.array([0.5, -1.0]), np.array([0.1, 0.3])
    s1 = opt.step(theta, g1)
    # step 1: m = 0.1 g1, v = 0.001 g1^2, bias-corrected m_hat = g1, v_hat = g1^2
    np.testing.assert_allclose(s1, lr * g1 / (np.abs(g1) + eps) - lr * wd * theta)
    theta = theta + s1
    s2 = opt.step(theta, g2)
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.999 * 0.001 * g1**2 + 0.001 * g2**2
    expect = lr * (m / (1 - b1**2)) / (np.sqrt(v / (1 - b2**2)) + eps) - lr * wd * theta
    np.testing.assert_allclose(s2, expect, rtol=1e-12)


def test_clipping_and_sgd():
    g = np.array([3.0, 4.0])
    np.testing.assert_allclose(clip_by_norm(g, 1.0), [0.6, 0.8])
    np.testing.assert_allclose(clip_by_norm(g, 10.0), g)
    np.testing.assert_allclose(SGD(0.5, max_grad_norm=1.0).step(np.zeros(2), g), [0.3, 0.4])
    # clipped Adam: first step is still lr sign(g) (scale-free), but the moments see the clipped g
    opt = AdamW(0.1, max_grad_norm=1.0)
    opt.step(np.zeros(2), g)
    np.testing.assert_allclose(opt.m, 0.1 * np.array([0.6, 0.8]))
    with pytest.raises(ValueError, match="betas"):
        AdamW(0.1, betas=(1.0, 0.9))


def test_grid_extends_when_best_is_at_an_edge():
    calls = []

    def score(lr):
        calls.append(lr)
        return -abs(np.log(lr / 0.02))

    best, tried = tune_grid(score, [0.1, 0.3, 1.0], 3.0, 4)
    assert best == pytest.approx(0.1 / 3) and tried[0] == pytest.approx(0.1 / 9)
    assert len(calls) == len(set(calls)) == 5  # each rate run once
    with pytest.raises(LearningRateAtEdge, match="edge"):
        tune_grid(lambda lr: lr, [0.1, 0.3, 1.0], 3.0, 2)  # monotone: never interior
    with pytest.raises(ValueError, match=">= 3 rates"):
        tune_grid(lambda lr: lr, [0.1, 1.0], 3.0, 2)


def _random_policy_rollouts(pb):
    """A random policy for ``pb`` and 12 rollouts on four prompts: (sim, cfg, rng, q, answers, rewards)."""
    rng = np.random.default_rng(0)
    pb.set_parameters(rng.normal(size=pb.n_params))
    q = np.array([0, 0, 0, 5, 5, 5, 7, 7, 7, 7, 2, 2])
    a, r = pb.sample(q, rng)
    return Simulator(pb, seed=1), TrainConfig(budget=12, aggregation="seq-mean"), rng, q, a, r


def test_transfer_knob_and_per_prompt_gradient():
    pb = make_problem("graded", n_prompts=30, n_test=5, dim=8, seed=0, transfer=0.4)
    assert pb.own_scale == pytest.approx(np.sqrt(0.6)) and pb.n_params == 8 * 6 + 30 * 6
    sim, cfg, rng, q, a, r = _random_policy_rollouts(pb)
    g = sim.batch_gradient(q, a, r, cfg)
    np.testing.assert_allclose(sim.rollout_gradients(q, a, r, cfg).sum(axis=0), g, atol=1e-12)
    coef_rows = sim.rollout_coefficients(q, a, r, cfg)
    coef = coef_rows[np.arange(q.size), a] / (1 - pb.probs(q)[np.arange(q.size), a])  # w_i A_i

    def f(theta):
        old = pb.parameters()
        pb.set_parameters(theta)
        out = float(np.sum(coef * np.log(pb.probs(q)[np.arange(q.size), a])))
        pb.set_parameters(old)
        return out

    theta, h = pb.parameters(), 1e-6
    for j in (3, 8 * 6 + 5 * 6 + 2, 8 * 6 + 7 * 6):  # a W entry, E rows of prompts 5 and 7
        e = np.zeros_like(theta)
        e[j] = h
        assert (f(theta + e) - f(theta - e)) / (2 * h) == pytest.approx(g[j], abs=1e-6)


def test_reasoning_tokens_add_score_noise_with_zero_mean():
    """The gradient with reasoning tokens is that of sum_i w_i A_i log pi(rollout_i), log pi(rollout) =
    log pi(answer) + sum_k c_k log pi(k); averaged over many draws of the tokens it is the gradient
    without them (they carry no reward signal), and its per-rollout noise grows with L."""
    pb = make_problem("graded", n_prompts=20, n_test=5, dim=8, seed=0, reasoning_tokens=16)
    sim, cfg, rng, q, a, r = _random_policy_rollouts(pb)
    c = pb.sample_reasoning(q, rng)
    assert c.shape == (12, 6) and np.all(c.sum(axis=1) == 16)
    g = sim.batch_gradient(q, a, r, cfg, c)
    np.testing.assert_allclose(sim.rollout_gradients(q, a, r, cfg, c).sum(axis=0), g, atol=1e-12)
    pb.reasoning_tokens = 0
    g0 = sim.batch_gradient(q, a, r, cfg)
    coef_rows = sim.rollout_coefficients(q, a, r, cfg)
    coef = coef_rows[np.arange(q.size), a] / (1 - pb.probs(q)[np.arange(q.size), a])  # w_i A_i
    pb.reasoning_tokens = 16

    def f(theta):
        old = pb.parameters()
        pb.set_parameters(theta)
        logp = np.log(pb.probs(q))
        out = float(np.sum(coef * (logp[np.arange(q.size), a] + (c * logp).sum(axis=1))))
        pb.set_parameters(old)
        return out

    theta, h = pb.parameters(), 1e-6
    for j in (3, 17, 40):
        e = np.zeros_like(theta)
        e[j] = h
        assert (f(theta + e) - f(theta - e)) / (2 * h) == pytest.approx(g[j], abs=1e-6)
    draws = np.array([sim.batch_gradient(q, a, r, cfg) for _ in range(4000)])  # fresh tokens each time
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - g0) < 5 * se + 1e-12)
    assert draws.std(axis=0).sum() > 0.5 * np.abs(g0).sum()  # L = 16 tokens: noise of the order of the signal


def test_measured_transfer_falls_with_the_knob():
    high = np.mean(
        [measured_transfer(Cell(dim=16, transfer=1.0, n_prompts=400).problem(s, 20), seed=s) for s in (0, 1)]
    )
    low = np.mean([measured_transfer(Cell(dim=16, transfer=0.1, n_prompts=400).problem(s, 20), seed=s) for s in (0, 1)])
    assert high > 0.6 and low < 0.5 and high > low + 0.3


def _tiny_map():
    return dataclasses.replace(
        QUICK_MAP,
        cells=[Cell(scenario="bimodal", dim=8, batch_prompts=6, n_prompts=60)],
        methods=("uniform", "default", "default@true-p"),
        tune_seeds=(100,),
        report_seeds=(0,),
        paired_seeds=(0, 1),
        steps=8,
        n_test=30,
        grad_var_every=4,
        grad_var_resamples=3,
        fingerprint_every=4,
        max_extensions=6,
    )


def test_tiny_map_end_to_end_and_resume(tmp_path, monkeypatch):
    import adaptive_rollouts.experiments.results as results

    monkeypatch.setattr(results, "kernel_tag", lambda: "")  # the runs unmarked on any machine; marked below
    cfg = _tiny_map()
    result = run_map(cfg, tmp_path, progress=False)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert not result["errors"]
    copy = tmp_path / "results" / "map" / "tiny.json"
    report = write_map_report(result, tmp_path, command="adaptive-rollouts bench --map", results_copy=copy)
    text = report.read_text()
    assert "| bimodal/d8-Q6-pool60 |" in text and "no regret" in text
    assert (tmp_path / "heatmap_default.png").stat().st_size > 0
    raw = json.loads((tmp_path / "map.json").read_text())
    assert raw["header"]["command"] == "adaptive-rollouts bench --map"  # a result file: command, commit, settings
    assert raw["header"]["settings"]["steps"] == cfg.steps and raw["header"]["commit"]
    assert json.loads(copy.read_text()) == raw  # the copy the docs render from
    data = raw["data"]
    row = data["rows"][0]
    assert set(row["methods"]) == {"uniform", "default", "default@true-p"}
    assert row["methods"]["uniform"]["speedup"] == pytest.approx(1.0)
    assert row["methods"]["default"]["seeds"] == [0, 1]  # paired with Uniform on every paired seed
    assert np.isfinite(row["methods"]["default"]["same_rate_speedup"])  # also run at Uniform's rate
    assert "at Uniform's best rate" in text
    assert np.isfinite(row["fingerprints"]["noise_to_signal_rollout"])
    # resume: nothing reruns, same numbers
    again = run_map(cfg, tmp_path, progress=False)
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines
    assert again["lr"] == result["lr"]
    # every run records its commit; runs of two commits are summarised only when allowed, and said so
    assert len(data["run_commits"]) == 1 and all("commit" in json.loads(x) for x in lines)
    other = json.loads(lines[0]) | {"commit": "0123456789abcdef"}
    (tmp_path / "runs.jsonl").write_text("\n".join([json.dumps(other), *lines[1:]]) + "\n")
    mixed = run_map(cfg, tmp_path, progress=False)
    with pytest.raises(MixedResultsError, match="2 commits.*0123456789"):
        write_map_report(mixed, tmp_path, plots=False)
    text = write_map_report(mixed, tmp_path, plots=False, allow_mixed_commits=True).read_text()
    assert "**Mixed runs: this map's runs ran at 2 commits:**" in text
    # a run made with numpy's AVX-512 kernels does not pair with the others: the refusal says how to match
    first = json.loads(lines[0])
    tagged = first | {"commit": first["commit"] + AVX512_TAG}
    (tmp_path / "runs.jsonl").write_text("\n".join([json.dumps(tagged), *lines[1:]]) + "\n")
    with pytest.raises(MixedResultsError, match=r"\+avx512 marks runs made with numpy's AVX-512.*NPY_DISABLE"):
        write_map_report(run_map(cfg, tmp_path, progress=False), tmp_path, plots=False)


def test_kernel_tag_marks_numpy_avx512_kernels(monkeypatch):
    import adaptive_rollouts.experiments.results as results

    def dispatch(target):
        return lambda func_name=None: {"exp": {"dd": {"current": target, "available": "X86_V4 X86_V3"}}}

    monkeypatch.setattr(results, "_opt_func_info", dispatch("X86_V4"))
    assert kernel_tag() == AVX512_TAG
    monkeypatch.setattr(results, "_opt_func_info", dispatch("X86_V3"))
    assert kernel_tag() == ""
    monkeypatch.setattr(results, "_opt_func_info", lambda func_name=None: {})  # a layout it does not know
    assert kernel_tag() == ""
    monkeypatch.setattr(results, "_opt_func_info", None)  # numpy before 2.0
    assert kernel_tag() == ""


def _curve_run(acc, seed=0):
    return {"rollouts": list(range(10, 10 * len(acc) + 1, 10)), "accuracy": list(acc), "accuracy0": 0.0, "seed": seed}


def test_bootstrap_interval_is_paired_and_brackets_the_speedup():
    from adaptive_rollouts.experiments.regime_map import bootstrap_speedup, speedup

    rng = np.random.default_rng(0)
    uni = [_curve_run(np.linspace(0.1, 0.6, 12) + rng.normal(0, 0.01, 12), s) for s in range(8)]
    same = [dict(u) for u in uni]
    assert bootstrap_speedup(uni, same, 0.5, resamples=200) == (1.0, 1.0)
    # a method that reaches every accuracy two steps earlier on every seed: faster on every resample
    faster = [_curve_run(np.r_[u["accuracy"][2:], [0.7, 0.7]], u["seed"]) for u in uni]
    lo, hi = bootstrap_speedup(uni, faster, 0.5, resamples=200)
    assert 1.0 < lo <= speedup(uni, faster, 0.5) <= hi
    with pytest.raises(ValueError, match="paired"):
        bootstrap_speedup(uni, faster[:3], 0.5)
    with pytest.raises(ValueError, match="target_at"):
        speedup(uni, faster, 0.0)


def test_running_max_target_ignores_a_late_dip():
    from adaptive_rollouts.experiments.regime_map import speedup

    uni = [_curve_run([0.2, 0.4, 0.6, 0.8])]
    dips = [_curve_run([0.45, 0.3, 0.3, 0.3])]  # pooled running max at half the run: 0.35
    assert speedup(uni, dips, 0.5) == pytest.approx(17.5 / 10)
    assert speedup(uni, dips, 0.5) * speedup(dips, uni, 0.5) == pytest.approx(1.0)
    assert speedup(uni, [_curve_run([0.0, 0.0, 0.0, 0.0])], 0.5) == 0.0


def test_a_method_that_allocates_like_uniform_scores_one():
    """Null control by Monte Carlo: two methods with the same learning curve and independent
    noise; the pooled target makes the speedup's median 1 (a target from Uniform's curve alone
    would include Uniform's own upward noise and score the twin below 1)."""
    from adaptive_rollouts.experiments.regime_map import speedup

    rng = np.random.default_rng(0)
    base = 0.6 * (1 - np.exp(-np.arange(1, 41) / 12))
    logs = []
    for _ in range(300):
        a = [_curve_run(base + rng.normal(0, 0.05, 40), s) for s in range(8)]
        b = [_curve_run(base + rng.normal(0, 0.05, 40), s) for s in range(8)]
        logs.append(np.log(speedup(a, b, 0.5)))
    assert abs(np.median(logs)) < 0.015  # a target from Uniform alone: about -0.03 here


def test_true_p_optimum_method_is_the_probes_reference():
    from adaptive_rollouts.allocators import VIP
    from adaptive_rollouts.experiments.bench import build_allocator

    pb = Cell(scenario="pareto", dim=8, batch_prompts=8, n_prompts=40).problem(0, 20)
    alloc, pred = build_allocator("optimum@true-p", pb, 0, aggregation="token-mean", estimator="rloo")
    assert isinstance(alloc, VIP) and pred is None
    assert alloc.aggregation == "token-mean" and alloc.estimator == "rloo"
    p = pb.success(np.arange(8))
    counts = alloc.plan(list(range(8)), 64).counts
    assert counts.sum() == 64
    # the optimum gives no more rollouts to a prompt at p ~ 0 than to the most uncertain one
    assert counts[np.argmin(np.abs(p - 0.5))] >= counts[np.argmin(p)]


def test_best_learned_allocator_is_never_the_null_control():
    from adaptive_rollouts.experiments.map_summary import _targets

    row = {
        "cell": "pareto/d128-Q16-L64",
        "fingerprints": {"noise_to_signal_batch": 14.0},
        "methods": {
            "uniform": {"speedup": 1.0},
            "uniform-rounds": {"speedup": 1.3},
            "vigor": {"speedup": 1.2},
            "default@true-p": {"speedup": 2.0},
        },
    }
    best = _targets([row])["learned_best_in_noise_dominated"]
    assert [(b["method"], b["speedup"]) for b in best] == [("vigor", 1.2)]


def test_method_options_build_a_variant_under_its_own_label():
    from adaptive_rollouts.experiments.bench import build_allocator, method_options

    pb = Cell(dim=8, n_prompts=40).problem(0, 10)
    alloc, _ = build_allocator("guarded-progressive[trust_scale=4;round_fractions=(0.25,0.25,0.5)]", pb, 0)
    assert alloc.trust_scale == 4.0 and alloc.round_fractions.tolist() == [0.25, 0.25, 0.5]
    assert build_allocator("guarded-progressive", pb, 0)[0].trust_scale == 16.0
    for bad in ("default[trust_scale]", "default[trust_scale=four]", "default[x=1]tail"):
        with pytest.raises(ValueError, match="method option"):
            method_options(bad)
    with pytest.raises(TypeError):
        build_allocator("vigor[colour=1]", pb, 0)


def test_saving_map_reports_rollouts_spent_and_the_saving_targets(tmp_path):
    from adaptive_rollouts.experiments.map_summary import verdict

    cfg = dataclasses.replace(_tiny_map(), methods=("uniform", "default", "oracle-skip", "greso-fill"))
    result = run_map(cfg, tmp_path, progress=False)
    text = write_map_report(result, tmp_path, plots=False).read_text()
    data = json.loads((tmp_path / "map.json").read_text())["data"]
    methods = data["rows"][0]["methods"]
    assert methods["greso-fill"]["spend"] == pytest.approx(1.0)  # a "fill" allocator spends Uniform's rollouts
    assert methods["default"]["spend"] < 1.0 and methods["oracle-skip"]["spend"] < 1.0
    (target,) = data["saving_targets"]
    assert target["known_p_rule"] == methods["oracle-skip"]["speedup"]
    assert target["needed"] == (1.5 if target["zero_variance_fraction"] >= 0.3 else 0.97)
    # the verdict follows the interval, not the point estimate
    assert target["verdict"] == verdict(methods["default"]["ci90"], target["needed"], None)
    assert target["met"] == (target["verdict"] == "met")
    assert "Rollouts generated over the run" in text and "Saving targets" in text
    assert "known-p skip rule" in text and "bound" not in text


def test_controls_run_at_uniforms_rate_and_the_replicate_is_uniform_on_other_seeds(tmp_path):
    """Untuned arms run at Uniform's tuned rate only; the replicate is Uniform's allocation on the same
    problem instances with other sampling seeds; the primary statistic, its interval and the pooled
    effect are in the summary and the tables."""
    from adaptive_rollouts.experiments.regime_map import NULL, REPLICATE

    cfg = dataclasses.replace(
        _tiny_map(),
        methods=("uniform", NULL, REPLICATE, "default"),
        untuned=(NULL, REPLICATE, "default"),
        fractions=(0.5, 0.75, 0.9),
        bootstrap=200,
        interval="percentile",  # two paired seeds: too few for the jackknife-t
    )
    result = run_map(cfg, tmp_path, progress=False)
    cell = cfg.cells[0].key
    assert result["lr"][cell][REPLICATE] == result["lr"][cell][NULL] == result["lr"][cell]["uniform"]
    tuned = {lr for (c, m, s, lr) in result["runs"] if m == REPLICATE}
    assert tuned == {result["lr"][cell]["uniform"]}  # no tuning runs of its own
    uni = result["runs"][(cell, "uniform", 0, result["lr"][cell]["uniform"])]
    rep = result["runs"][(cell, REPLICATE, 0, result["lr"][cell]["uniform"])]
    assert rep["accuracy0"] == uni["accuracy0"]  # the same problem instance
    assert rep["accuracy"] != uni["accuracy"]  # other sampling noise
    assert rep["rollouts"] == uni["rollouts"]  # Uniform's allocation
    text = write_map_report(result, tmp_path, plots=False).read_text()
    data = json.loads((tmp_path / "map.json").read_text())["data"]
    e = data["rows"][0]["methods"][REPLICATE]
    lo, hi = e["gain_ci90"]
    assert lo <= e["gain_speedup"] <= hi and len(e["gain_parts"]) == 3 and len(e["gain_per_seed"]) == 2
    assert "_draws" not in e  # the bootstrap draws are not saved
    assert set(data["pooled"]) >= {NULL, REPLICATE, "default", "default@uniform-rate"}
    assert "Primary statistic against Uniform" in text and "covers 1.00 in" in text


def test_sim_code_version_is_the_commit_with_the_kernels_mark(monkeypatch):
    import adaptive_rollouts.experiments.results as results

    monkeypatch.setattr(results, "git_commit", lambda cwd=None: "abc123")
    monkeypatch.setattr(results, "kernel_tag", lambda: AVX512_TAG)
    assert results.sim_code_version() == "abc123" + AVX512_TAG
    monkeypatch.setattr(results, "kernel_tag", lambda: "")
    assert results.sim_code_version() == "abc123"

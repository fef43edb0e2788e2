"""Cheap seeds: the map's runs in worker processes give the runs of one process, and the policy
view's calibration (the largest per-run overhead of the default's arms) is the formula's."""

import dataclasses
import json

import numpy as np
import pytest
from scipy.stats import norm

from adaptive_rollouts.experiments.map_runner import RunPool, check_jobs
from adaptive_rollouts.experiments.regime_map import NULL, QUICK_MAP, REPLICATE, run_map
from adaptive_rollouts.reporting.gain_report import protocol_line
from adaptive_rollouts.reporting.map_report import write_map_report
from adaptive_rollouts.sim.policy_view import PolicyView, view_auroc
from adaptive_rollouts.sim.problem import make_problem
from adaptive_rollouts.sim.regimes import Cell


def _map():
    return dataclasses.replace(
        QUICK_MAP,
        cells=[Cell(scenario="bimodal", dim=8, batch_prompts=6, n_prompts=60), Cell(scenario="pareto", dim=8)],
        methods=("uniform", NULL, REPLICATE, "default"),
        untuned=(NULL, REPLICATE, "default"),
        tune_seeds=(100,),
        report_seeds=(0, 1, 2),
        paired_seeds=(0, 1, 2),
        steps=6,
        n_test=30,
        grad_var_every=0,
        fingerprint_every=3,
        max_extensions=6,
        fractions=(0.5, 0.75, 0.9),
    )


def _lines(folder):
    # every field but the seconds a run took, in the file's order, as JSON text (NaN equals NaN there)
    return [
        json.dumps({k: v for k, v in json.loads(x).items() if k != "seconds"}, sort_keys=True)
        for x in (folder / "runs.jsonl").open()
    ]


def test_a_map_in_two_processes_writes_the_runs_of_one_process(tmp_path):
    cfg = _map()
    one = run_map(cfg, tmp_path / "one", progress=False, jobs=1)
    two = run_map(cfg, tmp_path / "two", progress=False, jobs=2)
    assert _lines(tmp_path / "one") == _lines(tmp_path / "two")  # bit for bit, in the same order
    assert one["lr"] == two["lr"] and not one["errors"] and not two["errors"]
    assert len(_lines(tmp_path / "one")) == len(two["runs"]) > 2 * 4 * 3
    # resuming in processes reruns nothing
    again = run_map(cfg, tmp_path / "two", progress=False, jobs=2)
    assert _lines(tmp_path / "two") == _lines(tmp_path / "one") and again["lr"] == one["lr"]
    # read with the jackknife-t interval, which the header and the protocol line name
    write_map_report(again, tmp_path / "two", plots=False)
    data = json.loads((tmp_path / "two" / "map.json").read_text())
    assert data["header"]["settings"]["interval"] == "jackknife-t"
    e = data["data"]["rows"][0]["methods"][REPLICATE]
    assert e["gain_ci90"][0] <= e["gain_speedup"] <= e["gain_ci90"][1] and e["gain_log_se"] >= 0
    assert "jackknife-t on log speedup over the 3 paired seeds" in protocol_line(data["data"]["config"])
    assert np.isfinite(data["data"]["pooled"][REPLICATE]["effect"])


def test_the_jackknife_needs_three_paired_seeds(tmp_path):
    with pytest.raises(ValueError, match="jackknife-t interval needs >= 3 paired seeds"):
        run_map(dataclasses.replace(_map(), paired_seeds=(0, 1), fractions=(0.5,)), tmp_path, progress=False)


def test_a_failing_run_fails_where_the_map_asks_for_it():
    with RunPool(_fails_on_three, jobs=2) as pool:
        pool.prefetch([1, 2, 3, 4])
        assert pool.get(1) == {"task": 1} and pool.get(4) == {"task": 4}
        with pytest.raises(ValueError, match="task 3"):
            pool.get(3)


def _fails_on_three(task):
    if task == 3:
        raise ValueError(f"task {task} failed")
    return {"task": task}


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_bad_jobs_are_named(jobs, tmp_path):
    with pytest.raises(ValueError, match="jobs must be an integer >= 1"):
        check_jobs(jobs)
    with pytest.raises(ValueError, match="jobs"):
        run_map(_map(), tmp_path, progress=False, jobs=jobs)


def test_view_auroc_is_the_pairs_formula():
    """The calibration's fast AUROC against the double sum over pairs written out."""
    rng = np.random.default_rng(3)
    p = np.concatenate([0.01 + 0.98 * rng.beta(0.5, 3, 25), [0.5, 0.5]])  # a tie: counted half
    lg = np.log(p / (1 - p))
    for sigma in (0.0, 0.3, 2.0):
        num = 0.0
        for i in range(p.size):
            for j in range(p.size):
                if i == j:
                    win = 0.5
                elif sigma == 0:
                    win = 1.0 if lg[i] > lg[j] else (0.0 if lg[i] < lg[j] else 0.5)
                else:
                    win = norm.cdf((lg[i] - lg[j]) / (sigma * np.sqrt(2)))
                num += p[i] * (1 - p[j]) * win
        assert view_auroc(p, sigma) == pytest.approx(num / (p.sum() * (1 - p).sum()), abs=1e-12)


def test_the_calibrated_view_is_the_same_at_every_call():
    pb = make_problem("hard-heavy", n_prompts=900, n_test=10, seed=2)  # above the 800-prompt sample
    a, b = PolicyView(pb, auroc=0.8, seed=4), PolicyView(pb, auroc=0.8, seed=4)
    assert a.sigma == b.sigma > 0 and np.array_equal(a.noise, b.noise)
    assert view_auroc(pb.success(), a.sigma) == pytest.approx(0.8, abs=0.01)

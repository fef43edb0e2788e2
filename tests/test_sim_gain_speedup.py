"""The map's primary statistic (`sim.gain_speedup`): brute force, symmetry, calibration by Monte Carlo,
the pooled effect, and the calibration of the committed saving maps' controls."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptive_rollouts.experiments.gain_speedup import (
    bootstrap_gain_speedup,
    gain_speedup,
    gain_speedup_parts,
    hitting_rollouts,
    pooled_effect,
)
from adaptive_rollouts.experiments.regime_map import seeds_for
from adaptive_rollouts.experiments.speedup import rollouts_to_target

ROOT = Path(__file__).resolve().parents[1]


def _run(acc, a0=0.0, step=10.0):
    acc = np.asarray(acc, float)
    return {"rollouts": (step * np.arange(1, acc.size + 1)).tolist(), "accuracy": acc.tolist(), "accuracy0": a0}


def _brute(uniform, method, fractions):
    """The statistic written out with the scalar hitting time of `speedup` on explicit lists."""
    au = np.maximum.accumulate(np.mean([r["accuracy"] for r in uniform], axis=0))
    am = np.maximum.accumulate(np.mean([r["accuracy"] for r in method], axis=0))
    ru, rm = np.mean([r["rollouts"] for r in uniform], axis=0), np.mean([r["rollouts"] for r in method], axis=0)
    a0 = float(np.mean([r["accuracy0"] for r in uniform]))
    gain = min(au.max(), am.max()) - a0
    out = []
    for f in fractions:
        t = a0 + f * gain
        # from (0, a0): prepend the start so the scalar reader interpolates from it
        tu = rollouts_to_target(np.r_[1e-300, ru], np.r_[a0, au], t)
        tm = rollouts_to_target(np.r_[1e-300, rm], np.r_[a0, am], t)
        out.append(tu / tm)
    return out


def test_matches_the_scalar_hitting_time_and_is_symmetric():
    rng = np.random.default_rng(0)
    base = 0.1 + 0.5 * (1 - np.exp(-np.arange(1, 31) / 8))
    for _ in range(20):
        u = [_run(base + rng.normal(0, 0.02, 30), a0=0.1) for _ in range(4)]
        m = [_run(base[np.minimum(np.arange(30) + 2, 29)] + rng.normal(0, 0.02, 30), a0=0.1) for _ in range(4)]
        parts = gain_speedup_parts(u, m)
        assert parts == pytest.approx(_brute(u, m, (0.5, 0.75, 0.9)), rel=1e-9)
        assert gain_speedup(u, m) == pytest.approx(np.exp(np.mean(np.log(parts))))
        assert gain_speedup(u, m) * gain_speedup(m, u) == pytest.approx(1.0)
    assert gain_speedup(u, u) == 1.0


def test_hitting_rollouts_interpolates_from_the_start_and_reports_never():
    r = np.array([[10.0, 20.0, 30.0]])
    a = np.array([[0.4, 0.3, 0.8]])  # a dip: the running max holds 0.4
    got = hitting_rollouts(r, a, np.array([0.0]), np.array([[0.2, 0.6, 0.9]]))
    assert got.tolist() == [[5.0, 25.0, np.inf]]


def test_a_twin_of_uniform_is_covered_at_the_nominal_rate():
    """Monte Carlo calibration: two arms with the same expected curve and independent per-seed noise
    (a random level per seed, as problem instances differ, plus step noise); the 90% paired interval
    covers 1 in about 90% of trials."""
    rng = np.random.default_rng(1)
    steps, seeds = 40, 16
    shape = 1 - np.exp(-np.arange(1, steps + 1) / 10)
    covered = []
    for _ in range(150):
        level = rng.uniform(0.3, 0.7, seeds)  # shared by the pair: the same problem instance
        u = [_run(level[s] * shape + rng.normal(0, 0.02, steps)) for s in range(seeds)]
        m = [_run(level[s] * shape + rng.normal(0, 0.02, steps)) for s in range(seeds)]
        lo, hi, _ = bootstrap_gain_speedup(u, m, resamples=300, seed=int(rng.integers(1 << 30)))
        covered.append(lo <= 1.0 <= hi)
    assert 0.8 <= np.mean(covered) <= 0.98


def test_bootstrap_brackets_a_uniformly_faster_arm_and_refuses_unpaired_lists():
    rng = np.random.default_rng(2)
    base = 0.6 * (1 - np.exp(-np.arange(1, 41) / 10))
    u = [_run(base + rng.normal(0, 0.01, 40)) for _ in range(8)]
    fast = [_run(0.6 * (1 - np.exp(-np.arange(1, 41) / 5)) + rng.normal(0, 0.01, 40)) for _ in range(8)]
    lo, hi, draws = bootstrap_gain_speedup(u, fast, resamples=200)
    assert 1.5 < lo <= gain_speedup(u, fast) <= hi and draws.shape == (200,)
    with pytest.raises(ValueError, match="paired"):
        bootstrap_gain_speedup(u, fast[:3])
    with pytest.raises(ValueError, match="level"):
        bootstrap_gain_speedup(u, fast, level=1.0)
    with pytest.raises(ValueError, match="lengths"):
        gain_speedup([_run([0.1, 0.2]), _run([0.1, 0.2, 0.3])], [_run([0.1, 0.2]), _run([0.1, 0.2, 0.3])])


def test_pooled_effect_is_the_geometric_mean_with_replicate_wise_draws():
    d1, d2 = np.array([1.0, 2.0, 4.0, 2.0]), np.array([1.0, 0.5, 1.0, 2.0])
    p = pooled_effect([2.0, 0.5, float("nan")], [d1, d2, np.ones(4)], level=0.5)
    assert p["effect"] == pytest.approx(1.0) and p["cells"] == 2 and p["left_out"] == 1
    pooled = np.sqrt(d1 * d2)  # replicate b of each cell
    assert (p["low"], p["high"]) == pytest.approx(tuple(np.quantile(pooled, [0.25, 0.75])))


def _saving_maps() -> list[dict]:
    return [d for _, d in _saving_map_files()]


def _saving_map_files() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted((ROOT / "results" / "map").glob("*.json")):
        data = json.loads(path.read_text())["data"]
        if data["config"].get("fractions"):
            out.append((path, data))
    return out


def test_committed_saving_maps_recompute_from_their_per_run_records():
    """Each map read with the primary statistic commits its compact per-run record, and the
    statistic of every cell and arm recomputes from it exactly."""
    from adaptive_rollouts.experiments.map_records import read_run_records, records_path

    files = _saving_map_files()
    assert files, "no committed map read with the primary statistic"
    for path, data in files:
        records = read_run_records(records_path(path))
        assert len({r["commit"] for r in records}) == len(data["run_commits"])
        fractions = data["config"]["fractions"]
        for row in data["rows"]:
            rate = data["lr"][row["cell"]]["uniform"]

            def curves(method, seeds, row=row, rate=rate):
                rs = [r for r in records if r["cell"] == row["cell"] and r["method"] == method]
                rs = [r for r in rs if abs(r["lr"] - rate) < 1e-12 and r["seed"] in seeds]
                return sorted(rs, key=lambda r: r["seed"])

            for method, e in row["methods"].items():
                key = "same_rate_gain_speedup" if "same_rate_gain_speedup" in e else "gain_speedup"
                if method != "uniform" and abs(e["lr"] - rate) < 1e-12:
                    # the paired arms run on the paired seeds, the others on the report seeds
                    seeds = seeds_for(data["config"], method)
                    got = gain_speedup(curves("uniform", seeds), curves(method, seeds), fractions)
                    if np.isfinite(e[key]):
                        assert got == pytest.approx(e[key], rel=1e-12), (row["cell"], method)
                    else:
                        assert not np.isfinite(got), (row["cell"], method)


def _control_coverage(maps: list[dict], seeds: int) -> None:
    rows = [r for d in maps for r in d["rows"]]
    assert len({r["cell"] for r in rows}) >= 20, "fewer than 20 cells read with the primary statistic"
    for d in maps:
        assert len(d["config"]["paired_seeds"]) >= seeds
    for arm in ("uniform-rounds", "uniform-replicate"):
        # a cell's control that several maps ran alike (same cell, seeds and per-seed values: the same
        # runs) is one observation, counted once
        same = {(r["cell"], tuple(r["methods"][arm]["gain_per_seed"])): r for r in rows if arm in r["methods"]}
        cis = [r["methods"][arm]["gain_ci90"] for r in same.values()]
        assert len(cis) >= 20, arm
        covered = np.mean([lo <= 1.0 <= hi for lo, hi in cis])
        assert covered >= 0.85, f"{arm}: covers 1.00 in {covered:.0%} of {len(cis)} cells"


@pytest.mark.xfail(
    strict=True,
    reason="measured: on 16 paired seeds the percentile-bootstrap intervals of the null control and the "
    "replicate cover 1.00 in fewer than 85% of the 20 cells (the rendered map says how many); the maps since "
    "are read with the jackknife-t on 32 paired seeds (the test below)",
)
def test_committed_percentile_maps_controls_cover_one_in_85_percent_of_cells():
    """Over the committed maps read with the percentile bootstrap (their configuration names no
    interval; at least 20 cells in all): the null control's and the Uniform replicate's 90% intervals
    each cover 1.00 in >= 85% of the cells, and every map fixed its seeds in its configuration."""
    _control_coverage([d for d in _saving_maps() if "interval" not in d["config"]], seeds=16)


def test_committed_jackknife_maps_controls_cover_one_in_85_percent_of_cells():
    """Over the committed maps read with the jackknife-t interval on 32 paired seeds (at least 20
    cells in all; the checks on 16 fresh seeds render their own null control): the null control's
    and the Uniform replicate's 90% intervals each cover 1.00 in >= 85% of the cells."""
    maps = [
        d
        for d in _saving_maps()
        if d["config"].get("interval") == "jackknife-t" and len(d["config"]["paired_seeds"]) >= 32
    ]
    _control_coverage(maps, seeds=32)


def test_the_bound_blocks_pool_each_committed_map_as_the_map_itself_does():
    """`experiments.map_summary.pooled_arm` pools the stored cell entries over both maps of a block;
    over one map's cells it must give that map's own pooled effect (computed when it ran), except
    where the map pooled a cell without a standard error (an undefined interval then; now that cell
    is left out)."""
    from adaptive_rollouts.experiments.map_summary import pooled_arm
    from adaptive_rollouts.reporting.bound_tables import (
        BOUND_MAPS,
        DEFAULT_MAPS,
        FRESH_MAPS,
        GROUP_FOUR_MAPS,
        SHORT_MAPS,
    )

    for rel in (*BOUND_MAPS, *FRESH_MAPS, *DEFAULT_MAPS, *SHORT_MAPS, *GROUP_FOUR_MAPS):
        data = json.loads((ROOT / rel).read_text())["data"]
        assert data["pooled"], rel
        for method, expected in data["pooled"].items():
            if method.endswith("@uniform-rate"):  # the same runs under another name
                continue
            got = pooled_arm([row["methods"].get(method) for row in data["rows"]])
            if not np.isfinite(expected["low"]) and got["no_se"]:
                assert got["cells"] + got["no_se"] == expected["cells"] and np.isfinite(got["low"]), (rel, method)
                continue
            assert got["cells"] == expected["cells"], (rel, method)
            for key in ("effect", "low", "high"):
                assert got[key] == pytest.approx(expected[key], rel=1e-12, nan_ok=True), (rel, method, key)


def test_a_block_over_maps_of_different_arms_pools_each_arm_over_the_cells_it_ran():
    from adaptive_rollouts.reporting.bound_tables import render_group_four

    text = render_group_four(ROOT)  # 10 cells with every arm, 2 recurring cells with two of them
    assert "- full pilots: " in text and "over 12 cells" in text.split("- full pilots: ")[1].splitlines()[0]
    assert "over 10 cells" in text.split("- pilots only: ")[1].splitlines()[0]
    # an arm a map did not run is not counted as left out; a cell without a standard error is
    assert all("left out (no standard error)" in line for line in text.splitlines() if "left out" in line)

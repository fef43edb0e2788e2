"""The maps this project runs: `QUICK_MAP` (4 cells, a first look), `FULL_MAP` (24 cells, every method
tuned on its own) and `SAVING_MAP` (the saving evidence of docs/saving.md: the controls and every
saving allocator at Uniform's rate, 32 paired seeds). `adaptive-rollouts bench --map` runs them
(`--quick`, `--saving`); `regime_map` has the protocol.

>>> len(QUICK_MAP.cells), len(FULL_MAP.cells), len(SAVING_MAP.cells)
(4, 24, 20)
>>> SAVING_MAP.methods[:4]
('uniform', 'uniform-rounds', 'uniform-replicate', 'default')
"""

from __future__ import annotations

from adaptive_rollouts.allocators import saving_allocators
from adaptive_rollouts.experiments.map_config import DEFAULT, NULL, REPLICATE, MapConfig
from adaptive_rollouts.sim.regimes import Cell

__all__ = ["QUICK_MAP", "FULL_MAP", "SAVING_MAP", "SAVING_METHODS", "SAVING_CELLS"]


def _grid_cells(scenarios, regimes) -> list[Cell]:
    return [Cell(scenario=s, **r) for r in regimes for s in scenarios]


_LOW = {"dim": 16, "batch_prompts": 32}
_MID = {"dim": 128, "batch_prompts": 16}
_NOISY = {**_MID, "reasoning_tokens": 16}  # noise-dominated: batch noise/signal 4-10 under Uniform
QUICK_MAP = MapConfig(
    cells=_grid_cells(("hard-heavy", "pareto"), (_LOW, _NOISY)),
    methods=("uniform", DEFAULT, "uniform-rounds", "default@true-p", "posterior-progressive@true-p", "vigor"),
    report_seeds=(0, 1, 2),
)
FULL_MAP = MapConfig(
    cells=_grid_cells(
        ("hard-heavy", "bimodal", "pareto"),
        (
            _LOW,
            _MID,
            _NOISY,
            {**_MID, "reasoning_tokens": 64},
            {"dim": 1024, "batch_prompts": 8},
            {**_MID, "transfer": 0.3},
            {**_MID, "n_prompts": 200},
            {**_MID, "n_prompts": 200, "reasoning_tokens": 64},  # noisy, and prompts recur every ~12 steps
        ),
    ),
    methods=(
        "uniform",
        DEFAULT,
        "uniform-rounds",
        "default@true-p",
        "optimum@true-p",
        "posterior-progressive@true-p",
        "vip@true-p",
        "vigor",
        "posterior-progressive",
        "vip",
        "vip-paper",
        "dynamic-sampling",
        "greso",
        "knapsack",
        "dynamo",
        "inverse-accuracy",
        "inverse-variance",
        "ar3po",
        "speedrl",
    ),
    # 16 tune seeds and a x sqrt(2) grid: with 8 tune seeds the rate choice alone moved the null
    # control (Uniform's allocation) to 0.71x-1.37x of Uniform (neighbouring rates)
    tune_seeds=tuple(range(100, 116)),
    lr_grid=(0.1, 0.141, 0.2, 0.283, 0.4),
    lr_step=2**0.5,
    max_extensions=8,  # x sqrt(2) steps: up to 16x beyond the grid (the d16 rows want 1-2)
    report_seeds=tuple(range(16)),
    paired_seeds=tuple(range(32)),
    steps=100,
)


SAVING_METHODS = (  # the controls and the default first: a map cut short still holds them
    "uniform",
    NULL,
    REPLICATE,
    DEFAULT,
    "oracle-skip",
    *(name for name in saving_allocators() if name != DEFAULT),  # every registered saving allocator
    "guarded-progressive",
    "vigor",
)
_RECURRING_NOISY = {**_MID, "n_prompts": 200, "reasoning_tokens": 16}  # prompts recur every ~12 steps
_SAVING_ROWS = [
    *_grid_cells(("hard-heavy", "pareto", "cold-start", "bimodal", "easy-heavy"), (_LOW, _NOISY)),
    *_grid_cells(("hard-heavy", "cold-start"), (_RECURRING_NOISY,)),
]
SAVING_CELLS = 20
SAVING_MAP = MapConfig(
    # its own rows first (five difficulty scenarios, a cold start among them), then the full map's
    # other cells in its order, up to 20 cells
    cells=[*_SAVING_ROWS, *(c for c in FULL_MAP.cells if c not in _SAVING_ROWS)][:SAVING_CELLS],
    methods=SAVING_METHODS,
    # every arm runs at Uniform's rate, tuned on the tune seeds: the controls' true rate is Uniform's,
    # and a user who switches to the default keeps the rate they tuned (the default's own best rate
    # is not run here: it costs a tuning per cell)
    untuned=tuple(m for m in SAVING_METHODS if m != "uniform"),
    same_rate=(DEFAULT,),
    tune_seeds=tuple(range(100, 106)),
    # 32 paired seeds with the jackknife-t interval, fixed before the run: where the true speedup is 1
    # (twin curves, and pairs resampled from the 16-seed maps' controls) it covers 1 at about its
    # 90% where the percentile bootstrap covers less (`experiments.intervals`,
    # benchmarks/interval_coverage.py); the other arms (report seeds) keep 16
    report_seeds=tuple(range(16)),
    paired_seeds=tuple(range(32)),
    grad_var_every=0,  # the gradient probes are the full map's; this map reads learning curves
    fractions=(0.5, 0.75, 0.9),
)
"""The saving evidence: the default against Uniform, the null control (Uniform's counts drawn in the
default's rounds), a Uniform-vs-Uniform replicate, the known-p skip rule (``oracle-skip``), every other
registered saving allocator, the budget-filling default and VIGOR, all at Uniform's rate, on the quick
map's rows for five difficulty scenarios (a cold start among them), a noisy row whose prompts recur, and the full map's next cells (20 cells), 32 paired seeds each; read
with `gain_speedup` (rollouts to 50/75/90% of the gain) and its jackknife-t interval. Cost is every generated rollout."""

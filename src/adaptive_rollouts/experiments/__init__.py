"""The research wing's experiment machinery: it runs the simulator (`sim`) over methods, seeds and
cells and keeps what they measured.

- `bench`: the simulator benchmark (`run_benchmark`), method names -> allocators (`build_allocator`),
  the null control (`null_control`); `bench_summary` its table.
- `regime_map`: the regime map (`run_map`); `map_config` its configuration and method names,
  `map_presets` the maps (`QUICK_MAP`, `FULL_MAP`, `SAVING_MAP`), `map_run` one run on a cell
  (`cell_run`, which every benchmark that reruns a map cell builds its run with), `map_store` its
  resumable run store, `map_summary` its summary and targets.
- `speedup`: rollouts to a target accuracy, speedups and their paired bootstrap intervals.
- `tuning`: the learning-rate grid search that extends itself at an edge.
- `run_store`: JSON / JSON Lines state of resumable runs; `results`: result files (a header naming
  the command, commit and settings, then the data), the files `reporting` renders into the docs.

Imports run one way: `reporting` -> `experiments` -> `sim`; nothing here imports `reporting`.
"""

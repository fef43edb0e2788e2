"""Tables and reports: Markdown helpers (`markdown`), the benchmark's and the regime map's reports
(`bench_report`, `map_report`) and the docs' tables rendered from committed result files
(`python -m adaptive_rollouts.reporting.render_docs`). It reads what `experiments` measured and
imports no simulator code."""

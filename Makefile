# Two set-up commands: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.installed

.PHONY: demo test test-core test-verl test-wheel lint venv bench fuzz soak docs results clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first (the CPU wheel of the pinned version), then everything else under the pin
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(VENV)/bin/adaptive-rollouts demo

# One BLAS/OpenMP thread: the tests are small, and oversubscribed BLAS on 2 cores is 10x slower.
TEST_ENV := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# numpy picks its SIMD kernels by CPU, and its AVX-512 kernels round some results differently: the
# committed simulator runs are made without them, so the tests and benchmarks switch them off and
# reproduce those runs bit for bit on any x86-64 machine (docs/benchmark.md, "Reproducing a run")
SIM_ENV := NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"

# verl pins its own transformers range, so its plug-in is tested in a venv of its own.
# Installed in stages: one resolve of verl + TRL + ray[default] together backtracks for >20 min.
VERL_VENV  := .venv-verl
VERL_PIP   := $(VERL_VENV)/bin/python -m pip --disable-pip-version-check
VERL_STAMP := $(VERL_VENV)/.installed

$(VERL_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_PIP) install -q torch==2.13.0
	$(VERL_PIP) install -q -c constraints.txt "verl==0.9.1" "ray>=2.41"
	$(VERL_PIP) install -q -c constraints.txt -e '.[verl]' pytest hypothesis
	touch $(VERL_STAMP)

test: test-core test-verl test-wheel

# ruff (lint + format check) and mypy (config in pyproject.toml); test-core runs them first
LINT_PATHS := src tests benchmarks scripts examples

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

test-core: lint
	$(TEST_ENV) $(SIM_ENV) $(PY) -m pytest -q $(if $(SLOW),,-m "not slow")

test-verl: $(VERL_STAMP)
	$(TEST_ENV) $(VERL_VENV)/bin/python -m pytest -q tests/verl_plugin tests/test_advantages.py

# The installed-wheel check: the wheel built from this tree (build/ removed first, so no stale file
# rides along), installed into a fresh venv in a temporary folder outside the repository (torch
# first, then the wheel with the quick start's extra under constraints.txt), runs README's quick
# start, extracted from README.md itself; it fails if the wheel misses a file the quick start needs.
# PYTHONPATH is dropped for the installs: a src/ on it would make pip see the package as installed.
test-wheel: $(STAMP)
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	rm -rf build; \
	$(PIP) wheel -q --no-deps --no-build-isolation -w "$$tmp/dist" .; \
	rm -rf build; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	env -u PYTHONPATH "$$tmp/venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check torch==2.13.0; \
	env -u PYTHONPATH "$$tmp/venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check -c constraints.txt "$$(ls "$$tmp"/dist/adaptive_rollouts-*.whl)[embed]"; \
	$(TEST_ENV) $(PY) scripts/readme_quickstart.py README.md --python "$$tmp/venv/bin/python" --workdir "$$tmp/run"

bench: $(STAMP)
	$(TEST_ENV) $(SIM_ENV) $(VENV)/bin/adaptive-rollouts bench --quick --out runs/bench

fuzz: $(STAMP)
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/fuzz.py --cases 100000

soak: $(STAMP)
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/soak.py --steps 100000 --pool 100000 --window 5000

# Every number-bearing block of README.md and docs/*.md, rendered from the result files under results/
docs: $(STAMP)
	$(PY) -m adaptive_rollouts.reporting.render_docs

# Re-run the cheap benchmarks behind results/ (minutes each on one core; commit the code first, so
# each file records a clean commit), then `make docs`. The regime map and the demo have their own commands.
results: $(STAMP)
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/solver.py
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/advantages.py
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/aggregation.py timing --out results/aggregation
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/scale.py
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/fuzz.py --cases 5000
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/soak.py --steps 10000 --pool 10000 --window 1000 --checkpoint-every 1000
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/predictors.py --full
	$(TEST_ENV) $(SIM_ENV) $(PY) benchmarks/saving_signal.py --seeds 6

clean:
	rm -rf $(VENV) $(VERL_VENV) build *.egg-info src/*.egg-info

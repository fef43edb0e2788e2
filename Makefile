# Two set-up commands: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.installed

.PHONY: demo test venv bench clean

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

test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q $(if $(SLOW),,-m "not slow")

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/adaptive-rollouts bench --quick --out runs/bench

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info

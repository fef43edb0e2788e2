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

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/adaptive-rollouts bench --quick --out runs/bench

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info

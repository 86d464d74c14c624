# The two commands of the README's quick start.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# Stamp of the last install: re-installs when pyproject.toml changes.
INSTALLED := $(VENV)/.installed

.PHONY: run test

$(INSTALLED): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned: the local CPU build. An unpinned torch pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

run: $(INSTALLED)
	HF_HUB_OFFLINE=1 $(PY) -m bot run

test: $(INSTALLED)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

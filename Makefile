# Two commands do everything: `make run` (a recipe, default below) and `make test`.
# `make test-fast` is the edit loop: the unit tests and in-process checks, under two minutes.
# Each sets up what it needs: a virtual environment in .venv with the kit and its pinned deps.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RECIPE ?= recipes/fsdp_llama.yaml
ARGS ?=
# pytest-xdist workers: one per CPU (each test has its own HOME, TMPDIR and engine objects); a
# test file goes to one worker whole (--dist loadfile: its module fixtures are made once), in
# tests/conftest.py's order (--no-loadscope-reorder: the files with slow tests first, not the
# files with the most tests)
JOBS ?= auto

.PHONY: run test test-fast lint format setup clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[worker,dev]"
	touch $@

setup: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/kit reproduce $(RECIPE) $(ARGS)

test: $(VENV)/.installed
	$(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=30 $(ARGS)

test-fast: $(VENV)/.installed
	$(PY) -m pytest -n $(JOBS) -m "not slow" tests/unit $(ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

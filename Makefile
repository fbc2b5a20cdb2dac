# PyTorch autograd, inside out: the two commands are `make lab` and `make test`.
# Everything bootstraps a .venv in this folder with pip on first use (no conda needed).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Learners get the lab stack; tests and maintainer tools add the test extras on top.
LAB_STAMP := $(VENV)/.installed-lab
TEST_STAMP := $(VENV)/.installed-test
# Extra pip arguments. On Linux, PyPI's torch is the multi-GB CUDA build; the CPU build is
# PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu".
PIP_ARGS ?=
# pytest: three workers on two cores (much of a test is waiting on a kernel, a browser or a
# server: 430 s against 474 s with two); a file's tests (a notebook's cells, a chapter's
# answer bank with its one kernel) stay on one worker. Not loadscope: it splits a module at a
# "::" inside a test id.
PYTEST_ARGS ?= -n 3 --dist loadfile

# Kernels, the lab server and the tests get their quiet environment from tools/kernels.py.

.PHONY: help setup setup-lab lab test hub-test lint outputs student workspace bench site clean

help:
	@echo "make lab        set up, build your workspace/ and open the course in JupyterLab"
	@echo "make test       set up and run every test (unit, notebooks, browser, student build, lint)"
	@echo "make workspace  copy new student notebooks into workspace/ (never overwrites yours)"
	@echo "make student    build student notebooks into build/student/"
	@echo "make outputs    re-execute the reference notebooks in place (maintainers)"
	@echo "make lint       ruff (lint and format check) and strict mypy"
	@echo "make bench      measure the course; writes bench/results.json and bench/results.md"
	@echo "make site       build the course's website into build/site/ (open build/site/index.html)"
	@echo "make hub-test   start a real workshop hub with two learners and check it (deploy/)"
	@echo "make clean      remove build/ and caches (keeps workspace/ and .venv/)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "The course needs Python 3.11 or newer; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(LAB_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_ARGS) -e '.[lab]'
	touch $(LAB_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_ARGS) -e '.[lab,test,site,hub]'
	touch $(LAB_STAMP) $(TEST_STAMP)

setup-lab: $(LAB_STAMP)

setup: $(TEST_STAMP)

lab: workspace
	$(BIN)/python -m tools.lab

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests notebooks --ignore=tests/hub \
		--nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

lint: setup
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .
	$(BIN)/python -m mypy

outputs: setup
	$(BIN)/python -m tools.outputs

bench: setup
	$(BIN)/python -m tools.bench $(BENCH_ARGS)

site: setup
	$(BIN)/python -m tools.site

# A real JupyterHub with two learners and an instructor (deploy/); npm's proxy, pinned.
hub-test: setup
	npm ci --prefix deploy --no-audit --no-fund
	$(BIN)/python -m pytest -p no:cacheprovider tests/hub -v

student: setup-lab
	$(BIN)/python -m tools.student

workspace: student
	$(BIN)/python -m tools.workspace

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +

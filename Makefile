# The README's two commands: `make demo` and `make test`. Each sets up what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint typecheck pytest bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/flowtape run examples/review.py
	$(BIN)/flowtape runs

lint: venv
	$(BIN)/ruff check engine server tests examples bench

typecheck: venv
	$(BIN)/mypy

pytest: venv
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: venv
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .flowtape

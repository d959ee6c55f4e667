# The README's two commands: `make demo` and `make test`. Each sets up what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint typecheck pytest client client-unit client-nvim client-e2e vsix bench clean
CLIENT := editor-client

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,debug]'
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

# The VS Code extension: npm packages from the registry, then its unit tests, then the end-to-end
# test in a real VS Code (code-server, installed once into .cache/ by scripts/install-code-server.sh).
$(CLIENT)/node_modules/.installed: $(CLIENT)/package.json $(CLIENT)/package-lock.json
	cd $(CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

client: $(CLIENT)/node_modules/.installed
	cd $(CLIENT) && npm run build

client-unit: client
	cd $(CLIENT) && npm run test:unit

# The Neovim plugin in a real headless Neovim (>= 0.10, from the test extra), against the real server.
client-nvim: venv
	FLOWTAPE_PYTHON=$(abspath $(BIN)/python) timeout 600 $(BIN)/nvim --headless -u NONE -i NONE \
		-c "luafile $(CLIENT)/nvim/test/run.lua"

client-e2e: venv client
	cd $(CLIENT) && npm run test:e2e

vsix: client
	cd $(CLIENT) && npm run package

test: lint typecheck pytest client-unit client-nvim client-e2e

bench: venv  ## BENCH_ARGS=--quick for the reduced run (< 60 s)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .flowtape

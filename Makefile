# Perdure: `make run` starts everything; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tests/node/node_modules/.installed

.PHONY: run install test test-unit lint typecheck fmt bench bench-recovery bench-load worker gateway clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	@if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then \
		cd tests/node && npm ci --silent --no-audit --no-fund && touch node_modules/.installed; \
	else case "$$(echo "$${CI:-}" | tr A-Z a-z)" in \
		""|0|false|no) echo "npm or node not found: the AI SDK client test will be skipped";; \
		*) echo "npm or node not found, and CI is set: every test must run" >&2; exit 1;; \
	esac; fi

install: $(STAMP)

run: $(STAMP)
	$(BIN)/perdure dev

worker: $(STAMP)
	$(BIN)/perdure worker

gateway: $(STAMP)
	$(BIN)/perdure gateway

test: $(STAMP) $(NODE_STAMP)
	$(BIN)/pytest -q

test-unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench.latency

# ARGS passes flags through, e.g. `make bench-recovery ARGS="--runs 20"`.
bench-recovery: $(STAMP)
	$(BIN)/python -m bench.recovery $(ARGS)

bench-load: $(STAMP)
	$(BIN)/python -m bench.load $(ARGS)

clean:
	rm -rf $(VENV) .perdure tests/node/node_modules

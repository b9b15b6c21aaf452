# Perdure: `make run` starts everything; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tests/node/node_modules/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: run install test check floors test-unit lint typecheck fmt bench bench-recovery bench-faults bench-load bench-waits bench-compare worker gateway web clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv installs the same versions pip would choose, five times faster, and compiles every
	# installed module's bytecode on all cores (pip compiles on one).
	$(BIN)/python -m pip install --quiet 'uv>=0.9,<1'
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[dev]'
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

# The browser tests (tests/browser) drive Debian's chromium, never a downloaded browser.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
		|| echo "apt-get could not install chromium: the browser tests will skip (fail under CI)"; \
	else echo "chromium is missing and installing it needs root and apt-get: the browser tests will skip (fail under CI)"; fi

test: $(STAMP) $(NODE_STAMP) $(CHROMIUM)
	PYTEST=$(BIN)/pytest tests/run_suite.sh

# Rebuilds the chat page (web/) into gateway/static, which is committed: see docs/web.md.
web:
	cd web && npm ci --no-audit --no-fund && npm run build

# Every floor in pyproject.toml is the lowest version the code runs on: this installs each direct
# dependency at its floor (uv's lowest-direct resolution) in .venv-floors and runs the unit specs
# there. Run it before changing a floor (CONTRIBUTING.md).
FLOORS := .venv-floors
floors: $(STAMP)
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	$(BIN)/uv pip install --quiet --python $(FLOORS)/bin/python --resolution lowest-direct -e '.[dev]'
	$(FLOORS)/bin/pytest -q -n 2 -p no:cacheprovider tests/unit

test-unit: $(STAMP)
	$(BIN)/pytest -q -n 2 tests/unit

# The fast lane while you work (under 90 s): lint, then types and the unit specs side by side.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy & mypy=$$!; $(BIN)/pytest -q -n 2 -p no:cacheprovider tests/unit; unit=$$?; \
	wait $$mypy && [ $$unit -eq 0 ]

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

# The chaos specs' faults, injected while chats stream: what clients see and lose.
bench-faults: $(STAMP)
	$(BIN)/python -m bench.faults $(ARGS)

bench-load: $(STAMP)
	$(BIN)/python -m bench.load $(ARGS)

bench-waits: $(STAMP)
	$(BIN)/python -m bench.waits $(ARGS)

# Perdure beside a session entity workflow, Workflow Streams and the direct floor.
bench-compare: $(STAMP)
	$(BIN)/python -m bench.compare $(ARGS)

clean:
	rm -rf $(VENV) $(FLOORS) .perdure tests/node/node_modules web/node_modules

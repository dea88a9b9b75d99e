# The two commands: `make run` (the demo) and `make test` (the linters, then the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CLIENTS_VENV ?= .venv-clients
CLIENTS_STAMP := $(CLIENTS_VENV)/.installed
NODE_CLIENTS := tests/clients/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.installed

.PHONY: install clients browser wrk tlog-go run lint test stress-test fuzz bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The client libraries tests/clients drives, each as its users run it: the Python ones in their own
# virtualenv (their pins never move the gateway's), the Node ones from the committed lock file.
$(CLIENTS_STAMP): tests/clients/requirements.txt
	$(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/clients/requirements.txt
	touch $(CLIENTS_STAMP)

$(NODE_STAMP): $(NODE_CLIENTS)/package-lock.json
	cd $(NODE_CLIENTS) && npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

clients: $(CLIENTS_STAMP) $(NODE_STAMP)  ## the client libraries tests/clients runs against the gateway

run: install  ## the gateway + upstream simulator on the embedded default; prints a demo key
	$(VENV)/bin/gateway demo

browser:  ## Debian's Chromium for tests/browser, when missing (without it they skip; in CI they fail)
	@bash .ci/apt-install /usr/bin/chromium chromium || echo "Chromium is not installed: the browser tests will skip (and fail in CI)"

# Debian's Go and its golang.org/x/mod (the checksum database's note and tlog verifiers), which
# tests/ledger/test_tlog_go.py builds tests/ledger/tlogverify from in GOPATH mode, offline.
tlog-go:  ## Debian's Go and golang.org/x/mod sources for tests/ledger/test_tlog_go.py, when missing (without them it skips; in CI it fails)
	@bash .ci/apt-install go golang-go || echo "Go is not installed: tests/ledger/test_tlog_go.py will skip (and fail in CI)"
	@bash .ci/apt-install /usr/share/gocode/src/golang.org/x/mod/sumdb/note golang-golang-x-mod-dev \
		|| echo "golang.org/x/mod is not installed: tests/ledger/test_tlog_go.py will skip (and fail in CI)"

lint: install  ## ruff over the code and the tests, mypy over the packages (settings in pyproject.toml)
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy

test: install clients browser wrk tlog-go lint  ## the linters, then every test, against real sockets, SQLite files, services and a real browser
	$(PY) -m pytest

# A busy CI runner: two CPU-bound processes run beside the suite for its whole duration and are
# stopped after it, whatever its outcome (the exit status is the suite's). PYTEST_ARGS picks tests.
stress-test: install clients browser wrk tlog-go  ## every test, as `make test` runs them, with two CPU burners beside them
	@for n in 1 2; do $(PY) -c 'while True: pass' & burners="$$burners $$!"; done; \
	trap 'kill $$burners' EXIT; \
	$(PY) -m pytest $(PYTEST_ARGS)

fuzz: install  ## a longer soak of the fuzz suite (make test runs a short one); FUZZ_EXAMPLES cases per route and mode
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-400} $(PY) -m pytest tests/robustness/test_fuzz.py tests/robustness/test_fuzz_edges.py -q

wrk:  ## Debian's wrk (the scale benchmark's load generator), when missing (without it tests/bench/test_bench_scale.py skips; in CI it fails)
	@bash .ci/apt-install wrk wrk || echo "wrk is not installed: tests/bench/test_bench_scale.py will skip (and fail in CI)"

bench: install wrk  ## benchmarks (not part of the test run)
	$(PY) -m bench.scale
	$(PY) -m bench.gateway_throughput
	$(PY) -m bench.log_pages
	$(PY) -m bench.ledger_append
	$(PY) -m bench.audit_scale
	$(PY) -m bench.statements
	$(PY) -m bench.export_scale
	$(PY) -m bench.tracing
	$(PY) -m bench.bedrock_stream
	$(PY) -m bench.catalogue_scale
	$(PY) -m bench.batches
	$(PY) -m bench.tlog

clean:
	rm -rf $(VENV) $(CLIENTS_VENV) $(NODE_CLIENTS)/node_modules data .pytest_cache .mypy_cache .ruff_cache

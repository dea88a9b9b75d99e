# The two commands: `make run` (the demo) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install  ## the gateway + upstream simulator on the embedded default; prints a demo key
	$(VENV)/bin/gateway demo

test: install  ## every test, against real sockets, SQLite files and services
	$(PY) -m pytest

bench: install  ## benchmarks (not part of the test run)
	$(PY) -m bench.gateway_throughput

clean:
	rm -rf $(VENV) data .pytest_cache

# Every target installs what it needs into .venv, so a fresh clone needs only Python 3.11+.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench chaos check clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[postgres,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

bench: $(STAMP)
	# Bytecode as a wheel install has it: the recovery figure times a fresh interpreter.
	$(BIN)/python -m compileall -q src bench
	$(BIN)/python -m bench
	$(BIN)/python -m bench.sleepers 1000
	$(BIN)/python -m bench.claims
	$(BIN)/python -m bench.check 10000
	$(BIN)/python -m bench.observability
	$(BIN)/python -m bench.dashboard
	# 20,000 runs here; the issue's size: python -m bench.scale --runs 1000000
	$(BIN)/python -m bench.scale --runs 20000
	$(BIN)/python -m bench.run_page
	$(BIN)/python -m bench.unconsumed_event
	$(BIN)/python -m bench.transaction
	$(BIN)/python -m bench.celery_transport

# The chaos suite at full size (make test runs it smaller): see docs/explanation/chaos.md.
chaos: $(STAMP)
	CAIRN_CHAOS=full $(BIN)/python -m pytest tests/chaos -s

check: $(STAMP)
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

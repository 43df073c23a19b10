# Everyday entry points. Every target installs into $(VENV) first: `run` only what serving needs
# (install), `test`, `lint`, `bench` and `reliability` the dev tools as well (install-dev). The
# stamp files make a second run reuse the venv until pyproject.toml changes.

VENV ?= .venv
PY := $(VENV)/bin/python
# LangGraph and DBOS, for bench/peers.py only: a venv of their own, never Signoff's dependencies.
PEERS_VENV ?= .venv-peers
PEERS_PY := $(PEERS_VENV)/bin/python
BOOTSTRAP_PYTHON := $(shell command -v python3.11 2>/dev/null || command -v python3)

.PHONY: install install-dev run test lint bench bench-peers reliability clean

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The venv itself, once; the stamps below only need it to exist (order-only), so that a new
# pip in it does not count as a change.
$(PY):
	@echo "creating $(VENV) with $(BOOTSTRAP_PYTHON)"
	$(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip stays --quiet, so say what the silent minutes are.
$(VENV)/.installed: pyproject.toml | $(PY)
	@echo "installing Signoff and its dependencies into $(VENV) (first time: a few minutes)"
	$(PY) -m pip install --quiet -e .
	touch $@
	@echo "installed into $(VENV)"

# Everything serving needs, and the test, lint and benchmark tools: it stands for .installed too.
$(VENV)/.installed-dev: pyproject.toml | $(PY)
	@echo "installing Signoff with its dev tools into $(VENV) (first time: a few minutes)"
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed
	@echo "installed into $(VENV), with the dev tools"

run: install
	$(VENV)/bin/signoff migrate
	$(VENV)/bin/signoff serve --config app.yaml

# pytest exits 5 when it collects nothing; make fails on it like on any other non-zero status.
# The suite waits on servers, databases and clocks more than it computes: worker processes
# (pytest-xdist) overlap those waits. Every test has its own databases and ports, so they
# run in any order; TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 3
test: install-dev
	$(PY) -m pytest -q -n $(TEST_WORKERS)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict engine bot cards
	$(VENV)/bin/lint-imports

# Each benchmark's defaults finish in a few minutes. No benchmark at all is a failure, not a pass.
# bench/peers.py runs last, with $(PEERS_VENV)'s python (see bench-peers).
bench: install-dev $(PEERS_VENV)/.installed
	@set -e; found=0; \
	for script in bench/*.py; do \
		[ -e "$$script" ] || continue; \
		[ "$$script" = bench/peers.py ] && continue; \
		found=1; echo "== $$script"; $(PY) "$$script"; \
	done; \
	if [ "$$found" = 0 ]; then echo "no benchmarks in bench/" >&2; exit 1; fi
	@echo "== bench/peers.py"; $(PEERS_PY) bench/peers.py

# Signoff next to LangGraph and DBOS only.
bench-peers: $(PEERS_VENV)/.installed
	$(PEERS_PY) bench/peers.py

$(PEERS_VENV)/.installed: pyproject.toml bench/peers/requirements.txt
	$(BOOTSTRAP_PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_PY) -m pip install --quiet --upgrade pip
	$(PEERS_PY) -m pip install --quiet -e . -r bench/peers/requirements.txt
	touch $@

reliability: install-dev
	SIGNOFF_RELIABILITY_FULL=1 $(PY) -m pytest tests/reliability

clean:
	rm -rf $(VENV) $(PEERS_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

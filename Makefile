# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv and install siftbus with its dev extras when needed.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck setup sysdeps browser-sysdeps bench-sysdeps clean bench

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || $(MAKE) sysdeps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Spark needs a JVM; install one from Debian when the machine has none.
sysdeps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless

# The dashboard test drives Debian's Chromium headless through Playwright (never a
# browser download: Playwright is pointed at /usr/bin/chromium).
browser-sysdeps:
	@command -v chromium >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

demo: $(STAMP)
	$(BIN)/siftbus demo

test: $(STAMP) browser-sysdeps
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# bench/network.py measures mosquitto (with client-side filtering) in the same run.
bench-sysdeps:
	@command -v mosquitto >/dev/null 2>&1 || test -x /usr/sbin/mosquitto || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto)

# Every benchmark in its short form; each writes bench/results/<name>.json.
bench: $(STAMP) bench-sysdeps
	$(BIN)/python bench/matcher.py --quick
	$(BIN)/python bench/covering.py --quick
	$(BIN)/python bench/network.py --quick
	$(BIN)/python bench/channels.py --quick
	$(BIN)/python bench/xmlfilter.py --quick
	$(BIN)/python bench/spark.py --quick
	$(BIN)/python bench/gateway.py --quick
	$(BIN)/python bench/rein.py --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

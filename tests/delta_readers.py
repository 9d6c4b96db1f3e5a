"""Real readers of a Delta table on the test S3 server: delta-rs, DuckDB's ``delta_scan`` and
Polars' ``read_delta``, each straight from S3, through :func:`read_all`; and Spark 4.1 with
delta-spark (tests/spark_delta.py), which is slow (1-4 s a read): it reads the *last* state each
test asserted of each table, once, at the test's end (:class:`SparkFinalReads`).

    read_all(uri, s3_config)          {"deltalake": Table, "duckdb": Table, "polars": Table}
    assert_tables_read(uri, s3_config, expected_rows)       (and noted for Spark, when a test
                                                             collects: ``spark_final_reads``)
    spark_reader(spark_delta)         a Reader for ``extra=`` (Spark reads this state now)
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

from beam_s3_sink import S3Config
from beam_s3_sink.delta_commit import storage_options

Reader = Callable[[str, S3Config], pa.Table]


def read_deltalake(uri: str, config: S3Config) -> pa.Table:
    """The table's current version, as delta-rs reads it."""
    from deltalake import DeltaTable

    return DeltaTable(uri, storage_options=storage_options(config)).to_pyarrow_table()


def read_duckdb(uri: str, config: S3Config) -> pa.Table:
    """DuckDB's ``delta_scan`` over httpfs, the extensions loaded from their wheels (no download)."""
    from pipelines import duckdb_s3

    con = duckdb_s3.connect(config.endpoint_url, config.access_key_id, config.secret_access_key, config.region_name)
    try:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute(f"LOAD '{duckdb_s3.extension_path('delta')}'")
        return con.execute("SELECT * FROM delta_scan('{}')".format(uri.replace("'", "''"))).to_arrow_table()
    finally:
        con.close()


def read_polars(uri: str, config: S3Config) -> pa.Table:
    """Polars' ``read_delta`` (delta-rs underneath, Polars' own Parquet reader)."""
    import polars as pl

    return pl.read_delta(uri, storage_options=storage_options(config)).to_arrow()


READERS: Dict[str, Reader] = {"deltalake": read_deltalake, "duckdb": read_duckdb, "polars": read_polars}


def read_all(uri: str, config: S3Config, extra: Optional[Mapping[str, Reader]] = None) -> Dict[str, pa.Table]:
    """The table as each reader of :data:`READERS` (and ``extra``) reads it."""
    return {name: read(uri, config) for name, read in {**READERS, **(extra or {})}.items()}


def spark_reader(spark: Any, version: Optional[int] = None) -> Reader:
    """Spark's read (of ``version``, else the current one), for ``extra=``."""
    from spark_delta import read_delta_spark

    return lambda uri, config: read_delta_spark(spark, uri, config, version)


class SparkFinalReads:
    """What the current test asserted last of each table (its version then, and the rows),
    for Spark to read once at the test's end (:meth:`check`): every intermediate state is
    read by the three fast readers, the final one by Spark too, at the version asserted."""

    active: Optional["SparkFinalReads"] = None

    def __init__(self) -> None:
        self.tables: Dict[str, Tuple[S3Config, int, List[Dict[str, Any]]]] = {}

    def note(self, uri: str, config: S3Config, expected: Sequence[Mapping[str, Any]]) -> None:
        from deltalake import DeltaTable

        version = DeltaTable(uri, storage_options=storage_options(config)).version()
        self.tables[uri.rstrip("/")] = (config, version, [dict(r) for r in expected])

    def check(self, spark: Any) -> int:
        """Spark reads each noted table at its noted version: exactly the rows asserted.
        Returns how many tables it read."""
        for uri, (config, version, expected) in self.tables.items():
            _compare(f"spark (version {version} of {uri})", spark_reader(spark, version)(uri, config), expected)
        return len(self.tables)


def rows_of(table: pa.Table, columns: Sequence[str]) -> List[Dict[str, Any]]:
    """The rows of ``table`` (its ``columns``, in that order) as Python values, in a canonical
    order (by their whole value: two rows may share an id)."""
    return sorted(table.select(list(columns)).to_pylist(), key=_order)


def _order(row: Mapping[str, Any]) -> str:
    return json.dumps(row, default=str)


def assert_tables_read(
    uri: str,
    config: S3Config,
    expected: Sequence[Mapping[str, Any]],
    extra: Optional[Mapping[str, Reader]] = None,
) -> None:
    """Every reader reads exactly ``expected`` (values compared, row by row); the state is noted
    for Spark's read at the test's end when the test collects (:class:`SparkFinalReads`)."""
    for name, table in read_all(uri, config, extra).items():
        _compare(name, table, expected)
    if SparkFinalReads.active is not None:
        SparkFinalReads.active.note(uri, config, expected)


def _compare(name: str, table: pa.Table, expected: Sequence[Mapping[str, Any]]) -> None:
    want = sorted((dict(r) for r in expected), key=_order)
    columns = list(want[0]) if want else []
    got = rows_of(table, columns) if want else table.to_pylist()
    assert len(got) == len(want), f"{name}: {len(got)} rows, {len(want)} expected"
    for mine, theirs in zip(got, want):
        assert mine == theirs, f"{name} read {mine}, expected {theirs}"

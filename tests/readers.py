"""The five Parquet readers the sink's files must open in, each as a user calls it.

Each ``read_*`` takes local Parquet paths and returns ``(types, rows)``: the reader's own type
name per column, and the rows as plain Python values (``None`` for NULL, ``bytes``, ``dict``
for structs and maps kept as the reader gives them), so that one comparison serves all::

    files ─▶ pyarrow.parquet.read_table   ─┐
          ─▶ duckdb read_parquet           ├─▶ (types, rows) ─▶ test_parquet.check_rows
          ─▶ polars.read_parquet           │
          ─▶ pandas.read_parquet(pyarrow)  │
          ─▶ spark.read.parquet            ┘

Spark's Python side cannot turn ``TimestampType`` values before year 2 into ``datetime``, so
those columns are read as ``unix_micros(col)`` (Spark's own value, in microseconds since the
epoch) and turned into aware ``datetime`` values here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Dict, List, Sequence, Tuple

Rows = List[Dict[str, Any]]
Read = Tuple[Dict[str, str], Rows]
READERS = ("pyarrow", "DuckDB", "Polars", "pandas", "Spark")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def read_pyarrow(paths: Sequence[str]) -> Read:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables(pq.read_table(p) for p in paths)
    return {f.name: str(f.type) for f in table.schema}, table.to_pylist()


def read_duckdb(paths: Sequence[str]) -> Read:
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        cursor = con.execute("SELECT * FROM read_parquet(?)", [list(paths)])
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, r)) for r in cursor.fetchall()]
        types = dict(
            con.execute(
                "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))", [list(paths)]
            ).fetchall()
        )
    finally:
        con.close()
    return types, rows


def read_polars(paths: Sequence[str]) -> Read:
    import polars as pl

    frame = pl.concat([pl.read_parquet(p) for p in paths])
    return {name: str(typ) for name, typ in frame.schema.items()}, frame.to_dicts()


def read_pandas(paths: Sequence[str]) -> Read:
    """pandas with ``dtype_backend="pyarrow"``: NumPy dtypes would turn the NULLs of integer
    columns into NaN floats (losing int64 precision) and NaN into NULL."""
    import pandas as pd

    frame = pd.concat([pd.read_parquet(p, dtype_backend="pyarrow") for p in paths], ignore_index=True)
    types = {name: str(frame[name].dtype) for name in frame.columns}
    rows = [{name: _plain_pandas(frame[name].iloc[i]) for name in frame.columns} for i in range(len(frame))]
    return types, rows


def _plain_pandas(value: Any) -> Any:
    import pandas as pd

    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def read_spark(spark: Any, paths: Sequence[str]) -> Read:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    frame = spark.read.parquet(*paths)
    instants = {f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)}
    columns = [F.unix_micros(F.col(f"`{n}`")).alias(n) if n in instants else F.col(f"`{n}`") for n in frame.columns]
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    rows = []
    for row in frame.select(*columns).collect():
        values = row.asDict(recursive=True)
        rows.append(
            {
                n: (None if values[n] is None else EPOCH + dt.timedelta(microseconds=values[n]))
                if n in instants
                else _plain_spark(values[n])
                for n in frame.columns
            }
        )
    return types, rows


def _plain_spark(value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [_plain_spark(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain_spark(v) for k, v in value.items()}
    return value


def read_all(spark: Any, paths: Sequence[str]) -> Dict[str, Any]:
    """Every reader's ``(types, rows)``, or the first line of the error it raised."""
    readers = {
        "pyarrow": read_pyarrow,
        "DuckDB": read_duckdb,
        "Polars": read_polars,
        "pandas": read_pandas,
        "Spark": lambda p: read_spark(spark, p),
    }
    results: Dict[str, Any] = {}
    for name, read in readers.items():
        try:
            results[name] = read(paths)
        except Exception as exc:  # noqa: BLE001 - recorded: the table says the reader failed
            results[name] = exc
    return results


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""Per-file statistics in the result and the manifest, checked against DuckDB's own over the
same files: ``parquet_metadata()`` for Parquet, ``min``/``max``/``count(*) - count(col)`` for CSV."""

from __future__ import annotations

import datetime
import pickle

import duckdb
import pyarrow as pa
import pytest

from beam_s3_sink import CsvFormat
from beam_s3_sink.formats.stats import ColumnStats
from helpers import get_bytes, read_manifest, run_copy

SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("day", pa.date32()), ("flag", pa.bool_())]
)


def make_row(i: int) -> dict:
    return {
        "id": i,
        "name": None if i % 5 == 0 else f"n{i:05d}",
        "amount": None if i % 7 == 0 else i / 4 - 100,
        "day": datetime.date(2020, 1, 1) + datetime.timedelta(days=i),
        "flag": None if i % 3 == 0 else i % 2 == 0,
    }


def download(client, bucket: str, result, tmp_path) -> list:
    paths = []
    for n, f in enumerate(result.files):
        path = tmp_path / f"{n}-{f.uri.rsplit('/', 1)[-1]}"
        path.write_bytes(get_bytes(client, bucket, f.uri.split("/", 3)[3]))
        paths.append(path)
    return paths


def check_manifest(client, bucket: str, result) -> None:
    manifest = read_manifest(client, bucket, result.manifest_uri.split("/", 3)[3])
    for entry, copied in zip(manifest["entries"], result.files):
        assert {c: v["null_count"] for c, v in entry["meta"]["columns"].items()} == {
            s.column: s.null_count for s in copied.stats
        }
        assert [(c, v["min"], v["max"]) for c, v in entry["meta"]["columns"].items()] == [
            (s.column, s.min, s.max) for s in copied.stats
        ]
    assert pickle.loads(pickle.dumps(result)) == result


def test_parquet_stats_match_duckdb_parquet_metadata(s3_config, s3_client, bucket, tmp_path):
    result = run_copy(
        generate=(make_row, 3000),
        uri=f"s3://{bucket}/pq",
        schema=SCHEMA,
        s3=s3_config,
        format="parquet",
        max_file_size=16 * 1024,
    )
    assert result.ok and len(result.files) >= 2
    check_manifest(s3_client, bucket, result)
    for path, copied in zip(download(s3_client, bucket, result, tmp_path), result.files):
        rows = duckdb.sql(
            f"SELECT path_in_schema, sum(stats_null_count), min(stats_min_value), "
            f"max(stats_max_value) FROM parquet_metadata('{path}') GROUP BY path_in_schema"
        ).fetchall()
        duck = {name: (int(nulls), low, high) for name, nulls, low, high in rows}
        ours = {s.column: s for s in copied.stats}
        assert set(duck) == set(ours)
        for name, (nulls, _low, _high) in duck.items():
            assert ours[name].null_count == nulls, name
        # min/max: DuckDB's values over the file itself (its stats strings sort as text).
        agg = duckdb.sql(
            f"SELECT min(id), max(id), min(name), max(name), min(amount), max(amount), min(day), max(day) FROM '{path}'"
        ).fetchall()[0]
        assert (
            ours["id"].min,
            ours["id"].max,
            ours["name"].min,
            ours["name"].max,
            ours["amount"].min,
            ours["amount"].max,
        ) == agg[:6]
        assert (ours["day"].min, ours["day"].max) == (agg[6].isoformat(), agg[7].isoformat())


@pytest.mark.parametrize("fmt", [CsvFormat(), CsvFormat(compression="gzip")])
def test_csv_stats_match_duckdb_aggregates(s3_config, s3_client, bucket, tmp_path, fmt):
    result = run_copy(
        generate=(make_row, 3000),
        uri=f"s3://{bucket}/csv",
        schema=SCHEMA,
        s3=s3_config,
        format=fmt,
        max_file_size=16 * 1024,
    )
    assert result.ok and len(result.files) >= 2
    check_manifest(s3_client, bucket, result)
    columns = "{'id': 'BIGINT', 'name': 'VARCHAR', 'amount': 'DOUBLE', 'day': 'DATE', 'flag': 'BOOLEAN'}"
    for path, copied in zip(download(s3_client, bucket, result, tmp_path), result.files):
        source = f"read_csv('{path}', header=false, columns={columns}, nullstr='', quote='\"')"
        for stat in copied.stats:
            c = stat.column
            low, high, nulls = duckdb.sql(f"SELECT min({c}), max({c}), count(*) - count({c}) FROM {source}").fetchall()[
                0
            ]
            if isinstance(low, datetime.date):
                low, high = low.isoformat(), high.isoformat()
            assert (stat.null_count, stat.min, stat.max) == (nulls, low, high), c
    assert sum(s.null_count for f in result.files for s in f.stats if s.column == "name") == 600


def test_empty_copy_has_stats_of_no_rows(s3_config, s3_client, bucket):
    result = run_copy([], uri=f"s3://{bucket}/empty", schema=SCHEMA, s3=s3_config, format="parquet")
    (copied,) = result.files
    floats = {f.name for f in SCHEMA if pa.types.is_floating(f.type)}
    assert floats  # a Parquet file counts the NaNs of its float columns: none here
    assert copied.stats == tuple(ColumnStats(n, 0, nan_count=0 if n in floats else None) for n in SCHEMA.names)

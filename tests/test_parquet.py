"""Parquet output read back by readers we did not write: pyarrow, DuckDB and Polars.

Covers the whole type mapping with NULLs and edge values, file sizes against
``max_file_size`` measured from the files' own row-group metadata, the format's options,
the schema derived from Beam schemas, and the error a row that does not fit gives.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import os
import statistics
import uuid

import apache_beam as beam
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import readers
from beam_s3_sink import CopyToS3, ParquetFormat
from beam_s3_sink.schema import resolve_schema
from helpers import data_keys, get_bytes, list_objects, pending_uploads, run_copy
from parquet_types import Event, Point, Priced

D = decimal.Decimal
UTC = dt.timezone.utc
MINUS7 = dt.timezone(dt.timedelta(hours=-7))
U_MAX = uuid.UUID(int=2**128 - 1)
U_ONE = uuid.UUID("12345678-1234-5678-1234-567812345678")
F32_MAX = 3.4028234663852886e38
F32_TINY = 1.401298464324817e-45

ALL_TYPES = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("u8", pa.uint8()),
        ("u16", pa.uint16()),
        ("u32", pa.uint32()),
        ("u64", pa.uint64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("flag", pa.bool_()),
        ("text", pa.string()),
        ("big_text", pa.large_string()),
        ("blob", pa.binary()),
        ("big_blob", pa.large_binary()),
        ("dec", pa.decimal128(38, 10)),
        ("money", pa.decimal128(5, 2)),
        ("wide", pa.decimal256(38, 4)),
        ("day", pa.date32()),
        ("at", pa.time64("us")),
        ("at_ms", pa.time32("ms")),
        ("ts_s", pa.timestamp("s")),
        ("ts_ms", pa.timestamp("ms")),
        ("ts_us", pa.timestamp("us")),
        ("ts_ns", pa.timestamp("ns")),
        ("tz_s", pa.timestamp("s", tz="UTC")),
        ("tz_ms", pa.timestamp("ms", tz="UTC")),
        ("tz_us", pa.timestamp("us", tz="UTC")),
        ("tz_ns", pa.timestamp("ns", tz="UTC")),
        ("tz_paris", pa.timestamp("us", tz="Europe/Paris")),
        ("ints", pa.list_(pa.int64())),
        ("words", pa.list_(pa.string())),
        ("pair", pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])),
        ("attrs", pa.map_(pa.string(), pa.int64())),
        ("doc", pa.json_()),
        ("key", pa.uuid()),
    ]
)

LOW = {
    "id": 0,
    "i8": -128,
    "i16": -(2**15),
    "i32": -(2**31),
    "i64": -(2**63),
    "u8": 0,
    "u16": 0,
    "u32": 0,
    "u64": 0,
    "f32": float("-inf"),
    "f64": float("-inf"),
    "flag": False,
    "text": "",
    "big_text": "",
    "blob": b"",
    "big_blob": b"",
    "dec": D("-" + "9" * 28 + "." + "9" * 10),
    "money": D("-999.99"),
    "wide": D("-" + "9" * 34 + ".9999"),
    "day": dt.date(1, 1, 1),
    "at": dt.time(0),
    "at_ms": dt.time(0),
    "ts_s": dt.datetime(1, 1, 1),
    "ts_ms": dt.datetime(1, 1, 1),
    "ts_us": dt.datetime(1, 1, 1),
    "ts_ns": dt.datetime(1677, 9, 22),
    "tz_s": dt.datetime(1, 1, 1, tzinfo=UTC),
    "tz_ms": dt.datetime(1, 1, 1, tzinfo=UTC),
    "tz_us": dt.datetime(1, 1, 1, tzinfo=UTC),
    "tz_ns": dt.datetime(1677, 9, 22, tzinfo=UTC),
    "tz_paris": dt.datetime(1900, 1, 1, tzinfo=UTC),
    "ints": [],
    "words": [],
    "pair": {"a": None, "b": []},
    "attrs": {},
    "doc": [],
    "key": uuid.UUID(int=0),
}
HIGH = {
    "id": 1,
    "i8": 127,
    "i16": 2**15 - 1,
    "i32": 2**31 - 1,
    "i64": 2**63 - 1,
    "u8": 255,
    "u16": 2**16 - 1,
    "u32": 2**32 - 1,
    "u64": 2**64 - 1,
    "f32": float("inf"),
    "f64": float("inf"),
    "flag": True,
    "text": "é ✓ 𝄞 \"q\" 'a'\\b\n\t,;",
    "big_text": "x" * 10_000,
    "blob": bytes(range(256)),
    "big_blob": b"\x00" * 1000,
    "dec": D("9" * 28 + "." + "9" * 10),
    "money": D("999.99"),
    "wide": D("9" * 34 + ".9999"),
    "day": dt.date(9999, 12, 31),
    "at": dt.time(23, 59, 59, 999999),
    "at_ms": dt.time(23, 59, 59, 999000),
    "ts_s": dt.datetime(9999, 12, 31, 23, 59, 59),
    "ts_ms": dt.datetime(9999, 12, 31, 23, 59, 59, 999000),
    "ts_us": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    "ts_ns": dt.datetime(2262, 4, 11, 23, 47, 16, 854775),
    "tz_s": dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    "tz_ms": dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    "tz_us": dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "tz_ns": dt.datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC),
    "tz_paris": dt.datetime(2024, 3, 31, 2, 30, tzinfo=MINUS7),
    "ints": [-(2**63), None, 2**63 - 1],
    "words": ["", None, "é"],
    "pair": {"a": 7, "b": ["x", None]},
    "attrs": {"a": 1, "": None, "é": -1},
    "doc": {"b": [1, 2.5, None, True], "a": {"é": '"x"'}},
    "key": U_MAX,
}
MIDDLE = {
    "id": 2,
    "i8": 0,
    "i16": -1,
    "i32": 1,
    "i64": 0,
    "u8": 1,
    "u16": 2,
    "u32": 3,
    "u64": 2**63,
    "f32": float("nan"),
    "f64": float("nan"),
    "flag": True,
    "text": "plain",
    "big_text": "",
    "blob": b"\x00",
    "big_blob": b"",
    "dec": D("0.0000000001"),
    "money": 0,
    "wide": D("-0.0001"),
    "day": dt.date(1970, 1, 1),
    "at": dt.time(12, 0, 0, 1),
    "at_ms": dt.time(0, 0, 0, 1000),
    "ts_s": dt.datetime(1970, 1, 1),
    "ts_ms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
    "ts_us": dt.datetime(2024, 6, 1, 12, 0, tzinfo=MINUS7),  # aware into a naive column: UTC
    "ts_ns": dt.datetime(2024, 2, 29, 0, 0, 0, 1),
    "tz_s": dt.datetime(1970, 1, 1, tzinfo=UTC),
    "tz_ms": dt.datetime(2024, 6, 1, 12, tzinfo=MINUS7),
    "tz_us": dt.datetime(2024, 6, 1, 12, 0, 0, 1),
    "tz_ns": dt.datetime(2000, 1, 1, 0, 0, 0, 999999, tzinfo=MINUS7),
    "tz_paris": dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC),
    "ints": [0],
    "words": [""],
    "pair": {"a": 0, "b": None},
    "attrs": [("k", 0)],
    "doc": '"just text"',
    "key": str(U_ONE),
}
SMALL_FLOATS = {"id": 3, "f32": F32_TINY, "f64": 5e-324, "key": U_ONE.bytes, "doc": "[]", "money": D("-0.01"), "dec": 5}
LARGE_FLOATS = {"id": 4, "f32": -F32_MAX, "f64": 1.7976931348623157e308, "doc": 0}
ALL_NULL = {"id": 5}
ROWS = [LOW, HIGH, MIDDLE, SMALL_FLOATS, LARGE_FLOATS, ALL_NULL, {"id": 6, "f32": -0.0, "f64": -0.0, "doc": "null"}]


PROFILES = ("compatible", "exact")
COMPATIBLE_TIME_DIGITS = {"us": "microseconds", "ms": "milliseconds", "s": "seconds", "ns": "microseconds"}


def meaning(column: str, value, types: str = "exact"):
    """The value a reader must give back, in one canonical form shared by all readers.

    With ``types="compatible"`` it is the documented equivalent: a UUID as its text, a time
    of day as ``HH:MM:SS.ffffff`` text, an unsigned integer as an int (``uint64`` as a
    ``Decimal``, the ``decimal(20, 0)`` it is written as)."""
    if value is None:
        return None
    typ = ALL_TYPES.field(column).type
    if types == "compatible":
        if isinstance(typ, pa.UuidType):
            return str(meaning(column, value))
        if pa.types.is_time(typ):
            return value.isoformat(timespec=COMPATIBLE_TIME_DIGITS[typ.unit])
        if typ == pa.uint64():
            return D(value)
    if isinstance(typ, pa.JsonType):
        return json.loads(value) if isinstance(value, str) else value
    if isinstance(typ, pa.UuidType):
        return (
            value
            if isinstance(value, uuid.UUID)
            else (uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(value))
        )
    if pa.types.is_map(typ):
        return dict(value.items() if isinstance(value, dict) else value)
    if pa.types.is_decimal(typ):
        return D(value)
    if pa.types.is_timestamp(typ):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
            return value if typ.tz else value.replace(tzinfo=None)
        return value.replace(tzinfo=UTC) if typ.tz else value
    return value


def read_back(column: str, value, types: str = "exact"):
    """A reader's value in the canonical form: JSON parsed, UUID as uuid.UUID, maps as dicts."""
    if value is None:
        return None
    typ = ALL_TYPES.field(column).type
    if hasattr(value, "to_pydatetime"):  # pyarrow gives pandas Timestamps for nanoseconds
        value = value.to_pydatetime()
    if isinstance(typ, pa.JsonType):
        assert isinstance(value, str), f"{column}: JSON must come back as text, got {value!r}"
        return json.loads(value)
    if isinstance(typ, pa.UuidType) and types == "exact":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=value)
    if pa.types.is_map(typ) and isinstance(value, list):
        return dict(value)
    if pa.types.is_timestamp(typ) and value.tzinfo is not None:
        return value.astimezone(UTC)
    return value


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def column_differences(got_rows, expected_rows, column: str, types: str = "exact"):
    """The rows whose ``column`` a reader gave back differently, as ``(id, got, wanted)``."""
    got = {r["id"]: r for r in got_rows}
    assert sorted(got) == sorted(r["id"] for r in expected_rows)
    differences = []
    for expected in expected_rows:
        want = meaning(column, expected.get(column), types)
        try:
            have = read_back(column, got[expected["id"]][column], types)
        except (AssertionError, ValueError, TypeError) as exc:
            have = exc
        if not same(have, want):
            differences.append((expected["id"], have, want))
    return differences


def check_rows(reader: str, got_rows, expected_rows, types: str = "exact", columns=None) -> None:
    for column in columns or ALL_TYPES.names:
        for row_id, have, want in column_differences(got_rows, expected_rows, column, types)[:1]:
            raise AssertionError(f"{reader}: column {column} of row {row_id}: {have!r} != {want!r}")


def _download(s3_client, bucket, prefix, tmp_path):
    paths = []
    for i, key in enumerate(data_keys(s3_client, bucket, prefix)):
        path = tmp_path / f"{prefix.replace('/', '-')}-{i}.parquet"
        path.write_bytes(get_bytes(s3_client, bucket, key))
        paths.append(str(path))
    assert paths
    return paths


@pytest.mark.parametrize("types", PROFILES)
def test_every_type_reads_back_in_every_reader(types, spark, s3_config, s3_client, bucket, tmp_path):
    """The all-types copy, read by pyarrow, DuckDB, Polars, pandas and Spark, column by column.

    ``compatible`` (the default): every reader opens the files and gives back every value
    (or its documented equivalent). ``exact``: pyarrow, DuckDB and Polars give back the exact
    types and values; Spark cannot open a file with UUID, TIME or TIMESTAMP(NANOS) columns.
    docs/formats.md's per-reader type table for the profile is made from what the readers returned.
    """
    fmt = ParquetFormat(types=types)
    result = run_copy(ROWS, uri=f"s3://{bucket}/all", schema=ALL_TYPES, s3=s3_config, format=fmt)
    assert result.ok, result.error
    assert result.rows == len(ROWS)
    paths = _download(s3_client, bucket, "all", tmp_path)
    manifest = json.loads(get_bytes(s3_client, bucket, result.manifest_uri.split("/", 3)[3]))
    written = {c["name"]: c for c in manifest["schema"]}
    assert manifest["format"]["options"]["types"] == types
    assert written["key"]["type"] == ("string" if types == "compatible" else "extension<arrow.uuid>")
    assert ("source_type" in written["key"]) == (types == "compatible")

    results = readers.read_all(spark, paths)
    if types == "compatible":
        for reader in readers.READERS:
            got = results[reader]
            assert not isinstance(got, Exception), f"{reader} cannot open the file: {got}"
            check_rows(reader, got[1], ROWS, types)
        spark_types = results["Spark"][0]
        assert (spark_types["key"], spark_types["at"], spark_types["u64"], spark_types["ts_ns"]) == (
            "string",
            "string",
            "decimal(20,0)",
            "timestamp_ntz",
        )
    else:
        for reader in ("pyarrow", "DuckDB", "Polars"):
            check_rows(reader, results[reader][1], ROWS, types)
        arrow_types, duck_types = results["pyarrow"][0], results["DuckDB"][0]
        assert (arrow_types["doc"], arrow_types["key"], arrow_types["ts_s"]) == (
            "extension<arrow.json>",
            "extension<arrow.uuid>",
            "timestamp[ms]",
        )  # Parquet has no seconds
        assert (duck_types["doc"], duck_types["key"], duck_types["u64"], duck_types["dec"], duck_types["tz_us"]) == (
            "JSON",
            "UUID",
            "UBIGINT",
            "DECIMAL(38,10)",
            "TIMESTAMP WITH TIME ZONE",
        )
        assert "PARQUET_TYPE_ILLEGAL" in str(results["Spark"]), results["Spark"]
        leaves = {c.path: c for c in pq.ParquetFile(paths[0]).schema}
        assert (leaves["doc"].logical_type.type, leaves["key"].logical_type.type) == ("JSON", "UUID")
        # Spark opens the file only without these columns: read it column by column.
        results["Spark"] = _spark_by_column(spark, fmt, tmp_path)
    table = type_table(fmt, results)
    readme_table_check(types, table)


def _spark_by_column(spark, fmt: ParquetFormat, tmp_path):
    """Spark's (types, rows), reading each column from a file of its own (written by the
    sink's encoder), with the error for each column it cannot read."""
    from beam_s3_sink.schema import rows_to_batch

    batch = rows_to_batch(ROWS, ALL_TYPES)
    types, errors, by_id = {}, {}, {r["id"]: {"id": r["id"]} for r in ROWS}
    compatible = ParquetFormat(types="compatible").file_schema(ALL_TYPES)
    same_columns = [
        n for n in ALL_TYPES.names if fmt.file_schema(ALL_TYPES).field(n).type.equals(compatible.field(n).type)
    ]
    groups = [same_columns] + [["id", n] for n in ALL_TYPES.names if n not in same_columns]
    for i, names in enumerate(groups):
        part = pa.Table.from_batches([batch]).select(names)
        path = tmp_path / f"spark-{i}.parquet"
        with open(path, "wb") as out:
            encoder = fmt.open(part.schema, out, 2**30)
            encoder.write(part.combine_chunks().to_batches()[0])
            encoder.close()
        try:
            got_types, rows = readers.read_spark(spark, [str(path)])
        except Exception as exc:  # noqa: BLE001 - recorded in the table
            errors[names[-1]] = readers.first_line(exc)
            continue
        types.update(got_types)
        for row in rows:
            by_id[row["id"]].update(row)
    return types, list(by_id.values()), errors


def _pretty_arrow(typ: pa.DataType) -> str:
    if isinstance(typ, pa.UuidType):
        return "uuid"
    if isinstance(typ, pa.JsonType):
        return "json"
    return str(typ)


def type_table(fmt: ParquetFormat, results) -> str:
    """docs/formats.md's table for ``fmt.types``: per column of the all-types schema, the type in
    the file and what each reader gives back (its type; ``≠`` where values differ from the
    documented equivalent; ``✗`` where it cannot read the column)."""
    file_schema = fmt.file_schema(ALL_TYPES)
    header = ["Arrow type", "in the file"] + list(readers.READERS)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for column in ALL_TYPES.names:
        if column == "id":
            continue
        cells = [
            f"`{_pretty_arrow(ALL_TYPES.field(column).type)}`",
            f"`{_pretty_arrow(file_schema.field(column).type)}`",
        ]
        for reader in readers.READERS:
            got = results[reader]
            errors = got[2] if isinstance(got, tuple) and len(got) == 3 else {}
            if isinstance(got, Exception) or column in errors:
                cells.append("✗ cannot open the file")
                continue
            types, rows = got[0], got[1]
            cell = f"`{types[column]}`"
            if column_differences(rows, ROWS, column, fmt.types):
                cell += " ≠"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


FORMATS_DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "formats.md")


def readme_table_check(types: str, table: str) -> None:
    """docs/formats.md's table between ``<!-- parquet-types:NAME -->`` markers must be ``table``;
    ``BEAM_S3_SINK_WRITE_DOCS=1`` writes it there instead."""
    begin, end = f"<!-- parquet-types:{types} -->\n", f"<!-- /parquet-types:{types} -->"
    with open(FORMATS_DOC, encoding="utf-8") as f:
        text = f.read()
    assert begin in text and end in text, f"docs/formats.md lacks the {begin.strip()} ... {end} markers"
    head, rest = text.split(begin, 1)
    current, tail = rest.split(end, 1)
    if os.environ.get("BEAM_S3_SINK_WRITE_DOCS"):
        with open(FORMATS_DOC, "w", encoding="utf-8") as f:
            f.write(head + begin + table + end + tail)
        return
    assert current == table, (
        f"docs/formats.md's {types!r} type table is not what the readers returned; rerun with "
        f"BEAM_S3_SINK_WRITE_DOCS=1 to rewrite it. Returned:\n{table}"
    )


def test_duckdb_reads_the_partitioned_copy_straight_from_s3(s3_endpoint, s3_config, s3_client, bucket):
    """DuckDB over httpfs (the wheel's extension file), hive partitions, against the S3 server."""
    from conftest import ACCESS_KEY, REGION, SECRET_KEY
    from pipelines import duckdb_s3

    rows = [
        {"id": i, "name": f"n{i % 3}", "amount": i / 4, "at": None, "tags": ["a"] if i % 2 else None}
        for i in range(300)
    ]
    result = run_copy(rows, uri=f"s3://{bucket}/parts", schema=SIZE_SCHEMA, s3=s3_config, partition_by=("name",))
    assert result.ok, result.error
    con = duckdb_s3.connect(s3_endpoint, ACCESS_KEY, SECRET_KEY, REGION)
    got = con.execute(
        f"SELECT name, count(*), sum(id), sum(amount) FROM read_parquet('s3://{bucket}/parts/**/*.parquet', "
        "hive_partitioning = true) GROUP BY name ORDER BY name"
    ).fetchall()
    assert got == [(f"n{k}", 100, sum(range(k, 300, 3)), sum(i / 4 for i in range(k, 300, 3))) for k in range(3)]


# -- file sizes ------------------------------------------------------------------------------
SIZE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
    ]
)


def sized_row(i: int) -> dict:
    h = (i * 2654435761) % 2**32
    return {
        "id": i,
        "name": f"customer-{h:08x}-{i % 977}",
        "amount": h / 7.0,
        "at": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=h % 10**7),
        "tags": [f"t{h % 13}", f"u{h % 101}"][: h % 3],
    }


def test_files_land_close_to_max_file_size(s3_config, s3_client, bucket):
    limit = 2**20
    result = run_copy(
        generate=(sized_row, 200_000), uri=f"s3://{bucket}/sized", schema=SIZE_SCHEMA, s3=s3_config, max_file_size=limit
    )
    assert result.ok, result.error
    assert result.rows == 200_000
    sizes = list_objects(s3_client, bucket, "sized")
    keys = data_keys(s3_client, bucket, "sized")
    assert len(keys) >= 4
    rows = 0
    for key in keys:
        meta = pq.ParquetFile(io.BytesIO(get_bytes(s3_client, bucket, key))).metadata
        groups = [
            sum(meta.row_group(i).column(c).total_compressed_size for c in range(meta.num_columns))
            for i in range(meta.num_row_groups)
        ]
        rows += meta.num_rows
        assert sizes[key] <= limit + max(groups), (key, sizes[key], groups)
        assert max(groups) <= limit // 4, (key, groups)
    assert rows == 200_000
    assert statistics.median(sizes[k] for k in keys) >= limit / 2, [sizes[k] for k in keys]


# -- options --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fmt, codec",
    [
        (ParquetFormat(), "SNAPPY"),
        (ParquetFormat(compression="zstd", compression_level=9), "ZSTD"),
        (ParquetFormat(compression="gzip", compression_level=1, version="1.0"), "GZIP"),
        (ParquetFormat(compression="none", use_dictionary=False, write_statistics=False), "UNCOMPRESSED"),
    ],
)
def test_format_options_reach_the_file(fmt, codec, s3_config, s3_client, bucket):
    rows = [{"id": i, "name": f"n{i % 3}", "amount": i / 3, "at": None, "tags": None} for i in range(50)]
    result = run_copy(rows, uri=f"s3://{bucket}/opts", schema=SIZE_SCHEMA, s3=s3_config, format=fmt)
    assert result.ok, result.error
    (key,) = data_keys(s3_client, bucket, "opts")
    meta = pq.ParquetFile(io.BytesIO(get_bytes(s3_client, bucket, key))).metadata
    chunk = meta.row_group(0).column(1)
    assert chunk.compression == codec
    assert meta.format_version == fmt.version
    assert chunk.is_stats_set == fmt.write_statistics
    assert ("RLE_DICTIONARY" in chunk.encodings or "PLAIN_DICTIONARY" in chunk.encodings) == fmt.use_dictionary
    assert duckdb.execute(
        "SELECT count(*), sum(id) FROM read_parquet(?)", [_local(s3_client, bucket, key)]
    ).fetchone() == (50, sum(range(50)))


def _local(client, bucket, key) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".parquet", delete=False) as f:
        f.write(get_bytes(client, bucket, key))
    return f.name


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(compression="snappy", compression_level=3), "takes no compression_level"),
        (dict(compression="zstd", compression_level=99), "from"),
        (dict(compression="lzo"), "is not one of"),
        (dict(version="3.0"), "version must be"),
        (dict(row_group_size=10), "at least 1024"),
    ],
)
def test_bad_options_fail_when_made(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ParquetFormat(**kwargs)


@pytest.mark.parametrize(
    "typ, message",
    [
        (pa.decimal256(40, 2), "at most 38 digits"),
        (pa.duration("s"), "Cast it to pa.int64"),
        (pa.list_(pa.struct([("d", pa.month_day_nano_interval())])), "Parquet has no such type"),
    ],
)
def test_types_no_reader_trusts_fail_at_construction(typ, message):
    schema = pa.schema([("id", pa.int64()), ("x", typ)])
    with pytest.raises(ValueError, match=message) as info:
        with beam.Pipeline() as p:
            _ = p | beam.Create([{"id": 1}]) | CopyToS3("s3://some-bucket/p", schema=schema)
    assert "'x'" in str(info.value)


# -- Beam schemas ---------------------------------------------------------------------------
def test_schema_derived_from_beam_types_with_logical_types():
    schema = resolve_schema(None, Event)
    assert [(f.name, f.type, f.nullable) for f in schema] == [
        ("id", pa.int64(), False),
        ("small", pa.int16(), False),
        ("ratio", pa.float32(), False),
        ("count", pa.uint32(), False),
        ("name", pa.string(), True),
        ("day", pa.date32(), False),
        ("at", pa.time64("us"), False),
        ("when", pa.timestamp("us"), False),
        ("instant", pa.timestamp("us", tz="UTC"), False),
        ("key", pa.uuid(), False),
        (
            "points",
            pa.list_(
                pa.field(
                    "item",
                    pa.struct([pa.field("x", pa.int64(), nullable=False), ("label", pa.string())]),
                    nullable=False,
                )
            ),
            False,
        ),
        ("tags", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)), False),
        ("payload", pa.binary(), True),
    ]


def test_decimal_without_precision_asks_for_a_schema():
    with pytest.raises(ValueError, match=r"'price'.*no precision.*pa.decimal128\(precision, scale\)"):
        resolve_schema(None, Priced)


def make_event(i: int) -> Event:
    from apache_beam.utils.timestamp import Timestamp

    return Event(
        id=i,
        small=i % 100,
        ratio=i / 4,
        count=2**32 - 1 - i,
        name=None if i % 2 else f"e{i}",
        day=dt.date(2024, 1, 1) + dt.timedelta(days=i),
        at=dt.time(1, 2, 3, i),
        when=dt.datetime(2024, 1, 1, 0, 0, 0, i),
        instant=Timestamp(micros=10**15 + i),
        key=uuid.UUID(int=i),
        points=[Point(i, None), Point(-i, "p")],
        tags={"k": i},
        payload=None,
    )


def test_copy_of_namedtuples_with_logical_types(s3_config, s3_client, bucket, tmp_path):
    events = [make_event(i) for i in range(20)]
    result = run_copy(events, uri=f"s3://{bucket}/events", s3=s3_config)
    assert result.ok, result.error
    (key,) = data_keys(s3_client, bucket, "events")
    path = tmp_path / "events.parquet"
    path.write_bytes(get_bytes(s3_client, bucket, key))
    got = sorted(pq.read_table(path).to_pylist(), key=lambda r: r["id"])
    for event, row in zip(events, got):
        # The default types: the UUID and the time of day as text, the uint32 as an int64.
        assert row["key"] == str(event.key) and row["count"] == event.count
        assert row["at"] == event.at.isoformat(timespec="microseconds")
        assert row["instant"] == event.instant.to_utc_datetime(has_tz=True)
        assert row["points"] == [p._asdict() for p in event.points]
        assert row["tags"] == list(event.tags.items()) and row["when"] == event.when
    assert duckdb.execute(f"SELECT count(*), max(count) FROM '{path}'").fetchone() == (20, 2**32 - 1)


# -- rows that do not fit -------------------------------------------------------------------
BAD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("qty", pa.int8()),
        ("price", pa.decimal128(5, 2)),
        ("note", pa.string()),
        ("doc", pa.json_()),
        ("key", pa.uuid()),
    ]
)


def good_row(i: int) -> dict:
    return {
        "id": i,
        "qty": i % 100,
        "price": D(i % 1000) / 10,
        "note": f"note {i}" * 3,
        "doc": {"i": i},
        "key": uuid.UUID(int=i),
    }


def wrong_type_late(i: int) -> dict:
    row = good_row(i)
    if i == 15_000:
        row["qty"] = "seven" + "!" * 300
    return row


@pytest.mark.parametrize(
    "bad, column, expected, shown",
    [
        pytest.param({"qty": "seven" + "!" * 300}, "qty", "int8", "'seven!!!", id="wrong-type"),
        pytest.param({"id": None}, "id", "int64", "NULL", id="null-non-nullable"),
        pytest.param({"id": "missing"}, "id", "int64", "missing", id="missing-non-nullable"),
        pytest.param({"qty": 300}, "qty", "int8", "300", id="overflowing-integer"),
        pytest.param({"id": 2**63}, "id", "int64", str(2**63), id="overflowing-int64"),
        pytest.param(
            {"price": D("12345.6")}, "price", "decimal128(5, 2)", "Decimal('12345.6')", id="decimal-beyond-precision"
        ),
        pytest.param({"price": D("1.234")}, "price", "decimal128(5, 2)", "Decimal('1.234')", id="decimal-beyond-scale"),
        pytest.param({"doc": "{not json"}, "doc", "extension<arrow.json>", "'{not json'", id="bad-json"),
        pytest.param({"key": "not-a-uuid"}, "key", "extension<arrow.uuid>", "'not-a-uuid'", id="bad-uuid"),
    ],
)
def test_bad_row_names_column_type_and_value(bad, column, expected, shown, s3_config, s3_client, bucket):
    rows = [good_row(i) for i in range(5)]
    broken = dict(good_row(5), **bad)
    if bad.get("id") == "missing":
        del broken["id"]
    rows.append(broken)
    result = run_copy(rows, uri=f"s3://{bucket}/bad", schema=BAD_SCHEMA, s3=s3_config, fail_on_error=False)
    assert not result.ok and result.rows == 0
    error = result.error
    assert f"column {column!r}" in error and expected in error and shown in error, error
    assert len(error) < 600 and "!" * 200 not in error, "the value must be shortened"
    assert data_keys(s3_client, bucket, "bad") == []
    assert not any(k.endswith("manifest.json") for k in list_objects(s3_client, bucket, "bad"))
    assert pending_uploads(s3_client, bucket) == []


def test_bad_row_after_many_good_files_makes_nothing_visible(s3_config, s3_client, bucket):
    result = run_copy(
        generate=(wrong_type_late, 20_000),
        uri=f"s3://{bucket}/late",
        schema=BAD_SCHEMA,
        s3=s3_config,
        max_file_size=64 * 1024,
        fail_on_error=False,
    )
    assert not result.ok
    assert "column 'qty' expects int8" in result.error and "'seven!!!" in result.error
    assert data_keys(s3_client, bucket, "late") == []
    assert pending_uploads(s3_client, bucket) == []


# -- the compatible profile's other conversions ------------------------------------------
def _encode(fmt: ParquetFormat, table: pa.Table, path) -> str:
    with open(path, "wb") as out:
        encoder = fmt.open(table.schema, out, 2**30)
        for batch in table.to_batches():
            encoder.write(batch)
        encoder.close()
    return str(path)


def test_view_float16_and_nanosecond_types_open_everywhere_by_default(spark, tmp_path):
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "sv": pa.array(["a", None, "é" * 20], pa.string_view()),
            "bv": pa.array([b"\x00", b"", None], pa.binary_view()),
            "lv": pa.array([[1, None], [], None], pa.large_list(pa.int32())),
            "half": pa.array([1.5, None, -0.25], pa.float16()),
            "ns": pa.array([0, 1_700_000_000_000_000_000, None], pa.timestamp("ns", tz="UTC")),
        }
    )
    path = _encode(ParquetFormat(), table, tmp_path / "compat.parquet")
    expected = {
        "sv": ["a", None, "é" * 20],
        "bv": [b"\x00", b"", None],
        "lv": [[1, None], [], None],
        "half": [1.5, None, -0.25],
        "ns": [dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), None],
    }
    for name, read in (
        ("pyarrow", readers.read_pyarrow),
        ("DuckDB", readers.read_duckdb),
        ("pandas", readers.read_pandas),
        ("Spark", lambda p: readers.read_spark(spark, p)),
    ):
        types, rows = read([path])
        rows = sorted(rows, key=lambda r: r["id"])
        for column, want in expected.items():
            got = [r[column] for r in rows]
            got = [g.astimezone(UTC) if isinstance(g, dt.datetime) else g for g in got]
            got = [list(g) if hasattr(g, "tolist") and not isinstance(g, (bytes, str)) else g for g in got]
            assert got == want, (name, column, got)
    schema = pq.read_schema(path)
    assert (schema.field("sv").type, schema.field("lv").type, schema.field("half").type) == (
        pa.string(),
        pa.list_(pa.int32()),
        pa.float32(),
    )


def test_a_nanosecond_the_compatible_types_cannot_hold_names_the_column(tmp_path):
    table = pa.table({"id": [1], "at": pa.array([1_700_000_000_000_000_001], pa.timestamp("ns"))})
    with pytest.raises(
        ValueError,
        match=r"column 'at' \(timestamp\[ns\]\) is written as timestamp\[us\]"
        r".*would lose data.*types='exact'",
    ):
        _encode(ParquetFormat(), table, tmp_path / "ns.parquet")
    path = _encode(ParquetFormat(types="exact"), table, tmp_path / "exact.parquet")
    assert pq.read_table(path).column("at").cast(pa.int64()).to_pylist() == [1_700_000_000_000_000_001]


def test_bad_types_profile_fails_when_made():
    with pytest.raises(ValueError, match="types must be one of"):
        ParquetFormat(types="spark")

"""CopyToIceberg into tables as other engines set them up: the table's write properties, schema
evolution when asked, and table metadata that a failed commit leaves nothing of (issue 34)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog

from faultproxy import FaultProxy
from helpers import get_bytes, pending_uploads
from test_iceberg import SCHEMA, make_row, run_table_copy, sqlite_catalog


def _create(catalog: dict, name: str, schema: pa.Schema, properties: dict) -> object:
    """The table as another engine makes it: pyiceberg, with table properties."""
    from beam_s3_sink.iceberg_commit import iceberg_schema

    loaded = load_catalog("default", **catalog)
    loaded.create_namespace_if_not_exists(name.split(".")[0])
    return loaded.create_table(name, schema=iceberg_schema(schema)[0], properties=properties)


def _key(uri: str, bucket: str) -> str:
    assert uri.startswith(f"s3://{bucket}/"), uri
    return uri[len(f"s3://{bucket}/") :]


def _codecs(s3_client, bucket: str, uri: str) -> set:
    meta = pq.ParquetFile(pa.BufferReader(get_bytes(s3_client, bucket, _key(uri, bucket)))).metadata
    return {
        meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)
    }


def wide_row(i: int) -> dict:
    return dict(make_row(i), name=f"name {i} " + "x" * (i % 50))


# part 4: the table's own write settings --------------------------------------------------------


def test_the_tables_write_properties_are_followed(tmp_path, s3_config, s3_client, bucket):
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    properties = {
        "write.data.path": f"s3://{bucket}/elsewhere/files",
        "write.parquet.compression-codec": "gzip",
        "write.parquet.compression-level": "7",
        "write.target-file-size-bytes": str(64 * 1024),
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.name": "truncate(4)",
        "write.metadata.metrics.column.amount": "full",
        "write.metadata.metrics.column.id": "none",
    }
    _create(catalog, "props.orders", SCHEMA, properties)
    rows = [wide_row(i) for i in range(20_000)]
    result = run_table_copy(rows, tmp_path, table="props.orders", catalog=catalog, schema=SCHEMA, sink_id="one")
    assert result.ok, result.error
    assert len(result.files) >= 3, "files of about 64 KiB"
    for f in result.files:
        assert f.uri.startswith(f"s3://{bucket}/elsewhere/files/one-"), f.uri
        assert f.bytes <= 64 * 1024 * 1.25, (f.uri, f.bytes)
        assert _codecs(s3_client, bucket, f.uri) == {"GZIP"}
    table = load_catalog("default", **catalog).load_table("props.orders")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == rows
    ids = {f.name: f.field_id for f in table.schema().fields}
    for entry in table.inspect.files().to_pylist():
        assert entry["file_path"].startswith(f"s3://{bucket}/elsewhere/files/")
        counts = dict(entry["value_counts"])
        nulls = dict(entry["null_value_counts"])
        lower, upper = dict(entry["lower_bounds"]), dict(entry["upper_bounds"])
        assert ids["id"] not in counts and ids["id"] not in nulls and ids["id"] not in lower, "id: none"
        assert counts[ids["at"]] == entry["record_count"] and ids["at"] not in lower, "the default: counts"
        assert len(lower[ids["name"]]) <= 4 and len(upper[ids["name"]]) <= 4, "name: truncate(4)"
        assert lower[ids["amount"]] and upper[ids["amount"]], "amount: full"
    # Stats are used for pruning: the row filter on amount skips files.
    assert table.scan(row_filter="amount < 1").to_arrow().num_rows == 4

    # The user's max_file_size wins over the table's target size.
    again = run_table_copy(
        rows[:5000], tmp_path, table="props.orders", catalog=catalog, schema=SCHEMA, sink_id="two", max_file_size="8MB"
    )
    assert again.ok and len(again.files) == 1 and again.files[0].bytes > 64 * 1024, again
    assert pending_uploads(s3_client, bucket) == []


def test_a_table_without_properties_gets_icebergs_defaults(tmp_path, s3_config, s3_client, bucket):
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    result = run_table_copy(
        [make_row(i) for i in range(100)], tmp_path, table="props.plain", catalog=catalog, schema=SCHEMA, sink_id="a"
    )
    assert result.ok, result.error
    table = load_catalog("default", **catalog).load_table("props.plain")
    (only,) = result.files
    assert only.uri.startswith(table.location().rstrip("/") + "/data/a-")
    assert _codecs(s3_client, bucket, only.uri) == {"ZSTD"}, "Iceberg's default codec"


def test_a_property_the_copy_cannot_follow_fails_before_any_upload(tmp_path, s3_config, s3_client, bucket):
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    _create(catalog, "props.lzo", SCHEMA, {"write.parquet.compression-codec": "lzo"})
    result = run_table_copy(
        [make_row(1)], tmp_path, table="props.lzo", catalog=catalog, schema=SCHEMA, sink_id="a", fail_on_error=False
    )
    assert not result.ok and "write.parquet.compression-codec='lzo'" in result.error, result.error
    assert pending_uploads(s3_client, bucket) == []
    assert load_catalog("default", **catalog).load_table("props.lzo").current_snapshot() is None


# part 7: a failed commit leaves nothing pending, metadata included ----------------------------


def _pending_under(s3_client, bucket: str, prefix: str) -> list:
    page = s3_client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return [u["Key"] for u in page.get("Uploads", ())]


def _metadata_writes(operation: str, path: str):
    """Every write of table metadata (a PutObject, or a multipart upload's completion) fails."""
    if "/metadata/" in path and operation in ("PutObject", "CompleteMultipartUpload"):
        return (403, "AccessDenied")
    return None


@pytest.mark.parametrize("file_io", ["default", "pyarrow"])
def test_a_commit_whose_metadata_cannot_be_written_leaves_nothing_pending(
    file_io, tmp_path, s3_endpoint, s3_config, s3_client, bucket
):
    """The package's FileIO writes each metadata object with one PutObject: a commit that
    cannot write its metadata leaves the table unchanged and no upload pending. (pyiceberg's
    PyArrowFileIO, for comparison, leaves its manifest's multipart upload behind.)"""
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    if file_io == "pyarrow":
        catalog["py-io-impl"] = "pyiceberg.io.pyarrow.PyArrowFileIO"
    kwargs = dict(table="meta.orders", schema=SCHEMA)
    assert run_table_copy([make_row(i) for i in range(10)], tmp_path, catalog=catalog, sink_id="base", **kwargs).ok
    table = load_catalog("default", **catalog).load_table("meta.orders")
    before, prefix = table.current_snapshot().snapshot_id, _key(table.location(), bucket)
    with FaultProxy(s3_endpoint, rate=0, refuse_when=_metadata_writes) as proxy:
        faulty = dict(catalog, **{"s3.endpoint": proxy.url})
        rows = [make_row(i) for i in range(100, 300)]
        result = run_table_copy(rows, tmp_path, catalog=faulty, sink_id="next", fail_on_error=False, **kwargs)
    assert not result.ok and "/metadata/" in result.error, result.error
    assert proxy.requests["CompleteMultipartUpload"] >= 1, "the data files were completed first"
    assert s3_config.secret_access_key not in result.error
    table = load_catalog("default", **catalog).load_table("meta.orders")
    assert table.current_snapshot().snapshot_id == before and table.scan().to_arrow().num_rows == 10
    if file_io == "pyarrow":
        assert proxy.refused["CompleteMultipartUpload"] >= 1
        assert [k for k in _pending_under(s3_client, bucket, prefix) if "/metadata/" in k], "pyarrow leaves one"
        return
    assert "PutObject" in result.error and "/metadata/" in result.error and "AccessDenied" in result.error
    assert proxy.refused["PutObject"] >= 1 and proxy.refused["CompleteMultipartUpload"] == 0
    assert _pending_under(s3_client, bucket, prefix) == [] and pending_uploads(s3_client, bucket) == []
    rerun = run_table_copy(rows, tmp_path, catalog=catalog, sink_id="next", **kwargs)
    assert rerun.ok and load_catalog("default", **catalog).load_table("meta.orders").scan().to_arrow().num_rows == 210


def test_transient_faults_on_data_and_metadata_are_ridden_through(tmp_path, s3_endpoint, s3_config, s3_client, bucket):
    """Random faults on every request, and each metadata object's first PutObject refused
    with a 503: botocore retries them, and every copy commits exactly once."""
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    rows = [make_row(i) for i in range(3000)]
    first_puts: set = set()

    def slow_down_once(operation: str, path: str):
        if operation == "PutObject" and "/metadata/" in path and path not in first_puts:
            first_puts.add(path)
            return (503, "SlowDown")
        return None

    with FaultProxy(s3_endpoint, seed=3, rate=1 / 8, max_faults=40, refuse_when=slow_down_once) as proxy:
        faulty = dict(catalog, **{"s3.endpoint": proxy.url})
        kwargs = dict(table="meta.faults", catalog=faulty, schema=SCHEMA, partition_by=["day"])
        first = run_table_copy(rows, tmp_path, sink_id="one", max_file_size="16KB", **kwargs)
        second = run_table_copy(rows[:500], tmp_path, sink_id="two", **kwargs)
    assert first.ok and second.ok, (first.error, second.error)
    assert proxy.refused["PutObject"] >= 6 and proxy.fault_count >= 3, (proxy.refused, proxy.faults)
    table = load_catalog("default", **catalog).load_table("meta.faults")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(list(range(3000)) + list(range(500)))
    assert len(table.snapshots()) == 2 and pending_uploads(s3_client, bucket) == []


# part 5: schema evolution, asked for ----------------------------------------------------------

WITH_NOTE = SCHEMA.append(pa.field("note", pa.string()))


def _objects(s3_client, bucket: str, prefix: str) -> list:
    return [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", ())]


def test_a_new_column_is_added_in_the_copys_own_commit_when_asked(tmp_path, s3_config, s3_client, bucket):
    from iceberg_catalogs import read_duckdb

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    kwargs = dict(table="evolve.orders", catalog=catalog)
    old = [make_row(i) for i in range(50)]
    assert run_table_copy(old, tmp_path, schema=SCHEMA, sink_id="base", **kwargs).ok
    table = load_catalog("default", **catalog).load_table("evolve.orders")
    prefix, last_id = _key(table.location(), bucket), table.metadata.last_column_id
    before = _objects(s3_client, bucket, prefix)
    new = [dict(make_row(i), note=None if i % 3 == 0 else f"note {i}") for i in range(100, 160)]

    refused = run_table_copy(new, tmp_path, schema=WITH_NOTE, sink_id="next", fail_on_error=False, **kwargs)
    assert not refused.ok and "column 'note' (string) of the copy is not in the table" in refused.error
    assert "schema_evolution='add_columns'" in refused.error
    assert _objects(s3_client, bucket, prefix) == before and pending_uploads(s3_client, bucket) == []

    result = run_table_copy(new, tmp_path, schema=WITH_NOTE, sink_id="next", schema_evolution="add_columns", **kwargs)
    assert result.ok, result.error
    table = load_catalog("default", **catalog).load_table("evolve.orders")
    assert len(table.snapshots()) == 2, "one new snapshot: the columns came with the rows"
    assert table.schema().schema_id == 1 and table.current_snapshot().schema_id == 1
    note = table.schema().find_field("note")
    assert note.field_id == last_id + 1 and not note.required and str(note.field_type) == "string"
    for f in result.files:
        footer = pq.ParquetFile(pa.BufferReader(get_bytes(s3_client, bucket, _key(f.uri, bucket)))).schema_arrow
        assert footer.field("note").metadata[b"PARQUET:field_id"] == str(note.field_id).encode()
    want = sorted([dict(r, note=None) for r in old] + new, key=lambda r: r["id"])
    assert table.scan().to_arrow().sort_by("id").to_pylist() == want
    duck = read_duckdb(catalog, "evolve.orders").sort_by("id")
    assert duck.column("note").to_pylist() == [r["note"] for r in want]
    again = run_table_copy(new, tmp_path, schema=WITH_NOTE, sink_id="next", schema_evolution="add_columns", **kwargs)
    assert again.snapshot_id == result.snapshot_id, "a rerun commits nothing"
    more = [dict(make_row(i), note="more") for i in range(200, 210)]
    assert run_table_copy(more, tmp_path, schema=WITH_NOTE, sink_id="more", **kwargs).ok, "the table takes it now"
    assert load_catalog("default", **catalog).load_table("evolve.orders").schema().schema_id == 1


def test_a_widening_is_applied_when_asked(tmp_path, s3_config, s3_client, bucket):
    from iceberg_catalogs import read_duckdb

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    kwargs = dict(table="evolve.counts", catalog=catalog)
    narrow = pa.schema([pa.field("id", pa.int32(), nullable=False), ("n", pa.int32()), ("x", pa.float32())])
    wide = pa.schema([pa.field("id", pa.int32(), nullable=False), ("n", pa.int64()), ("x", pa.float64())])
    old = [{"id": i, "n": i, "x": i / 2} for i in range(10)]
    new = [{"id": i, "n": 2**40 + i, "x": 1e300} for i in range(10, 15)]
    assert run_table_copy(old, tmp_path, schema=narrow, sink_id="base", **kwargs).ok
    refused = run_table_copy(new, tmp_path, schema=wide, sink_id="wide", fail_on_error=False, **kwargs)
    assert not refused.ok and "column 'n' is int in the table, long" in refused.error, refused.error
    assert "column 'x' is float in the table, double" in refused.error and pending_uploads(s3_client, bucket) == []
    result = run_table_copy(new, tmp_path, schema=wide, sink_id="wide", schema_evolution="add_columns", **kwargs)
    assert result.ok, result.error
    table = load_catalog("default", **catalog).load_table("evolve.counts")
    assert [str(f.field_type) for f in table.schema().fields] == ["int", "long", "double"]
    assert len(table.snapshots()) == 2
    assert table.scan().to_arrow().sort_by("id").to_pylist() == old + new
    assert read_duckdb(catalog, "evolve.counts").sort_by("id").column("n").to_pylist() == [r["n"] for r in old + new]


# string_view and large_string columns into a table ----------------------------------------------


def test_view_and_large_strings_land_as_the_tables_strings(tmp_path, s3_config, s3_client, bucket):
    """Iceberg has one string type: a copy of string_view (tpchgen's Parquet, Polars) and
    large_string columns is written as the table's strings, with the table's field ids; every
    reader reads them back, and schema evolution takes them too."""
    from iceberg_catalogs import read_duckdb

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string_view()), ("l", pa.large_string()), ("b", pa.binary_view())])
    batch = pa.record_batch(
        [
            pa.array(range(1000), pa.int64()),
            pa.array([f"view {i}" for i in range(1000)], pa.string_view()),
            pa.array([None if i % 9 == 0 else f"large {i}" for i in range(1000)], pa.large_string()),
            pa.array([bytes([i % 256]) for i in range(1000)], pa.binary_view()),
        ],
        schema=schema,
    )
    result = run_table_copy([batch], tmp_path, table="views.t", catalog=catalog, schema=schema, sink_id="a")
    assert result.ok, result.error
    (f,) = result.files
    footer = pq.ParquetFile(pa.BufferReader(get_bytes(s3_client, bucket, _key(f.uri, bucket)))).schema_arrow
    assert footer.field("v").type == pa.string() and footer.field("v").metadata[b"PARQUET:field_id"] == b"2"
    assert footer.field("b").type == pa.binary(), "stored as the table's plain types"
    table = load_catalog("default", **catalog).load_table("views.t")
    assert [str(c.field_type) for c in table.schema().fields] == ["long", "string", "string", "binary"]
    want = batch.to_pylist()
    assert table.scan().to_arrow().sort_by("id").to_pylist() == want
    duck = read_duckdb(catalog, "views.t").sort_by("id")
    assert duck.column("v").to_pylist() == [r["v"] for r in want] and duck.column("l").to_pylist() == [
        r["l"] for r in want
    ]
    grown = schema.append(pa.field("note", pa.string_view()))
    more = batch.append_column("note", pa.array(["n"] * 1000, pa.string_view()))
    evolved = run_table_copy(
        [more], tmp_path, table="views.t", catalog=catalog, schema=grown, sink_id="b", schema_evolution="add_columns"
    )
    assert evolved.ok, evolved.error
    assert load_catalog("default", **catalog).load_table("views.t").scan().to_arrow().num_rows == 2000

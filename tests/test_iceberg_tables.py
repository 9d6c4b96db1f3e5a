"""CopyToIceberg into tables as other engines set them up: the table's write properties, schema
evolution when asked, and table metadata that a failed commit leaves nothing of (issue 34)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import load_catalog

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

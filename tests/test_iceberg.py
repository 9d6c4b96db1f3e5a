"""CopyToIceberg: one snapshot per copy, all or nothing, on real catalogs, read back by real readers."""

from __future__ import annotations

import datetime
import decimal

import apache_beam as beam
import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToIceberg
from helpers import _write_pickle, pending_uploads

UTC = datetime.timezone.utc
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("tags", pa.list_(pa.string())),
    ]
)


def make_row(i: int) -> dict:
    return {
        "id": i,
        "name": None if i % 7 == 0 else f"name {i}",
        "amount": decimal.Decimal(i) / 4,
        "at": datetime.datetime(2026, 1, 1, tzinfo=UTC) + datetime.timedelta(minutes=i),
        "day": datetime.date(2026, 1, 1 + i % 3),
        "tags": [f"t{i % 2}"],
    }


def sqlite_catalog(tmp_path, s3_config, bucket) -> dict:
    return {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"s3://{bucket}/warehouse",
        "s3.endpoint": s3_config.endpoint_url,
        "s3.access-key-id": s3_config.access_key_id,
        "s3.secret-access-key": s3_config.secret_access_key,
        "s3.region": s3_config.region_name,
        "s3.path-style-access": "true",
    }


def run_table_copy(rows, tmp_path, **kwargs):
    import pickle

    out = tmp_path / f"result-{kwargs.get('sink_id', 'x')}.pickle"
    out.write_bytes(b"")
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        result = p | beam.Create(rows) | CopyToIceberg(**kwargs)
        result | beam.Map(_write_pickle, str(out))
    with open(out, "rb") as f:
        return pickle.load(f)


def test_append_twice_then_rerun_then_overwrite(tmp_path, s3_config, s3_client, bucket):
    from pyiceberg.catalog import load_catalog

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    rows = [make_row(i) for i in range(500)]
    first = run_table_copy(rows, tmp_path, table="sales.orders", catalog=catalog, schema=SCHEMA, sink_id="one")
    assert first.ok and first.rows == 500 and first.snapshot_id is not None, first.error
    second = run_table_copy(rows[:100], tmp_path, table="sales.orders", catalog=catalog, schema=SCHEMA, sink_id="two")
    assert second.ok and second.rows == 100
    table = load_catalog("default", **catalog).load_table("sales.orders")
    read = table.scan().to_arrow()
    assert read.num_rows == 600
    assert sorted(read.column("id").to_pylist()) == sorted(list(range(500)) + list(range(100)))
    again = run_table_copy(rows, tmp_path, table="sales.orders", catalog=catalog, schema=SCHEMA, sink_id="one")
    assert again.snapshot_id == first.snapshot_id and again.rows == 500
    assert len(load_catalog("default", **catalog).load_table("sales.orders").snapshots()) == 2
    over = run_table_copy(
        rows[:10], tmp_path, table="sales.orders", catalog=catalog, schema=SCHEMA, sink_id="three", mode="overwrite"
    )
    assert over.ok
    table = load_catalog("default", **catalog).load_table("sales.orders")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(10))
    assert table.current_snapshot().summary["beam-s3-sink.sink-id"] == "three"
    assert pending_uploads(s3_client, bucket) == []

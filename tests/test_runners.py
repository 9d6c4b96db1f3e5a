"""The end-to-end contract of CopyToS3 on every runner of the matrix (tests/conftest.py):
in-process (FnApiRunner, its multi-process mode, the embedded portable runner) and on real
job servers of the session (Flink LOOPBACK and with an EXTERNAL pool of two worker processes,
Spark ``local[2]``, Prism), against a real S3 server.

One pipeline per check (three for the rerun and replace), small data: every copy is read
back with pyarrow or Python's csv module and compared value for value; every test ends with
no pending multipart upload. The single ``CopyToResult`` comes back through a local pickle
file (tests/helpers.py::run_copy), written by whichever worker runs the last step, which
fails the pipeline if a second result ever arrives.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import pickle
import subprocess
import sys
from typing import Any, Dict, List

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToS3, CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from helpers import (
    _write_pickle,
    batch_numbers,
    data_keys,
    get_bytes,
    list_objects,
    pending_uploads,
    read_manifest,
    read_parquet,
    run_copy,
)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("paid", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("region", pa.string()),
    ]
)
REGIONS = ["north", "south", "east west"]
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def make_row(i: int) -> Dict[str, Any]:
    return {
        "id": i,
        "name": None if i % 11 == 0 else f'name {i}, "quoted"\nünïcode ☃' if i % 7 == 0 else f"n{i}",
        "amount": None if i % 13 == 0 else i * 0.25,
        "paid": None if i % 17 == 0 else i % 2 == 0,
        "at": EPOCH + datetime.timedelta(seconds=i, microseconds=i % 1000),
        "region": REGIONS[i % len(REGIONS)],
    }


def by_id(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def read_csv(data: bytes) -> List[Dict[str, Any]]:
    """PostgreSQL COPY CSV with a header, parsed back into the rows' Python values."""
    lines = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    assert lines[0] == SCHEMA.names
    return [
        {
            "id": int(id_),
            "name": name if name != "" else None,
            "amount": float(amount) if amount else None,
            "paid": {"t": True, "f": False, "": None}[paid],
            "at": datetime.datetime.fromisoformat(at.replace("+00", "+00:00")),
            "region": region,
        }
        for id_, name, amount, paid, at, region in lines[1:]
    ]


def check_committed(client, bucket: str, prefix: str, result) -> List[str]:
    """A finished copy: no sentinel, a manifest listing exactly the data files, no pending
    upload. Returns the data files' keys."""
    assert result.ok, result.error
    keys = CopyKeys(S3Location(bucket, prefix), result.sink_id)
    objects = list_objects(client, bucket, prefix)
    assert keys.sentinel not in objects
    files = data_keys(client, bucket, prefix)
    assert sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in files]
    manifest = read_manifest(client, bucket, keys.manifest)
    assert sorted(e["url"] for e in manifest["entries"]) == [f"s3://{bucket}/{k}" for k in files]
    assert manifest["rows"] == result.rows == sum(f.rows for f in result.files)
    assert pending_uploads(client, bucket) == []
    return files


def test_parquet_copy_reads_back_exactly(runner, s3_config, s3_client, bucket):
    n = 12_000  # three generated shards, spread over the workers
    counters: Dict[str, int] = {}
    result = run_copy(
        args=runner,
        generate=(make_row, n),
        counters=counters,
        uri=f"s3://{bucket}/pq",
        format="parquet",
        schema=SCHEMA,
        s3=s3_config,
        max_file_size="96KiB",
    )
    files = check_committed(s3_client, bucket, "pq", result)
    assert len(files) >= 2
    tables = [read_parquet(s3_client, bucket, key) for key in files]
    assert all(t.schema.equals(SCHEMA) for t in tables)
    assert [t.num_rows for t in tables] == [f.rows for f in sorted(result.files, key=lambda f: f.uri)]
    assert by_id(pa.concat_tables(tables).to_pylist()) == [make_row(i) for i in range(n)]
    assert counters.get("rows") == n and counters.get("files") == len(files)


def test_csv_copy_reads_back_exactly(runner, s3_config, s3_client, bucket):
    rows = [make_row(i) for i in range(3000)]
    result = run_copy(
        rows, runner, uri=f"s3://{bucket}/csv", format=CsvFormat(header=True), schema=SCHEMA, s3=s3_config
    )
    files = check_committed(s3_client, bucket, "csv", result)
    assert result.rows == len(rows) and files and all(k.endswith(".csv") for k in files)
    got = [row for key in files for row in read_csv(get_bytes(s3_client, bucket, key))]
    assert by_id(got) == rows


def test_num_batches_and_partition_by(runner, s3_config, s3_client, bucket):
    n = 3000
    result = run_copy(
        args=runner,
        generate=(make_row, n),
        uri=f"s3://{bucket}/parts",
        schema=SCHEMA,
        s3=s3_config,
        num_batches=3,
        partition_by=["region"],
        keep_partition_columns=True,
        sink_id="parts",
    )
    files = check_committed(s3_client, bucket, "parts", result)
    got, batches = [], set()
    for key in files:
        directory, name = key.split("/")[1:]
        rows = read_parquet(s3_client, bucket, key).to_pylist()
        batch = int(name.split("-batch-", 1)[1][:4])
        assert name.startswith("parts-batch-") and 0 <= batch < 3, key
        assert {f"region={r['region']}" for r in rows} == {directory}, key
        assert set(batch_numbers(rows, SCHEMA, 3)) == {batch}, key
        batches.add(batch)
        got.extend(rows)
    assert batches == {0, 1, 2}
    assert by_id(got) == [make_row(i) for i in range(n)]


def test_rerun_changes_nothing_and_replace_swaps_the_data(runner, s3_config, s3_client, bucket):
    def listing() -> Dict[str, Any]:
        pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="r/")
        return {o["Key"]: (o["ETag"], o["LastModified"]) for page in pages for o in page.get("Contents", ())}

    first_rows = [make_row(i) for i in range(500)]
    first = run_copy(first_rows, runner, uri=f"s3://{bucket}/r", schema=SCHEMA, s3=s3_config, sink_id="nightly")
    check_committed(s3_client, bucket, "r", first)
    before = listing()
    again = run_copy(first_rows, runner, uri=f"s3://{bucket}/r", schema=SCHEMA, s3=s3_config, sink_id="nightly")
    assert again == first
    assert listing() == before, "a rerun of a finished copy writes nothing"

    new_rows = [make_row(i) for i in range(1000, 1700)]
    fresh = run_copy(
        new_rows, runner, uri=f"s3://{bucket}/r", schema=SCHEMA, s3=s3_config, sink_id="fresh", if_exists="replace"
    )
    files = check_committed(s3_client, bucket, "r", fresh)
    assert all(k.startswith("r/fresh-") or k.startswith("r/_fresh-") for k in listing())
    got = [row for key in files for row in read_parquet(s3_client, bucket, key).to_pylist()]
    assert by_id(got) == new_rows


def test_empty_input_writes_one_schema_only_file(runner, s3_config, s3_client, bucket):
    result = run_copy([], runner, uri=f"s3://{bucket}/empty", schema=SCHEMA, s3=s3_config)
    files = check_committed(s3_client, bucket, "empty", result)
    assert result.rows == 0 and len(files) == 1
    table = read_parquet(s3_client, bucket, files[0])
    assert table.num_rows == 0 and table.schema.equals(SCHEMA)


def test_bad_row_fails_the_copy_with_nothing_visible(runner, s3_config, s3_client, bucket):
    rows = [make_row(i) for i in range(300)] + [dict(make_row(300), amount="12.5 EUR")]
    with pytest.raises(Exception, match="amount") as info:
        run_copy(rows, runner, uri=f"s3://{bucket}/bad", schema=SCHEMA, s3=s3_config, sink_id="bad")
    assert "12.5 EUR" in str(info.value)
    assert data_keys(s3_client, bucket, "bad") == []
    assert list_objects(s3_client, bucket) == {"bad/_bad-INCOMPLETE": 0}
    assert pending_uploads(s3_client, bucket) == []


def test_errors_input_aborts_the_copy(runner, s3_config, s3_client, bucket, tmp_path):
    out = tmp_path / "result.pickle"
    out.write_bytes(b"")
    with beam.Pipeline(options=PipelineOptions(runner)) as p:
        rows = p | "Rows" >> beam.Create([make_row(i) for i in range(200)])
        errors = p | "Errors" >> beam.Create(["validation failed: order 17 has no customer"])
        result = rows | CopyToS3(f"s3://{bucket}/p", schema=SCHEMA, s3=s3_config, errors=errors, fail_on_error=False)
        result | "Keep" >> beam.Map(_write_pickle, str(out))
    result = pickle.loads(out.read_bytes())
    assert not result.ok and result.rows == 0
    assert "validation failed: order 17 has no customer" in result.error
    assert list_objects(s3_client, bucket) == {}
    assert pending_uploads(s3_client, bucket) == []


def test_cli_copies_generated_rows(runner, s3_endpoint, s3_client, bucket):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "beam_s3_sink.cli",
            "--source",
            "generate:5000",
            "--output",
            f"s3://{bucket}/cli",
            "--sink_id",
            "cli",
            *runner,
            "--s3_endpoint_url",
            s3_endpoint,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    manifest = read_manifest(s3_client, bucket, "cli/_cli-manifest.json")
    files = data_keys(s3_client, bucket, "cli")
    assert manifest["rows"] == 5000 and len(files) == manifest["files"]
    ids = sorted(i for key in files for i in read_parquet(s3_client, bucket, key).column("order_id").to_pylist())
    assert len(ids) == len(set(ids)) == 5000
    assert pending_uploads(s3_client, bucket) == []

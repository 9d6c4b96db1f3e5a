"""Output layout options end to end against a real S3 server: JSON Lines, if_exists,
num_batches and partition_by, each read back by DuckDB, pyarrow or Polars."""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import os
import threading

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import GlobalWindows

from beam_s3_sink import CopyToS3, JsonlFormat
from beam_s3_sink.layout import Layout, escape_path_name
from conftest import LOCAL_RUNNERS, SERVERS
from helpers import data_keys, get_bytes, list_objects, pending_uploads, read_manifest, run_copy

S3_SERVERS = SERVERS  # moto and SeaweedFS: see conftest.pytest_generate_tests

UTC = datetime.timezone.utc
JSON_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("paid", pa.bool_()),
        ("price", pa.decimal128(20, 6)),
        ("day", pa.date32()),
        ("created", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
    ]
)


def json_row(i: int) -> dict:
    return {
        "id": i,
        "name": None if i % 7 == 0 else f'név "{i}"\n\\ ünïcode ☃',
        "amount": None if i % 5 == 0 else i * 0.1,
        "paid": i % 2 == 0,
        "price": decimal.Decimal(f"{i % 1000}12345678901.123456") if i % 3 else None,
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
        "created": datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=i, microseconds=i),
        "tags": [f"t{i}", "x,y"] if i % 4 else [],
    }


def download(client, bucket: str, prefix: str, into: str) -> list:
    """Download every data file under ``prefix`` into ``into``, keeping the key's layout."""
    paths = []
    for key in data_keys(client, bucket, prefix):
        path = os.path.join(into, key[len(prefix) :].lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(get_bytes(client, bucket, key))
        paths.append(path)
    return paths


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_jsonl_reads_back_with_duckdb_and_polars(s3_config, s3_client, bucket, tmp_path, compression):
    n = 300
    result = run_copy(
        generate=(json_row, n),
        uri=f"s3://{bucket}/j",
        format=JsonlFormat(compression=compression),
        schema=JSON_SCHEMA,
        s3=s3_config,
        max_file_size=2048,
    )
    assert result.ok and result.rows == n and len(result.files) > 1
    ext = JsonlFormat(compression=compression).extension
    assert all(f.uri.endswith("." + ext) for f in result.files)
    paths = download(s3_client, bucket, "j", str(tmp_path))
    expected = pa.Table.from_pylist([json_row(i) for i in range(n)], schema=JSON_SCHEMA)

    columns = (
        "{'id': 'BIGINT', 'name': 'VARCHAR', 'amount': 'DOUBLE', 'paid': 'BOOLEAN', "
        "'price': 'DECIMAL(20,6)', 'day': 'DATE', 'created': 'TIMESTAMPTZ', 'tags': 'VARCHAR[]'}"
    )
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    got = con.sql(
        f"SELECT * FROM read_json({paths!r}, format='newline_delimited', columns={columns}) ORDER BY id"
    ).to_arrow_table()
    # DuckDB 1.5 (the release whose httpfs extension is on PyPI, see setup.py) parses JSON
    # numbers as doubles first, so decimals come back to the nearest double, as in Polars.
    as_double = [{**r, "price": None if r["price"] is None else float(r["price"])} for r in expected.to_pylist()]
    got_rows = [
        {**r, "price": None if r["price"] is None else float(r["price"])} for r in got.cast(JSON_SCHEMA).to_pylist()
    ]
    assert got_rows == as_double

    # Polars parses every JSON number as a double first too; its dates and timestamps come back exact.
    overrides = {"price": pl.Float64, "day": pl.Date, "created": pl.Datetime("us", "UTC")}
    frames = [
        pl.read_ndjson(io.BytesIO(_decompress(open(p, "rb").read(), compression)), schema_overrides=overrides)
        for p in paths
    ]
    frame = pl.concat(frames).sort("id")
    as_double = [{**r, "price": None if r["price"] is None else float(r["price"])} for r in expected.to_pylist()]
    got = frame.to_arrow()
    assert (
        got.cast(got.schema.set(4, pa.field("price", pa.float64())))
        .cast(JSON_SCHEMA.set(4, pa.field("price", pa.float64())))
        .to_pylist()
        == as_double
    )


def _decompress(data: bytes, compression):
    if compression == "gzip":
        return gzip.decompress(data)
    if compression == "zstd":
        return pa.input_stream(pa.BufferReader(data), compression="zstd").read()
    return data


def test_jsonl_value_rules(s3_config, s3_client, bucket):
    schema = pa.schema(
        [
            ("x", pa.float64()),
            ("b", pa.binary()),
            ("t", pa.timestamp("us")),
            ("s", pa.struct([("a", pa.int32())])),
            ("m", pa.map_(pa.string(), pa.int64())),
        ]
    )
    rows = [
        {
            "x": float("nan"),
            "b": b"\x00\xff",
            "t": datetime.datetime(2024, 1, 2, 3, 4, 5),
            "s": {"a": 1},
            "m": [("k", 2)],
        },
        {"x": float("-inf"), "b": None, "t": None, "s": None, "m": None},
    ]
    result = run_copy(rows, uri=f"s3://{bucket}/v", format="jsonl", schema=schema, s3=s3_config)
    (key,) = data_keys(s3_client, bucket, "v")
    lines = sorted(get_bytes(s3_client, bucket, key).decode().splitlines())
    assert result.ok and lines == sorted(
        [
            '{"x":"NaN","b":"AP8=","t":"2024-01-02T03:04:05","s":{"a":1},"m":{"k":2}}',
            '{"x":"-Infinity","b":null,"t":null,"s":null,"m":null}',
        ]
    )


# if_exists ---------------------------------------------------------------------------------
CSV_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def csv_row(i: int) -> dict:
    return {"id": i, "name": f"name-{i}"}


def put_old_objects(client, bucket: str, prefix: str) -> dict:
    old = {f"{prefix}/old-{i:03d}.csv": f"{i},old\n".encode() for i in range(40)}
    old[f"{prefix}/day=2024-01-01/part-0.parquet"] = b"not really parquet"
    old[f"{prefix}/_other-manifest.json"] = b"{}"
    for key, body in old.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return {k: len(v) for k, v in old.items()}


def test_if_exists_append_leaves_foreign_objects(s3_config, s3_client, bucket):
    old = put_old_objects(s3_client, bucket, "a")
    result = run_copy(
        [csv_row(i) for i in range(10)],
        uri=f"s3://{bucket}/a",
        format="csv",
        schema=CSV_SCHEMA,
        s3=s3_config,
        if_exists="append",
        sink_id="nightly",
    )
    listing = list_objects(s3_client, bucket, "a/")
    assert result.ok and result.rows == 10
    assert {k: listing[k] for k in old} == old
    assert set(listing) - set(old) == {f.uri.split("/", 3)[3] for f in result.files} | {"a/_nightly-manifest.json"}


def test_if_exists_error_is_the_default_and_names_the_option(s3_config, s3_client, bucket):
    old = put_old_objects(s3_client, bucket, "e")
    result = run_copy(
        [csv_row(1)], uri=f"s3://{bucket}/e", format="csv", schema=CSV_SCHEMA, s3=s3_config, fail_on_error=False
    )
    assert not result.ok and "if_exists='append' or 'replace'" in result.error
    assert list_objects(s3_client, bucket, "e/") == old


def test_if_exists_replace_readers_never_see_a_partial_path(s3_config, s3_client, bucket):
    old = put_old_objects(s3_client, bucket, "r")
    listings: list = []
    stop = threading.Event()

    def lister() -> None:
        client = s3_config.make_client()
        while not stop.is_set():
            listings.append(list_objects(client, bucket, "r/"))

    thread = threading.Thread(target=lister)
    thread.start()
    try:
        result = run_copy(
            generate=(csv_row, 20000),
            uri=f"s3://{bucket}/r",
            format="csv",
            schema=CSV_SCHEMA,
            s3=s3_config,
            if_exists="replace",
            sink_id="nightly",
            max_file_size=16384,
        )
    finally:
        stop.set()
        thread.join()
    listings.append(list_objects(s3_client, bucket, "r/"))
    assert result.ok and result.rows == 20000 and len(result.files) > 10
    new = {f.uri.split("/", 3)[3]: f.bytes for f in result.files}
    manifest = "r/_nightly-manifest.json"
    assert listings[-1].keys() == new.keys() | {manifest}
    assert {u["url"] for u in read_manifest(s3_client, bucket, manifest)["entries"]} == {f.uri for f in result.files}
    saw_old_during_copy = 0
    for listing in listings:
        has_all_old = all(listing.get(k) == size for k, size in old.items())
        has_all_new = all(listing.get(k) == size for k, size in new.items()) and manifest in listing
        assert has_all_old or has_all_new, f"a reader saw a partial path: {sorted(listing)[:10]}"
        if manifest in listing:
            assert has_all_new  # the manifest always names a complete copy
        # a data file of the new copy is only ever seen whole
        assert all(listing[k] == new[k] for k in listing if k in new)
        saw_old_during_copy += has_all_old and "r/_nightly-INCOMPLETE" in listing
    assert saw_old_during_copy, "the reader never listed the path while the copy ran"


def test_if_exists_replace_keeps_old_objects_when_the_copy_fails(s3_config, s3_client, bucket):
    old = put_old_objects(s3_client, bucket, "f")
    result = run_copy(
        [csv_row(1), {"id": "not a number", "name": "x"}],
        uri=f"s3://{bucket}/f",
        format="csv",
        schema=CSV_SCHEMA,
        s3=s3_config,
        if_exists="replace",
        sink_id="nightly",
        fail_on_error=False,
    )
    listing = list_objects(s3_client, bucket, "f/")
    assert not result.ok and "'id'" in result.error
    assert {k: listing[k] for k in old} == old and set(listing) - set(old) == {"f/_nightly-INCOMPLETE"}
    assert pending_uploads(s3_client, bucket) == []


# num_batches -------------------------------------------------------------------------------
def relative_keys(result, prefix: str) -> list:
    return sorted(f.uri.split("/", 3)[3][len(prefix) + 1 :] for f in result.files)


# On the in-process runners, against both S3 servers; the job-server runners' copies are in
# tests/test_runners.py (on moto), so that the runner x server product stays CI-sized.
@pytest.mark.parametrize("runner", sorted(LOCAL_RUNNERS), indirect=True)
def test_num_batches_same_data_same_keys_each_batch_in_its_own_files(s3_config, s3_client, bucket, runner):
    from helpers import batch_numbers, read_parquet

    n = 3000
    first = run_copy(
        args=runner,
        generate=(json_row, n),
        uri=f"s3://{bucket}/b1",
        schema=JSON_SCHEMA,
        s3=s3_config,
        num_batches=4,
        sink_id="nightly",
    )
    again = run_copy(
        generate=(lambda i: json_row(n - 1 - i), n),
        uri=f"s3://{bucket}/b2",
        schema=JSON_SCHEMA,
        s3=s3_config,
        num_batches=4,
        sink_id="nightly",
    )
    assert first.ok and again.ok and first.rows == again.rows == n
    assert (
        relative_keys(first, "b1")
        == relative_keys(again, "b2")
        == [f"nightly-batch-{b:04d}-0001.parquet" for b in range(4)]
    )
    seen = []
    for prefix in ("b1", "b2"):
        by_batch = {}
        for key in data_keys(s3_client, bucket, prefix):
            rows = read_parquet(s3_client, bucket, key).to_pylist()
            batch = int(key.rsplit("-batch-", 1)[1][:4])
            assert set(batch_numbers(rows, JSON_SCHEMA, 4)) == {batch}, key
            by_batch[batch] = sorted(r["id"] for r in rows)
        assert sorted(i for ids in by_batch.values() for i in ids) == list(range(n))
        assert all(by_batch.values()), "with 3000 rows every batch gets rows"
        seen.append(by_batch)
    assert seen[0] == seen[1]


def test_num_batches_hash_alike_values_alike_and_use_every_batch():
    from helpers import batch_numbers

    schema = pa.schema([("x", pa.float64()), ("s", pa.string())])
    assert batch_numbers([{"x": 1, "s": "a"}], schema, 7) == batch_numbers([{"x": 1.0, "s": "a"}], schema, 7)
    numbers = batch_numbers([{"x": float(i), "s": str(i)} for i in range(1000)], schema, 7)
    assert set(numbers) == set(range(7))


def test_num_batches_hash_depends_on_no_format(s3_config, s3_client, bucket):
    """The shard hash is the Arrow type's (arrow_hash): nested, map and dictionary columns (JSON
    Lines cannot write a dictionary column) shard alike as rows and as record batches."""
    import numpy as np

    from beam_s3_sink.arrow_hash import row_hashes
    from beam_s3_sink.batches import split_by_batch_number
    from helpers import batch_numbers

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("kind", pa.dictionary(pa.int32(), pa.string())),
            ("tags", pa.list_(pa.struct([("k", pa.string()), ("v", pa.float64())]))),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            ("pair", pa.list_(pa.int32(), 2)),
        ]
    )

    def row(i):
        return {
            "id": i % 40,
            "kind": "ab"[i % 2],
            "tags": [{"k": str(i % 7), "v": float(i % 3)}] * (i % 3),
            "attrs": [("a", i % 5)] if i % 4 else None,
            "pair": [i % 2, 1],
        }

    rows = [row(i) for i in range(400)]
    numbers = batch_numbers(rows, schema, 5)
    assert set(numbers) == set(range(5))
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    assert (row_hashes(batch) % np.uint64(5)).tolist() == numbers
    assert (row_hashes(batch.slice(100)) % np.uint64(5)).tolist() == numbers[100:]
    for number, part in split_by_batch_number(batch, 5):  # what a record batch element is split into
        assert set(batch_numbers(part.to_pylist(), schema, 5)) == {number}
    shard_of = {}
    for r, n in zip(rows, numbers):
        assert shard_of.setdefault(repr(r), n) == n  # equal rows, one shard

    result = run_copy(
        generate=(row, 400), uri=f"s3://{bucket}/nested", schema=schema, s3=s3_config, num_batches=5, sink_id="nested"
    )
    assert result.ok, result.error
    assert relative_keys(result, "nested") == [f"nested-batch-{b:04d}-0001.parquet" for b in range(5)]


def test_num_batches_a_retried_batch_commits_only_the_reported_uploads(s3_config, s3_client, bucket):
    from beam_s3_sink.batches import encode_blob
    from beam_s3_sink.formats import resolve_format
    from beam_s3_sink.initialization import initialize
    from beam_s3_sink.keys import CopyKeys, S3Location
    from beam_s3_sink.schema import rows_to_batch
    from helpers import complete_copy, write_groups, write_settings

    keys = CopyKeys(S3Location(bucket, "p"), "retried")
    settings = write_settings(keys, s3_config, resolve_format("csv"), CSV_SCHEMA, max_file_size=4096)
    state = initialize(s3_client, keys)

    def run_batch(names):
        rows = [{"id": i, "name": name} for i, name in enumerate(names)]
        blobs = [encode_blob([rows_to_batch(rows[:500], CSV_SCHEMA)], CSV_SCHEMA)]
        blobs.append(encode_blob([rows_to_batch(rows[500:], CSV_SCHEMA)], CSV_SCHEMA))
        (report,) = write_groups(settings, {2: blobs}, state)  # shard 2's writer
        return report

    lost = run_batch(["lost"] * 1000)
    committed = run_batch(["kept"] * 1000)
    assert [f.key for f in lost.files] == [f.key for f in committed.files]  # the same keys
    assert len(committed.files) > 1 and committed.files[0].key == "p/retried-batch-0002-0001.csv"
    result = complete_copy(settings, [committed], state)
    assert result.ok and result.rows == 1000
    body = b"".join(get_bytes(s3_client, bucket, f.key) for f in committed.files)
    assert body.count(b",kept\n") == 1000 and b"lost" not in body
    assert pending_uploads(s3_client, bucket) == []


# partition_by ------------------------------------------------------------------------------
PART_SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()), ("amount", pa.float64())])
REGIONS = [None, "a b", "x/y", "k=v", "Zürich ☃", "50%", "c:d#e?f*[g]^{h}'\"\\", "plain"]


def part_row(i: int) -> dict:
    return {
        "id": i,
        "region": REGIONS[i % len(REGIONS)],
        "day": None if i % 11 == 0 else datetime.date(2024, 1, 1 + i % 3),
        "amount": i / 4,
    }


def read_hive(tmp_path, schema) -> dict:
    """The copy read back by DuckDB and by pyarrow, through their Hive partitioning."""
    con = duckdb.connect()
    duck = con.sql(
        f"SELECT id, region, day, amount FROM read_parquet('{tmp_path}/**/*.parquet', hive_partitioning=true, "
        "hive_types={'region': 'VARCHAR', 'day': 'DATE'}) ORDER BY id"
    ).to_arrow_table()
    partitioning = ds.partitioning(pa.schema([("region", pa.string()), ("day", pa.date32())]), flavor="hive")
    arrow = ds.dataset(str(tmp_path), format="parquet", partitioning=partitioning).to_table().sort_by("id")
    return {"duckdb": duck.cast(schema).to_pylist(), "pyarrow": arrow.select(schema.names).cast(schema).to_pylist()}


def test_partition_by_reads_back_through_duckdb_and_pyarrow_hive_partitioning(s3_config, s3_client, bucket, tmp_path):
    n = 2000
    result = run_copy(
        generate=(part_row, n),
        uri=f"s3://{bucket}/h",
        schema=PART_SCHEMA,
        s3=s3_config,
        partition_by=["region", "day"],
        sink_id="parts",
    )
    assert result.ok and result.rows == n
    keys = data_keys(s3_client, bucket, "h")
    manifest = read_manifest(s3_client, bucket, "h/_parts-manifest.json")
    assert sorted(e["url"] for e in manifest["entries"]) == sorted(f"s3://{bucket}/{k}" for k in keys)
    directories = {k.rsplit("/", 1)[0] for k in keys}
    assert "h/region=__HIVE_DEFAULT_PARTITION__/day=__HIVE_DEFAULT_PARTITION__" in directories
    assert "h/region=x%2Fy/day=2024-01-02" in directories and "h/region=k%3Dv/day=2024-01-02" in directories
    assert "h/region=Zürich ☃/day=2024-01-02" in directories
    assert "h/region=c%3Ad%23e%3Ff%2A%5Bg%5D%5E%7Bh}%27%22%5C/day=2024-01-01" in directories
    assert len(directories) == len(REGIONS) * 4
    download(s3_client, bucket, "h", str(tmp_path))
    first = pq_schema(tmp_path)
    assert first.names == ["id", "amount"], "partition columns are left out of the files"
    expected = [part_row(i) for i in range(n)]
    got = read_hive(tmp_path, PART_SCHEMA)
    assert got["duckdb"] == expected
    assert got["pyarrow"] == expected


def pq_schema(tmp_path) -> pa.Schema:
    import pyarrow.parquet as pq

    return pq.read_schema(next(iter(sorted(tmp_path.rglob("*.parquet")))))


def test_partition_by_keeps_columns_on_request_with_batches(s3_config, s3_client, bucket, tmp_path):
    n = 4000
    result = run_copy(
        generate=(part_row, n),
        uri=f"s3://{bucket}/k",
        schema=PART_SCHEMA,
        s3=s3_config,
        partition_by=["region"],
        keep_partition_columns=True,
        max_open_files=2,
        num_batches=2,
        sink_id="kept",
    )
    assert result.ok and result.rows == n
    keys = data_keys(s3_client, bucket, "k")
    assert keys and all("/kept-batch-000" in k for k in keys)
    assert {k.rsplit("/", 1)[0] for k in keys} == {
        "k/region=" + ("__HIVE_DEFAULT_PARTITION__" if r is None else escape_path_name(r)) for r in REGIONS
    }
    download(s3_client, bucket, "k", str(tmp_path))
    assert pq_schema(tmp_path).names == PART_SCHEMA.names
    con = duckdb.connect()
    got = (
        con.sql(f"SELECT * FROM read_parquet('{tmp_path}/**/*.parquet', hive_partitioning=false) ORDER BY id")
        .to_arrow_table()
        .cast(PART_SCHEMA)
        .to_pylist()
    )
    assert got == [part_row(i) for i in range(n)]


def test_partition_by_errors_at_construction():
    with pytest.raises(ValueError, match="partition_by column 'nope' is not in the schema"):
        CopyToS3("s3://b-b/p", schema=PART_SCHEMA, partition_by=["nope"]).expand(_FakePColl())
    with pytest.raises(ValueError, match="partition_by column 'amount' has type double"):
        CopyToS3("s3://b-b/p", schema=PART_SCHEMA, partition_by=["amount"]).expand(_FakePColl())
    with pytest.raises(ValueError, match="max_open_files must be a positive int"):
        CopyToS3("s3://b-b/p", schema=PART_SCHEMA, partition_by=["region"], max_open_files=0)
    with pytest.raises(ValueError, match="num_batches must be an int from 1 to 10000"):
        CopyToS3("s3://b-b/p", schema=PART_SCHEMA, num_batches=0)


class _FakePColl:
    """What CopyToS3.expand reads of its input before the partition check: a bounded
    PCollection in the global window, without a Beam schema."""

    element_type = None
    is_bounded = True
    windowing = Windowing(GlobalWindows())


def test_partition_writer_keeps_at_most_max_open_files_open(s3_config, s3_client, bucket):
    """Rows cycling over 8 partitions with 2 files open: the cap holds after every row, the
    largest file is closed to open another (so partitions get several files), nothing is lost."""
    from concurrent.futures import ThreadPoolExecutor

    from beam_s3_sink.formats import resolve_format
    from beam_s3_sink.initialization import initialize
    from beam_s3_sink.keys import CopyKeys, S3Location
    from beam_s3_sink.writer import FileWriter
    from helpers import complete_copy, write_settings

    keys = CopyKeys(S3Location(bucket, "w"), "capped")
    settings = write_settings(
        keys, s3_config, resolve_format("parquet"), PART_SCHEMA, 2**20, layout=Layout(("region",)), max_open_files=2
    )
    state = initialize(s3_client, keys)
    with ThreadPoolExecutor(2) as pool:
        writer = FileWriter(
            s3_client,
            pool,
            settings,
            lambda directory, n: keys.data_file("0123456789abcdef", n, "parquet", directory),
            buffer_bytes=2048,
        )
        most_open = 0
        for i in range(3000):
            writer.add(part_row(i))
            most_open = max(most_open, writer.open_files)
        report = writer.finish()
    assert report.error is None and report.rows == 3000 and most_open == 2
    directories = [f.key.rsplit("/", 1)[0] for f in report.files]
    assert len(set(directories)) == len(REGIONS) < len(directories)
    result = complete_copy(settings, [report], state)
    assert result.ok and result.rows == 3000 and pending_uploads(s3_client, bucket) == []

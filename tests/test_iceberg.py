"""CopyToIceberg: one snapshot per copy, all or nothing, on real catalogs, read back by real readers."""

from __future__ import annotations

import datetime
import decimal

import apache_beam as beam
import pyarrow as pa
import pytest
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


def run_table_copy(rows, tmp_path, args=None, **kwargs):
    import pickle

    out = tmp_path / f"result-{kwargs.get('sink_id', 'x')}.pickle"
    out.write_bytes(b"")
    with beam.Pipeline(options=PipelineOptions(args or ["--runner=FnApiRunner"])) as p:
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


def test_overwrite_partitions_replaces_only_the_partitions_written(tmp_path, s3_config, bucket):
    from pyiceberg.catalog import load_catalog

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    rows = [make_row(i) for i in range(300)]  # days 1, 2 and 3 of January
    kwargs = dict(table="sales.by_day", catalog=catalog, schema=SCHEMA, partition_by=["day"])
    first = run_table_copy(rows, tmp_path, sink_id="all", **kwargs)
    assert first.ok and len(first.files) == 3, first
    day2 = [dict(make_row(i), id=10_000 + i) for i in range(30) if make_row(i)["day"].day == 2]
    again = run_table_copy(day2, tmp_path, sink_id="day2", mode="overwrite_partitions", **kwargs)
    assert again.ok, again.error
    read = load_catalog("default", **catalog).load_table("sales.by_day").scan().to_arrow().to_pylist()
    kept = [r for r in rows if r["day"].day != 2]
    assert sorted(r["id"] for r in read) == sorted([r["id"] for r in kept] + [r["id"] for r in day2])


def test_a_failed_copy_leaves_the_table_unchanged_and_its_rerun_is_exact(tmp_path, s3_config, s3_client, bucket):
    from pyiceberg.catalog import load_catalog

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    good = [make_row(i) for i in range(200)]
    kwargs = dict(table="sales.failing", catalog=catalog, schema=SCHEMA)
    assert run_table_copy(good, tmp_path, sink_id="base", **kwargs).ok
    before = load_catalog("default", **catalog).load_table("sales.failing").current_snapshot().snapshot_id
    bad = good + [dict(make_row(999), amount="not a number")]
    failed = run_table_copy(bad, tmp_path, sink_id="next", fail_on_error=False, **kwargs)
    assert not failed.ok and "amount" in failed.error, failed.error
    table = load_catalog("default", **catalog).load_table("sales.failing")
    assert table.current_snapshot().snapshot_id == before and table.scan().to_arrow().num_rows == 200
    assert pending_uploads(s3_client, bucket) == []
    rerun = run_table_copy(good[:50], tmp_path, sink_id="next", **kwargs)
    assert rerun.ok and rerun.rows == 50
    assert load_catalog("default", **catalog).load_table("sales.failing").scan().to_arrow().num_rows == 250


def test_a_copy_that_does_not_fit_the_table_fails_before_any_upload(tmp_path, s3_config, s3_client, bucket):
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    assert run_table_copy([make_row(1)], tmp_path, sink_id="one", table="sales.fit", catalog=catalog, schema=SCHEMA).ok
    other = pa.schema([("id", pa.int64()), ("name", pa.int32())])
    failed = run_table_copy(
        [{"id": 1, "name": 2}],
        tmp_path,
        sink_id="two",
        table="sales.fit",
        catalog=catalog,
        schema=other,
        fail_on_error=False,
    )
    assert not failed.ok and "'name'" in failed.error and "string" in failed.error and "int" in failed.error
    assert "amount" in failed.error, "a column of the table that the copy lacks is named too"
    assert pending_uploads(s3_client, bucket) == []


def test_bad_arguments_fail_when_the_pipeline_is_built_and_secrets_never_show(tmp_path, s3_config, bucket):
    from apache_beam.transforms.display import DisplayData

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    with pytest.raises(ValueError, match="namespace.table"):
        CopyToIceberg("orders", catalog=catalog)
    with pytest.raises(ValueError, match="mode"):
        CopyToIceberg("sales.orders", catalog=catalog, mode="upsert")
    copy = CopyToIceberg("sales.orders", catalog=catalog, schema=SCHEMA)
    shown = repr(copy._catalog) + str(DisplayData.create_from(copy).items)
    assert s3_config.secret_access_key not in shown and "***" in repr(copy._catalog)


def test_the_contract_on_every_runner(runner, tmp_path, s3_config, s3_client, bucket):
    """One snapshot with every row once, partitioned by identity and a transform (pyiceberg's,
    on the runner's workers); a rerun commits nothing."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import EqualTo

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    rows = [make_row(i) for i in range(3000)]
    partition_by = ["day", "bucket(4, id)"]
    kwargs = dict(table="runs.orders", catalog=catalog, schema=SCHEMA, partition_by=partition_by, sink_id="run")
    first = run_table_copy(rows, tmp_path, args=runner, **kwargs)
    assert first.ok and first.rows == 3000, first.error
    assert len({f.partition for f in first.files}) == 12  # 3 days, 4 buckets
    table = load_catalog("default", **catalog).load_table("runs.orders")
    assert len(table.snapshots()) == 1
    assert sum(table.scan(row_filter=EqualTo("id", 7)).to_arrow().column("id").to_pylist()) == 7
    read = table.scan().to_arrow().sort_by("id").to_pylist()
    assert read == sorted(rows, key=lambda r: r["id"])
    again = run_table_copy(rows, tmp_path, args=runner, **kwargs)
    assert again.snapshot_id == first.snapshot_id
    assert len(load_catalog("default", **catalog).load_table("runs.orders").snapshots()) == 1
    assert pending_uploads(s3_client, bucket) == []


def test_files_a_crashed_copy_completed_are_deleted_by_its_rerun_or_by_abort(tmp_path, s3_config, s3_client, bucket):
    """A crash between completing the uploads and the commit leaves files no snapshot has: the
    rerun deletes them (and commits its own), ``abort_table_copy`` removes them; never both."""
    from pyiceberg.catalog import load_catalog

    from beam_s3_sink import CommittedCopyError
    from beam_s3_sink.iceberg import abort_table_copy

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    kwargs = dict(table="sales.crash", catalog=catalog, schema=SCHEMA)
    assert run_table_copy([make_row(1)], tmp_path, sink_id="base", **kwargs).ok
    table = load_catalog("default", **catalog).load_table("sales.crash")
    prefix = table.location().split(f"s3://{bucket}/", 1)[1] + "/data"
    orphan = f"{prefix}/crashed-0123456789abcdef-0001.parquet"
    s3_client.put_object(Bucket=bucket, Key=orphan, Body=b"completed, never committed")
    s3_client.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/crashed-0123456789abcdef-0002.parquet")
    report = abort_table_copy("sales.crash", catalog, "crashed")
    assert report.deleted == (f"s3://{bucket}/{orphan}",) and len(report.aborted) == 1
    assert pending_uploads(s3_client, bucket) == []
    with pytest.raises(CommittedCopyError):
        abort_table_copy("sales.crash", catalog, "base")

    s3_client.put_object(Bucket=bucket, Key=orphan, Body=b"completed, never committed")
    rerun = run_table_copy([make_row(i) for i in range(2, 12)], tmp_path, sink_id="crashed", **kwargs)
    assert rerun.ok and rerun.rows == 10
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert orphan not in keys
    table = load_catalog("default", **catalog).load_table("sales.crash")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(1, 12))


def test_two_copies_appending_at_once_both_commit(tmp_path, s3_config, bucket):
    """Both commit (the loser re-reads the metadata and retries): the rows are the sum."""
    import threading

    from pyiceberg.catalog import load_catalog

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    kwargs = dict(table="sales.race", catalog=catalog, schema=SCHEMA)
    assert run_table_copy([make_row(0)], tmp_path, sink_id="create", **kwargs).ok
    results = {}

    def copy(name: str, start: int) -> None:
        rows = [make_row(i) for i in range(start, start + 1000)]
        results[name] = run_table_copy(rows, tmp_path, sink_id=name, **kwargs)

    threads = [threading.Thread(target=copy, args=(n, s)) for n, s in (("a", 1000), ("b", 2000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"].ok and results["b"].ok, results
    table = load_catalog("default", **catalog).load_table("sales.race")
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == [0, *range(1000, 3000)]
    assert {s.summary["beam-s3-sink.sink-id"] for s in table.snapshots()} == {"create", "a", "b"}


def test_every_catalog_every_reader(iceberg_catalog, spark_iceberg, tmp_path):
    """append, append, overwrite_partitions, overwrite and a rerun, on each catalog; each state
    read back exactly by pyiceberg and DuckDB (and Spark, on the catalogs Spark reaches)."""
    import uuid

    from iceberg_catalogs import read_duckdb, read_pyiceberg, read_spark

    name = f"contract.t{uuid.uuid4().hex[:8]}"
    props = dict(iceberg_catalog.props, name=iceberg_catalog.name)
    kwargs = dict(table=name, catalog=props, schema=SCHEMA, partition_by=["day"])
    expected: list = []

    def check() -> None:
        want = sorted(expected, key=lambda r: r["id"])
        assert read_pyiceberg(iceberg_catalog, name).sort_by("id").to_pylist() == want
        assert read_duckdb(iceberg_catalog, name).sort_by("id").column("id").to_pylist() == [r["id"] for r in want]
        if iceberg_catalog.kind != "sql-sqlite":  # Spark has no SQLite catalog
            got = read_spark(spark_iceberg, iceberg_catalog, name).sort_by("id").to_pylist()
            assert [r["id"] for r in got] == [r["id"] for r in want] and got[-1]["amount"] == want[-1]["amount"]

    first = [make_row(i) for i in range(300)]
    assert run_table_copy(first, tmp_path, sink_id="a", **kwargs).ok
    expected += first
    check()
    second = [make_row(i) for i in range(300, 400)]
    assert run_table_copy(second, tmp_path, sink_id="b", **kwargs).ok
    expected += second
    check()
    day1 = [dict(make_row(i), id=5000 + i) for i in range(0, 30, 3)]  # day 2026-01-01 only
    result = run_table_copy(day1, tmp_path, sink_id="c", mode="overwrite_partitions", **kwargs)
    assert result.ok, result.error
    expected = [r for r in expected if r["day"].day != 1] + day1
    check()
    again = run_table_copy(day1, tmp_path, sink_id="c", mode="overwrite_partitions", **kwargs)
    assert again.snapshot_id == result.snapshot_id, "a rerun commits nothing"
    last = [make_row(i) for i in range(7000, 7010)]
    assert run_table_copy(last, tmp_path, sink_id="d", mode="overwrite", **kwargs).ok
    expected = last
    check()


def test_a_dry_run_names_the_bad_rows_and_touches_no_catalog(tmp_path, s3_config, s3_client, bucket):
    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    rows = [make_row(i) for i in range(20)] + [dict(make_row(99), amount="x")]
    result = run_table_copy(rows, tmp_path, table="dry.run", catalog=catalog, schema=SCHEMA, validate_only=True)
    assert result.dry_run and result.rows == 21 and result.invalid_rows == 1 and "amount" in result.error
    assert result.uri == "iceberg:dry.run"
    assert not (tmp_path / "catalog.db").exists() and s3_client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_failure_race_and_mismatch_on_every_catalog(iceberg_catalog, tmp_path):
    """On each catalog: a failed copy leaves the table unchanged, two copies appending at once
    both commit (the rows are the sum), a copy that does not fit fails naming the column; each
    state read back exactly by pyiceberg and DuckDB."""
    import threading
    import uuid

    from iceberg_catalogs import read_duckdb, read_pyiceberg

    name = f"edge.t{uuid.uuid4().hex[:8]}"
    props = dict(iceberg_catalog.props, name=iceberg_catalog.name)
    kwargs = dict(table=name, catalog=props, schema=SCHEMA)

    def ids() -> list:
        via_duckdb = sorted(read_duckdb(iceberg_catalog, name).column("id").to_pylist())
        assert sorted(read_pyiceberg(iceberg_catalog, name).column("id").to_pylist()) == via_duckdb
        return via_duckdb

    assert run_table_copy([make_row(i) for i in range(100)], tmp_path, sink_id="base", **kwargs).ok
    failed = run_table_copy(
        [make_row(500), dict(make_row(501), id=None)], tmp_path, sink_id="bad", fail_on_error=False, **kwargs
    )
    assert not failed.ok and "'id'" in failed.error, failed.error
    assert ids() == list(range(100))

    results = {}

    def copy(sink: str, start: int) -> None:
        results[sink] = run_table_copy(
            [make_row(i) for i in range(start, start + 500)], tmp_path, sink_id=sink, **kwargs
        )

    threads = [threading.Thread(target=copy, args=(s, n)) for s, n in (("left", 1000), ("right", 2000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["left"].ok and results["right"].ok, results
    assert ids() == [*range(100), *range(1000, 1500), *range(2000, 2500)]

    other = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.int32())])
    mismatch = run_table_copy(
        [{"id": 1, "name": 2}], tmp_path, sink_id="other", table=name, catalog=props, schema=other, fail_on_error=False
    )
    assert not mismatch.ok and "'name'" in mismatch.error and "string" in mismatch.error
    assert len(ids()) == 1100


def test_int_and_bool_partitions_and_a_table_partitioned_otherwise(tmp_path, s3_config, s3_client, bucket):
    """A copy without partition_by writes with the table's spec; one whose partition_by
    disagrees is refused before any upload, naming both."""
    from pyiceberg.catalog import load_catalog

    catalog = sqlite_catalog(tmp_path, s3_config, bucket)
    schema = pa.schema([("id", pa.int64()), ("bucket", pa.int32()), ("flag", pa.bool_()), ("s", pa.string())])
    rows = [{"id": i, "bucket": i % 3, "flag": i % 2 == 0, "s": f"v{i}"} for i in range(60)]
    kwargs = dict(table="parts.mixed", catalog=catalog, schema=schema)
    result = run_table_copy(rows, tmp_path, sink_id="one", partition_by=["bucket", "flag"], **kwargs)
    assert result.ok and len(result.files) == 6, result.error
    table = load_catalog("default", **catalog).load_table("parts.mixed")
    assert sorted(table.scan(row_filter="bucket = 2 AND flag = true").to_arrow().column("id").to_pylist()) == [
        i for i in range(60) if i % 3 == 2 and i % 2 == 0
    ]
    more = [{**r, "id": r["id"] + 100} for r in rows[:12]]
    table_spec = run_table_copy(more, tmp_path, sink_id="two", **kwargs)  # no partition_by: the table's
    assert table_spec.ok and len(table_spec.files) == 6, table_spec.error
    assert {f.partition for f in table_spec.files} == {
        (("bucket", b), ("flag", f)) for b in range(3) for f in (True, False)
    }
    other = run_table_copy(
        rows,
        tmp_path,
        sink_id="three",
        partition_by=["flag"],
        mode="overwrite_partitions",
        fail_on_error=False,
        **kwargs,
    )
    assert not other.ok and other.uri == "iceberg:parts.mixed"
    assert (
        "the table is partitioned by bucket, flag, the copy by partition_by=['flag']: pass "
        "partition_by=['bucket', 'flag'] or leave it out" in other.error
    ), other.error
    assert pending_uploads(s3_client, bucket) == []
    assert load_catalog("default", **catalog).load_table("parts.mixed").scan().to_arrow().num_rows == 72
    with pytest.raises(Exception, match="CopyToIceberg to iceberg:parts.mixed .sink_id .four.. failed"):
        run_table_copy(rows, tmp_path, sink_id="four", partition_by=["bucket(3, id)"], **kwargs)

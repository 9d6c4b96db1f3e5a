"""CopyToDelta (issue 36): one Delta Lake version per copy, all or nothing, exactly once, on moto
and SeaweedFS; every table read back exactly by delta-rs, DuckDB's ``delta_scan`` and Polars
(tests/delta_readers.py) at every state a test asserts, and by Spark 4.1 with delta-spark at the
last state it asserts of each table (``spark_final_reads``, autouse here)."""

from __future__ import annotations

import datetime
import decimal
import multiprocessing
import pickle
from typing import Any, Dict, List

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CommittedCopyError, CopyToDelta, abort_delta_copy
from beam_s3_sink.delta_commit import SINK_ID_KEY, UNIT_KEY, storage_options
from conftest import LOCAL_RUNNERS, SERVERS
from delta_readers import assert_tables_read
from faultproxy import FaultProxy
from helpers import _write_pickle, list_objects, pending_uploads

S3_SERVERS = SERVERS
UTC = datetime.timezone.utc
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("tags", pa.list_(pa.string())),
        ("region", pa.string()),
    ]
)
REGIONS = ("eu", "us", "a/b c", None)


@pytest.fixture(autouse=True)
def _spark_reads_the_final_state(spark_final_reads):
    """Spark reads (once, at the end) the last state each test asserted of each table."""
    return spark_final_reads


def make_row(i: int, region: Any = "unset") -> Dict[str, Any]:
    return {
        "id": i,
        "name": None if i % 7 == 0 else f"name {i}",
        "amount": decimal.Decimal(i) / 4,
        "at": datetime.datetime(2026, 1, 1, tzinfo=UTC) + datetime.timedelta(minutes=i, microseconds=i),
        "day": datetime.date(2026, 1, 1 + i % 3),
        "tags": [f"t{i % 2}"],
        "region": REGIONS[i % len(REGIONS)] if region == "unset" else region,
    }


def run_delta_copy(rows, tmp_path, args=None, **kwargs):
    out = tmp_path / f"result-{kwargs.get('sink_id', 'x')}.pickle"
    out.write_bytes(b"")
    with beam.Pipeline(options=PipelineOptions(args or ["--runner=FnApiRunner"])) as p:
        result = p | beam.Create(rows) | CopyToDelta(**kwargs)
        result | beam.Map(_write_pickle, str(out))
    with open(out, "rb") as f:
        return pickle.load(f)


def table(uri: str, s3_config):
    from deltalake import DeltaTable

    return DeltaTable(uri, storage_options=storage_options(s3_config))


def data_objects(s3_client, bucket: str, prefix: str) -> List[str]:
    return sorted(k for k in list_objects(s3_client, bucket, prefix + "/") if "/_delta_log/" not in k)


def test_create_append_rerun_and_overwrite(tmp_path, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/orders"
    copy = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config)
    rows = [make_row(i) for i in range(400)]
    first = run_delta_copy(rows, tmp_path, sink_id="one", **copy)
    assert first.ok and first.rows == 400 and first.snapshot_id == 0, first.error
    assert {f.uri.split("/lake/orders/")[1].split("/")[0] for f in first.files} == {
        "region=eu",
        "region=us",
        "region=a%2Fb%20c",
        "region=__HIVE_DEFAULT_PARTITION__",
    }
    assert_tables_read(uri, s3_config, rows)

    second = run_delta_copy(rows[:50], tmp_path, sink_id="two", **copy)
    third = run_delta_copy([make_row(i) for i in range(1000, 1010)], tmp_path, sink_id="three", **copy)
    assert (second.snapshot_id, second.rows, third.snapshot_id, third.rows) == (1, 50, 2, 10)
    assert_tables_read(uri, s3_config, rows + rows[:50] + [make_row(i) for i in range(1000, 1010)])

    again = run_delta_copy(rows, tmp_path, sink_id="one", **copy)
    assert again.ok and again.snapshot_id == 0 and again.rows == 400
    assert sorted(f.uri for f in again.files) == sorted(f.uri for f in first.files)
    loaded = table(uri, s3_config)
    assert loaded.version() == 2 and loaded.transaction_version("one") == 0
    commits = {h["version"]: h for h in loaded.history()}
    assert [commits[v][SINK_ID_KEY] for v in (0, 1, 2)] == ["one", "two", "three"]

    # Stats from the upload: numRecords, and min/max/nullCount per column (the partition column left out).
    adds = pa.table(loaded.get_add_actions(flatten=False)).to_pylist()
    for add in adds:
        assert "region" not in add["min"] and add["num_records"] > 0
        assert add["null_count"]["id"] == 0 and add["min"]["id"] <= add["max"]["id"]

    over = run_delta_copy(rows[:20], tmp_path, sink_id="over", mode="overwrite", **copy)
    assert over.ok and over.snapshot_id == 3
    assert_tables_read(uri, s3_config, rows[:20])
    assert pending_uploads(s3_client, bucket) == []


def test_overwrite_partitions_replaces_exactly_the_partitions_written(tmp_path, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/by_region"
    copy = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config)
    rows = [make_row(i) for i in range(200)]
    assert run_delta_copy(rows, tmp_path, sink_id="base", **copy).ok
    new = [make_row(i, "eu") for i in range(500, 520)] + [make_row(i, None) for i in range(600, 605)]
    result = run_delta_copy(new, tmp_path, sink_id="replace", mode="overwrite_partitions", **copy)
    assert result.ok and result.snapshot_id == 1, result.error
    kept = [r for r in rows if r["region"] not in ("eu", None)]
    assert_tables_read(uri, s3_config, kept + new)
    # the replaced files stay for time travel: version 0 still reads every row
    from deltalake import DeltaTable

    old = DeltaTable(uri, version=0, storage_options=storage_options(s3_config)).to_pyarrow_table()
    assert sorted(old.column("id").to_pylist()) == list(range(200))


def test_an_empty_string_partition_value_reads_back_as_null(tmp_path, s3_config, bucket):
    """Delta's protocol: an empty string partition value is null (Spark writes it so too)."""
    uri = f"s3://{bucket}/lake/empty"
    rows = [make_row(1, ""), make_row(2, None), make_row(3, "x")]
    result = run_delta_copy(rows, tmp_path, table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config)
    assert result.ok, result.error
    assert_tables_read(uri, s3_config, [dict(rows[0], region=None), rows[1], rows[2]])


def _log_writes(operation: str, path: str):
    """Every write of the table's log fails, as a store that refuses the commit would."""
    if "/_delta_log/" in path and operation in ("PutObject", "CopyObject", "CompleteMultipartUpload"):
        return (403, "AccessDenied")
    return None


def test_a_failed_commit_leaves_the_table_and_the_bucket_as_they_were(
    tmp_path, s3_endpoint, s3_config, s3_client, bucket
):
    uri = f"s3://{bucket}/lake/failing"
    copy = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"])
    assert run_delta_copy([make_row(i) for i in range(10)], tmp_path, sink_id="base", s3=s3_config, **copy).ok
    before = list_objects(s3_client, bucket, "lake/failing/")
    with FaultProxy(s3_endpoint, rate=0, refuse_when=_log_writes) as proxy:
        failed = run_delta_copy(
            [make_row(i) for i in range(100, 300)],
            tmp_path,
            sink_id="failed",
            s3=s3_config.replace(endpoint_url=proxy.url),
            fail_on_error=False,
            **copy,
        )
        assert proxy.refused, "the commit was refused"
    assert not failed.ok and "committing to Delta table" in failed.error, failed
    assert "s3cr3t" not in failed.error and s3_config.secret_access_key not in failed.error
    assert table(uri, s3_config).version() == 0
    assert list_objects(s3_client, bucket, "lake/failing/") == before, "no new file visible"
    assert pending_uploads(s3_client, bucket) == []
    assert_tables_read(uri, s3_config, [make_row(i) for i in range(10)])
    report = abort_delta_copy(uri, "failed", s3=s3_config)
    assert report.deleted == () and report.aborted == ()
    with pytest.raises(CommittedCopyError):
        abort_delta_copy(uri, "base", s3=s3_config)


def test_a_commit_delta_rs_fails_after_writing_its_version_is_the_copys(tmp_path, s3_config, s3_client, bucket):
    """delta-rs can fail after the version is written (its post-commit steps: seen with a table
    it cannot read back): the copy reports that version, and its files stay."""
    from deltalake import DeltaTable

    uri = f"s3://{bucket}/lake/late_failure"
    copy = dict(table_uri=uri, schema=SCHEMA, s3=s3_config)
    assert run_delta_copy([make_row(1)], tmp_path, sink_id="a", **copy).ok
    original = DeltaTable.create_write_transaction

    def write_then_fail(self, *args, **kwargs):
        original(self, *args, **kwargs)
        raise RuntimeError("failed after the commit")

    DeltaTable.create_write_transaction = write_then_fail
    try:
        result = run_delta_copy([make_row(2)], tmp_path, sink_id="b", **copy)
    finally:
        DeltaTable.create_write_transaction = original
    assert result.ok and result.snapshot_id == 1, result.error
    assert_tables_read(uri, s3_config, [make_row(1), make_row(2)])
    assert pending_uploads(s3_client, bucket) == []


def test_a_copy_that_does_not_fit_is_refused_before_any_upload(tmp_path, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/strict"
    assert run_delta_copy([make_row(1)], tmp_path, table_uri=uri, schema=SCHEMA, sink_id="a", s3=s3_config).ok
    before = list_objects(s3_client, bucket, "lake/strict/")
    other = pa.schema([("id", pa.string()) if f.name == "id" else f for f in SCHEMA])
    rows = [dict(make_row(i), id=str(i)) for i in range(5)]
    result = run_delta_copy(rows, tmp_path, table_uri=uri, schema=other, sink_id="b", s3=s3_config, fail_on_error=False)
    assert not result.ok
    assert "column 'id' is long in the table, string (Arrow string) in the copy" in result.error, result.error
    assert list_objects(s3_client, bucket, "lake/strict/") == before and pending_uploads(s3_client, bucket) == []
    assert table(uri, s3_config).version() == 0


def test_bad_rows_are_left_out_and_counted_in_the_commit(tmp_path, s3_config, bucket):
    uri = f"s3://{bucket}/lake/bad"
    rows = [make_row(i) for i in range(10)] + [dict(make_row(99), amount="not a number")]
    result = run_delta_copy(rows, tmp_path, table_uri=uri, schema=SCHEMA, sink_id="b", s3=s3_config, max_bad_rows=1)
    assert result.ok and result.rows == 10 and result.bad_rows == 1, result
    assert table(uri, s3_config).history()[0]["beam-s3-sink.bad-rows"] == "1"
    assert_tables_read(uri, s3_config, rows[:10])


# -- concurrent writers --------------------------------------------------------------------------


def _copy_in_child(rows, out: str, kwargs: dict) -> None:
    """One copy, in a process of its own (spawned: a fork of a process that used delta-rs hangs)."""
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        result = p | beam.Create(rows) | CopyToDelta(**kwargs)
        result | beam.Map(_write_pickle, out)


def _commit_puts(operation: str, path: str):
    """Hold the writes of a table version's log entry until both writers are there."""
    if "/_delta_log/" in path and path.endswith(".json") and operation == "PutObject":
        return "commit"
    return None


def _run_both(tmp_path, s3_endpoint, s3_config, uri: str, copies: Dict[str, dict]) -> Dict[str, Any]:
    """Run ``copies`` (sink id -> rows and options) at once, each in a spawned process, their
    log writes held until both are in (so that they race for the same version)."""
    context = multiprocessing.get_context("spawn")
    outs = {name: str(tmp_path / f"{name}.pickle") for name in copies}
    with FaultProxy(s3_endpoint, rate=0, hold=_commit_puts, hold_timeout=30) as proxy:
        config = s3_config.replace(endpoint_url=proxy.url)
        processes = []
        for name, (rows, options) in copies.items():
            open(outs[name], "wb").close()
            kwargs = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=config, sink_id=name, **options)
            processes.append(context.Process(target=_copy_in_child, args=(rows, outs[name], kwargs)))
        for process in processes:
            process.start()
        for process in processes:
            process.join(300)
            assert process.exitcode == 0, f"a copy failed (exit code {process.exitcode})"
        held = proxy.held["commit"]
    results = {}
    for name, path in outs.items():
        with open(path, "rb") as f:
            results[name] = pickle.load(f)
    results["held"] = held
    return results


def test_two_appends_at_once_both_commit(tmp_path, s3_endpoint, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/concurrent"
    base = [make_row(i) for i in range(10)]
    assert run_delta_copy(base, tmp_path, table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config).ok
    left = [make_row(i) for i in range(100, 300)]
    right = [make_row(i) for i in range(300, 450)]
    results = _run_both(tmp_path, s3_endpoint, s3_config, uri, {"left": (left, {}), "right": (right, {})})
    assert results["held"] >= 2, "the two commits raced for one version"
    assert results["left"].ok and results["right"].ok
    assert sorted([results["left"].snapshot_id, results["right"].snapshot_id]) == [1, 2]
    assert_tables_read(uri, s3_config, base + left + right)
    assert pending_uploads(s3_client, bucket) == []


def test_an_overwrite_racing_an_append(tmp_path, s3_endpoint, s3_config, s3_client, bucket):
    """Both commit (delta-rs finds no conflict between a blind append and a write that removes
    the files it read): whichever lands second, the append's rows stay in the table, beside the
    overwrite's (the overwrite removes only the files of the version it read)."""
    uri = f"s3://{bucket}/lake/race"
    base = [make_row(i) for i in range(10)]
    assert run_delta_copy(base, tmp_path, table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config).ok
    over = [make_row(i) for i in range(100, 130)]
    app = [make_row(i) for i in range(200, 240)]
    results = _run_both(
        tmp_path,
        s3_endpoint,
        s3_config,
        uri,
        {"over": (over, {"mode": "overwrite"}), "app": (app, {})},
    )
    assert results["held"] >= 2 and results["over"].ok and results["app"].ok
    assert_tables_read(uri, s3_config, over + app)


# -- a stream ------------------------------------------------------------------------------------


def test_a_stream_commits_one_version_per_unit_exactly_once(tmp_path, s3_config, s3_client, bucket):
    from test_streaming import LAST, LATE, ON_TIME, events, expected_units, fixed, keep_result, load_results
    from test_streaming import SCHEMA as STREAM_SCHEMA

    uri = f"s3://{bucket}/lake/stream"
    out = tmp_path / "units"
    out.mkdir()
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner", "--streaming"])) as p:
        rows = p | "Events" >> events()
        results = rows | fixed(late=True) | CopyToDelta(uri, schema=STREAM_SCHEMA, sink_id="stream", s3=s3_config)
        results | beam.Map(keep_result, str(out))
    results = load_results(str(out))
    want = expected_units("table")
    assert all(r.ok for r in results) and len(results) == len(want), [r.error for r in results]
    loaded = table(uri, s3_config)
    commits = {h["version"]: h for h in loaded.history()}
    assert sorted(commits) == sorted(r.snapshot_id for r in results) == list(range(len(want)))
    by_unit = {}
    for r in results:
        assert commits[r.snapshot_id][SINK_ID_KEY] == "stream" and commits[r.snapshot_id][UNIT_KEY] == r.unit.id
        start, end = int(r.unit.start.timestamp()), int(r.unit.end.timestamp())
        by_unit[(start, end, r.unit.timing)] = r.rows
    assert by_unit == {k: len(v) for k, v in want.items()}
    seconds = dict(ON_TIME + LATE + LAST)
    assert_tables_read(uri, s3_config, [{"id": i, "at_s": seconds[i]} for v in want.values() for i in v])
    assert sorted(data_objects(s3_client, bucket, "lake/stream")) == sorted(
        f.uri.split("/", 3)[3] for r in results for f in r.files
    )
    assert pending_uploads(s3_client, bucket) == []


def test_what_a_crashed_copy_left_is_removed_by_its_rerun_or_by_abort(tmp_path, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/crash"
    copy = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config)
    assert run_delta_copy([make_row(i) for i in range(8)], tmp_path, sink_id="base", **copy).ok
    kept = data_objects(s3_client, bucket, "lake/crash")

    def leave(sink_id: str) -> tuple:
        """A completed but uncommitted file, and a pending upload, as a crashed run leaves them."""
        done = f"lake/crash/region=us/{sink_id}-0123456789abcdef-0001.parquet"
        s3_client.put_object(Bucket=bucket, Key=done, Body=b"PAR1")
        pending = f"lake/crash/region=eu/{sink_id}-fedcba9876543210-0001.parquet"
        upload = s3_client.create_multipart_upload(Bucket=bucket, Key=pending)["UploadId"]
        return done, pending, upload

    done, pending, upload = leave("crashed")
    report = abort_delta_copy(uri, "crashed", s3=s3_config)
    assert report.deleted == (f"s3://{bucket}/{done}",) and report.aborted == ((f"s3://{bucket}/{pending}", upload),)
    assert data_objects(s3_client, bucket, "lake/crash") == kept and pending_uploads(s3_client, bucket) == []

    leave("again")
    rows = [make_row(i) for i in range(100, 120)]
    result = run_delta_copy(rows, tmp_path, sink_id="again", **copy)
    assert result.ok and result.snapshot_id == 1
    assert data_objects(s3_client, bucket, "lake/crash") == sorted(
        kept + [f.uri.split("/", 3)[3] for f in result.files]
    )
    assert pending_uploads(s3_client, bucket) == []
    assert_tables_read(uri, s3_config, [make_row(i) for i in range(8)] + rows)


@pytest.mark.parametrize("args", [["--runner=FnApiRunner"], LOCAL_RUNNERS["portable"]], ids=["direct", "portable"])
def test_the_grouped_upload_graph_carries_partition_values(args, tmp_path, s3_config, bucket):
    """Rows spilled through the GroupByKey to one writer per key: each file's partition values
    still reach the commit."""
    uri = f"s3://{bucket}/lake/grouped"
    rows = [make_row(i) for i in range(300)]
    result = run_delta_copy(
        rows,
        tmp_path,
        args,
        table_uri=uri,
        schema=SCHEMA,
        partition_by=["region"],
        s3=s3_config,
        upload_graph="grouped",
    )
    assert result.ok and result.rows == 300, result.error
    assert {dict(f.partition)["region"] for f in result.files} == {"eu", "us", "a/b c", None}
    assert_tables_read(uri, s3_config, rows)


def test_validate_only_writes_nothing(tmp_path, s3_config, s3_client, bucket):
    rows = [make_row(i) for i in range(5)] + [dict(make_row(9), id="x")]
    uri = f"s3://{bucket}/lake/dry"
    result = run_delta_copy(rows, tmp_path, table_uri=uri, schema=SCHEMA, s3=s3_config, validate_only=True)
    assert result.dry_run and result.rows == 6 and result.invalid_rows == 1, result
    assert list_objects(s3_client, bucket, "lake/") == {}


# -- tables Spark made ---------------------------------------------------------------------------

SPARK_COLUMNS = (
    "id BIGINT NOT NULL, name STRING, amount DECIMAL(12,2), at TIMESTAMP, day DATE, tags ARRAY<STRING>, region STRING"
)


def spark_rows(ids, region: str) -> List[Dict[str, Any]]:
    """Rows as Spark's ``INSERT`` below writes them (each a ``make_row`` shape)."""
    return [
        {
            "id": i,
            "name": f"spark {i}",
            "amount": decimal.Decimal(i) / 4,
            "at": datetime.datetime(2025, 6, 1, tzinfo=UTC) + datetime.timedelta(seconds=i),
            "day": datetime.date(2025, 6, 1),
            "tags": ["s"],
            "region": region,
        }
        for i in ids
    ]


def spark_insert(spark_delta, s3_config, uri: str, rows: List[Dict[str, Any]]) -> None:
    from spark_delta import spark_sql

    values = ", ".join(
        f"({r['id']}, '{r['name']}', {r['amount']}, TIMESTAMP'{r['at']:%Y-%m-%d %H:%M:%S}', DATE'{r['day']}', "
        f"array('s'), '{r['region']}')"
        for r in rows
    )
    spark_sql(spark_delta, s3_config, f"INSERT INTO {{table}} VALUES {values}", table_uri=uri)


def test_a_table_spark_made_takes_appends_and_an_overwrite_of_partitions(
    tmp_path, spark_delta, s3_config, s3_client, bucket
):
    """Spark makes the table (partitioned, id NOT NULL) and inserts; copies append (the table's
    own partitioning, no partition_by given) and replace a partition; Spark inserts on top of
    them; every reader, Spark at the end too, reads the union exactly."""
    from spark_delta import create_delta_table_spark

    uri = f"s3://{bucket}/lake/spark_made"
    create_delta_table_spark(spark_delta, uri, s3_config, SPARK_COLUMNS, partitioned_by=("region",))
    from_spark = spark_rows(range(1, 4), "eu") + spark_rows(range(4, 6), "us")
    spark_insert(spark_delta, s3_config, uri, from_spark)
    copy = dict(table_uri=uri, schema=SCHEMA, s3=s3_config)
    appended = [make_row(i) for i in range(100, 140)]
    first = run_delta_copy(appended, tmp_path, sink_id="append", **copy)
    assert first.ok and first.snapshot_id == 2, first.error
    assert_tables_read(uri, s3_config, from_spark + appended)

    eu = [make_row(i, "eu") for i in range(200, 210)]
    over = run_delta_copy(eu, tmp_path, sink_id="eu", mode="overwrite_partitions", **copy)
    assert over.ok and over.snapshot_id == 3, over.error
    after_spark = spark_rows(range(300, 302), "us")
    spark_insert(spark_delta, s3_config, uri, after_spark)
    kept = [r for r in from_spark + appended if r["region"] != "eu"]
    assert_tables_read(uri, s3_config, kept + eu + after_spark)
    loaded = table(uri, s3_config)
    assert loaded.version() == 4 and loaded.transaction_version("eu") == 0
    assert pending_uploads(s3_client, bucket) == []


def test_what_a_spark_table_asks_and_a_copy_cannot_honour_is_refused_before_any_upload(
    tmp_path, spark_delta, s3_config, s3_client, bucket
):
    """A copy whose schema does not fit Spark's table (the column named), and tables with what a
    copy cannot honour (column mapping; row tracking, which delta-rs 1.6 refuses only at the
    commit; an overwrite of an append-only table or of one with deletion vectors): each refused
    at initialization, nothing uploaded, the table's version unchanged."""
    from spark_delta import create_delta_table_spark

    cases = [
        ("fit", {}, "append", [("id", pa.string())], "column 'id' is long in the table, string (Arrow string)"),
        ("mapped", {"delta.columnMapping.mode": "name"}, "append", [], "delta.columnMapping.mode = name"),
        ("tracked", {"delta.enableRowTracking": "true"}, "append", [], "writer feature(s) domainMetadata, rowTracking"),
        ("append_only", {"delta.appendOnly": "true"}, "overwrite", [], "delta.appendOnly = true (mode 'overwrite'"),
        ("vectors", {"delta.enableDeletionVectors": "true"}, "overwrite_partitions", [], "deletion vectors (mode"),
    ]
    for name, properties, mode, changed, message in cases:
        uri = f"s3://{bucket}/lake/{name}"
        create_delta_table_spark(
            spark_delta, uri, s3_config, SPARK_COLUMNS, partitioned_by=("region",), properties=properties
        )
        before = list_objects(s3_client, bucket, f"lake/{name}/")
        schema = pa.schema([pa.field(f.name, dict(changed).get(f.name, f.type), f.nullable) for f in SCHEMA])
        rows = [make_row(i) for i in range(5)]
        if changed:
            rows = [dict(r, id=str(r["id"])) for r in rows]
        result = run_delta_copy(
            rows, tmp_path, table_uri=uri, schema=schema, mode=mode, sink_id=name, s3=s3_config, fail_on_error=False
        )
        assert not result.ok and message in result.error, (name, result.error)
        assert list_objects(s3_client, bucket, f"lake/{name}/") == before, name
        assert table(uri, s3_config).version() == 0, name
    assert pending_uploads(s3_client, bucket) == []

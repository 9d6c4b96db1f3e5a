"""Partitions of any spec (issue 34): CopyToIceberg into tables that Spark 4.1 made and evolved,
with ``""`` kept apart from NULL, Spark's maintenance procedures on a copied table, and a
stream into a ``day(ts)`` table.

The catalog is pyiceberg's SQL catalog on PostgreSQL, which Spark opens as Iceberg's
JdbcCatalog (``iceberg_postgres``), its warehouse on moto; Spark is the session's one
``SparkIceberg`` worker (``spark_iceberg``), which now also runs SQL (``spark_sql``). Every
table is read back whole by pyiceberg, DuckDB's ``iceberg_scan`` and Spark, and filtered on
each partition source column by pyiceberg and Spark (which prune by the partition records the
copy wrote); what each read must return is computed here from the rows, and what an
``overwrite_partitions`` replaces from pyiceberg's per-value transforms. Nothing is skipped.
"""

from __future__ import annotations

import datetime
import os
import pickle
import uuid
from typing import Any, Callable, Dict, List, Sequence, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToIceberg
from iceberg_catalogs import duckdb_connect, load, read_duckdb, read_pyiceberg, read_spark, spark_sql

UTC = datetime.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("s", pa.string()),
        ("p", pa.string()),
        ("x", pa.float64()),
    ]
)
SPARK_COLUMNS = "id BIGINT, ts TIMESTAMP, d DATE, s STRING, p STRING, x DOUBLE"
STRINGS = ["", None, "abc", "abcdef", "abcdxyz", "null", "zz"]
REGIONS = ["", None, "eu", "null", "us"]


def row(i: int, j: int | None = None) -> Dict[str, Any]:
    """Row ``i`` (its values those of row ``j``, when given: the same partitions but bucket)."""
    j = i if j is None else j
    return {
        "id": i,
        "ts": None if j % 10 == 9 else datetime.datetime(2024, 1, 30, 20, tzinfo=UTC) + datetime.timedelta(hours=5 * j),
        "d": None if j % 11 == 10 else datetime.date(2023, 12, 20) + datetime.timedelta(days=9 * j),
        "s": STRINGS[j % 7],
        "p": REGIONS[j % 5],
        "x": j / 4,
    }


APPENDED = [row(i) for i in range(48)]
REPLACING = [row(1000 + j, j) for j in (0, 1, 2, 5, 7, 12)]
SPARK_ROWS = [row(2000 + j, j) for j in (3, 4, 6, 9)]  # what Spark inserts before it evolves a spec


def spark_values(rows: Sequence[Dict[str, Any]]) -> str:
    def literal(column: str, value: Any) -> str:
        if value is None:
            return "NULL"
        if column == "ts":
            return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S')}'"
        if column == "d":
            return f"DATE '{value.isoformat()}'"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)

    return ", ".join("(" + ", ".join(literal(c, r[c]) for c in SCHEMA.names) + ")" for r in rows)


def as_rows(table: pa.Table) -> List[Dict[str, Any]]:
    """Rows in id order, the columns of SCHEMA (any reader's Arrow types)."""
    return sorted(table.select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])


def run_copies(tmp_path, copies: Dict[str, Tuple[Sequence[Dict[str, Any]], Dict[str, Any]]]) -> Dict[str, Any]:
    """One DirectRunner pipeline holding one CopyToIceberg per entry (its rows, its kwargs);
    every copy's one result, by label."""
    out = tmp_path / f"results-{uuid.uuid4().hex[:6]}"
    out.mkdir()
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        for label, (rows, kwargs) in copies.items():
            result = p | f"Rows {label}" >> beam.Create(rows) | f"Copy {label}" >> CopyToIceberg(**kwargs)
            result | f"Keep {label}" >> beam.Map(_keep, str(out / f"{label}.pickle"))
    results = {}
    for label in copies:
        with open(out / f"{label}.pickle", "rb") as f:
            results[label] = pickle.load(f)
    return results


def _keep(result: Any, path: str) -> None:
    with open(path, "xb") as f:  # a second result fails the pipeline
        pickle.dump(result, f)


def catalog_arg(catalog) -> Dict[str, str]:
    return dict(catalog.props, name=catalog.name)


# -- what each read must return ------------------------------------------------------------------

FEB1 = datetime.datetime(2024, 2, 1, tzinfo=UTC)
D3 = row(3)["d"]
FILTERS: Dict[str, Tuple[str, Callable[[Dict[str, Any]], bool]]] = {
    # label: (Spark SQL condition, what it keeps)
    "ts_2_days": (
        "ts >= TIMESTAMP '2024-02-01 00:00:00' AND ts < TIMESTAMP '2024-02-03 00:00:00'",
        lambda r: r["ts"] is not None and FEB1 <= r["ts"] < FEB1 + datetime.timedelta(days=2),
    ),
    "ts_null": ("ts IS NULL", lambda r: r["ts"] is None),
    "d_eq": (f"d = DATE '{D3.isoformat()}'", lambda r: r["d"] == D3),
    "d_null": ("d IS NULL", lambda r: r["d"] is None),
    "id_eq": ("id = 7", lambda r: r["id"] == 7),
    "s_empty": ("s = ''", lambda r: r["s"] == ""),
    "s_null": ("s IS NULL", lambda r: r["s"] is None),
    "s_abcdef": ("s = 'abcdef'", lambda r: r["s"] == "abcdef"),
    "s_text_null": ("s = 'null'", lambda r: r["s"] == "null"),
    "p_empty": ("p = ''", lambda r: r["p"] == ""),
    "p_null": ("p IS NULL", lambda r: r["p"] is None),
    "p_text_null": ("p = 'null'", lambda r: r["p"] == "null"),
}


def pyiceberg_filter(label: str) -> Any:
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, IsNull, LessThan

    return {
        "ts_2_days": And(
            GreaterThanOrEqual("ts", "2024-02-01T00:00:00+00:00"), LessThan("ts", "2024-02-03T00:00:00+00:00")
        ),
        "ts_null": IsNull("ts"),
        "d_eq": EqualTo("d", D3.isoformat()),
        "d_null": IsNull("d"),
        "id_eq": EqualTo("id", 7),
        "s_empty": EqualTo("s", ""),
        "s_null": IsNull("s"),
        "s_abcdef": EqualTo("s", "abcdef"),
        "s_text_null": EqualTo("s", "null"),
        "p_empty": EqualTo("p", ""),
        "p_null": IsNull("p"),
        "p_text_null": EqualTo("p", "null"),
    }[label]


def check_filters(spark, catalog, name: str, expected: List[Dict[str, Any]]) -> set:
    """Every filter, through pyiceberg and Spark (one query for all), returns exactly the ids
    it should; returns the labels of those that found rows."""
    table = load(catalog).load_table(name)
    union = " UNION ALL ".join(
        f"SELECT '{label}' AS f, id FROM {{catalog}}.{name} WHERE {condition}"
        for label, (condition, _) in FILTERS.items()
    )
    by_spark: Dict[str, List[int]] = {label: [] for label in FILTERS}
    for found in spark_sql(spark, catalog, union).to_pylist():
        by_spark[found["f"]].append(found["id"])
    found_rows = set()
    for label, (_, keep) in FILTERS.items():
        want = sorted(r["id"] for r in expected if keep(r))
        found_rows |= {label} if want else set()
        got = sorted(table.scan(row_filter=pyiceberg_filter(label)).to_arrow().column("id").to_pylist())
        assert got == want, f"pyiceberg, {name}, {label}"
        assert sorted(by_spark[label]) == want, f"Spark, {name}, {label}"
    return found_rows


def check_every_reader(spark, catalog, name: str, expected: List[Dict[str, Any]]) -> None:
    want = sorted(expected, key=lambda r: r["id"])
    assert as_rows(read_pyiceberg(catalog, name)) == want, f"pyiceberg, {name}"
    assert as_rows(read_duckdb(catalog, name)) == want, f"DuckDB, {name}"
    assert as_rows(read_spark(spark, catalog, name)) == want, f"Spark, {name}"


def partition_key(table: Any, r: Dict[str, Any]) -> Tuple[Any, ...]:
    """``r``'s partition in the table's current spec, by pyiceberg's per-value transforms."""
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

    schema, key = table.schema(), []
    for field in table.spec().fields:
        source = schema.find_field(field.source_id)
        value = r[source.name]
        if isinstance(value, datetime.datetime):
            value = datetime_to_micros(value)
        elif isinstance(value, datetime.date):
            value = date_to_days(value)
        key.append(None if value is None else field.transform.transform(source.field_type)(value))
    return tuple(key)


# -- "" is "", NULL is NULL ----------------------------------------------------------------------


def test_empty_string_partition_values_are_not_null(tmp_path, iceberg_postgres, spark_iceberg):
    """A table created by the copy with partition_by=["p"]: ``""`` and NULL are two partitions
    (``p=`` and ``p=null``), and the string "null" a third; pyiceberg, DuckDB and Spark filter
    each exactly and Spark shows ``""``, not NULL."""
    catalog = iceberg_postgres
    namespace = f"empty_{uuid.uuid4().hex[:8]}"
    name = f"{namespace}.by_p"
    rows = APPENDED[:20]
    (result,) = run_copies(
        tmp_path, {"c": (rows, dict(table=name, catalog=catalog_arg(catalog), schema=SCHEMA, partition_by=["p"]))}
    ).values()
    assert result.ok, result.error
    assert {f.partition for f in result.files} == {(("p", v),) for v in REGIONS}
    table = load(catalog).load_table(name)
    paths = {f["file_path"].split("/data/")[1].rsplit("/", 1)[0] for f in table.inspect.files().to_pylist()}
    assert paths == {"p=", "p=null", "p=eu", "p=us"}  # NULL and "null" share Iceberg's directory, not a file
    records = sorted((f["partition"]["p"] is None, f["partition"]["p"]) for f in table.inspect.files().to_pylist())
    assert records == [(False, ""), (False, "eu"), (False, "null"), (False, "us"), (True, None)]

    from pyiceberg.expressions import EqualTo, IsNull

    def ids(found) -> List[int]:
        return sorted(found.column("id").to_pylist())

    empty = sorted(r["id"] for r in rows if r["p"] == "")
    null = sorted(r["id"] for r in rows if r["p"] is None)
    assert empty and null
    assert ids(table.scan(row_filter=EqualTo("p", "")).to_arrow()) == empty
    assert ids(table.scan(row_filter=IsNull("p")).to_arrow()) == null

    from pipelines import duckdb_s3

    con = duckdb_connect(catalog)
    try:
        scan = duckdb_s3.iceberg_scan(table.metadata_location)
        assert sorted(i for (i,) in con.execute(f"SELECT id FROM {scan} WHERE p = ''").fetchall()) == empty
        assert sorted(i for (i,) in con.execute(f"SELECT id FROM {scan} WHERE p IS NULL").fetchall()) == null
    finally:
        con.close()

    spark = {r["id"]: r["p"] for r in read_spark(spark_iceberg, catalog, name).to_pylist()}
    assert spark == {r["id"]: r["p"] for r in rows}  # "" stays "", NULL stays NULL
    assert ids(spark_sql(spark_iceberg, catalog, f"SELECT id FROM {{catalog}}.{name} WHERE p = ''")) == empty
    assert ids(spark_sql(spark_iceberg, catalog, f"SELECT id FROM {{catalog}}.{name} WHERE p IS NULL")) == null
    check_every_reader(spark_iceberg, catalog, name, rows)


def test_transform_partitions_on_the_rest_catalog(tmp_path, iceberg_rest, spark_iceberg):
    """SeaweedFS's S3 Tables catalog takes Iceberg's partition paths (``p=null``, escaped
    values) under a table's data/, and every reader reads the rows back. It refuses a key with
    an empty segment value (``p=``, Iceberg's path of ``""``; Spark's own INSERT of ``''``
    fails there the same way): that copy fails cleanly, naming the key, and leaves the table
    as it was."""
    catalog = iceberg_rest
    name = f"rest_{uuid.uuid4().hex[:8]}.t"
    rows = [dict(r, p="a/b c=d%") if r["p"] == "" else r for r in APPENDED[:30]]
    kwargs = dict(table=name, catalog=catalog_arg(catalog), schema=SCHEMA, partition_by=["p", "day(ts)"])
    (result,) = run_copies(tmp_path, {"c": (rows, dict(kwargs, sink_id="c"))}).values()
    assert result.ok, result.error
    assert any("/data/p=a%2Fb+c%3Dd%25/ts_day=" in f.uri for f in result.files), [f.uri for f in result.files]
    assert any("/data/p=null/ts_day=" in f.uri for f in result.files)
    check_every_reader(spark_iceberg, catalog, name, rows)

    empty = [dict(APPENDED[0], id=500, p="")]
    (refused,) = run_copies(tmp_path, {"e": (empty, dict(kwargs, sink_id="e", fail_on_error=False))}).values()
    assert not refused.ok and "AccessDenied" in refused.error and "/data/p=/ts_day=" in refused.error, refused.error
    assert load(catalog).load_table(name).current_snapshot().snapshot_id == result.snapshot_id
    assert as_rows(read_pyiceberg(catalog, name)) == sorted(rows, key=lambda r: r["id"])


# -- tables Spark made -------------------------------------------------------------------------

SPARK_TABLES = {
    # table: (PARTITIONED BY, statements after Spark's own insert: the evolution, or none)
    "days_ts": ("days(ts)", ()),
    "months_d": ("months(d)", ()),
    "bucket_id": ("bucket(8, id)", ()),
    "truncate_s": ("truncate(4, s)", ()),
    "identity_p": ("p", ()),
    "evolved": (
        "p",
        (
            "ALTER TABLE {table} ADD PARTITION FIELD days(ts)",
            "ALTER TABLE {table} REPLACE PARTITION FIELD p WITH bucket(4, id)",
        ),
    ),
}


def test_spark_made_tables_take_appends_and_partition_overwrites(tmp_path, iceberg_postgres, spark_iceberg):
    """Spark creates a table per transform (and one whose spec it evolves after writing rows);
    a copy appends into each with the table's current spec (no partition_by), another
    overwrites the partitions it writes; every reader reads every row back exactly, and every
    filter on a partition source column returns exactly its rows."""
    catalog = iceberg_postgres
    namespace = f"spark_{uuid.uuid4().hex[:8]}"
    load(catalog).create_namespace(namespace)
    for short, (partitioned, evolution) in SPARK_TABLES.items():
        table = f"{{catalog}}.{namespace}.{short}"
        statements = [f"CREATE TABLE {table} ({SPARK_COLUMNS}) USING iceberg PARTITIONED BY ({partitioned})"]
        if evolution:
            statements.append(f"INSERT INTO {table} VALUES {spark_values(SPARK_ROWS)}")
            statements += [s.format(table=table) for s in evolution]
        spark_sql(spark_iceberg, catalog, *statements)
    evolved = load(catalog).load_table(f"{namespace}.evolved")
    assert len(evolved.specs()) == 3
    assert [str(f.transform) for f in evolved.spec().fields] == ["day", "bucket[4]"]

    def copies(rows, mode: str, sink: str):
        return {
            short: (
                rows,
                dict(
                    table=f"{namespace}.{short}",
                    catalog=catalog_arg(catalog),
                    schema=SCHEMA,
                    mode=mode,
                    sink_id=f"{sink}-{short}",
                ),
            )
            for short in SPARK_TABLES
        }

    appended = run_copies(tmp_path, copies(APPENDED, "append", "a"))
    assert all(r.ok for r in appended.values()), {k: r.error for k, r in appended.items()}
    replaced = run_copies(tmp_path, copies(REPLACING, "overwrite_partitions", "o"))
    assert all(r.ok for r in replaced.values()), {k: r.error for k, r in replaced.items()}

    found_rows = set()
    for short in SPARK_TABLES:
        name = f"{namespace}.{short}"
        table = load(catalog).load_table(name)
        touched = {partition_key(table, r) for r in REPLACING}
        kept = [r for r in APPENDED if partition_key(table, r) not in touched]
        assert len(kept) < len(APPENDED), short  # the overwrite replaced something
        expected = (SPARK_ROWS if SPARK_TABLES[short][1] else []) + kept + REPLACING
        spec_ids = {f["spec_id"] for f in table.inspect.files().to_pylist()}
        assert spec_ids == ({0, 2} if short == "evolved" else {0}), (short, spec_ids)
        check_every_reader(spark_iceberg, catalog, name, expected)
        found_rows |= check_filters(spark_iceberg, catalog, name, expected)
    assert found_rows == set(FILTERS)  # no filter is vacuous everywhere


def test_partition_by_that_disagrees_with_a_spark_table_is_refused(tmp_path, iceberg_postgres, spark_iceberg):
    catalog = iceberg_postgres
    namespace = f"refuse_{uuid.uuid4().hex[:8]}"
    load(catalog).create_namespace(namespace)
    spark_sql(
        spark_iceberg,
        catalog,
        f"CREATE TABLE {{catalog}}.{namespace}.t ({SPARK_COLUMNS}) USING iceberg PARTITIONED BY (days(ts), bucket(8, id))",
    )
    kwargs = dict(table=f"{namespace}.t", catalog=catalog_arg(catalog), schema=SCHEMA, fail_on_error=False)
    results = run_copies(
        tmp_path,
        {
            "same": (APPENDED[:5], dict(kwargs, partition_by=["days(ts)", "bucket(8, id)"], sink_id="same")),
            "other": (APPENDED[:5], dict(kwargs, partition_by=["day(ts)"], sink_id="other")),
        },
    )
    assert results["same"].ok, results["same"].error
    assert not results["other"].ok
    assert (
        "the table is partitioned by day(ts), bucket(8, id), the copy by partition_by=['day(ts)']: "
        "pass partition_by=['day(ts)', 'bucket(8, id)'] or leave it out"
    ) in results["other"].error
    assert as_rows(read_spark(spark_iceberg, catalog, f"{namespace}.t")) == APPENDED[:5]


# -- Spark's maintenance on a copied table ---------------------------------------------------------


def test_spark_maintenance_procedures_on_a_copied_table(tmp_path, iceberg_postgres, spark_iceberg):
    """rewrite_data_files, expire_snapshots and remove_orphan_files on a table that copies made
    (partitioned by day(ts) and p): the table still reads back exactly, and a later copy adds
    to it."""
    catalog = iceberg_postgres
    namespace = f"maint_{uuid.uuid4().hex[:8]}"
    name = f"{namespace}.t"
    kwargs = dict(table=name, catalog=catalog_arg(catalog), schema=SCHEMA, partition_by=["day(ts)", "p"])
    for sink, rows in (("one", APPENDED[:24]), ("two", APPENDED[24:])):
        (result,) = run_copies(tmp_path, {sink: (rows, dict(kwargs, sink_id=sink))}).values()
        assert result.ok, result.error
    table = load(catalog).load_table(name)
    files_before = len(table.inspect.files())
    assert len(table.snapshots()) == 2

    s3 = catalog.s3.make_client()
    bucket, _, prefix = table.location().removeprefix("s3://").partition("/")
    orphan = f"{prefix}/data/ts_day=2024-02-01/p=eu/orphan-0001.parquet"
    s3.put_object(Bucket=bucket, Key=orphan, Body=b"PAR1 not a table file")
    ident = f"'{name}'"
    rewritten = spark_sql(
        spark_iceberg,
        catalog,
        f"CALL {{catalog}}.system.rewrite_data_files(table => {ident}, options => map('min-input-files', '2'))",
    ).to_pylist()
    assert rewritten[0]["rewritten_data_files_count"] > 0, rewritten
    expired = spark_sql(
        spark_iceberg,
        catalog,
        f"CALL {{catalog}}.system.expire_snapshots(table => {ident}, "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)",
    ).to_pylist()
    assert expired[0]["deleted_data_files_count"] > 0, expired
    soon = (datetime.datetime.now(UTC) + datetime.timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M:%S")
    removed = (
        spark_sql(
            spark_iceberg,
            catalog,
            f"CALL {{catalog}}.system.remove_orphan_files(table => {ident}, older_than => TIMESTAMP '{soon}', "
            "prefix_listing => true)",
            # the procedure refuses an interval under 24 hours unless Spark is under test: the orphan is minutes old
            conf={"spark.sql.legacy.setCommandRejectsSparkCoreConfs": "false", "spark.testing": "true"},
        )
        .column("orphan_file_location")
        .to_pylist()
    )
    assert removed == [f"s3://{bucket}/{orphan}"], removed

    table = load(catalog).load_table(name)
    assert len(table.snapshots()) == 1 and len(table.inspect.files()) < files_before
    check_every_reader(spark_iceberg, catalog, name, APPENDED)
    (later,) = run_copies(tmp_path, {"three": (REPLACING, dict(kwargs, sink_id="three"))}).values()
    assert later.ok, later.error
    check_every_reader(spark_iceberg, catalog, name, APPENDED + REPLACING)
    assert check_filters(spark_iceberg, catalog, name, APPENDED + REPLACING) == set(FILTERS)


# -- a stream --------------------------------------------------------------------------------------


def test_a_stream_into_a_day_partitioned_table(tmp_path, iceberg_sqlite):
    """TestStream on the DirectRunner, in 1-day windows, into a table created with
    partition_by=["day(ts)"]: every row lands once, each file's partition is the day of every
    row it holds, and each day's filter returns exactly that day's rows."""
    from apache_beam.testing import test_stream
    from apache_beam.transforms import window
    from pyiceberg.expressions import And, GreaterThanOrEqual, IsNull, LessThan

    day = 86400
    start = datetime.datetime(2024, 3, 1, tzinfo=UTC)
    events = []
    for i in range(40):
        at = i * 3 * 3600 + 1800  # every 3 hours, for 5 days
        ts = None if i % 13 == 12 else start + datetime.timedelta(seconds=at)
        events.append((at, {"id": i, "ts": ts, "d": None, "s": "s", "p": "", "x": 0.0}))
    stream = test_stream.TestStream().advance_watermark_to(0)
    for first in range(0, 40, 10):
        batch = events[first : first + 10]
        stream = stream.add_elements([window.TimestampedValue(r, at) for at, r in batch])
        stream = stream.advance_watermark_to(batch[-1][0])
    stream = stream.advance_watermark_to_infinity()
    catalog = dict(iceberg_sqlite.props, name=iceberg_sqlite.name)
    name = f"streams_{uuid.uuid4().hex[:8]}.by_day"
    out = tmp_path / "units"
    out.mkdir()
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner", "--streaming"])) as p:
        results = (
            p
            | stream
            | beam.WindowInto(window.FixedWindows(day))
            | CopyToIceberg(name, catalog=catalog, schema=SCHEMA, partition_by=["day(ts)"], sink_id="stream")
        )
        results | beam.Map(lambda r: _keep(r, os.path.join(str(out), f"{r.unit.id}.pickle")))
    units = [pickle.loads((out / f).read_bytes()) for f in sorted(os.listdir(out))]
    assert len(units) == 5 and all(u.ok for u in units), [u.error for u in units]
    rows = [r for _, r in events]
    assert as_rows(read_pyiceberg(iceberg_sqlite, name)) == rows
    assert sorted(read_duckdb(iceberg_sqlite, name).column("id").to_pylist()) == list(range(40))

    table = load(iceberg_sqlite).load_table(name)
    assert [f.name for f in table.spec().fields] == ["ts_day"]
    files = table.inspect.files().to_pylist()
    assert len(files) == len({(f["partition"]["ts_day"], f["file_path"]) for f in files})
    for f in files:
        partition_day = f["partition"]["ts_day"]
        metrics = f["readable_metrics"]["ts"]
        if partition_day is None:
            assert f["null_value_counts"] and metrics["null_value_count"] == f["record_count"]
            continue
        assert metrics["lower_bound"].date() == partition_day == metrics["upper_bound"].date(), f["file_path"]
        assert f"/data/ts_day={partition_day.isoformat()}/" in f["file_path"]
    for offset in range(5):
        low = start + datetime.timedelta(days=offset)
        found = table.scan(
            row_filter=And(
                GreaterThanOrEqual("ts", low.isoformat()),
                LessThan("ts", (low + datetime.timedelta(days=1)).isoformat()),
            )
        ).to_arrow()
        want = [r["id"] for r in rows if r["ts"] is not None and low <= r["ts"] < low + datetime.timedelta(days=1)]
        assert sorted(found.column("id").to_pylist()) == sorted(want) and want
    assert sorted(table.scan(row_filter=IsNull("ts")).to_arrow().column("id").to_pylist()) == [12, 25, 38]


@pytest.fixture(autouse=True)
def _spark_made_tables_need_the_catalog_tables(request):
    """Spark's JdbcCatalog does not create the catalog's tables (init-catalog-tables=false):
    pyiceberg's SqlCatalog makes them when it is first loaded."""
    if "iceberg_postgres" in request.fixturenames:
        request.getfixturevalue("iceberg_postgres").load()

"""iceberg_commit: schemas, data files and the one-snapshot commit, on pyiceberg's SQL catalog
(SQLite) with a file:// warehouse in tmp_path. Data files are real Parquet written with
file_schema(); their statistics come from the footer, as the package computes them."""

from __future__ import annotations

import datetime
import decimal
import logging
import os
import subprocess
import sys
from typing import Any, Dict, List, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import LongType, NestedField, TimestampType

from beam_s3_sink.formats.stats import parquet_footer_stats
from beam_s3_sink.iceberg_commit import (
    BAD_ROWS_PROPERTY,
    SINK_ID_PROPERTY,
    UNIT_PROPERTY,
    CommitConflictError,
    TableFile,
    check_schema,
    commit,
    committed_snapshot,
    data_file,
    file_schema,
    iceberg_schema,
    referenced_paths,
)

UTC = datetime.timezone.utc
PARTITION_BY = ("region", "n", "day")
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int32()),
        ("f", pa.float64()),
        ("flag", pa.bool_()),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
        ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("region", pa.string()),
        ("n", pa.int32()),
        ("day", pa.date32()),
    ]
)


def rows(region: str, n: int, day: datetime.date, ids: Sequence[int]) -> pa.Table:
    """Rows of one partition: every column varies, and each has a null (but the partition's)."""
    out: List[Dict[str, Any]] = []
    for i in ids:
        null = i % 4 == 3
        out.append(
            {
                "id": i,
                "small": None if null else -i,
                "f": None if null else (float("inf") if i % 5 == 4 else i / 3),
                "flag": None if null else i % 2 == 0,
                "name": None if null else f"name {i:03d} that is longer than sixteen",
                "amount": None if null else decimal.Decimal(i * 125) / 100,
                "ts": None if null else datetime.datetime(2024, 1, 1, 12) + datetime.timedelta(minutes=i),
                "tstz": None if null else datetime.datetime(2024, 6, 1, tzinfo=UTC) + datetime.timedelta(seconds=i),
                "tags": None if null else [f"t{i}", None][: 1 + i % 2],
                "s": None if null else {"x": i, "y": None if i % 2 else f"y{i}"},
                "region": region,
                "n": n,
                "day": day,
            }
        )
    return pa.Table.from_pylist(out, ARROW)


D1, D2 = datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)


@pytest.fixture
def catalog(tmp_path) -> SqlCatalog:
    (tmp_path / "warehouse").mkdir()
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    return catalog


def make_table(catalog: SqlCatalog, name: str = "t", partition_by=PARTITION_BY, **properties: str) -> Table:
    schema, spec = iceberg_schema(ARROW, partition_by)
    return catalog.create_table(f"ns.{name}", schema=schema, partition_spec=spec, properties=properties)


def write(table: Table, name: str, data: pa.Table, partition: Sequence[tuple] = ()) -> TableFile:
    """A Parquet data file under the table's location, as the upload step writes one."""
    uri = f"{table.location()}/data/{name}.parquet"
    path = uri[len("file://") :]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data.cast(file_schema(table.schema())), path)
    metadata = pq.ParquetFile(path).metadata
    return TableFile(uri, metadata.num_rows, os.path.getsize(path), parquet_footer_stats(metadata), tuple(partition))


def part(region: str, n: int, day: datetime.date) -> tuple:
    return (("region", region), ("n", n), ("day", day))


def read(table: Table) -> List[Dict[str, Any]]:
    return table.scan().to_arrow().sort_by("id").to_pylist()


def expected(*tables: pa.Table) -> List[Dict[str, Any]]:
    return pa.concat_tables(tables).sort_by("id").to_pylist()


def sink_snapshots(table: Table) -> List[str]:
    return [s.summary[SINK_ID_PROPERTY] for s in table.snapshots() if s.summary is not None]


# -- schemas ---------------------------------------------------------------------------------


def test_iceberg_schema_ids_are_those_the_catalog_assigns(catalog):
    schema, spec = iceberg_schema(ARROW, PARTITION_BY)
    table = catalog.create_table("ns.t", schema=schema, partition_spec=spec)
    assert table.schema().as_struct() == schema.as_struct()  # field ids, names, types, nullability
    assert [(f.source_id, f.field_id, str(f.transform), f.name) for f in table.spec().fields] == [
        (schema.find_field(name).field_id, 1000 + i, "identity", name) for i, name in enumerate(PARTITION_BY)
    ]
    assert [str(schema.find_type(c)) for c in ("amount", "ts", "tstz", "tags", "day")] == [
        "decimal(12, 2)",
        "timestamp",
        "timestamptz",
        "list<string>",
        "date",
    ]


@pytest.mark.parametrize(
    "partition_by, message",
    [
        (["nope"], "partition column 'nope' is not a column"),
        (["tags"], "partition column 'tags' has type list<string>"),
        (["day", "day"], "partition column 'day' is given twice"),
    ],
)
def test_iceberg_schema_refuses_a_bad_partition_column(partition_by, message):
    with pytest.raises(ValueError, match=message):
        iceberg_schema(ARROW, partition_by)


def test_iceberg_schema_names_a_column_without_iceberg_type():
    with pytest.raises(ValueError, match="column 'ns': Arrow type timestamp\\[ns\\] has no Iceberg type"):
        iceberg_schema(pa.schema([("a", pa.int64()), ("ns", pa.timestamp("ns"))]))


def test_file_schema_puts_field_ids_on_every_field(catalog, tmp_path):
    table = make_table(catalog)
    data_file_ = write(table, "f", rows("eu", 1, D1, [1, 2]))
    written = pq.read_schema(data_file_.uri[len("file://") :])
    ids = {name: table.schema().find_field(name).field_id for name in ("id", "tags", "tags.element", "s", "s.x")}
    assert written.field("id").metadata[b"PARQUET:field_id"] == str(ids["id"]).encode()
    assert written.field("tags").metadata[b"PARQUET:field_id"] == str(ids["tags"]).encode()
    assert written.field("tags").type.value_field.metadata[b"PARQUET:field_id"] == str(ids["tags.element"]).encode()
    assert written.field("s").type.field("x").metadata[b"PARQUET:field_id"] == str(ids["s.x"]).encode()
    assert written.field("name").type == pa.string() and pa.types.is_list(written.field("tags").type)  # not large_


def test_check_schema_accepts_the_same_and_iceberg_promotions():
    schema, _ = iceberg_schema(pa.schema([("l", pa.int64()), ("d", pa.float64()), ("dec", pa.decimal128(12, 2))]))
    check_schema(
        schema, pa.schema([("dec", pa.decimal128(12, 2)), ("l", pa.int64()), ("d", pa.float64())])
    )  # any order
    check_schema(schema, pa.schema([("l", pa.int32()), ("d", pa.float32()), ("dec", pa.decimal128(10, 2))]))
    check_schema(
        schema,
        pa.schema([pa.field("l", pa.int64(), nullable=False), ("d", pa.float64()), ("dec", pa.decimal128(12, 2))]),
    )
    large = pa.schema([("name", pa.large_string()), ("tags", pa.large_list(pa.string()))])
    check_schema(iceberg_schema(pa.schema([("name", pa.string()), ("tags", pa.list_(pa.string()))]))[0], large)
    check_schema(iceberg_schema(ARROW)[0], ARROW)


@pytest.mark.parametrize(
    "arrow, message",
    [
        (pa.schema([("l", pa.int64())]), "column 'st' \\(struct<.*>\\) of the table is missing from the copy"),
        (
            pa.schema([("l", pa.int64()), ("st", pa.struct([("x", pa.int32())])), ("extra", pa.string())]),
            "column 'extra' \\(string\\) of the copy is not in the table",
        ),
        (
            pa.schema([("l", pa.string()), ("st", pa.struct([("x", pa.int32())]))]),
            "column 'l' is long in the table, string \\(Arrow string\\) in the copy",
        ),
        (
            pa.schema([("l", pa.int64()), ("st", pa.struct([("x", pa.float64())]))]),
            "column 'st.x' is int in the table, double in the copy",
        ),
        (
            pa.schema([("l", pa.int64()), ("st", pa.struct([("x", pa.int32()), ("z", pa.int32())]))]),
            "column 'st.z' \\(int\\) of the copy is not in the table",
        ),
        (
            pa.schema([("l", pa.int64()), ("st", pa.struct([("x", pa.int64())]))]),
            "column 'st.x' is int in the table, long in the copy",  # no narrowing
        ),
        (
            pa.schema([("l", pa.int64()), ("st", pa.struct([("x", pa.int32())]))]),
            "column 'l' is required \\(long\\) in the table, nullable in the copy",
        ),
        (
            pa.schema([("l", pa.timestamp("ns")), ("st", pa.struct([("x", pa.int32())]))]),
            "column 'l': Arrow type timestamp\\[ns\\] has no Iceberg type",
        ),
    ],
)
def test_check_schema_names_the_column_and_both_types(arrow, message):
    table_schema = iceberg_schema(
        pa.schema([pa.field("l", pa.int64(), nullable=False), ("st", pa.struct([("x", pa.int32())]))])
    )[0]
    if "nullable" not in message:  # each case has one problem: l non-nullable, as the table's
        arrow = arrow.set(0, arrow.field(0).with_nullable(False))
    with pytest.raises(ValueError, match=message) as raised:
        check_schema(table_schema, arrow)
    assert "; " not in str(raised.value)  # one problem, said once


def test_check_schema_lists_element_nullability_and_types():
    table_schema = iceberg_schema(pa.schema([("tags", pa.list_(pa.field("element", pa.int64(), nullable=False)))]))[0]
    check_schema(table_schema, pa.schema([("tags", pa.list_(pa.field("item", pa.int32(), nullable=False)))]))
    with pytest.raises(
        ValueError, match="column 'tags.element' is required \\(long\\) in the table, nullable in the copy"
    ):
        check_schema(table_schema, pa.schema([("tags", pa.list_(pa.int64()))]))
    with pytest.raises(ValueError, match="column 'tags.element' is long in the table, string in the copy"):
        check_schema(table_schema, pa.schema([("tags", pa.list_(pa.field("e", pa.string(), nullable=False)))]))


# -- files -----------------------------------------------------------------------------------


def files_by_path(table: Table) -> Dict[str, Dict[str, Any]]:
    return {row["file_path"]: row for row in table.inspect.files().to_pylist()}


def test_data_file_statistics_are_those_add_files_computes(catalog):
    """Every statistic a commit stores equals what pyiceberg's add_files reads from the footer,
    but the value counts of list elements (left out) and the column sizes and split offsets,
    which the package does not collect."""
    ours, theirs = make_table(catalog, "ours"), make_table(catalog, "theirs")
    batches = [rows("eu", 1, D1, range(0, 10)), rows("us", 2, D2, range(10, 14))]
    files = [
        write(ours, f"f{i}", b, part(r, n, d))
        for i, (b, (r, n, d)) in enumerate(zip(batches, [("eu", 1, D1), ("us", 2, D2)]))
    ]
    commit(ours, files, "append", sink_id="s1")
    theirs.add_files([f.uri for f in files])

    mine, pyiceberg_s = files_by_path(ours), files_by_path(theirs)
    assert set(mine) == set(pyiceberg_s) == {f.uri for f in files}
    element_id = ours.schema().find_field("tags.element").field_id
    for path, row in mine.items():
        other = pyiceberg_s[path]
        for key in ("content", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes"):
            assert row[key] == other[key], key
        for key in ("null_value_counts", "lower_bounds", "upper_bounds"):
            assert row[key] and row[key] == other[key], key
        assert dict(row["value_counts"]) == {k: v for k, v in other["value_counts"] if k != element_id}
        assert row["readable_metrics"] == {
            column: {
                **metrics,
                "column_size": None,
                "value_count": None if column == "tags.element" else metrics["value_count"],
            }
            for column, metrics in other["readable_metrics"].items()
        }
    strings = mine[files[0].uri]["readable_metrics"]["name"]
    assert (strings["lower_bound"], strings["upper_bound"]) == ("name 000 that is", "name 009 that it")  # truncate(16)
    assert mine[files[0].uri]["readable_metrics"]["f"]["upper_bound"] == float("inf")
    assert read(ours) == read(theirs) == expected(*batches)


def test_bounds_left_out_when_the_statistics_lack_them(catalog):
    table = make_table(catalog)
    long_text = rows("eu", 1, D1, [0, 1]).set_column(4, "name", pa.array(["x" * 70, "y" * 70]))
    f = write(table, "long", long_text, part("eu", 1, D1))
    name_id = table.schema().find_field("name").field_id
    df = data_file(table, f)
    assert name_id not in df.lower_bounds and name_id not in df.upper_bounds and df.null_value_counts[name_id] == 0
    unusable = TableFile(
        f.uri,
        f.rows,
        f.bytes,
        tuple(s if s.column != "id" else type(s)("id", 0, "x", 2.5) for s in f.stats),
        f.partition,
    )
    id_id = table.schema().find_field("id").field_id
    df = data_file(table, unusable)
    assert id_id not in df.lower_bounds and id_id not in df.upper_bounds


def test_partition_values_plain_or_python(catalog):
    table = make_table(catalog)
    f = write(table, "f", rows("eu", 7, D2, [1]), part("eu", 7, D2))
    as_text = TableFile(f.uri, f.rows, f.bytes, f.stats, (("day", "2024-01-02"), ("region", "eu"), ("n", 7)))
    assert data_file(table, f).partition == data_file(table, as_text).partition
    assert list(data_file(table, f).partition) == ["eu", 7, (D2 - datetime.date(1970, 1, 1)).days]
    with pytest.raises(ValueError, match="no value for partition field 'day' \\(day; given: \\['n', 'region'\\]\\)"):
        data_file(table, TableFile(f.uri, 1, 1, (), (("region", "eu"), ("n", 7))))


def test_a_transform_partition_is_typed_as_its_result(catalog):
    schema = Schema(NestedField(1, "ts", TimestampType()), NestedField(2, "v", LongType()))
    spec = PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=2, field_id=1001, transform=BucketTransform(8), name="v_bucket"),
    )
    table = catalog.create_table("ns.days", schema=schema, partition_spec=spec)
    f = TableFile("file:///x.parquet", 1, 1, (), (("ts_day", "2024-01-02"), ("v_bucket", 3)))
    assert list(data_file(table, f).partition) == [(D2 - datetime.date(1970, 1, 1)).days, 3]
    with pytest.raises(ValueError, match="no value for partition field 'ts_day' \\(day\\(ts\\); given: \\['ts'\\]\\)"):
        data_file(table, TableFile("file:///x.parquet", 1, 1, (), (("ts", datetime.datetime(2024, 1, 1)),)))


# -- the commit ------------------------------------------------------------------------------


def test_modes_append_append_overwrite_overwrite_partitions(catalog):
    table = make_table(catalog)
    a = rows("eu", 1, D1, range(0, 4))
    b = rows("us", 2, D2, range(4, 8))
    c = rows("eu", 1, D1, range(8, 10))
    d = rows("us", 2, D2, range(10, 12))
    e = rows("eu", 1, D1, range(12, 13))
    fa, fb = write(table, "a", a, part("eu", 1, D1)), write(table, "b", b, part("us", 2, D2))
    fc, fd = write(table, "c", c, part("eu", 1, D1)), write(table, "d", d, part("us", 2, D2))
    fe = write(table, "e", e, part("eu", 1, D1))

    first = commit(table, [fa], "append", sink_id="s1")
    assert read(table) == expected(a)
    second = commit(table, [fb], "append", sink_id="s2")
    assert read(table) == expected(a, b)
    assert referenced_paths(table) == {fa.uri, fb.uri}

    third = commit(table, [fc, fd], "overwrite", sink_id="s3")
    assert read(table) == expected(c, d) and referenced_paths(table) == {fc.uri, fd.uri}

    fourth = commit(table, [fe], "overwrite_partitions", sink_id="s4")
    assert read(table) == expected(d, e)  # eu/1/D1 replaced, us/2/D2 kept
    assert referenced_paths(table) == {fd.uri, fe.uri}
    assert referenced_paths(table, every_snapshot=True) == {f.uri for f in (fa, fb, fc, fd, fe)}  # time travel

    snapshots = table.snapshots()
    assert [s.snapshot_id for s in snapshots] == [first, second, third, fourth]  # one snapshot per commit
    assert [s.summary.operation.value for s in snapshots] == ["append", "append", "overwrite", "overwrite"]
    assert sink_snapshots(table) == ["s1", "s2", "s3", "s4"]
    assert [s.summary["added-data-files"] for s in snapshots] == ["1", "1", "2", "1"]
    assert [s.summary["deleted-data-files"] for s in snapshots] == [None, None, "2", "1"]
    assert table.current_snapshot().snapshot_id == fourth


def test_overwrite_partitions_of_an_unpartitioned_table_replaces_it(catalog):
    table = make_table(catalog, partition_by=())
    a, b = rows("eu", 1, D1, [1, 2]), rows("us", 2, D2, [3])
    commit(table, [write(table, "a", a)], "append", sink_id="s1")
    commit(table, [write(table, "b", b)], "overwrite_partitions", sink_id="s2")
    assert read(table) == expected(b)


def test_summary_names_the_sink_and_the_unit(catalog):
    table = make_table(catalog)
    a = rows("eu", 1, D1, [1])
    snapshot_id = commit(table, [write(table, "a", a, part("eu", 1, D1))], "append", sink_id="copy-7", unit="w1/p0")
    summary = table.snapshot_by_id(snapshot_id).summary
    assert (summary[SINK_ID_PROPERTY], summary[UNIT_PROPERTY]) == ("copy-7", "w1/p0")
    assert committed_snapshot(table, "copy-7", "w1/p0").snapshot_id == snapshot_id
    assert committed_snapshot(table, "copy-7") is None  # a bounded copy of that id is another thing
    assert committed_snapshot(table, "copy-7", "w2/p0") is None
    assert committed_snapshot(table, "copy-8", "w1/p0") is None

    plain = commit(table, [], "append", sink_id="copy-9")
    assert UNIT_PROPERTY not in table.snapshot_by_id(plain).summary.additional_properties
    assert committed_snapshot(table, "copy-9").snapshot_id == plain


def test_a_rerun_commits_nothing_and_reports_the_snapshot(catalog):
    table = make_table(catalog)
    a, b = rows("eu", 1, D1, [1, 2]), rows("us", 2, D2, [3])
    fa = write(table, "a", a, part("eu", 1, D1))
    first = commit(table, [fa], "append", sink_id="s1")
    commit(table, [write(table, "b", b, part("us", 2, D2))], "append", sink_id="s2")

    again = catalog.load_table("ns.t")
    assert committed_snapshot(again, "s1").snapshot_id == first  # not the current snapshot: walks them all
    assert commit(again, [fa], "append", sink_id="s1") == first
    assert commit(again, [fa], "overwrite", sink_id="s1") == first
    assert len(again.snapshots()) == 2 and read(again) == expected(a, b)


def test_no_files_still_commits_one_snapshot(catalog):
    table = make_table(catalog)
    a, b = rows("eu", 1, D1, [1, 2]), rows("us", 2, D2, [3])
    commit(table, [write(table, "a", a, part("eu", 1, D1)), write(table, "b", b, part("us", 2, D2))], "append", "s1")

    empty_append = commit(table, [], "append", sink_id="s2")  # adds nothing, records the copy
    assert table.current_snapshot().snapshot_id == empty_append and read(table) == expected(a, b)
    empty_partitions = commit(table, [], "overwrite_partitions", sink_id="s3")  # wrote no partition: removes none
    assert table.current_snapshot().snapshot_id == empty_partitions and read(table) == expected(a, b)
    empty_overwrite = commit(table, [], "overwrite", sink_id="s4")  # empties the table
    assert table.current_snapshot().snapshot_id == empty_overwrite
    assert read(table) == [] and referenced_paths(table) == set()
    assert sink_snapshots(table) == ["s1", "s2", "s3", "s4"]


def test_an_empty_first_commit(catalog):
    table = make_table(catalog)
    snapshot_id = commit(table, [], "overwrite", sink_id="s1")
    assert table.current_snapshot().snapshot_id == snapshot_id and read(table) == []
    assert referenced_paths(table) == set()


@pytest.mark.parametrize("pyiceberg_retries", [None, "0"], ids=["pyiceberg-retries", "our-retries-alone"])
def test_two_appends_from_tables_loaded_before_either_commit_both_land(catalog, caplog, pyiceberg_retries):
    properties = {} if pyiceberg_retries is None else {"commit.retry.num-retries": pyiceberg_retries}
    make_table(catalog, **properties)
    one, two = catalog.load_table("ns.t"), catalog.load_table("ns.t")
    a, b = rows("eu", 1, D1, [1, 2]), rows("us", 2, D2, [3])
    fa, fb = write(one, "a", a, part("eu", 1, D1)), write(two, "b", b, part("us", 2, D2))
    with caplog.at_level(logging.WARNING):
        first = commit(one, [fa], "append", sink_id="s1")
        second = commit(two, [fb], "append", sink_id="s2")  # its base is stale: a conflict, then a retry
    table = catalog.load_table("ns.t")
    assert [s.snapshot_id for s in table.snapshots()] == [first, second]
    assert read(table) == expected(a, b) and referenced_paths(table) == {fa.uri, fb.uri}
    if pyiceberg_retries == "0":
        assert "commit of sink s2 (attempt 1 of 5) lost to a concurrent commit" in caplog.text


@pytest.mark.parametrize("pyiceberg_retries", [None, "0"], ids=["pyiceberg-retries", "our-retries-alone"])
def test_an_overwrite_that_loses_the_race_to_an_append_removes_its_files_too(catalog, pyiceberg_retries):
    properties = {} if pyiceberg_retries is None else {"commit.retry.num-retries": pyiceberg_retries}
    make_table(catalog, **properties)
    base = catalog.load_table("ns.t")
    a = rows("eu", 1, D1, [1])
    commit(base, [write(base, "a", a, part("eu", 1, D1))], "append", sink_id="s0")

    appender, overwriter = catalog.load_table("ns.t"), catalog.load_table("ns.t")
    b, c = rows("us", 2, D2, [2]), rows("eu", 1, D1, [3])
    fb, fc = write(appender, "b", b, part("us", 2, D2)), write(overwriter, "c", c, part("eu", 1, D1))
    commit(appender, [fb], "append", sink_id="s1")
    commit(overwriter, [fc], "overwrite", sink_id="s2")  # planned on the snapshot before s1's
    table = catalog.load_table("ns.t")
    assert sink_snapshots(table) == ["s0", "s1", "s2"]
    assert read(table) == expected(c) and referenced_paths(table) == {fc.uri}  # ordered after the append


def test_overwrite_partitions_that_loses_the_race_recomputes_its_partitions(catalog):
    make_table(catalog, **{"commit.retry.num-retries": "0"})
    late, early = catalog.load_table("ns.t"), catalog.load_table("ns.t")
    a, b = rows("eu", 1, D1, [1]), rows("eu", 1, D1, [2])
    commit(early, [write(early, "a", a, part("eu", 1, D1))], "append", sink_id="s1")
    commit(late, [write(late, "b", b, part("eu", 1, D1))], "overwrite_partitions", sink_id="s2")
    assert read(catalog.load_table("ns.t")) == expected(b)


def test_gives_up_after_max_attempts_with_a_clear_error(catalog, monkeypatch):
    table = make_table(catalog, **{"commit.retry.num-retries": "0"})
    calls = []

    def conflict(*args, **kwargs):
        calls.append(1)
        raise CommitFailedException("Requirement failed: branch main has changed")

    monkeypatch.setattr(catalog, "commit_table", conflict)
    f = write(table, "a", rows("eu", 1, D1, [1]), part("eu", 1, D1))
    with pytest.raises(
        CommitConflictError, match="the append of sink s1 \\(1 files\\) did not commit in 3 attempts"
    ) as e:
        commit(table, [f], "append", sink_id="s1", max_attempts=3)
    assert "branch main has changed" in str(e.value) and isinstance(e.value.__cause__, CommitFailedException)
    assert len(calls) == 3
    monkeypatch.undo()
    assert catalog.load_table("ns.t").snapshots() == []


def test_bad_arguments(catalog):
    table = make_table(catalog)
    with pytest.raises(ValueError, match="unknown mode 'upsert': one of append, overwrite, overwrite_partitions"):
        commit(table, [], "upsert", sink_id="s1")
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        commit(table, [], "append", sink_id="s1", max_attempts=0)


def test_importing_the_module_needs_no_pyiceberg():
    code = "import sys; sys.modules['pyiceberg'] = None; import beam_s3_sink, beam_s3_sink.iceberg_commit"
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    )


# -- partitions of any spec ------------------------------------------------------------------

TRANSFORMED = ("day(ts)", "bucket(4, id)", "truncate(3, name)", "region")


def write_routed(table: Table, prefix: str, data: pa.Table, spec_id=None) -> List[TableFile]:
    """Files as the upload step writes them: ``data`` split by the table's current spec
    (:class:`TableLayout`), one Parquet file per partition, each with its partition record."""
    from beam_s3_sink.table_layout import TableLayout

    layout = TableLayout.of(table.spec(), table.schema())
    schema = file_schema(table.schema())
    files = []
    for i, part_ in enumerate(layout.split(data.cast(schema).combine_chunks().to_batches()[0], schema)):
        f = write(table, f"{prefix}/{part_.directory}/f{i}", pa.Table.from_batches([part_.rows]), part_.partition)
        files.append(
            TableFile(f.uri, f.rows, f.bytes, f.stats, f.partition, layout.spec_id if spec_id is None else spec_id)
        )
    return files


def transformed_rows(ids: Sequence[int]) -> pa.Table:
    out = rows("eu", 1, D1, ids).to_pylist()
    for row in out:
        row["region"] = ["", None, "eu", "null"][row["id"] % 4]
        row["name"] = [None, "", "ab", "abcdef", "abcxyz"][row["id"] % 5]
    return pa.Table.from_pylist(out, ARROW)


def test_a_transformed_spec_commits_typed_records_that_every_filter_finds(catalog):
    """Files routed by day, bucket, truncate and identity: each file's partition record is
    typed as Iceberg wants it (pyiceberg's inspect shows the values), and pyiceberg's scans
    with filters on each source column (pruned by those records) return exactly the rows."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, IsNull, LessThan

    table = make_table(catalog, partition_by=TRANSFORMED)
    assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[4]", "truncate[3]", "identity"]
    data = transformed_rows(range(40))
    files = write_routed(table, "a", data)
    commit(table, files, "append", sink_id="s1")
    assert read(table) == expected(data)
    partitions = {tuple(p.values()) for p in table.inspect.files().column("partition").to_pylist()}
    assert {p[0] for p in partitions} == {D1, None}  # day(ts): a date; ts is null in every 4th row
    assert {p[1] for p in partitions} == {0, 1, 2, 3}  # bucket(4, id)
    assert {p[2] for p in partitions} == {None, "", "ab", "abc"}
    assert {p[3] for p in partitions} == {"", None, "eu", "null"}

    source = data.to_pylist()
    noon = datetime.datetime(2024, 1, 1, 12)
    filters = {
        "region = ''": (EqualTo("region", ""), lambda r: r["region"] == ""),
        "region IS NULL": (IsNull("region"), lambda r: r["region"] is None),
        "region = 'null'": (EqualTo("region", "null"), lambda r: r["region"] == "null"),
        "name = ''": (EqualTo("name", ""), lambda r: r["name"] == ""),
        "name IS NULL": (IsNull("name"), lambda r: r["name"] is None),
        "name = 'abcdef'": (EqualTo("name", "abcdef"), lambda r: r["name"] == "abcdef"),
        "id = 13": (EqualTo("id", 13), lambda r: r["id"] == 13),
        "ts in 12:10-12:20": (
            And(GreaterThanOrEqual("ts", "2024-01-01T12:10:00"), LessThan("ts", "2024-01-01T12:20:00")),
            lambda r: (
                r["ts"] is not None
                and noon + datetime.timedelta(minutes=10) <= r["ts"] < noon + datetime.timedelta(minutes=20)
            ),
        ),
        "ts IS NULL": (IsNull("ts"), lambda r: r["ts"] is None),
    }
    for label, (row_filter, keep) in filters.items():
        got = sorted(table.scan(row_filter=row_filter).to_arrow().column("id").to_pylist())
        assert got == sorted(r["id"] for r in source if keep(r)), label
        assert got, label  # each filter finds rows


def test_overwrite_partitions_replaces_the_transformed_partitions_written(catalog):
    table = make_table(catalog, partition_by=("bucket(4, id)",))
    first = transformed_rows(range(40))
    commit(table, write_routed(table, "a", first), "append", sink_id="s1")
    second = transformed_rows([100, 104, 108])  # bucket(4) of these is one bucket
    files = write_routed(table, "b", second)
    assert len({f.partition for f in files}) == 1
    ((_, bucket),) = files[0].partition
    commit(table, files, "overwrite_partitions", sink_id="s2")
    kept = [r for r in first.to_pylist() if r["id"] is None or _bucket4(r["id"]) != bucket]
    assert len(kept) < first.num_rows
    assert read(table) == sorted(kept + second.to_pylist(), key=lambda r: r["id"])


def _bucket4(value: int) -> int:
    from pyiceberg.transforms import BucketTransform

    return BucketTransform(4).transform(LongType())(value)


def test_a_spec_changed_since_the_files_were_written_fails_the_commit(catalog):
    table = make_table(catalog, partition_by=("region",))
    files = write_routed(table, "a", transformed_rows(range(8)))
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
    with pytest.raises(
        ValueError,
        match="the table's partition spec changed while the copy ran: its files are "
        "partitioned by spec 0 \\(region\\), the table's is now spec 1 \\(region, bucket\\(4, id\\)\\)",
    ):
        commit(table, files, "append", sink_id="s1")
    assert table.current_snapshot() is None


def test_files_of_the_current_spec_after_an_evolution(catalog):
    """Old files stay in their spec; a copy in the evolved spec adds its files with it, and an
    overwrite_partitions replaces only current-spec files (as Iceberg's ReplacePartitions)."""
    table = make_table(catalog, partition_by=("region",))
    old = transformed_rows(range(8))
    commit(table, write_routed(table, "a", old), "append", sink_id="s1")
    with table.update_spec() as update:
        update.add_field("ts", DayTransform(), "ts_day")
    table = catalog.load_table("ns.t")
    new = transformed_rows(range(8, 16))
    commit(table, write_routed(table, "b", new), "append", sink_id="s2")
    again = transformed_rows(range(16, 20))
    commit(table, write_routed(table, "c", again), "overwrite_partitions", sink_id="s3")
    specs = sorted(table.inspect.files().column("spec_id").to_pylist())
    assert specs == [0] * 4 + [1] * 4  # 4 regions: old ones kept, the new spec's replaced
    assert read(table) == expected(old, again)


def test_nan_counts_of_float_and_double_columns(catalog):
    from beam_s3_sink.formats import ParquetFormat

    table = make_table(catalog, partition_by=())
    data = rows("eu", 1, D1, range(6))
    data = data.set_column(2, "f", pa.array([float("nan"), 1.0, None, float("nan"), float("nan"), 2.0]))
    schema = file_schema(table.schema())
    uri = f"{table.location()}/data/nan.parquet"
    os.makedirs(os.path.dirname(uri[len("file://") :]), exist_ok=True)
    with open(uri[len("file://") :], "wb") as out:
        encoder = ParquetFormat(types="exact").open(schema, out, 2**30)
        for batch in data.cast(schema).to_batches():
            encoder.write(batch)
        encoder.close()
    stats = encoder.stats()
    assert {s.column: s.nan_count for s in stats if s.nan_count is not None} == {"f": 3}
    f = TableFile(uri, 6, os.path.getsize(uri[len("file://") :]), stats)
    df = data_file(table, f)
    f_id = table.schema().find_field("f").field_id
    assert df.nan_value_counts == {f_id: 3}
    commit(table, [f], "append", sink_id="s1")
    (row,) = table.inspect.files().to_pylist()
    assert dict(row["nan_value_counts"]) == {f_id: 3}
    assert row["readable_metrics"]["f"]["nan_value_count"] == 3
    assert row["readable_metrics"]["f"]["lower_bound"] == 1.0 and row["readable_metrics"]["f"]["upper_bound"] == 2.0


def test_the_snapshot_summary_counts_the_bad_rows_left_out(catalog):
    table = make_table(catalog, "bad")
    files = [write(table, "f0", rows("eu", 1, D1, range(0, 10)), part("eu", 1, D1))]
    commit(table, files, "append", sink_id="s1", bad_rows=3)
    assert table.current_snapshot().summary[BAD_ROWS_PROPERTY] == "3"
    commit(table, [], "append", sink_id="s2")
    table.refresh()
    assert table.current_snapshot().summary[BAD_ROWS_PROPERTY] is None  # none left out: not named

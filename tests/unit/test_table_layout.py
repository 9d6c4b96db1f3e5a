"""table_layout: partition_by expressions, a table's partitions computed with pyiceberg's
transforms on Arrow columns, directories as Iceberg names them, and partition records that
keep ``""`` apart from null. Each partition is checked against pyiceberg's per-value
(Python) transform, not the Arrow one the layout uses."""

from __future__ import annotations

import datetime
import decimal
import pickle
from typing import Any, Dict, List

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform, VoidTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

from beam_s3_sink.errors import RowError
from beam_s3_sink.iceberg_commit import iceberg_schema
from beam_s3_sink.table_layout import (
    PartitionExpression,
    TableLayout,
    expression_text,
    parse_partition_by,
    partition_json,
    partition_value,
    table_layout_for,
)

UTC = datetime.timezone.utc
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("s", pa.string()),
        ("amount", pa.decimal128(9, 2)),
        ("b", pa.binary()),
        ("flag", pa.bool_()),
        ("x", pa.float64()),
    ]
)


def data(n: int = 60) -> pa.RecordBatch:
    """Rows whose every column varies, with nulls, ``""``, ``"null"``, dates before 1970 and
    timestamps on both sides of midnight."""
    rows: List[Dict[str, Any]] = []
    for i in range(n):
        at = datetime.datetime(1969, 12, 30, 22) + datetime.timedelta(hours=7 * i)
        rows.append(
            {
                "id": None if i % 11 == 10 else i * 7 - 50,
                "n": i % 5 - 2,
                "ts": None if i % 9 == 8 else at,
                "tstz": at.replace(tzinfo=UTC) + datetime.timedelta(days=400 * (i % 3)),
                "d": None if i % 13 == 12 else datetime.date(1969, 11, 1) + datetime.timedelta(days=17 * i),
                "s": ["", None, "null", "abcdef", "abc", "ab/cd=é", "abcdxyz"][i % 7],
                "amount": decimal.Decimal(i * 37 - 400) / 100,
                "b": [b"", None, b"\x00\x01\x02\x03\x04", b"xy"][i % 4],
                "flag": [True, False, None][i % 3],
                "x": float(i),
            }
        )
    return pa.RecordBatch.from_pylist(rows, schema=ARROW)


def layout_of(*partition_by: str) -> TableLayout:
    schema, spec = iceberg_schema(ARROW, partition_by)
    return TableLayout.of(spec, schema)


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, column, transform, name",
    [
        ("region", "region", "identity", "region"),
        ("identity(region)", "region", "identity", "region"),
        ("year(ts)", "ts", "year", "ts_year"),
        ("years(ts)", "ts", "year", "ts_year"),
        ("months( d )", "d", "month", "d_month"),
        ("DAYS(ts)", "ts", "day", "ts_day"),
        ("hours(ts)", "ts", "hour", "ts_hour"),
        ("bucket(16, id)", "id", "bucket[16]", "id_bucket"),
        ("bucket(id, 16)", "id", "bucket[16]", "id_bucket"),
        ("truncate(4,s)", "s", "truncate[4]", "s_trunc"),
        ("void(x)", "x", "void", "x_null"),
    ],
)
def test_parse_partition_by_spellings(text, column, transform, name):
    (expression,) = parse_partition_by([text])
    assert (expression.column, expression.transform, expression.name) == (column, transform, name)
    assert parse_partition_by([str(expression)]) == (expression,)  # the canonical spelling parses back


@pytest.mark.parametrize(
    "partition_by, message",
    [
        (["week(ts)"], "partition_by 'week\\(ts\\)': unknown transform 'week' \\(identity, year, month"),
        (["bucket(id)"], "partition_by 'bucket\\(id\\)': bucket takes a positive width and a column"),
        (["bucket(0, id)"], "bucket takes a positive width"),
        (["truncate(a, b)"], "truncate takes a positive width and a column"),
        (["day(a, b)"], "partition_by 'day\\(a, b\\)': day takes one column"),
        (["day()"], "day takes one column"),
        (["a(b"], "partition_by 'a\\(b': not a column name or a transform"),
        ([""], "give a column name or a transform"),
        (["ts", "identity(ts)"], "partition column 'ts' is given twice \\(ts\\)"),
        (["day(ts)", "days(ts)"], "partition column 'ts' is given twice \\(day\\(ts\\)\\)"),
    ],
)
def test_parse_partition_by_refuses_with_the_entry_and_the_problem(partition_by, message):
    with pytest.raises(ValueError, match=message):
        parse_partition_by(partition_by)


def test_two_transforms_of_one_column_are_two_fields():
    schema, spec = iceberg_schema(ARROW, ["day(ts)", "hour(ts)", "ts"])
    assert [(f.name, str(f.transform)) for f in spec.fields] == [
        ("ts_day", "day"),
        ("ts_hour", "hour"),
        ("ts", "identity"),
    ]


@pytest.mark.parametrize(
    "partition_by, message",
    [
        (["day(s)"], "partition_by 'day\\(s\\)': the day transform does not apply to column 's' of type string"),
        (["truncate(2, flag)"], "the truncate\\[2\\] transform does not apply to column 'flag' of type boolean"),
        (["bucket(4, x)"], "the bucket\\[4\\] transform does not apply to column 'x' of type double"),
        (["hours(d)"], "the hour transform does not apply to column 'd' of type date"),
        (["day(nope)"], "partition column 'nope' is not a column of the schema"),
    ],
)
def test_iceberg_schema_refuses_a_transform_that_does_not_apply(partition_by, message):
    with pytest.raises(ValueError, match=message):
        iceberg_schema(ARROW, partition_by)


def test_expression_text():
    assert [expression_text(t, "c") for t in ("identity", "year", "bucket[3]", "truncate[10]", "void")] == [
        "c",
        "year(c)",
        "bucket(3, c)",
        "truncate(10, c)",
        "void(c)",
    ]
    assert str(PartitionExpression("id", "bucket[8]")) == "bucket(8, id)"


# -- routing ---------------------------------------------------------------------------------

TRANSFORMS = [
    "s",
    "n",
    "d",
    "flag",
    "amount",
    "b",
    "tstz",
    "year(ts)",
    "month(ts)",
    "day(ts)",
    "hour(ts)",
    "day(tstz)",
    "hour(tstz)",
    "year(d)",
    "month(d)",
    "day(d)",
    "bucket(5, id)",
    "bucket(3, n)",
    "bucket(4, s)",
    "bucket(4, d)",
    "bucket(4, ts)",
    "bucket(4, amount)",
    "bucket(4, b)",
    "truncate(3, s)",
    "truncate(10, id)",
    "truncate(4, n)",
    "truncate(50, amount)",
    "truncate(2, b)",
    "void(s)",
]


@pytest.mark.parametrize("expression", TRANSFORMS)
def test_each_transform_routes_every_row_to_its_own_partition(expression):
    """Every row lands once, in the part whose record is pyiceberg's per-value transform of the
    row's value (typed as the field's result type), and each part's directory is the one
    pyiceberg names for that record."""
    from pyiceberg.typedef import Record

    layout = layout_of(expression)
    batch = data()
    (field,) = layout.spec.fields
    source = layout.schema.find_field(field.source_id)
    result_type = field.transform.result_type(source.field_type)
    per_value = field.transform.transform(source.field_type)
    parts = layout.split(batch, ARROW)
    assert sum(p.rows.num_rows for p in parts) == batch.num_rows
    assert len({p.partition for p in parts}) == len(parts)  # one part per partition
    for part in parts:
        ((name, value),) = part.partition
        assert name == field.name
        record_value = partition_value(result_type, value)
        assert partition_json(result_type, record_value) == value  # JSON-ready, and round trips
        for row in part.rows.to_pylist():
            raw = _internal_source(source.field_type, row[source.name])
            expected = None if raw is None else per_value(raw)
            assert record_value == expected, (expression, row[source.name])
        assert part.directory == layout.spec.partition_to_path(Record(record_value), layout.schema)
    assert {p.rows.schema for p in parts} == {ARROW}  # every column stays in the files


def _internal_source(typ: Any, value: Any) -> Any:
    """A source value as pyiceberg's per-value transforms take it."""
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

    if value is None:
        return None
    if isinstance(typ, DateType):
        return date_to_days(value)
    if isinstance(typ, (TimestampType, TimestamptzType)):
        return datetime_to_micros(value)
    return value


def test_empty_string_null_and_the_string_null_are_three_partitions():
    layout = layout_of("s")
    batch = pa.RecordBatch.from_pylist([{"s": v} for v in ["", None, "null", "", "a", None]], schema=ARROW)
    parts = {p.partition: (p.directory, p.rows.column("s").to_pylist()) for p in layout.split(batch, ARROW)}
    assert parts == {
        (("s", ""),): ("s=", ["", ""]),
        (("s", None),): ("s=null", [None, None]),
        (("s", "null"),): ("s=null", ["null"]),  # Iceberg's path is the same: the record is not
        (("s", "a"),): ("s=a", ["a"]),
    }


def test_several_fields_name_nested_directories_escaped_as_iceberg_does():
    layout = layout_of("day(ts)", "bucket(16, id)", "s")
    batch = pa.RecordBatch.from_pylist(
        [{"ts": datetime.datetime(2024, 1, 1, 23, 59), "id": 1, "s": "a/b c=d"}], schema=ARROW
    )
    (part,) = layout.split(batch, ARROW)
    assert part.directory == "ts_day=2024-01-01/id_bucket=4/s=a%2Fb+c%3Dd"
    assert part.partition == (("ts_day", "2024-01-01"), ("id_bucket", 4), ("s", "a/b c=d"))


def test_check_names_the_field_the_transform_and_the_column():
    layout = layout_of("day(ts)")
    layout.check(ARROW)
    with pytest.raises(ValueError, match="partition field 'ts_day' \\(day\\(ts\\)\\): the copy has no column 'ts'"):
        layout.check(pa.schema([("id", pa.int64())]))
    with pytest.raises(
        ValueError, match="partition field 'ts_day' \\(day\\(ts\\)\\) cannot be computed on column 'ts'"
    ):
        layout.check(pa.schema([("ts", pa.string())]))


def test_a_value_the_transform_cannot_take_is_a_row_error():
    layout = layout_of("day(ts)")
    schema = pa.schema([("ts", pa.string())])
    with pytest.raises(RowError, match="partition field 'ts_day' \\(day\\(ts\\)\\): a value of column 'ts'"):
        layout.split(pa.record_batch([["x"]], schema=schema), schema)


def test_a_nested_source_column():
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import NestedField, StructType

    schema = Schema(NestedField(1, "s", StructType(NestedField(2, "x", LongType())), required=False))
    spec = PartitionSpec(PartitionField(2, 1000, BucketTransform(2), "s_x_bucket"))
    layout = TableLayout.of(spec, schema)
    arrow = pa.schema([("s", pa.struct([("x", pa.int64())]))])
    batch = pa.RecordBatch.from_pylist([{"s": {"x": 1}}, {"s": None}, {"s": {"x": 2}}], schema=arrow)
    parts = {p.partition: p.rows.num_rows for p in layout.split(batch, arrow)}
    assert parts == {(("s_x_bucket", 0),): 2, (("s_x_bucket", None),): 1}  # bucket(2) of 1 and 2 is 0


def test_layout_pickles_and_keeps_its_spec():
    layout = layout_of("day(ts)", "s")
    layout.split(data(5), ARROW)  # parsed once, cached
    again = pickle.loads(pickle.dumps(layout))
    assert again == layout and again.describe() == "day(ts), s" and again.partition_by == ("ts", "s")
    assert [p.partition for p in again.split(data(5), ARROW)] == [p.partition for p in layout.split(data(5), ARROW)]


def test_unpartitioned_layout():
    layout = layout_of()
    assert layout.partition_by == () and layout.describe() == "nothing" and layout.file_schema(ARROW) is ARROW


# -- the table's spec against partition_by ---------------------------------------------------


def test_table_layout_for_takes_the_tables_spec_or_an_agreeing_partition_by():
    schema, spec = iceberg_schema(ARROW, ["day(ts)", "bucket(16, id)", "s"])
    assert table_layout_for(spec, schema, ()).describe() == "day(ts), bucket(16, id), s"
    agreeing = parse_partition_by(["days(ts)", "bucket(id, 16)", "identity(s)"])
    assert table_layout_for(spec, schema, agreeing).spec == spec


def test_table_layout_for_names_both_specs_when_they_disagree():
    schema, spec = iceberg_schema(ARROW, ["day(ts)", "bucket(16, id)"])
    with pytest.raises(ValueError) as caught:
        table_layout_for(spec, schema, parse_partition_by(["month(ts)", "bucket(16, id)"]))
    assert str(caught.value) == (
        "the table is partitioned by day(ts), bucket(16, id), the copy by partition_by=['month(ts)', "
        "'bucket(16, id)']: pass partition_by=['day(ts)', 'bucket(16, id)'] or leave it out (a copy writes "
        "with the table's current partition spec)"
    )


def test_a_void_field_is_a_dropped_one():
    """A v1 table's dropped field stays as void: partition_by need not name it, its record is null."""
    schema, _ = iceberg_schema(ARROW)
    s = schema.find_field("s").field_id
    ts = schema.find_field("ts").field_id
    spec = PartitionSpec(
        PartitionField(s, 1000, VoidTransform(), "s"), PartitionField(ts, 1001, IdentityTransform(), "ts")
    )
    layout = table_layout_for(spec, schema, parse_partition_by(["ts"]))
    batch = pa.RecordBatch.from_pylist([{"s": "a", "ts": datetime.datetime(2024, 1, 1)}], schema=ARROW)
    (part,) = layout.split(batch, ARROW)
    assert part.partition == (("s", None), ("ts", "2024-01-01T00:00:00"))


# -- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typ, record, json",
    [
        (StringType(), "", ""),
        (StringType(), None, None),
        (IntegerType(), 3, 3),
        (LongType(), -7, -7),
        (BooleanType(), False, False),
        (DoubleType(), 1.5, 1.5),
        (DateType(), 19724, "2024-01-02"),
        (TimestampType(), 1_704_164_645_000_001, "2024-01-02T03:04:05.000001"),
        (TimestamptzType(), 0, "1970-01-01T00:00:00+00:00"),
        (DecimalType(9, 2), decimal.Decimal("-1.50"), "-1.50"),
        (BinaryType(), b"\x00\xff", "00ff"),
        (UUIDType(), b"\x12" * 16, "12121212-1212-1212-1212-121212121212"),
    ],
)
def test_partition_values_json_and_back(typ, record, json):
    assert partition_json(typ, record) == json
    assert partition_value(typ, json) == record
    assert type(partition_value(typ, json)) is type(record)


def test_partition_value_takes_python_values():
    assert partition_value(DateType(), datetime.date(1970, 1, 3)) == 2
    assert partition_value(TimestampType(), datetime.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000

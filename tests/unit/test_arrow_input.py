"""arrow_input: Arrow elements conformed to the copy's schema, by name, with lossless casts only."""

from __future__ import annotations

import pyarrow as pa
import pytest

from beam_s3_sink.arrow_input import conform, conform_batches, describe, is_arrow, widens
from beam_s3_sink.errors import BatchError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_same_schema_is_returned_as_it_is():
    batch = pa.record_batch({"id": [1], "name": ["a"]}, schema=SCHEMA)
    assert conform(batch, SCHEMA) is batch


def test_columns_by_name_casts_and_missing_nullable_columns():
    table = pa.table({"name": pa.array(["a", "b"], pa.large_string()), "id": pa.array([1, 2], pa.int8())})
    out = conform(table, SCHEMA)
    assert isinstance(out, pa.Table) and out.schema == SCHEMA and out.column("id").to_pylist() == [1, 2]
    only_id = conform(pa.record_batch({"id": [5]}), SCHEMA)
    assert isinstance(only_id, pa.RecordBatch) and only_id.column(1).to_pylist() == [None]


def test_conform_batches_drops_empty_batches():
    table = pa.concat_tables([pa.table({"id": [1], "name": ["a"]}), pa.table({"id": [2], "name": ["b"]})]).cast(SCHEMA)
    assert [b.num_rows for b in conform_batches(table, SCHEMA)] == [1, 1]
    assert conform_batches(pa.record_batch({"id": pa.array([], pa.int64())}), SCHEMA) == []


@pytest.mark.parametrize(
    "data, says",
    [
        (pa.table({"id": [1], "extra": [1]}), r"has column\(s\) \['extra'\] that are not in the copy's schema"),
        (
            pa.table({"id": ["x"]}),
            "column 'id' is int64 in the copy's schema, but .* holds string, which does not convert",
        ),
        (
            pa.table({"id": pa.array([2**40], pa.uint64())}).cast(pa.schema([("id", pa.uint64())])),
            "holds uint64, which does not convert",
        ),
    ],
)
def test_refusals_name_the_column_and_the_source(data, says):
    with pytest.raises(BatchError, match=says):
        conform(data, SCHEMA)


def test_not_null_columns():
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    with pytest.raises(BatchError, match=r"column 'id' \(int64, NOT NULL\) is missing from orders.parquet"):
        conform(pa.table({"name": ["a"]}), schema, "orders.parquet")
    with pytest.raises(BatchError, match="is NOT NULL in the copy's schema, but .* has 1 NULL"):
        conform(pa.table({"id": [1, None]}), schema)


def test_repeated_columns():
    table = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"])
    with pytest.raises(BatchError, match="repeats a column name"):
        conform(table, SCHEMA)


def test_a_value_that_overflows_the_cast_is_named():
    schema = pa.schema([("t", pa.timestamp("ns"))])
    table = pa.table({"t": pa.array([10**17], pa.timestamp("s"))})
    with pytest.raises(BatchError, match="column 't': .* holds timestamp\\[s\\], and a value does not fit"):
        conform(table, schema)


@pytest.mark.parametrize(
    "source, target, ok",
    [
        (pa.int32(), pa.int64(), True),
        (pa.int64(), pa.int32(), False),
        (pa.uint8(), pa.int16(), True),
        (pa.uint16(), pa.int16(), False),
        (pa.int8(), pa.uint64(), False),
        (pa.float32(), pa.float64(), True),
        (pa.int16(), pa.float32(), True),
        (pa.int64(), pa.float64(), False),
        (pa.large_string(), pa.string(), True),
        (pa.binary(), pa.large_binary(), True),
        (pa.string(), pa.binary(), False),
        (pa.timestamp("ms", "UTC"), pa.timestamp("us", "UTC"), True),
        (pa.timestamp("ms"), pa.timestamp("us", "UTC"), False),
        (pa.timestamp("us"), pa.timestamp("ms"), False),
        (pa.time32("s"), pa.time64("us"), True),
        (pa.date64(), pa.date32(), True),
        (pa.decimal128(5, 2), pa.decimal128(7, 3), True),
        (pa.decimal128(5, 2), pa.decimal128(5, 3), False),
        (pa.binary(16), pa.uuid(), True),
        (pa.binary(8), pa.uuid(), False),
        (pa.null(), pa.int8(), True),
        (pa.dictionary(pa.int8(), pa.string()), pa.string(), True),
        (pa.list_(pa.int8()), pa.large_list(pa.int64()), True),
        (pa.list_(pa.int64()), pa.list_(pa.int8()), False),
        (pa.struct([("a", pa.int8())]), pa.struct([("a", pa.int64())]), True),
        (pa.struct([("a", pa.int8()), ("b", pa.int8())]), pa.struct([("b", pa.int8()), ("a", pa.int8())]), False),
        (pa.struct([("a", pa.int8())]), pa.struct([("c", pa.int8())]), False),
        (pa.string(), pa.int64(), False),
    ],
)
def test_widens(source, target, ok):
    assert widens(source, target) is ok


def test_every_widening_the_rule_allows_is_a_cast_pyarrow_takes():
    pairs = [
        (pa.array([1, None], pa.int32()), pa.int64()),
        (pa.array([1], pa.uint32()), pa.int64()),
        (pa.array(["a"], pa.string_view()), pa.string()),
        (pa.array([b"x" * 16], pa.binary(16)), pa.uuid()),
    ]
    for array, target in pairs:
        assert widens(array.type, target)
        assert conform(pa.table({"c": array}), pa.schema([("c", target)])).schema.field("c").type == target


def test_is_arrow_and_describe():
    assert is_arrow(pa.table({"a": [1]})) and is_arrow(pa.record_batch({"a": [1]})) and not is_arrow({"a": 1})
    wide = pa.table({f"c{i}": [1] for i in range(10)})
    assert describe(wide) == (
        "a pyarrow.Table of 1 rows with columns ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', '...']"
    )

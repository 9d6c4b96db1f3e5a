"""schema: the copy's Arrow schema from the PCollection, rows into record batches, and the errors."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import typing
import uuid

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.utils.timestamp import Timestamp

from beam_s3_sink.errors import RowError
from beam_s3_sink.schema import as_mapping, resolve_schema, rows_to_batch, schema_to_json


class Order(typing.NamedTuple):
    id: int
    name: typing.Optional[str]
    price: float


@dataclasses.dataclass
class Event:
    at: datetime.datetime
    key: uuid.UUID
    small: np.uint8
    tags: typing.List[str]


def test_given_schema_is_used_as_it_is():
    schema = pa.schema([("a", pa.int8())])
    assert resolve_schema(schema, Order) is schema


@pytest.mark.parametrize(
    "schema, error, says",
    [
        ("not a schema", TypeError, "must be a pyarrow.Schema"),
        (pa.schema([]), ValueError, "no columns"),
        (pa.schema([("a", pa.int8()), ("a", pa.int8())]), ValueError, "repeats a column"),
    ],
)
def test_bad_schemas(schema, error, says):
    with pytest.raises(error, match=says):
        resolve_schema(schema, None)


def test_schema_from_a_namedtuple():
    schema = resolve_schema(None, Order)
    assert schema.names == ["id", "name", "price"]
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert schema.field("name").type == pa.string() and schema.field("name").nullable
    assert schema.field("price").type == pa.float64()


def test_schema_from_a_dataclass_with_types_beam_leaves_out():
    schema = resolve_schema(None, Event)
    assert schema.field("at").type == pa.timestamp("us")
    assert schema.field("key").type == pa.uuid()
    assert schema.field("small").type == pa.uint8()
    assert schema.field("tags").type.value_type == pa.string()


def test_schema_from_beam_row_type():
    pcoll_type = beam.typehints.row_type.RowTypeConstraint.from_fields([("x", int), ("y", str)])
    assert resolve_schema(None, pcoll_type).names == ["x", "y"]


def test_no_schema_says_what_to_do():
    with pytest.raises(ValueError, match="has no schema. Pass schema=pa.schema"):
        resolve_schema(None, typing.Any)
    with pytest.raises(ValueError, match="has no schema"):
        resolve_schema(None, dict)


def test_decimal_and_any_columns_are_refused_with_a_way_out():
    class Priced(typing.NamedTuple):
        amount: decimal.Decimal

    with pytest.raises(ValueError, match=r"'amount'.*decimal128\(precision, scale\)"):
        resolve_schema(None, Priced)

    class Loose(typing.NamedTuple):
        thing: typing.Any

    with pytest.raises(ValueError, match="'thing'.*untyped"):
        resolve_schema(None, Loose)


def test_as_mapping():
    row = {"a": 1}
    assert as_mapping(row) is row
    assert as_mapping(Order(1, None, 2.0)) == {"id": 1, "name": None, "price": 2.0}
    assert as_mapping(beam.Row(a=1, b="x")) == {"a": 1, "b": "x"}
    with pytest.raises(RowError, match="must be a dict, beam.Row or NamedTuple, got int: 7"):
        as_mapping(7)


def test_rows_to_batch_converts_every_type():
    schema = pa.schema(
        [
            ("i", pa.int16()),
            ("s", pa.string()),
            ("d", pa.decimal128(5, 2)),
            ("t", pa.timestamp("us", tz="UTC")),
            ("j", pa.json_()),
            ("u", pa.uuid()),
            ("l", pa.list_(pa.int8())),
        ]
    )
    u = uuid.uuid4()
    rows = [
        {
            "i": 1,
            "s": "a",
            "d": decimal.Decimal("1.50"),
            "t": Timestamp(seconds=1),
            "j": {"k": 1},
            "u": str(u),
            "l": [1, None],
        },
        {"i": None},
    ]
    batch = rows_to_batch(rows, schema)
    assert batch.schema == schema and batch.num_rows == 2
    first = batch.to_pylist()[0]
    assert first["t"] == datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc)
    assert first["j"] == '{"k":1}' and first["u"] == u and first["d"] == decimal.Decimal("1.50")
    assert batch.to_pylist()[1] == dict.fromkeys(schema.names)


def test_struct_column_of_beam_rows():
    schema = pa.schema([("p", pa.struct([("x", pa.int8())]))])
    batch = rows_to_batch([{"p": beam.Row(x=1)}, {"p": {"x": 2}}], schema)
    assert batch.column(0).to_pylist() == [{"x": 1}, {"x": 2}]


@pytest.mark.parametrize(
    "schema, row, says",
    [
        (pa.schema([("a", pa.int8())]), {"a": 1, "b": 2}, r"columns that are not in the schema: \['b'\]"),
        (
            pa.schema([("a", pa.int8())]),
            {"a": 300},
            "column 'a' expects int8, but a row holds 300 .*out of range: int8 holds -128 to 127",
        ),
        (pa.schema([("a", pa.uint8())]), {"a": -1}, "out of range: uint8 holds 0 to 255"),
        (pa.schema([("a", pa.int64())]), {"a": "x"}, "column 'a' expects int64, but a row holds 'x' \\(str\\)"),
        (pa.schema([("d", pa.decimal128(5, 2))]), {"d": decimal.Decimal("1.234")}, "3 digits after the point"),
        (
            pa.schema([("d", pa.decimal128(5, 2))]),
            {"d": decimal.Decimal("12345")},
            "5 digits before the point; decimal\\(5, 2\\) holds at most 3",
        ),
        (pa.schema([pa.field("a", pa.int8(), nullable=False)]), {"a": None}, "not nullable, but it is NULL"),
        (pa.schema([pa.field("a", pa.int8(), nullable=False)]), {}, "not nullable, but it is missing"),
        (pa.schema([("j", pa.json_())]), {"j": "{bad"}, "column 'j' expects extension<arrow.json>.*does not parse"),
    ],
)
def test_row_errors_name_the_column_and_the_value(schema, row, says):
    with pytest.raises(RowError, match=says):
        rows_to_batch([row], schema)


def test_long_values_are_shortened_in_errors():
    with pytest.raises(RowError) as info:
        rows_to_batch([{"a": "x" * 1000}], pa.schema([("a", pa.int8())]))
    assert len(str(info.value)) < 400 and "..." in str(info.value)


def test_schema_to_json():
    files = pa.schema([pa.field("k", pa.string()), pa.field("n", pa.int64(), nullable=False)])
    source = pa.schema([pa.field("k", pa.uuid()), pa.field("n", pa.int64(), nullable=False)])
    assert schema_to_json(files) == [
        {"name": "k", "type": "string", "nullable": True},
        {"name": "n", "type": "int64", "nullable": False},
    ]
    assert schema_to_json(files, source)[0]["source_type"] == "extension<arrow.uuid>"
    assert "source_type" not in schema_to_json(files, source)[1]


def test_extension_types_nested_in_lists_structs_and_maps():
    """pyarrow builds no nested extension array from Python values; rows_to_batch does."""
    u = uuid.uuid4()
    schema = pa.schema(
        [
            ("l", pa.list_(pa.uuid())),
            ("s", pa.struct([("d", pa.json_()), ("k", pa.uuid())])),
            ("m", pa.map_(pa.string(), pa.uuid())),
            ("f", pa.list_(pa.json_(), 1)),
        ]
    )
    batch = rows_to_batch([{"l": [u, None], "s": {"d": {"a": 1}, "k": str(u)}, "m": {"x": u}, "f": [[1]]}, {}], schema)
    assert batch.schema == schema
    assert batch.to_pylist() == [
        {"l": [u, None], "s": {"d": '{"a":1}', "k": u}, "m": [("x", u)], "f": ["[1]"]},
        {"l": None, "s": None, "m": None, "f": None},
    ]
    with pytest.raises(
        RowError, match=r"column 'l' expects list<item: extension<arrow.uuid>>, but a row holds \['nope'\]"
    ):
        rows_to_batch([{"l": ["nope"]}], schema)


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
@pytest.mark.parametrize("column_tz", [None, "UTC", "Europe/Berlin"])
def test_datetime_columns_convert_as_pyarrow_does(unit, column_tz):
    """Timestamp columns of datetimes (built from ``value - epoch`` for us and ns) hold
    pyarrow's own values: aware values in any zone, DST folds included, naive values, and
    the two mixed; a value beyond the unit's range fails as pyarrow's path says."""
    from zoneinfo import ZoneInfo

    zones = (
        ZoneInfo("Europe/Berlin"),
        datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
        datetime.timezone.utc,
    )
    start = datetime.datetime(2026, 10, 25, 0, 30)  # Berlin's clocks go back at 03:00
    naive = [start + datetime.timedelta(minutes=17 * i, microseconds=1000 * i) for i in range(300)]
    aware = [v.replace(tzinfo=zones[i % 3], fold=i % 2) for i, v in enumerate(naive)]
    schema = pa.schema([("at", pa.timestamp(unit, tz=column_tz))])
    for values in (naive, aware, naive[:5] + aware[:5], [datetime.datetime(9999, 12, 31)]):
        try:
            expected = pa.array(values, schema.field("at").type)
        except (pa.ArrowException, ValueError, OverflowError):
            with pytest.raises(RowError, match="column 'at'"):
                rows_to_batch([{"at": v} for v in values], schema)
            continue
        assert rows_to_batch([{"at": v} for v in values], schema).column(0).equals(expected)

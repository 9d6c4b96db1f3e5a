"""coerce: the few Python values pyarrow does not convert by itself (JSON, UUID, Beam rows)."""

from __future__ import annotations

import datetime
import json
import uuid

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.utils.timestamp import Timestamp

from beam_s3_sink.coerce import converter
from beam_s3_sink.errors import CoercionError

U = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    "typ",
    [
        pa.int64(),
        pa.string(),
        pa.list_(pa.int8()),
        pa.timestamp("us"),
        pa.struct([("a", pa.int8())]),
        pa.map_(pa.string(), pa.int8()),
    ],
)
def test_no_converter_where_pyarrow_does_it(typ):
    assert converter(typ) is None


def test_json_values():
    convert = converter(pa.json_())
    assert convert(None) is None
    assert convert('{"a": 1}') == '{"a": 1}'  # text is kept as it is, once it parses
    assert convert(b"[1]") == "[1]"
    assert json.loads(convert({"b": [1.5, None], "a": "é"})) == {"b": [1.5, None], "a": "é"}
    assert convert({"b": 1, "a": 2}) == '{"b":1,"a":2}'  # compact, keys in order
    assert convert(3) == "3" and convert(True) == "true"


@pytest.mark.parametrize(
    "value, says",
    [
        ("{not json", "does not parse"),
        (b"\xff", "not UTF-8"),
        ({"x": object()}, "cannot serialise"),
        (float("nan"), "cannot serialise"),
    ],
)
def test_json_refusals(value, says):
    with pytest.raises(CoercionError, match=says):
        converter(pa.json_())(value)


def test_uuid_values():
    convert = converter(pa.uuid())
    assert convert(U) == U.bytes
    assert convert(str(U)) == U.bytes
    assert convert(U.bytes) == U.bytes
    assert convert(bytearray(U.bytes)) == U.bytes
    assert convert(None) is None


@pytest.mark.parametrize(
    "value, says",
    [
        (b"short", "16 bytes long, not 5"),
        ("not-a-uuid", "not a UUID"),
        (123, "must be a uuid.UUID"),
    ],
)
def test_uuid_refusals(value, says):
    with pytest.raises(CoercionError, match=says):
        converter(pa.uuid())(value)


def test_nested_types_are_reached():
    lists = converter(pa.list_(pa.uuid()))
    assert lists([U, None]) == [U.bytes, None] and lists(None) is None
    maps = converter(pa.map_(pa.string(), pa.json_()))
    assert maps({"k": [1]}) == [("k", "[1]")]
    assert maps([("k", {"a": 1})]) == [("k", '{"a":1}')]
    structs = converter(pa.struct([("id", pa.uuid()), ("n", pa.int8())]))
    assert structs({"id": str(U), "n": 1}) == {"id": U.bytes, "n": 1}
    assert structs(None) is None


@pytest.mark.parametrize(
    "typ, value, back",
    [
        (pa.uuid(), str(U), U),
        (pa.json_(), {"a": 1}, '{"a":1}'),
    ],
)
def test_converted_values_go_into_pyarrow(typ, value, back):
    assert pa.array([converter(typ)(value)], typ).to_pylist() == [back]


def test_rows_mode_turns_beam_rows_and_timestamps():
    typ = pa.struct([("at", pa.timestamp("us", tz="UTC")), ("n", pa.int8())])
    assert converter(typ) is None
    convert = converter(typ, rows=True)
    out = convert(beam.Row(at=Timestamp(seconds=60), n=1))
    assert out == {"at": datetime.datetime(1970, 1, 1, 0, 1, tzinfo=datetime.timezone.utc), "n": 1}
    assert converter(pa.timestamp("us"), rows=True)(datetime.datetime(2024, 1, 1)) == datetime.datetime(2024, 1, 1)


def test_struct_from_a_namedtuple():
    import typing

    class Point(typing.NamedTuple):
        id: str
        n: int

    convert = converter(pa.struct([("id", pa.uuid()), ("n", pa.int8())]))
    assert convert(Point(str(U), 2)) == {"id": U.bytes, "n": 2}
    assert convert((U.bytes, 2)) == (U.bytes, 2)  # a tuple is left to pyarrow

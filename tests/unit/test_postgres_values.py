"""formats/postgres_values: values as PostgreSQL's output functions print them."""

from __future__ import annotations

import datetime
import decimal
import uuid

import numpy as np
import pyarrow as pa
import pytest

from beam_s3_sink.formats.postgres_values import check_type, column_renderer, format_float, render_column


def texts(values, typ=None):
    array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, typ)
    return render_column(array).to_pylist()


def test_bool_ints_and_nulls():
    assert texts([True, False, None]) == ["t", "f", None]
    assert texts([-(2**63), 2**63 - 1, None], pa.int64()) == ["-9223372036854775808", "9223372036854775807", None]
    assert texts([255], pa.uint8()) == ["255"]
    assert texts(pa.nulls(2)) == [None, None]


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (2.5, "2.5"),
        (0.1, "0.1"),
        (1 / 3, "0.3333333333333333"),
        (1e14, "100000000000000"),
        (1e15, "1e+15"),
        (123456789012345.6, "123456789012345.6"),
        (1e-4, "0.0001"),
        (1e-5, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (1e300, "1e+300"),
        (-2.5e-310, "-2.5e-310"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_float8out(value, text):
    assert format_float(value) == text
    assert texts([value], pa.float64()) == [text]  # the vectorised path agrees


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1"),
        (0.1, "0.1"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (3.4028235e38, "3.4028235e+38"),
        (1e-5, "1e-05"),
    ],
)
def test_float4out(value, text):
    assert format_float(value, single=True) == text
    assert texts([value], pa.float32()) == [text]


def test_float_round_trips_exactly():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-20, 20, 500), [2.0**60, 2.0**53 + 2]])
    assert [float(t) for t in texts(pa.array(values))] == values.tolist()


def test_numeric_keeps_its_scale_without_exponent():
    assert texts(
        [decimal.Decimal("1.50"), decimal.Decimal("0E-10"), decimal.Decimal("12300"), None], pa.decimal128(20, 10)
    ) == ["1.5000000000", "0.0000000000", "12300.0000000000", None]


def test_strings_binary_uuid_json():
    assert texts(["a b", "", None]) == ["a b", "", None]
    assert texts([b"\x00\xff", b"", None]) == ["\\x00ff", "\\x", None]
    u = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    assert texts(pa.array([u.bytes, None], pa.uuid())) == [str(u), None]
    assert texts(pa.array(['{"a": 1}'], pa.json_())) == ['{"a": 1}']
    assert texts(pa.array(["x", "y", "x"]).dictionary_encode()) == ["x", "y", "x"]


def test_nul_cannot_be_stored():
    with pytest.raises(ValueError, match=r"column 'note': a value holds the character NUL"):
        render_column(pa.array(["a\x00"]), "note")


def test_dates_and_bc():
    assert texts([datetime.date(2024, 2, 29), datetime.date(1, 1, 1), None]) == ["2024-02-29", "0001-01-01", None]
    bc = pa.array([-719162 - 366, -719162 - 1], pa.date32())  # 1 BC is a leap year
    assert texts(bc) == ["0001-01-01 BC", "0001-12-31 BC"]
    assert texts(pa.array([86_400_000 * 31], pa.date64())) == ["1970-02-01"]


def test_times_drop_trailing_zeros():
    assert texts([datetime.time(1, 2, 3), datetime.time(23, 59, 59, 500000), None], pa.time64("us")) == [
        "01:02:03",
        "23:59:59.5",
        None,
    ]
    assert texts(pa.array([1, 10**9 * 3600 + 10], pa.time64("ns"))) == ["00:00:00.000000001", "01:00:00.00000001"]


def test_timestamps_naive_and_utc():
    naive = pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5, 600000), None], pa.timestamp("us"))
    assert texts(naive) == ["2024-01-02 03:04:05.6", None]
    utc = pa.array([datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)], pa.timestamp("ms", "Europe/Paris"))
    assert texts(utc) == ["2024-01-02 00:00:00+00"]
    assert texts(pa.array([-62135596800 - 86400], pa.timestamp("s"))) == ["0001-12-31 00:00:00 BC"]
    assert texts(pa.array([253402300800], pa.timestamp("s", "UTC"))) == ["10000-01-01 00:00:00+00"]


def test_timestamps_outside_postgresql_s_range():
    with pytest.raises(ValueError, match="outside PostgreSQL's timestamp range"):
        render_column(pa.array([-(2**62)], pa.timestamp("us")))


def test_arrays():
    assert texts([["a b", None, "", "NULL", 'q"', "x\\y", "{}", "plain"], [], None]) == [
        '{"a b",NULL,"","NULL","q\\"","x\\\\y","{}",plain}',
        "{}",
        None,
    ]
    assert texts([[1, 2], [None]], pa.list_(pa.int8())) == ["{1,2}", "{NULL}"]
    assert texts([[[1, 2], [3, 4]]], pa.list_(pa.list_(pa.int8()))) == ["{{1,2},{3,4}}"]
    assert texts([[True]], pa.large_list(pa.bool_())) == ["{t}"]


def test_arrays_are_rectangular():
    with pytest.raises(ValueError, match="column 'm': nested lists of different lengths"):
        render_column(pa.array([[[1], [2, 3]]]), "m")
    with pytest.raises(ValueError, match="a nested list holds a NULL list"):
        render_column(pa.array([[[1], None]]), "m")


@pytest.mark.parametrize(
    "typ",
    [
        pa.struct([("a", pa.int8())]),
        pa.map_(pa.string(), pa.int8()),
        pa.duration("s"),
        pa.list_(pa.struct([("a", pa.int8())])),
    ],
)
def test_types_without_a_text_form_are_refused_naming_the_column(typ):
    with pytest.raises(ValueError, match=r"column 'c': type .* has no PostgreSQL COPY text form"):
        check_type(pa.field("c", typ))


def test_renderer_is_chosen_once_per_column():
    render = column_renderer(pa.int64(), "n")
    assert render(pa.array([1])).to_pylist() == ["1"] and render(pa.array([2, None])).to_pylist() == ["2", None]

"""layout: Hive-style partition directories."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from beam_s3_sink.layout import DEFAULT_PARTITION, Layout, escape_path_name

SCHEMA = pa.schema(
    [("id", pa.int64()), ("day", pa.date32()), ("country", pa.string()), ("ok", pa.bool_()), ("price", pa.float64())]
)


@pytest.mark.parametrize(
    "text, escaped",
    [
        ("plain text é", "plain text é"),
        ("a/b", "a%2Fb"),
        ("k=v", "k%3Dv"),
        ("100%", "100%25"),
        ("\"#'*:?\\{[]^", "%22%23%27%2A%3A%3F%5C%7B%5B%5D%5E"),
        ("tab\tnl\n\x7f", "tab%09nl%0A%7F"),
    ],
)
def test_escape_path_name(text, escaped):
    assert escape_path_name(text) == escaped


def test_directory_of_a_row():
    layout = Layout(partition_by=("day", "country"))
    row = {"id": 1, "day": datetime.date(2024, 1, 31), "country": "FR/BE"}
    assert layout.directory(row, SCHEMA) == "day=2024-01-31/country=FR%2FBE"


def test_null_and_empty_go_to_the_default_partition():
    layout = Layout(partition_by=("country",))
    assert layout.directory({"country": None}, SCHEMA) == f"country={DEFAULT_PARTITION}"
    assert layout.directory({"country": ""}, SCHEMA) == f"country={DEFAULT_PARTITION}"
    assert layout.directory({}, SCHEMA) == f"country={DEFAULT_PARTITION}"


def test_bool_and_int_values():
    assert Layout(partition_by=("ok", "id")).directory({"ok": False, "id": -3}, SCHEMA) == "ok=false/id=-3"


def test_value_that_does_not_fit_its_column_is_named():
    with pytest.raises(ValueError, match="partition column 'id' expects int64.*'x'"):
        Layout(partition_by=("id",)).directory({"id": "x"}, SCHEMA)


def test_no_partitions():
    layout = Layout()
    assert layout.directory({"id": 1}, SCHEMA) == ""
    assert layout.file_schema(SCHEMA) is SCHEMA
    assert layout.values("p/ID-0001.csv") == ()


def test_partition_columns_leave_the_files_unless_kept():
    dropped = Layout(partition_by="country")  # a bare string is one column
    assert dropped.partition_by == ("country",)
    assert "country" not in dropped.file_schema(SCHEMA).names
    assert dropped.values("p/country=FR/ID-0001.csv") == (("country", "FR"),)
    assert dropped.values("p/country=__HIVE_DEFAULT_PARTITION__/ID-0001.csv") == (("country", None),)
    kept = Layout(partition_by=("country",), keep_partition_columns=True)
    assert kept.file_schema(SCHEMA) == SCHEMA


def test_file_schema_keeps_metadata():
    schema = SCHEMA.with_metadata({b"k": b"v"})
    assert Layout(partition_by=("day",)).file_schema(schema).metadata == {b"k": b"v"}


@pytest.mark.parametrize(
    "layout, says",
    [
        (Layout(partition_by=("nope",)), "not in the schema"),
        (Layout(partition_by=("price",)), "has type double"),
    ],
)
def test_check_refuses(layout, says):
    with pytest.raises(ValueError, match=says):
        layout.check(SCHEMA)


def test_check_refuses_partitioning_every_column():
    schema = pa.schema([("a", pa.string())])
    with pytest.raises(ValueError, match="every column is a partition column"):
        Layout(partition_by=("a",)).check(schema)
    Layout(partition_by=("a",), keep_partition_columns=True).check(schema)


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(partition_by=("a", "a")), "repeats a column"),
    ],
)
def test_invalid_layouts(kwargs, says):
    with pytest.raises(ValueError, match=says):
        Layout(**kwargs)

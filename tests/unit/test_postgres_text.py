"""formats/postgres_text: PostgreSQL's COPY ... TO text format (tab-separated, backslash escapes)."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

from beam_s3_sink.formats import TextFormat


def encode(fmt, table):
    out = io.BytesIO()
    encoder = fmt.open(table.schema, out, 2**30)
    for batch in table.to_batches():
        encoder.write(batch)
    encoder.close()
    return out.getvalue()


def test_defaults():
    table = pa.table({"id": [1, None], "s": ["a", None], "l": [[1, None], None]})
    assert encode(TextFormat(), table) == b"1\ta\t{1,NULL}\n\\N\t\\N\t\\N\n"


@pytest.mark.parametrize(
    "value, field",
    [
        ("back\\slash", "back\\\\slash"),
        ("tab\there", "tab\\there"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("\b\f\v", "\\b\\f\\v"),
        ("\\N", "\\\\N"),  # the text \N is not NULL
        ("", ""),
    ],
)
def test_escapes(value, field):
    assert encode(TextFormat(), pa.table({"s": [value]})) == field.encode() + b"\n"


def test_other_delimiter_and_null():
    table = pa.table({"a": ["x|y", None], "b": ["p", "q"]})
    assert encode(TextFormat(delimiter="|", null="\\NULL"), table) == b"x\\|y|p\n\\NULL|q\n"


def test_a_null_string_the_data_holds_is_refused():
    with pytest.raises(ValueError, match=r"column 's': a value is the text 'NA', the NULL string"):
        encode(TextFormat(null="NA"), pa.table({"s": ["NA"]}))
    assert encode(TextFormat(null="NA"), pa.table({"s": ["na", None]})) == b"na\nNA\n"


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(delimiter="\\"), "delimiter must be one ASCII character other than"),
        (dict(delimiter="a"), "delimiter must be"),
        (dict(delimiter="7"), "delimiter must be"),
        (dict(delimiter=".."), "delimiter must be"),
        (dict(null="a\tb"), "must be a string without the delimiter"),
        (dict(compression="zip"), "TextFormat: compression must be"),
    ],
)
def test_invalid_options(kwargs, says):
    with pytest.raises(ValueError, match=says):
        TextFormat(**kwargs)


def test_extension_and_schema_check():
    assert (TextFormat().extension, TextFormat(compression="gzip").extension) == ("txt", "txt.gz")
    with pytest.raises(ValueError, match="column 'm'"):
        TextFormat().check_schema(pa.schema([("m", pa.map_(pa.string(), pa.int8()))]))

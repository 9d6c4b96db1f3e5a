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


def test_a_value_written_as_a_null_string_with_a_backslash_is_refused():
    """COPY FROM compares the written text with the NULL string: with null \\t a tab value
    (written \\t) would load as NULL; with \\\\ a backslash would."""
    with pytest.raises(ValueError, match=r"column 's': a value is the text '\\t', written '\\\\t', the NULL string"):
        encode(TextFormat(delimiter="|", null="\\t"), pa.table({"s": ["a", "\t"]}))
    with pytest.raises(ValueError, match=r"column 's': a value is the text '\\\\', written '\\\\\\\\'"):
        encode(TextFormat(null="\\\\"), pa.table({"s": ["\\"]}))
    assert encode(TextFormat(delimiter="|", null="\\t"), pa.table({"s": ["\\t", None]})) == b"\\\\t\n\\t\n"


def test_upper_case_letter_delimiter_as_postgresql_accepts():
    table = pa.table({"a": ["aXb", None], "b": ["x", "NaN"]})
    assert encode(TextFormat(delimiter="X"), table) == b"a\\XbXx\n\\NXNaN\n"


@pytest.mark.parametrize(
    "kwargs, says",
    [
        # what PostgreSQL's COPY refuses (ProcessCopyOptions)
        (dict(delimiter="\\"), r"delimiter must be one ASCII character other than NUL, CR, LF, backslash"),
        (dict(delimiter="."), "delimiter must be .*got '.'"),
        (dict(delimiter="a"), "delimiter must be .*a lower-case letter or a digit.*got 'a'"),
        (dict(delimiter="z"), "delimiter must be .*got 'z'"),
        (dict(delimiter="7"), "delimiter must be .*got '7'"),
        (dict(delimiter=".."), "delimiter must be .*got '..'"),
        (dict(delimiter="é"), "delimiter must be .*got 'é'"),
        (dict(delimiter="\n"), "delimiter must be .*got '\\\\n'"),
        (dict(delimiter="\r"), "delimiter must be .*got '\\\\r'"),
        (dict(delimiter="\x00"), "delimiter must be .*got '\\\\x00'"),
        (dict(null="a\tb"), r"null 'a\\tb' must not contain the delimiter '\\t'"),
        (dict(delimiter="|", null="|"), r"null '\|' must not contain the delimiter"),
        (dict(null="a\nb"), "null 'a\\\\nb' must not contain LF"),
        (dict(null="\r"), "null '\\\\r' must not contain CR"),
        (dict(null="\x00"), "null '\\\\x00' must not contain NUL"),
        # accepted by PostgreSQL, but a NULL written with them does not load back
        (dict(null="\\."), r"null '\\\\.' must not contain \\. \(PostgreSQL's end-of-data marker\)"),
        (dict(null="N\\.A"), r"null 'N\\\\.A' must not contain \\."),
        (dict(null="x\\"), r"null 'x\\\\' must not end in a lone backslash"),
        (dict(null="\\\\\\"), "null .* must not end in a lone backslash"),
        # the package's own
        (dict(compression="zip"), "compression must be"),
    ],
)
def test_invalid_options(kwargs, says):
    with pytest.raises(ValueError, match="TextFormat: " + says):
        TextFormat(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(delimiter="A"),
        dict(delimiter="\x01"),
        dict(null="\\\\."),
        dict(null="\\x."),
        dict(null="<\\N>"),
        dict(null=""),
    ],
)
def test_options_postgresql_accepts_are_accepted(kwargs):
    TextFormat(**kwargs)


def test_extension_and_schema_check():
    assert (TextFormat().extension, TextFormat(compression="gzip").extension) == ("txt", "txt.gz")
    with pytest.raises(ValueError, match="column 'm'"):
        TextFormat().check_schema(pa.schema([("m", pa.map_(pa.string(), pa.int8()))]))

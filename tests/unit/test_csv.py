"""formats/csv: PostgreSQL's COPY ... (FORMAT csv) quoting, header, options and compression."""

from __future__ import annotations

import dataclasses
import gzip
import io
import pickle

import pyarrow as pa
import pytest

from beam_s3_sink.formats import CsvFormat


def encode(fmt: CsvFormat, table: pa.Table, max_file_size: int = 2**30) -> bytes:
    out = io.BytesIO()
    encoder = fmt.open(table.schema, out, max_file_size)
    for batch in table.to_batches():
        assert encoder.write(batch) is None
    encoder.close()
    return out.getvalue()


def test_defaults_as_postgresql_writes_them():
    table = pa.table({"id": [1, None], "s": ["plain", None], "b": [True, False]})
    assert encode(CsvFormat(), table) == b"1,plain,t\n,,f\n"


@pytest.mark.parametrize(
    "value, field",
    [
        ("a,b", '"a,b"'),
        ('say "hi"', '"say ""hi"""'),
        ("two\nlines", '"two\nlines"'),
        ("cr\r", '"cr\r"'),
        ("", '""'),  # the empty string, told apart from NULL (an empty field)
        (" padded ", " padded "),
    ],
)
def test_quoting(value, field):
    assert encode(CsvFormat(), pa.table({"s": [value], "n": [1]})) == f"{field},1\n".encode()


def test_end_of_data_marker_is_quoted_as_the_only_column():
    assert encode(CsvFormat(), pa.table({"s": ["\\."]})) == b'"\\."\n'
    assert encode(CsvFormat(), pa.table({"s": ["\\."], "n": [1]})) == b"\\.,1\n"


def test_header_and_options():
    fmt = CsvFormat(header=True, delimiter=";", null="NULL", quote="'", escape="\\")
    table = pa.table({"a;b": ["x'y", None], "c": ["NULL", "p\\q"]})
    assert encode(fmt, table) == b"'a;b';c\n'x\\'y';'NULL'\nNULL;p\\q\n"


def test_escape_inside_a_quoted_field_is_escaped():
    fmt = CsvFormat(escape="\\")
    assert encode(fmt, pa.table({"s": ['a"b\\c']})) == b'"a\\"b\\\\c"\n'


def test_force_quote():
    table = pa.table({"a": ["x", None], "b": ["y", "z"]})
    assert encode(CsvFormat(force_quote=("a",)), table) == b'"x",y\n,z\n'  # never a NULL
    assert encode(CsvFormat(force_quote=True), table) == b'"x","y"\n,"z"\n'
    assert CsvFormat(force_quote=["a"]).force_quote == ("a",)


def test_header_only_for_an_empty_file():
    assert encode(CsvFormat(header=True), pa.table({"id": pa.array([], pa.int64())})) == b"id\n"


def test_gzip_compression():
    fmt = CsvFormat(compression="gzip")
    assert fmt.extension == "csv.gz"
    assert gzip.decompress(encode(fmt, pa.table({"id": list(range(100))}))) == b"".join(
        f"{i}\n".encode() for i in range(100)
    )


def test_extensions():
    assert (CsvFormat().extension, CsvFormat(compression="zstd").extension) == ("csv", "csv.zst")


def test_files_are_cut_at_whole_lines():
    fmt, table = CsvFormat(), pa.table({"id": list(range(10, 20))})
    out = io.BytesIO()
    encoder = fmt.open(table.schema, out, 9)
    rest = encoder.write(table.to_batches()[0])
    assert out.getvalue() == b"10\n11\n12\n" and encoder.full and rest.num_rows == 7


def test_check_schema():
    CsvFormat().check_schema(pa.schema([("l", pa.list_(pa.int8()))]))
    with pytest.raises(ValueError, match="column 's': type struct"):
        CsvFormat().check_schema(pa.schema([("s", pa.struct([("a", pa.int8())]))]))
    with pytest.raises(ValueError, match=r"force_quote names columns not in the schema: \['x'\]"):
        CsvFormat(force_quote=("x",)).check_schema(pa.schema([("a", pa.int8())]))


@pytest.mark.parametrize(
    "kwargs, says",
    [
        # what PostgreSQL's COPY refuses (ProcessCopyOptions)
        (dict(delimiter=";;"), "delimiter must be one ASCII character other than NUL.*got ';;'"),
        (dict(delimiter=""), "delimiter must be one ASCII character.*got ''"),
        (dict(delimiter="é"), "delimiter must be one ASCII character.*got 'é'"),
        (dict(delimiter="\x00"), r"delimiter must be one ASCII character other than NUL.*got '\\x00'"),
        (dict(delimiter="\n"), r"delimiter must not be CR or LF \(PostgreSQL refuses it\), got '\\n'"),
        (dict(delimiter="\r"), r"delimiter must not be CR or LF \(PostgreSQL refuses it\), got '\\r'"),
        (dict(quote="é"), "quote must be one ASCII character.*got 'é'"),
        (dict(quote="''"), "quote must be one ASCII character.*got \"''\""),
        (dict(escape=""), "escape must be one ASCII character.*got ''"),
        (dict(escape="\\\\"), r"escape must be one ASCII character.*got '\\\\\\\\'"),
        (dict(delimiter='"'), "delimiter and quote must differ.*got '\"' for both"),
        (dict(delimiter=";", quote=";"), "delimiter and quote must differ.*got ';' for both"),
        (dict(null="a,b"), "null 'a,b' must not contain the delimiter ','"),
        (dict(delimiter="|", null="a|b"), r"null 'a\|b' must not contain the delimiter '\|'"),
        (dict(null='"NA"'), "null '\"NA\"' must not contain the quote '\"'"),
        (dict(quote="'", null="it's"), 'null "it\'s" must not contain the quote "\'"'),
        (dict(null="a\nb"), "null 'a\\\\nb' must not contain LF"),
        (dict(null="\r"), "null '\\\\r' must not contain CR"),
        (dict(null="a\x00"), "null 'a\\\\x00' must not contain NUL"),
        # accepted by PostgreSQL, but what COPY TO writes with them does not load back
        (dict(quote="\n"), r"quote must not be CR or LF \(COPY FROM cannot read back a quoted field\)"),
        (dict(quote="\r"), "quote must not be CR or LF"),
        (dict(null="\\."), r"null '\\\\.' is PostgreSQL's end-of-data marker"),
        # the package's own
        (dict(force_quote="a"), "force_quote takes a list"),
        (dict(compression="bz2"), "compression must be None, 'gzip' or 'zstd'"),
    ],
)
def test_invalid_options(kwargs, says):
    with pytest.raises(ValueError, match="CsvFormat: " + says):
        CsvFormat(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(escape=","),  # the escape may be the delimiter,
        dict(escape="\n"),  # CR or LF (only quoted fields hold it),
        dict(escape="x", null="x"),  # or appear in the NULL string
        dict(delimiter="a", quote="b", escape="c", null="d"),
        dict(delimiter="\t", quote="\\"),
        dict(delimiter=".", null="\\"),
        dict(null="\\.x"),
    ],
)
def test_options_postgresql_accepts_are_accepted(kwargs):
    assert CsvFormat(**kwargs).escape == kwargs.get("escape", kwargs.get("quote", '"'))


def test_escape_defaults_to_the_quote_as_in_postgresql():
    """Issue 28: CsvFormat(quote="'") kept escape='"', so a"b,c was written 'a""b,c' and
    PostgreSQL's COPY FROM (ESCAPE defaults to QUOTE) loaded a""b,c."""
    fmt = CsvFormat(quote="'")
    assert fmt.escape == "'" and fmt == CsvFormat(quote="'", escape="'")
    assert repr(fmt) == (
        "CsvFormat(header=False, delimiter=',', null='', quote=\"'\", escape=\"'\", force_quote=(), compression=None)"
    )
    assert encode(fmt, pa.table({"s": ['a"b,c', "it's"]})) == b"'a\"b,c'\n'it''s'\n"
    assert CsvFormat(quote="'", escape="\\").escape == "\\"
    assert pickle.loads(pickle.dumps(fmt)) == fmt and pickle.loads(pickle.dumps(fmt)).escape == "'"
    assert CsvFormat().describe()["options"]["escape"] == '"'


def test_replace_with_another_quote_takes_its_escape():
    """The CLI makes its format with dataclasses.replace(CsvFormat(), quote=...): the default
    escape follows the new quote; an escape given stays."""
    assert dataclasses.replace(CsvFormat(), quote="`").escape == "`"
    assert dataclasses.replace(CsvFormat(escape="\\"), quote="`").escape == "\\"
    assert dataclasses.replace(CsvFormat(quote="'"), delimiter=";") == CsvFormat(quote="'", delimiter=";")


def test_escape_other_than_the_quote():
    fmt = CsvFormat(delimiter="|", quote="'", escape="!", null="NULL")
    table = pa.table({"s": ["a!b", "it's", "x|y!", "NULL", "!", None]})
    assert encode(fmt, table) == b"a!b\n'it!'s'\n'x|y!!'\n'NULL'\n!\nNULL\n"


def test_a_line_that_would_be_the_end_of_data_marker_is_quoted():
    """With delimiter "." and two columns, PostgreSQL's COPY TO writes the row ('\\', NULL)
    as the line \\. that its COPY FROM reads as the end of the data; the value is quoted."""
    table = pa.table({"a": ["\\", "\\", "x"], "b": [None, "y", None]})
    assert encode(CsvFormat(delimiter="."), table) == b'"\\".\n\\.y\nx.\n'
    assert encode(CsvFormat(delimiter=".", escape="\\"), table).startswith(b'"\\\\".\n')
    table = pa.table({"a": [None, None], "b": ["", "z"]})  # a NULL written as a backslash, then ''
    assert encode(CsvFormat(delimiter=".", null="\\"), table) == b'\\.""\n\\.z\n'
    header = CsvFormat(delimiter=".", null="N", header=True).header_line(
        pa.schema([("\\", pa.int8()), ("", pa.int8())])
    )
    assert header == b'"\\".\n'


def test_describe_for_the_manifest():
    assert CsvFormat(header=True).describe() == {
        "name": "csv",
        "extension": "csv",
        "options": {
            "header": True,
            "delimiter": ",",
            "null": "",
            "quote": '"',
            "escape": '"',
            "force_quote": (),
            "compression": None,
        },
    }

"""formats/csv: PostgreSQL's COPY ... (FORMAT csv) quoting, header, options and compression."""

from __future__ import annotations

import gzip
import io

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
        (dict(delimiter=";;"), "delimiter must be one ASCII character"),
        (dict(delimiter="\n"), "delimiter must be one ASCII character"),
        (dict(quote="é"), "quote must be one ASCII character"),
        (dict(delimiter='"'), "delimiter and quote must differ"),
        (dict(null="a,b"), "null 'a,b' must be a string without"),
        (dict(force_quote="a"), "force_quote takes a list"),
        (dict(compression="bz2"), "compression must be None, 'gzip' or 'zstd'"),
    ],
)
def test_invalid_options(kwargs, says):
    with pytest.raises(ValueError, match=says):
        CsvFormat(**kwargs)


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

"""formats (the registry) and formats/base (the interface every format implements)."""

from __future__ import annotations

import io
import pickle

import pyarrow as pa
import pytest

from beam_s3_sink.formats import FORMATS, CsvFormat, Format, JsonlFormat, ParquetFormat, TextFormat, resolve_format
from beam_s3_sink.formats.base import FileEncoder


@pytest.mark.parametrize(
    "name, cls",
    [("parquet", ParquetFormat), ("csv", CsvFormat), ("text", TextFormat), ("jsonl", JsonlFormat), ("CSV", CsvFormat)],
)
def test_resolve_by_name(name, cls):
    assert resolve_format(name) == cls()


def test_resolve_an_object_as_it_is():
    fmt = CsvFormat(header=True)
    assert resolve_format(fmt) is fmt


@pytest.mark.parametrize("value", ["orc", None, 3])
def test_unknown_formats(value):
    with pytest.raises(ValueError, match=r"unknown format .*use one of \['csv', 'jsonl', 'parquet', 'text'\]"):
        resolve_format(value)


@pytest.mark.parametrize("cls", list(FORMATS.values()), ids=list(FORMATS))
def test_every_format_keeps_the_contract(cls):
    """A frozen picklable value whose encoder writes a file of a batch, with a manifest description."""
    fmt = cls()
    assert isinstance(fmt, Format) and FORMATS[fmt.name] is cls
    assert pickle.loads(pickle.dumps(fmt)) == fmt and hash(fmt) == hash(cls())
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    fmt.check_schema(schema)
    out = io.BytesIO()
    encoder = fmt.open(fmt.file_schema(schema), out, 2**30)
    assert isinstance(encoder, FileEncoder)
    assert encoder.write(pa.record_batch([[1, 2], ["a", None]], schema=fmt.file_schema(schema))) is None
    encoder.close()
    assert encoder.rows == 2 and out.getvalue() and not encoder.full
    assert [s.column for s in encoder.stats()][:1] == ["id"]
    description = fmt.describe()
    assert description["name"] == fmt.name and description["extension"] == fmt.extension
    assert isinstance(description["options"], dict)


@pytest.mark.parametrize(
    "fmt, content_type",
    [
        (ParquetFormat(), "application/vnd.apache.parquet"),
        (CsvFormat(), "text/csv"),
        (TextFormat(), "text/plain"),
        (JsonlFormat(), "application/jsonl"),
        (CsvFormat(compression="gzip"), "application/gzip"),
        (JsonlFormat(compression="zstd"), "application/zstd"),
    ],
)
def test_every_format_owns_its_content_type(fmt, content_type):
    assert fmt.content_type == content_type

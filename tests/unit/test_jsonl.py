"""formats/jsonl: one JSON object per row, with PostgreSQL's to_json rules."""

from __future__ import annotations

import base64
import datetime
import decimal
import gzip
import io
import json
import uuid

import pyarrow as pa
import pytest

from beam_s3_sink.formats import JsonlFormat
from beam_s3_sink.formats.jsonl import render_lines


def test_every_type():
    u = uuid.UUID(int=1)
    batch = pa.record_batch(
        {
            "n": pa.array([None], pa.int8()),
            "b": [True],
            "i": [-3],
            "f": [1.5],
            "d": pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
            "s": ['é"\n'],
            "raw": [b"\x00\xff"],
            "day": [datetime.date(2024, 1, 2)],
            "t": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us")),
            "tz": pa.array([datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)], pa.timestamp("us", "UTC")),
            "at": pa.array([datetime.time(12, 30)], pa.time64("us")),
            "l": [[1, None]],
            "st": [{"x": 1}],
            "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int8())),
            "u": pa.array([u.bytes], pa.uuid()),
            "j": pa.array(['{"a": [1]}'], pa.json_()),
        }
    )
    (line,) = render_lines(batch)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert json.loads(line) == {
        "n": None,
        "b": True,
        "i": -3,
        "f": 1.5,
        "d": 1.5,
        "s": 'é"\n',
        "raw": base64.b64encode(b"\x00\xff").decode(),
        "day": "2024-01-02",
        "t": "2024-01-02T03:04:05",
        "tz": "2024-01-02T00:00:00+00:00",
        "at": "12:30:00",
        "l": [1, None],
        "st": {"x": 1},
        "m": {"k": 1},
        "u": str(u),
        "j": {"a": [1]},
    }
    assert b'"d":1.50' in line and "é".encode() in line  # exact digits; not ASCII-escaped


def test_non_finite_floats_are_strings():
    assert render_lines(pa.record_batch({"x": [float("nan"), float("inf"), -float("inf")]})) == [
        b'{"x":"NaN"}\n',
        b'{"x":"Infinity"}\n',
        b'{"x":"-Infinity"}\n',
    ]


def test_encoder_writes_lines_and_compresses():
    table = pa.table({"id": [1, 2]})
    for fmt, unpack in ((JsonlFormat(), bytes), (JsonlFormat(compression="gzip"), gzip.decompress)):
        out = io.BytesIO()
        encoder = fmt.open(table.schema, out, 2**30)
        encoder.write(table.to_batches()[0])
        encoder.close()
        assert unpack(out.getvalue()) == b'{"id":1}\n{"id":2}\n'
        assert encoder.rows == 2


def test_extensions():
    assert [JsonlFormat(compression=c).extension for c in (None, "gzip", "zstd")] == ["jsonl", "jsonl.gz", "jsonl.zst"]


def test_check_schema():
    JsonlFormat().check_schema(
        pa.schema([("u", pa.uuid()), ("j", pa.json_()), ("s", pa.struct([("l", pa.list_(pa.uuid()))]))])
    )
    with pytest.raises(ValueError, match="column 'd' has type duration"):
        JsonlFormat().check_schema(pa.schema([("d", pa.duration("s"))]))
    with pytest.raises(ValueError, match=r"column 's.d' has type duration"):
        JsonlFormat().check_schema(pa.schema([("s", pa.struct([("d", pa.duration("s"))]))]))


def test_invalid_compression():
    with pytest.raises(ValueError, match="JsonlFormat: compression must be"):
        JsonlFormat(compression="lz4")

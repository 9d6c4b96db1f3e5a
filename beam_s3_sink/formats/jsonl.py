"""JSON Lines output (``.jsonl``): one JSON object per row, one row per line.

Values follow PostgreSQL's ``to_json`` (the JSON type's rules), with two choices where
PostgreSQL's text forms would not read back as data elsewhere::

    batch ──▶ render each column to JSON texts ──▶ {"col": text, ...}\\n per row ──▶ [compressor] ──▶ stream

=====================  ==========================================================
Arrow type             JSON
=====================  ==========================================================
NULL                   ``null`` (the key is always present)
bool, integers         ``true``/``false``, numbers
floats                 numbers (shortest round-trip form); NaN and ±Infinity, which
                       JSON cannot hold, as the strings ``"NaN"``, ``"Infinity"``,
                       ``"-Infinity"`` (PostgreSQL's ``to_json`` does the same)
decimal                numbers written exactly from the decimal's digits
string                 strings (UTF-8, not ASCII-escaped)
binary                 base64 strings (as BigQuery and Spark write bytes to JSON)
date, time, timestamp  ISO 8601 strings: ``2024-01-01``, ``12:30:00``,
                       ``2024-01-01T12:30:00`` (naive), ``...+00:00`` (with time zone)
list, struct, map      arrays, objects, objects (map keys as strings)
uuid, json (ext.)      the UUID's text; the JSON text itself, unquoted
=====================  ==========================================================

A file is full once it reaches ``max_file_size``; lines are written whole, the ones that
did not fit start the next file. With ``compression`` (``gzip`` or ``zstd``, through
pyarrow's ``CompressedOutputStream``) the size is of the compressed bytes, measured as
:mod:`.line_encoder` does for CSV and text, whose line writer this format shares.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional

import pyarrow as pa

from ..errors import EncodeError
from .base import FileEncoder, Format, OutputStream
from .line_encoder import LineEncoder, check_compression, compressed_content_type, compressed_extension

__all__ = ["JsonlFormat", "render_lines"]


@dataclass(frozen=True)
class JsonlFormat(Format):
    """JSON Lines files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``).

    >>> JsonlFormat(compression="gzip").extension, JsonlFormat().content_type
    ('jsonl.gz', 'application/jsonl')

    Attributes:
      compression: None (default), ``"gzip"`` or ``"zstd"``.
    """

    name: ClassVar[str] = "jsonl"

    compression: Optional[str] = None

    def __post_init__(self) -> None:
        check_compression("JsonlFormat", self.compression)

    @property
    def extension(self) -> str:
        return compressed_extension("jsonl", self.compression)

    @property
    def content_type(self) -> str:
        return compressed_content_type("application/jsonl", self.compression)  # jsonlines.org

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            _check_type(field.name, field.type)

    def open(self, schema: pa.Schema, out: OutputStream, max_file_size: int) -> FileEncoder:
        # Whole lines, the size limit and compression: the same writer as CSV and text.
        return LineEncoder(out, max_file_size, _line_array, self.compression)

    def check_values(self, batch: pa.RecordBatch) -> pa.Array:
        """``batch``'s lines (what refuses a value is rendering it): the encoder writes them."""
        return _line_array(batch)


def _check_type(name: str, typ: pa.DataType) -> None:
    if isinstance(typ, pa.BaseExtensionType):
        if typ.extension_name in ("arrow.uuid", "arrow.json"):
            return
        raise ValueError(f"JsonlFormat: column {name!r} has extension type {typ}, which JSON Lines cannot write")
    t = pa.types
    if (
        t.is_null(typ)
        or t.is_boolean(typ)
        or t.is_integer(typ)
        or t.is_floating(typ)
        or t.is_decimal(typ)
        or t.is_string(typ)
        or t.is_large_string(typ)
        or t.is_binary(typ)
        or t.is_large_binary(typ)
        or t.is_fixed_size_binary(typ)
        or t.is_date(typ)
        or t.is_time(typ)
        or t.is_timestamp(typ)
    ):
        return
    if t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ):
        return _check_type(name, typ.value_type)
    if t.is_map(typ):
        _check_type(name, typ.key_type)
        return _check_type(name, typ.item_type)
    if t.is_struct(typ):
        for index in range(typ.num_fields):
            _check_type(f"{name}.{typ.field(index).name}", typ.field(index).type)
        return
    raise ValueError(
        f"JsonlFormat: column {name!r} has type {typ}, which JSON Lines cannot write; "
        "cast it to a string or a number first"
    )


def _value(value: Any, typ: pa.DataType) -> str:
    """The JSON text of one Python value of Arrow type ``typ`` (see the module's table)."""
    if value is None:
        return "null"
    if isinstance(typ, pa.BaseExtensionType):
        return value if typ.extension_name == "arrow.json" else json.dumps(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '"NaN"'
        if math.isinf(value):
            return '"Infinity"' if value > 0 else '"-Infinity"'
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (bytes, bytearray)):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return '"' + value.isoformat() + '"'
    if isinstance(value, uuid.UUID):
        return '"' + str(value) + '"'
    if pa.types.is_map(typ):
        return (
            "{"
            + ",".join(
                (json.dumps(k, ensure_ascii=False) if isinstance(k, str) else json.dumps(_value(k, typ.key_type)))
                + ":"
                + _value(v, typ.item_type)
                for k, v in value
            )
            + "}"
        )
    if pa.types.is_struct(typ):
        return (
            "{"
            + ",".join(
                json.dumps(typ.field(i).name, ensure_ascii=False)
                + ":"
                + _value(value.get(typ.field(i).name), typ.field(i).type)
                for i in range(typ.num_fields)
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_value(v, typ.value_type) for v in value) + "]"
    raise EncodeError(f"cannot write {type(value).__name__} {value!r} as JSON")


def render_lines(batch: pa.RecordBatch) -> List[bytes]:
    """One JSON object per row of ``batch``, each ending with a newline.

    >>> render_lines(pa.record_batch({"id": [1], "x": [float("nan")]}))
    [b'{"id":1,"x":"NaN"}\\n']
    """
    keys = [json.dumps(name, ensure_ascii=False) + ":" for name in batch.schema.names]
    columns = [
        [key + _value(v, column.type) for v in _python_values(column, name)]
        for key, column, name in zip(keys, batch.columns, batch.schema.names)
    ]
    return [("{" + ",".join(fields) + "}\n").encode("utf-8") for fields in zip(*columns)]


def _python_values(column: pa.Array, name: str) -> List[Any]:
    try:
        return column.to_pylist()
    except (ValueError, OverflowError) as exc:  # a timestamp past year 9999, for one
        raise EncodeError(f"column {name!r}: a value has no Python form to write as JSON: {exc}") from None


def _line_array(batch: pa.RecordBatch) -> pa.Array:
    return pa.array([line.decode("utf-8") for line in render_lines(batch)], pa.string())

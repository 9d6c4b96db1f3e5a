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
pyarrow's ``CompressedOutputStream``) the size is of the compressed bytes, the compressor
flushed every 1/16 of ``max_file_size`` (4 KiB to 1 MiB of input) to measure it.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, BinaryIO, ClassVar, List, Optional

import pyarrow as pa

from .base import FileEncoder, Format

__all__ = ["JsonlFormat", "render_lines"]

_COMPRESSIONS = {None: "jsonl", "gzip": "jsonl.gz", "zstd": "jsonl.zst"}


@dataclass(frozen=True)
class JsonlFormat(Format):
    """JSON Lines files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``).

    >>> JsonlFormat(compression="gzip").extension
    'jsonl.gz'

    Attributes:
      compression: None (default), ``"gzip"`` or ``"zstd"``.
    """

    name: ClassVar[str] = "jsonl"

    compression: Optional[str] = None

    def __post_init__(self) -> None:
        if self.compression not in _COMPRESSIONS:
            raise ValueError(f"JsonlFormat: compression must be None, 'gzip' or 'zstd', got {self.compression!r}")

    @property
    def extension(self) -> str:
        return _COMPRESSIONS[self.compression]

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            _check_type(field.name, field.type)

    def open(self, schema: pa.Schema, out: BinaryIO, max_file_size: int) -> "JsonlEncoder":
        return JsonlEncoder(self, out, max_file_size)


def _check_type(name: str, typ: pa.DataType) -> None:
    if isinstance(typ, pa.ExtensionType):
        if typ.extension_name in ("arrow.uuid", "arrow.json"):
            return
        raise ValueError(f"JsonlFormat: column {name!r} has extension type {typ}, which JSON Lines cannot write")
    t = pa.types
    if (t.is_null(typ) or t.is_boolean(typ) or t.is_integer(typ) or t.is_floating(typ)
            or t.is_decimal(typ) or t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ)
            or t.is_large_binary(typ) or t.is_fixed_size_binary(typ) or t.is_date(typ)
            or t.is_time(typ) or t.is_timestamp(typ)):
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
    raise ValueError(f"JsonlFormat: column {name!r} has type {typ}, which JSON Lines cannot write; "
                     "cast it to a string or a number first")


def _value(value: Any, typ: pa.DataType) -> str:
    """The JSON text of one Python value of Arrow type ``typ`` (see the module's table)."""
    if value is None:
        return "null"
    if isinstance(typ, pa.ExtensionType):
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
        return "{" + ",".join(
            (json.dumps(k, ensure_ascii=False) if isinstance(k, str) else json.dumps(_value(k, typ.key_type)))
            + ":" + _value(v, typ.item_type) for k, v in value) + "}"
    if pa.types.is_struct(typ):
        return "{" + ",".join(
            json.dumps(typ.field(i).name, ensure_ascii=False) + ":" + _value(value.get(typ.field(i).name), typ.field(i).type)
            for i in range(typ.num_fields)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_value(v, typ.value_type) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as JSON")


def render_lines(batch: pa.RecordBatch) -> List[bytes]:
    """One JSON object per row of ``batch``, each ending with a newline.

    >>> render_lines(pa.record_batch({"id": [1], "x": [float("nan")]}))
    [b'{"id":1,"x":"NaN"}\\n']
    """
    keys = [json.dumps(name, ensure_ascii=False) + ":" for name in batch.schema.names]
    columns = [[key + _value(v, column.type) for v in column.to_pylist()]
               for key, column in zip(keys, batch.columns)]
    return [("{" + ",".join(fields) + "}\n").encode("utf-8") for fields in zip(*columns)]


class JsonlEncoder(FileEncoder):
    """One JSON Lines file: lines written whole until the file reaches its size."""

    def __init__(self, fmt: JsonlFormat, out: BinaryIO, max_file_size: int) -> None:
        super().__init__(out, max_file_size)
        self._raw = out
        self._sink: Any = out if fmt.compression is None else pa.CompressedOutputStream(out, fmt.compression)
        self._unflushed = 0
        self._flush_every = max(4096, min(2**20, max_file_size // 16))

    def write(self, batch: pa.RecordBatch) -> Optional[pa.RecordBatch]:
        lines = render_lines(batch)
        room = self.max_file_size - self._raw.tell()
        if self._sink is not self._raw:
            # Compressed: the compressor holds bytes back, so flush it every ``_flush_every``
            # input bytes to see how large the file is, and stop once it is full.
            fit = 0
            for line in lines:
                if fit and self.full:
                    break
                self._sink.write(line)
                self._unflushed += len(line)
                if self._unflushed >= self._flush_every:
                    self._sink.flush()
                    self._unflushed = 0
                fit += 1
        else:
            ends = list(accumulate(len(line) for line in lines))
            fit = sum(1 for end in ends if end <= room)
            if fit == 0 and self.rows == 0:
                fit = 1  # a row larger than the limit gets a file of its own
            self._sink.write(b"".join(lines[:fit]))
        self.rows += fit
        return batch.slice(fit) if fit < len(lines) else None

    @property
    def full(self) -> bool:
        return self._raw.tell() >= self.max_file_size

    def close(self) -> None:
        if self._sink is not self._raw:
            self._sink.close()

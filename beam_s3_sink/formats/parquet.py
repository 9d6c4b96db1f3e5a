"""Parquet output through pyarrow's ``ParquetWriter``, with row groups sized in bytes.

Sizing follows Materialize's S3 sink: rows are buffered as Arrow batches and written one row
group at a time, and a file is closed before the next row group would take it past
``max_file_size``. A row group's *encoded* size is what lands in the file, so the encoder
learns the ratio of encoded to Arrow bytes from the groups it has written and buffers as many
Arrow bytes as make ``row_group_size`` encoded bytes (at most ``MAX_PENDING_BYTES``)::

    batches ──▶ pending Arrow bytes ≥ row_group_size × (arrow/encoded)? ──▶ one row group ──▶ stream
                                                                               │
    full when: written + last row group + footer estimate > max_file_size ◀────┘

So a file exceeds the limit by at most one row group (when the next group is larger than the
last), row groups are about an eighth of the limit by default, and a worker holds one row
group of rows per open file. Large Arrow batches (``MIN_WHOLE_BATCH``, at least a quarter of a
group, such as the row groups ``ReadFromParquetBatched`` reads) are not gathered: each is
encoded as a row group of its own (cut at a group's size), so that the encoder holds no batch
beyond the one its producer holds anyway.

The writer is made with the file's first row group, which decides the dictionary columns
(:func:`dictionary_columns`: mostly distinct columns are written plain from the start, instead
of pyarrow building a dictionary, overflowing it and falling back). pyarrow writes a row group
in some 200 pieces; a native buffer (``SINK_BUFFER``) gathers them, so that the output stream,
a Python object, gets each group in a few writes without taking the GIL per piece::

    row group ─▶ ParquetWriter ─(pieces)─▶ native buffer ─(≤ 1 MiB writes, flushed per group)─▶ stream

The Arrow schema is stored in the file (``ARROW:schema``), so pyarrow and Polars restore the
exact types. Which types land in the file is the format's ``types`` profile::

    Arrow schema ──parquet_schema(schema, types)──▶ file schema ──▶ ParquetWriter
    batch ─────────to_file_table(table, file schema)──▶ cast (UUID → text first) ──▶ row group

- ``"compatible"`` (the default): every file opens in Spark 4, DuckDB, pyarrow, Polars,
  pandas and Trino/Athena, and every value reads back equal or as its documented
  equivalent: UUID as its 36-character text, a time of day as ``HH:MM:SS.ffffff`` text (the
  unit's digits), unsigned integers as the next wider signed type (``uint64`` as
  ``decimal(20, 0)``, as Spark reads them), nanosecond timestamps as microseconds (a value
  with nanoseconds fails the copy, naming the column: nothing is truncated), ``float16`` as
  ``float32``, ``large_*`` and view types as their plain types.
- ``"exact"``: Parquet's own logical types (UUID, TIME, TIMESTAMP(NANOS), unsigned
  integers, FLOAT16), for readers that know them (pyarrow, DuckDB, Polars); Spark cannot
  open a file holding UUID, TIME or nanosecond columns at all.

In both, the few Arrow types that Parquet stores in another unit (``date64``,
``timestamp[s]``, ``time32[s]``) are written as the type Parquet holds (``date32``,
milliseconds), so that every reader sees the same type. JSON columns are Parquet's ``JSON``
logical type (Spark reads it as a string). Types no common reader reads back unchanged
(durations, intervals, decimals wider than 38 digits) are refused when the pipeline is built.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, replace
from typing import Any, ClassVar, List, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import EncodeError
from .base import FileEncoder, Format, KeepOpen, OutputStream, uuid_text
from .stats import ColumnStats, nan_counts, parquet_footer_stats

__all__ = ["ParquetFormat", "parquet_schema", "to_file_table", "dictionary_columns", "TYPE_PROFILES"]

_COMPRESSIONS = ("snappy", "zstd", "gzip", "brotli", "lz4", "none")
MIN_ROW_GROUP = 16 * 2**10
MAX_ROW_GROUP = 4 * 2**20
"""The default row group's most encoded bytes, about DuckDB's own row groups (122,880 rows of a
wide table): large enough for every reader's scans and parallel enough for one file, small
enough that a worker's memory does not grow with the input. The last group of a file is encoded
when the file closes, with nothing left to overlap it: at 16 MiB, a 15 MB file of a million rows
spent 0.28 s there, 70 % of its rows, while smaller groups are encoded on the encode thread as
the rows come."""
MAX_PENDING_BYTES = 64 * 2**20
"""The most Arrow bytes an encoder buffers for one row group, however well the data compresses."""
DICTIONARY_SAMPLE_ROWS = 16384
"""Rows of a file's first row group whose distinct values decide its dictionary columns."""
SINK_BUFFER = 2**20
"""Bytes of the native buffer between pyarrow's Parquet writer and the output stream. pyarrow
writes a row group in some 200 pieces, most of them page headers of a few dozen bytes; into a
Python file object each piece is a call that needs the GIL, which the thread feeding the copy
(Beam, the reader) holds most of the time, so an encode thread waited on it about once per
piece. Buffered natively, the stream gets a few whole MiBs per row group instead."""
MIN_WHOLE_BATCH = 8 * 2**20
"""A batch of at least this many Arrow bytes (and a quarter of a row group) is a row group of its
own: already held by its producer, it is encoded as it is rather than gathered with others."""
MAX_DECIMAL_PRECISION = 38
"""The widest decimal that DuckDB, Polars, Spark and Trino read exactly."""
TYPE_PROFILES = ("compatible", "exact")
"""``ParquetFormat(types=...)``: what every reader opens (default), or Parquet's exact types."""


@dataclass(frozen=True)
class ParquetFormat(Format):
    """Parquet files (``.parquet``).

    >>> ParquetFormat(compression="zstd", compression_level=3).extension
    'parquet'

    Attributes:
      compression: ``snappy`` (default), ``zstd``, ``gzip``, ``brotli``, ``lz4`` or ``none``.
      compression_level: the codec's level (zstd, gzip, brotli, lz4), or None for its default.
      row_group_size: encoded (on-disk) bytes per row group; None: an eighth of
        ``max_file_size``, from 16 KiB to 4 MiB.
      use_dictionary: True (default): dictionary-encode the columns where it pays: every
        column but those whose first rows in a file are mostly distinct values (more than
        half of up to ``DICTIONARY_SAMPLE_ROWS``), which pyarrow would dictionary-encode until
        the dictionary page overflows and then write plain anyway (the TPC-H lineitem copy:
        26 % less encoding time, 8 % smaller). Nested columns, or a column name with a dot,
        keep pyarrow's own choice (all). False: none.
      write_statistics: write min/max statistics per column chunk.
      version: the Parquet format version, ``"1.0"``, ``"2.4"`` or ``"2.6"``.
      types: ``"compatible"`` (default): types that Spark, Trino/Athena, DuckDB, pyarrow,
        Polars and pandas all read (UUID and time of day as text, unsigned integers widened,
        nanosecond timestamps as microseconds); ``"exact"``: Parquet's own logical types.
    """

    name: ClassVar[str] = "parquet"

    compression: str = "snappy"
    compression_level: Optional[int] = None
    row_group_size: Optional[int] = None
    use_dictionary: bool = True
    write_statistics: bool = True
    version: str = "2.6"
    types: str = "compatible"

    def __post_init__(self) -> None:
        if self.types not in TYPE_PROFILES:
            raise ValueError(f"ParquetFormat: types must be one of {list(TYPE_PROFILES)}, got {self.types!r}")
        if not isinstance(self.compression, str) or self.compression.lower() not in _COMPRESSIONS:
            raise ValueError(f"ParquetFormat: compression {self.compression!r} is not one of {list(_COMPRESSIONS)}")
        if self.compression_level is not None:
            codec = self.compression.lower()
            if codec == "none" or not pa.Codec.supports_compression_level(codec):
                raise ValueError(f"ParquetFormat: compression {codec!r} takes no compression_level")
            low, high = pa.Codec.minimum_compression_level(codec), pa.Codec.maximum_compression_level(codec)
            if (
                not isinstance(self.compression_level, int)
                or isinstance(self.compression_level, bool)
                or not low <= self.compression_level <= high
            ):
                raise ValueError(
                    f"ParquetFormat: compression_level for {codec} must be an int from {low} to "
                    f"{high}, got {self.compression_level!r}"
                )
        if self.version not in ("1.0", "2.4", "2.6"):
            raise ValueError(f"ParquetFormat: version must be '1.0', '2.4' or '2.6', got {self.version!r}")
        if self.row_group_size is not None and (
            not isinstance(self.row_group_size, int)
            or isinstance(self.row_group_size, bool)
            or self.row_group_size < 1024
        ):
            raise ValueError(
                f"ParquetFormat: row_group_size is in bytes and must be at least 1024, got {self.row_group_size!r}"
            )

    @property
    def extension(self) -> str:
        return "parquet"

    @property
    def content_type(self) -> str:
        return "application/vnd.apache.parquet"  # IANA, 2024; compression is inside the file

    def row_group_bytes(self, max_file_size: int) -> int:
        """The encoded row-group size used for files of ``max_file_size`` bytes.

        >>> ParquetFormat().row_group_bytes(2**20)
        131072
        """
        if self.row_group_size is not None:
            return self.row_group_size
        return max(MIN_ROW_GROUP, min(MAX_ROW_GROUP, max_file_size // 8))

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            _check_type(field.type, field.name)
        try:
            pq.ParquetWriter(io.BytesIO(), self.file_schema(schema), **self.writer_options()).close()
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise ValueError(f"ParquetFormat: pyarrow cannot write the schema as Parquet: {exc}") from None

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema the files hold for rows of ``schema`` (see :func:`parquet_schema`)."""
        return parquet_schema(schema, self.types)

    def open(self, schema: pa.Schema, out: OutputStream, max_file_size: int) -> "ParquetEncoder":
        return ParquetEncoder(self, schema, out, max_file_size)

    def check_values(self, batch: pa.RecordBatch) -> None:
        """Only a column written in another type (``types="compatible"``) can refuse a value
        (:func:`to_file_table`): that conversion is the check, with no encoding.

        >>> ParquetFormat().check_values(pa.record_batch({"id": [1]}))  # nothing to convert: nothing refused
        """
        file_schema = self.file_schema(batch.schema)
        if not file_schema.equals(batch.schema):
            to_file_table(pa.Table.from_batches([batch]), file_schema)

    def writer_options(self) -> dict:
        """Keyword arguments for ``pyarrow.parquet.ParquetWriter``."""
        compression = self.compression.lower()
        return dict(
            compression=None if compression == "none" else compression,
            compression_level=self.compression_level,
            use_dictionary=self.use_dictionary,
            write_statistics=self.write_statistics,
            version=self.version,
            coerce_timestamps=None,
            allow_truncated_timestamps=False,
            store_schema=True,
        )


def _check_type(typ: pa.DataType, column: str) -> None:
    if pa.types.is_duration(typ) or pa.types.is_interval(typ):
        raise ValueError(
            f"ParquetFormat: column {column!r} is {typ}; Parquet has no such type and readers see "
            "a bare integer. Cast it to pa.int64() (and name the unit in the column) first."
        )
    if pa.types.is_decimal(typ) and typ.precision > MAX_DECIMAL_PRECISION:
        raise ValueError(
            f"ParquetFormat: column {column!r} is {typ}; DuckDB, Polars, Spark and Trino read "
            f"decimals of at most {MAX_DECIMAL_PRECISION} digits (DuckDB turns wider ones into "
            f"doubles). Use precision {MAX_DECIMAL_PRECISION} or less, or pa.string()."
        )
    if pa.types.is_union(typ):
        raise ValueError(f"ParquetFormat: column {column!r} is a union ({typ}), which Parquet cannot hold")
    for i in range(typ.num_fields):
        _check_type(typ.field(i).type, column)


def parquet_schema(schema: pa.Schema, types: str = "compatible") -> pa.Schema:
    """The schema written to the file: ``schema`` with the types of the ``types`` profile.

    >>> parquet_schema(pa.schema([("t", pa.timestamp("s", tz="UTC")), ("d", pa.date64())]))
    t: timestamp[ms, tz=UTC]
    d: date32[day]
    >>> parquet_schema(pa.schema([("k", pa.uuid()), ("at", pa.time64("us")), ("n", pa.uint64())]))
    k: string
    at: string
    n: decimal128(20, 0)
    >>> parquet_schema(pa.schema([("k", pa.uuid())]), "exact")
    k: extension<arrow.uuid>
    """
    compatible = types == "compatible"
    return pa.schema([f.with_type(_parquet_type(f.type, compatible)) for f in schema], metadata=schema.metadata)


_WIDER = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}
"""Unsigned integers in the compatible profile: the signed type Spark reads them as."""


def _parquet_type(typ: pa.DataType, compatible: bool) -> pa.DataType:
    def inner(field: pa.Field) -> pa.Field:
        return field.with_type(_parquet_type(field.type, compatible))

    if compatible:
        if isinstance(typ, pa.UuidType) or pa.types.is_time(typ):
            return pa.string()
        if pa.types.is_unsigned_integer(typ):
            return _WIDER[typ]
        if pa.types.is_float16(typ):
            return pa.float32()
        if pa.types.is_timestamp(typ) and typ.unit == "ns":
            return pa.timestamp("us", tz=typ.tz)
        if pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
            return pa.string()
        if pa.types.is_large_binary(typ) or pa.types.is_binary_view(typ):
            return pa.binary()
        if pa.types.is_large_list(typ) or pa.types.is_list_view(typ) or pa.types.is_large_list_view(typ):
            return pa.list_(inner(typ.value_field))
    if pa.types.is_date64(typ):
        return pa.date32()
    if pa.types.is_timestamp(typ) and typ.unit == "s":
        return pa.timestamp("ms", tz=typ.tz)
    if pa.types.is_time32(typ) and typ.unit == "s":
        return pa.time32("ms")
    if pa.types.is_list(typ):
        return pa.list_(inner(typ.value_field))
    if pa.types.is_large_list(typ):
        return pa.large_list(inner(typ.value_field))
    if pa.types.is_fixed_size_list(typ):
        return pa.list_(inner(typ.value_field), typ.list_size)
    if pa.types.is_map(typ):
        return pa.map_(inner(typ.key_field), inner(typ.item_field), typ.keys_sorted)
    if pa.types.is_struct(typ):
        return pa.struct([inner(typ.field(i)) for i in range(typ.num_fields)])
    return typ


def to_file_table(table: pa.Table, file_schema: pa.Schema) -> pa.Table:
    """``table`` converted to ``file_schema``, column by column (see :func:`parquet_schema`).

    A value the file's type cannot hold (a nanosecond in a timestamp written as
    microseconds) raises ``ValueError`` naming the column: nothing is truncated.
    """
    columns = []
    for field, column in zip(file_schema, table.columns):
        if column.type.equals(field.type):
            columns.append(column)
            continue
        try:
            columns.append(
                pa.chunked_array([_to_file_array(chunk, field.type) for chunk in column.chunks], type=field.type)
            )
        except (pa.ArrowInvalid, ValueError, OverflowError) as exc:
            raise EncodeError(
                f"ParquetFormat: column {field.name!r} ({column.type}) is written as {field.type} "
                f"with types='compatible', which cannot hold a value: {exc}. Cast the column to "
                f"{field.type} first, or use ParquetFormat(types='exact') for readers that know "
                f"{column.type}"
            ) from None
    return pa.Table.from_arrays(columns, schema=file_schema)


def _to_file_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    if isinstance(array.type, pa.UuidType):
        return uuid_text(array)
    if _holds_uuid(array.type):
        # A UUID inside a list, struct or map: rare; converted value by value.
        values = [_uuid_as_text(v, array.type) for v in array.to_pylist()]
        return pa.array(values, type=_uuid_as_string(array.type)).cast(target, safe=True)
    return array.cast(target, safe=True)


def _holds_uuid(typ: pa.DataType) -> bool:
    if isinstance(typ, pa.UuidType):
        return True
    return any(_holds_uuid(typ.field(i).type) for i in range(typ.num_fields))


def _uuid_as_string(typ: pa.DataType) -> pa.DataType:
    """``typ`` with every UUID in it made a string, and nothing else changed."""
    if isinstance(typ, pa.UuidType):
        return pa.string()
    if pa.types.is_map(typ):
        return pa.map_(
            typ.key_field.with_type(_uuid_as_string(typ.key_type)),
            typ.item_field.with_type(_uuid_as_string(typ.item_type)),
            typ.keys_sorted,
        )
    if pa.types.is_struct(typ):
        return pa.struct([typ.field(i).with_type(_uuid_as_string(typ.field(i).type)) for i in range(typ.num_fields)])
    if pa.types.is_fixed_size_list(typ):
        return pa.list_(typ.value_field.with_type(_uuid_as_string(typ.value_type)), typ.list_size)
    if typ.num_fields == 1:
        return pa.list_(typ.value_field.with_type(_uuid_as_string(typ.value_type)))
    return typ


def _uuid_as_text(value: Any, typ: pa.DataType) -> Any:
    """A nested value with its UUIDs as text (times are cast by pyarrow afterwards)."""
    if value is None:
        return None
    if isinstance(typ, pa.UuidType):
        return str(value)
    if pa.types.is_map(typ):
        return [(_uuid_as_text(k, typ.key_type), _uuid_as_text(v, typ.item_type)) for k, v in value]
    if pa.types.is_struct(typ):
        return {
            typ.field(i).name: _uuid_as_text(value.get(typ.field(i).name), typ.field(i).type)
            for i in range(typ.num_fields)
        }
    if typ.num_fields == 1:  # lists of every kind
        return [_uuid_as_text(v, typ.field(0).type) for v in value]
    return value


_SAME_STRING = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_SAME_BINARY = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)


def _same_storage(schema: pa.Schema, file_schema: pa.Schema) -> bool:
    """True when the columns of ``schema`` and ``file_schema`` differ at most in being view or
    large variants of string or binary, whose Parquet columns (BYTE_ARRAY) are the same bytes.

    >>> _same_storage(pa.schema([("s", pa.string_view())]), pa.schema([("s", pa.string())]))
    True
    >>> _same_storage(pa.schema([("t", pa.timestamp("ns"))]), pa.schema([("t", pa.timestamp("us"))]))
    False
    """
    if schema.names != file_schema.names or schema.metadata != file_schema.metadata:
        return False
    for field, target in zip(schema, file_schema):
        if field.type.equals(target.type):
            continue
        if field.nullable != target.nullable or field.metadata != target.metadata:
            return False
        if not any(
            any(f(field.type) for f in kind) and any(f(target.type) for f in kind)
            for kind in (_SAME_STRING, _SAME_BINARY)
        ):
            return False
    return True


class ParquetEncoder(FileEncoder):
    """One Parquet file: buffers a row group of batches, then encodes it."""

    def __init__(self, fmt: ParquetFormat, schema: pa.Schema, out: OutputStream, max_file_size: int) -> None:
        super().__init__(out, max_file_size)
        self._schema = schema
        self._file_schema = fmt.file_schema(schema)
        self._cast = not self._file_schema.equals(schema)
        self._target = fmt.row_group_bytes(max_file_size)
        options = fmt.writer_options()
        self._stored_schema: Optional[pa.Schema] = None
        if self._cast and options["store_schema"] and _same_storage(schema, self._file_schema):
            # Only view/large string and binary types differ, which Parquet stores alike: write the
            # batches as they are (no copy) and store the file schema for Arrow readers ourselves.
            self._cast, self._stored_schema = False, self._file_schema
            writer_schema, options = schema, dict(options, store_schema=False)
        else:
            writer_schema = self._file_schema
        # Native buffering, no GIL per piece (SINK_BUFFER), flushed into ``out`` per row group
        # and at close; KeepOpen: pyarrow never closes ``out``, which the caller still needs.
        self._sink = pa.BufferedOutputStream(pa.PythonFile(KeepOpen(out), mode="w"), buffer_size=SINK_BUFFER)
        self._writer_schema, self._options = writer_schema, options
        self._writer: Optional[pq.ParquetWriter] = None  # made with the first row group (use_dictionary)
        self._pending: List[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._arrow_written = 0
        self._encoded_written = 0
        self._last_group_encoded = 0
        self._groups = 0
        self._leaves = len(pa.Table.from_batches([], schema=self._file_schema).flatten().schema)
        self._footer_base = 1024 + len(self._file_schema.serialize()) * 2
        self._nans = nan_counts(pa.Table.from_batches([], schema=schema))  # 0 per float column

    def _group_arrow_bytes(self) -> int:
        """Arrow bytes that encode to about one row group, from the groups written so far."""
        if not self._encoded_written:
            return self._target
        ratio = self._arrow_written / self._encoded_written
        return max(1024, min(MAX_PENDING_BYTES, int(self._target * ratio)))

    @staticmethod
    def _whole(batch: pa.RecordBatch, group: int) -> bool:
        """A batch large enough to be a row group of its own (``MIN_WHOLE_BATCH``)."""
        return batch.nbytes >= max(MIN_WHOLE_BATCH, group // 4)

    def write(self, batch: pa.RecordBatch, checked: Optional[pa.Array] = None) -> Optional[pa.RecordBatch]:
        while batch is not None and batch.num_rows:
            group = self._group_arrow_bytes()
            whole = self._whole(batch, group)
            if whole and self._pending:
                self._flush()  # smaller batches gathered so far: a group of their own
                if self.full:
                    return batch
            room = group - self._pending_bytes
            if batch.nbytes <= room or batch.num_rows == 1:
                head, batch = batch, None
            else:
                per_row = max(1, batch.nbytes // batch.num_rows)
                take = max(1, min(batch.num_rows - 1, room // per_row))
                head, batch = batch.slice(0, take), batch.slice(take)
            self._pending.append(head)
            self._pending_bytes += head.nbytes
            self.rows += head.num_rows
            if whole or self._pending_bytes >= group:
                self._flush()
                if self.full:
                    return batch
        return None

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        for column, count in nan_counts(table).items():
            self._nans[column] = self._nans.get(column, 0) + count
        if self._cast:
            table = to_file_table(table, self._file_schema)
        before = self._sink.tell()  # the bytes of the file so far, buffered ones included
        writer = self._writer or self._open_writer(table)
        writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._sink.flush()  # the group's bytes to the stream now, to upload while the next encodes
        del table
        self._pending = []
        # Hand the group's freed buffers back to the OS now: pyarrow's pool (mimalloc) keeps
        # them otherwise, and a copy's peak RSS grows by about a row group's worth.
        pa.default_memory_pool().release_unused()
        self._last_group_encoded = self._sink.tell() - before
        self._arrow_written += self._pending_bytes
        self._encoded_written += self._last_group_encoded
        self._groups += 1
        self._pending_bytes = 0

    def _footer_estimate(self) -> int:
        """A generous guess of the footer: schema, and per row group and leaf column its chunk."""
        return self._footer_base + (self._groups + 1) * (self._leaves * 160 + 64)

    @property
    def full(self) -> bool:
        return (
            self._groups > 0
            and not self._pending
            and self._sink.tell() + self._last_group_encoded + self._footer_estimate() > self.max_file_size
        )

    def _open_writer(self, first: Optional[pa.Table]) -> pq.ParquetWriter:
        """The file's writer, with the dictionary columns chosen from its first row group."""
        options = self._options
        if options["use_dictionary"] is True and first is not None:
            options = dict(options, use_dictionary=dictionary_columns(first))
        self._writer = pq.ParquetWriter(self._sink, self._writer_schema, **options)
        return self._writer

    def close(self) -> None:
        self._flush()
        writer = self._writer or self._open_writer(None)  # an empty file: the schema alone
        if self._stored_schema is not None:  # what store_schema=True writes (ARROW:schema)
            encoded = base64.b64encode(self._stored_schema.serialize().to_pybytes()).decode("ascii")
            writer.add_key_value_metadata({"ARROW:schema": encoded})
        writer.close()  # leaves the sink open
        self._sink.flush()  # the footer into ``out``

    def stats(self) -> Tuple[ColumnStats, ...]:
        """From the footer just written (``FileMetaData``), per leaf column; float and double
        columns with the NaNs of the batches written."""
        assert self._writer is not None, "close() makes the footer"
        return tuple(
            replace(s, nan_count=self._nans[s.column]) if s.column in self._nans else s
            for s in parquet_footer_stats(self._writer.writer.metadata)
        )


def dictionary_columns(table: pa.Table) -> Union[bool, List[str]]:
    """``use_dictionary`` for a file whose first row group is ``table``: the names of the
    columns that are not mostly distinct in its first ``DICTIONARY_SAMPLE_ROWS`` rows, or True
    (every column) when a column is nested or has a dot in its name (pyarrow names a column to
    dictionary-encode by its dotted leaf path).

    >>> table = pa.table({"id": range(1000), "kind": ["a", "b"] * 500})
    >>> dictionary_columns(table)
    ['kind']
    """
    if any(pa.types.is_nested(f.type) or "." in f.name for f in table.schema):
        return True
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    chosen = []
    for field, column in zip(sample.schema, sample.columns):
        if pa.types.is_string_view(field.type) or pa.types.is_binary_view(field.type):
            column = column.cast(pa.string() if pa.types.is_string_view(field.type) else pa.binary())
        try:
            distinct = pc.count_distinct(column, mode="all").as_py()
        except pa.ArrowNotImplementedError:  # a type without the kernel: pyarrow's own choice
            distinct = 0
        if distinct * 2 <= max(1, sample.num_rows):
            chosen.append(field.name)
    return chosen

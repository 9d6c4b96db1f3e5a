"""Arrow input: ``pyarrow.RecordBatch`` and ``pyarrow.Table`` elements, conformed to the copy's schema.

Columns are matched by name; a missing nullable column becomes nulls; a type is kept as it is
(no copy) or cast by pyarrow (``safe=True``) when every value keeps its value (:func:`widens`:
wider integers and floats, dictionaries, string/binary flavours, finer time units, wider
decimals, 16-byte binary into ``uuid``, and these inside lists and structs). Anything else is
a :class:`~beam_s3_sink.errors.BatchError` naming the column, both types and the source.
"""

from __future__ import annotations

from typing import Any, List, Optional, Union

import pyarrow as pa

from .errors import BatchError

__all__ = ["ARROW_TYPES", "is_arrow", "conform", "conform_batches", "describe", "widens"]

ARROW_TYPES = (pa.RecordBatch, pa.Table)
Arrow = Union[pa.RecordBatch, pa.Table]


def is_arrow(element: Any) -> bool:
    """True for ``pyarrow.RecordBatch`` and ``pyarrow.Table`` elements."""
    return isinstance(element, ARROW_TYPES)


def describe(data: Arrow) -> str:
    """How an error names an Arrow element: its class, rows and columns."""
    names = data.schema.names
    shown = names if len(names) <= 8 else names[:8] + ["..."]
    return f"a pyarrow.{type(data).__name__} of {data.num_rows:,} rows with columns {shown}"


def conform_batches(data: Arrow, schema: pa.Schema, source: Optional[str] = None) -> List[pa.RecordBatch]:
    """``data`` as record batches of exactly ``schema`` (zero-copy where the types agree).

    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    >>> [b.to_pydict() for b in conform_batches(pa.table({"name": ["a"], "id": pa.array([1], pa.int32())}), schema)]
    [{'id': [1], 'name': ['a']}]
    """
    conformed = conform(data, schema, source)
    if isinstance(conformed, pa.RecordBatch):
        return [conformed] if conformed.num_rows else []
    return [b for b in conformed.to_batches() if b.num_rows]


def conform(data: Arrow, schema: pa.Schema, source: Optional[str] = None, lossless: bool = True) -> Arrow:
    """``data`` (a Table or RecordBatch, returned as the same kind) with ``schema``'s columns and types.

    Raises :class:`BatchError` naming the column, the types and ``source`` (default: a
    description of ``data``). ``lossless=False`` (the CLI, whose user names the types with
    ``--schema``) also takes the casts that only some values survive, checking each value
    (``cast(safe=True)``: ``"12"`` into ``int64``, ``int64`` into ``int32``).
    """
    where = source or describe(data)
    if data.schema.equals(schema):
        return data  # the common case: nothing to do, nothing copied
    present = data.schema.names
    if len(set(present)) != len(present):
        raise BatchError(f"{where} repeats a column name: {present}")
    extra = [n for n in present if n not in schema.names]
    if extra:
        raise BatchError(f"{where} has column(s) {extra} that are not in the copy's schema {schema.names}")
    columns = []
    for field in schema:
        if field.name not in present:
            if not field.nullable:
                raise BatchError(f"column {field.name!r} ({field.type}, NOT NULL) is missing from {where}")
            columns.append(pa.nulls(data.num_rows, field.type))
            continue
        column = data.column(field.name)
        if column.type != field.type:
            column = _cast(column, field, where, lossless)
        if not field.nullable and column.null_count:
            raise BatchError(
                f"column {field.name!r} ({field.type}) is NOT NULL in the copy's schema, "
                f"but {where} has {column.null_count:,} NULL(s) in it"
            )
        columns.append(column)
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(column: Any, field: pa.Field, where: str, lossless: bool) -> Any:
    source_type = column.type
    if lossless and not widens(source_type, field.type):
        raise BatchError(
            f"column {field.name!r} is {field.type} in the copy's schema, but {where} "
            f"holds {source_type}, which does not convert to it without loss; cast it "
            f"first (for example with pyarrow.compute.cast)"
        )
    try:
        return column.cast(field.type, safe=True)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BatchError(
            f"column {field.name!r}: {where} holds {source_type}, and a value does not fit {field.type}: {first}"
        ) from None


_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def widens(source: pa.DataType, target: pa.DataType) -> bool:
    """True when every value of ``source`` has the same value in ``target`` (the casts taken).

    >>> widens(pa.int32(), pa.int64()), widens(pa.int64(), pa.int32()), widens(pa.string(), pa.int64())
    (True, False, False)
    """
    t = pa.types
    if source == target:
        return True
    if t.is_dictionary(source):
        return widens(source.value_type, target)
    if t.is_null(source):
        return True
    if t.is_integer(source) and t.is_integer(target):
        if t.is_signed_integer(source) and t.is_unsigned_integer(target):
            return False
        if t.is_unsigned_integer(source) and t.is_signed_integer(target):
            return target.bit_width > source.bit_width
        return target.bit_width >= source.bit_width
    if t.is_floating(source) and t.is_floating(target):
        return target.bit_width >= source.bit_width
    if t.is_integer(source) and t.is_floating(target):
        return target.bit_width >= 32 and source.bit_width <= (16 if target.bit_width == 32 else 32)
    strings = (t.is_string, t.is_large_string, getattr(t, "is_string_view", lambda _: False))
    if any(f(source) for f in strings) and any(f(target) for f in strings):
        return not isinstance(target, pa.ExtensionType)
    binaries = (t.is_binary, t.is_large_binary, getattr(t, "is_binary_view", lambda _: False))
    if any(f(source) for f in binaries) and any(f(target) for f in binaries):
        return True
    if t.is_timestamp(source) and t.is_timestamp(target):
        return source.tz == target.tz and _TIME_UNITS[target.unit] >= _TIME_UNITS[source.unit]
    if t.is_time(source) and t.is_time(target):
        return _TIME_UNITS[target.unit] >= _TIME_UNITS[source.unit]
    if t.is_date(source) and t.is_date(target):
        return True  # date64 holds whole days here (Arrow's rule); the cast checks it
    if t.is_decimal(source) and t.is_decimal(target):
        return target.scale >= source.scale and target.precision - target.scale >= source.precision - source.scale
    if isinstance(target, pa.UuidType):
        return t.is_fixed_size_binary(source) and source.byte_width == 16
    lists = (t.is_list, t.is_large_list)
    if any(f(source) for f in lists) and any(f(target) for f in lists):
        return widens(source.value_type, target.value_type)
    if t.is_struct(source) and t.is_struct(target):
        names = [target.field(i).name for i in range(target.num_fields)]
        if sorted(source.field(i).name for i in range(source.num_fields)) != sorted(names):
            return False
        if [source.field(i).name for i in range(source.num_fields)] != names:
            return False  # pyarrow casts structs by position: a reorder is not a cast
        return all(widens(source.field(i).type, target.field(i).type) for i in range(target.num_fields))
    return False

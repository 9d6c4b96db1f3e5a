"""The Arrow schema of a copy, and :func:`rows_to_batch`, which turns rows into a record batch.

The schema is given as a ``pyarrow.Schema`` or derived from the PCollection's Beam schema
with Beam's own Arrow helpers (and, for the types those leave out, from the annotations).
Rows are converted a column at a time by pyarrow in C++; only JSON and UUID columns
(:mod:`.coerce`) and Beam ``Timestamp`` values go through Python per value. A refused column
is retried value by value to name the column, the expected type and the value.
"""

from __future__ import annotations

import collections.abc
import datetime
import decimal
import itertools
import operator
import typing
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

from .coerce import converter
from .errors import CoercionError, RowError

__all__ = ["resolve_schema", "rows_to_batch", "as_mapping", "schema_to_json"]


_CONVERSION_ERRORS = (pa.ArrowException, CoercionError, TypeError, ValueError, OverflowError)


def resolve_schema(schema: Optional[pa.Schema], element_type: Any) -> pa.Schema:
    """The copy's Arrow schema: ``schema`` if given, else the PCollection's Beam schema.

    >>> import typing
    >>> class Order(typing.NamedTuple):
    ...     id: int
    ...     note: typing.Optional[str]
    >>> resolve_schema(None, Order).names
    ['id', 'note']
    """
    if schema is not None:
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"CopyToS3: schema must be a pyarrow.Schema, got {type(schema).__name__}")
        if len(schema) == 0:
            raise ValueError("CopyToS3: the schema has no columns")
        if len(set(schema.names)) != len(schema.names):
            raise ValueError(f"CopyToS3: the schema repeats a column name: {schema.names}")
        return schema
    derived = _from_beam_type(element_type)
    if derived is None:
        raise ValueError(
            "CopyToS3: the input PCollection has no schema. Pass schema=pa.schema([...]), or make "
            "the elements NamedTuples or beam.Row (for example "
            "beam.Map(lambda r: beam.Row(id=int(r['id']), ...))) so that Beam knows the schema. "
            "For pyarrow Table/RecordBatch elements (e.g. from beam.io.ReadFromParquetBatched, whose "
            "element type is Any), pass their schema, e.g. schema=pyarrow.parquet.read_schema(path). "
            f"The element type is {element_type!r}."
        )
    return derived


def _from_beam_type(element_type: Any) -> Optional[pa.Schema]:
    """Beam's own Arrow conversion where it fits; our mapping for the types it leaves out.

    ``arrow_type_compatibility`` maps Beam's atomic, array, map and row types but no logical
    type (https://github.com/apache/beam/issues/23817), and Beam's schemas have no type at all
    for ``datetime``, ``UUID`` or unsigned numpy integers. Columns of those types are mapped
    here from their Python annotations, column by column; every other column keeps Beam's
    own mapping.
    """
    from apache_beam.portability.api import schema_pb2
    from apache_beam.typehints import arrow_type_compatibility, schemas

    fields = _python_fields(element_type)
    if fields is None:
        return None
    try:
        beam_schema = schemas.schema_from_element_type(element_type)
        return arrow_type_compatibility.arrow_schema_from_beam_schema(beam_schema)
    except (NotImplementedError, TypeError, ValueError, KeyError):
        pass
    arrow_fields = []
    for name, typ in fields:
        try:
            beam_field = schema_pb2.Field(name=name, type=schemas.typing_to_runner_api(typ))
            arrow_fields.append(
                arrow_type_compatibility.arrow_schema_from_beam_schema(schema_pb2.Schema(fields=[beam_field])).field(0)
            )
        except (NotImplementedError, TypeError, ValueError, KeyError):
            nullable, inner = _optional(typ)
            arrow_fields.append(pa.field(name, _arrow_type(inner, name, element_type), nullable=nullable))
    return pa.schema(arrow_fields)


def _python_fields(element_type: Any) -> Optional[List[Tuple[str, Any]]]:
    """(name, annotation) per field of a NamedTuple, dataclass or ``beam.Row`` type, else None."""
    import dataclasses

    from apache_beam.typehints.row_type import RowTypeConstraint

    if element_type is None or element_type is Any:
        return None
    if isinstance(element_type, RowTypeConstraint):
        return list(element_type._fields)
    if isinstance(element_type, type) and (
        (issubclass(element_type, tuple) and hasattr(element_type, "_fields")) or dataclasses.is_dataclass(element_type)
    ):
        try:
            hints = typing.get_type_hints(element_type)
        except Exception as exc:  # a string annotation that does not resolve
            raise ValueError(
                f"CopyToS3: cannot read the annotations of {element_type!r} ({exc}); "
                "annotate with real types or pass schema=pa.schema([...])."
            ) from None
        names = (
            element_type._fields
            if hasattr(element_type, "_fields")
            else [f.name for f in dataclasses.fields(element_type)]
        )
        missing = [n for n in names if n not in hints]
        if missing:
            raise ValueError(
                f"CopyToS3: the Beam schema of {element_type!r} leaves columns {missing} untyped. "
                "Annotate them, or pass schema=pa.schema([...])."
            )
        return [(n, hints[n]) for n in names]
    return None


def _optional(typ: Any) -> Tuple[bool, Any]:
    args = typing.get_args(typ)
    if typing.get_origin(typ) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return True, rest[0]
    return False, typ


def _python_types() -> Dict[Any, pa.DataType]:
    import numpy as np
    from apache_beam.utils.timestamp import Timestamp

    return {
        datetime.datetime: pa.timestamp("us"),
        datetime.date: pa.date32(),
        datetime.time: pa.time64("us"),
        Timestamp: pa.timestamp("us", tz="UTC"),
        uuid.UUID: pa.uuid(),
        np.uint8: pa.uint8(),
        np.uint16: pa.uint16(),
        np.uint32: pa.uint32(),
        np.uint64: pa.uint64(),
        np.float16: pa.float16(),
    }


def _arrow_type(typ: Any, column: str, element_type: Any) -> pa.DataType:
    """The Arrow type of a Python annotation that Beam's Arrow helpers do not map."""
    from apache_beam.typehints import arrow_type_compatibility, schemas

    known = _python_types().get(typ)
    if known is not None:
        return known
    if typ is decimal.Decimal:
        raise ValueError(
            f"CopyToS3: column {column!r} of {element_type!r} is a decimal.Decimal, which has no "
            "precision in a Beam schema; pass schema=pa.schema([...]) with "
            f"pa.field({column!r}, pa.decimal128(precision, scale))."
        )
    if typ is Any:
        raise ValueError(
            f"CopyToS3: column {column!r} of {element_type!r} is untyped (Any). Annotate it with a "
            "concrete type (note that Beam cannot read string annotations, as "
            "'from __future__ import annotations' makes them), or pass schema=pa.schema([...])."
        )
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection) and args:
        nullable, inner = _optional(args[0])
        return pa.list_(pa.field("item", _arrow_type(inner, column, element_type), nullable=nullable))
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping) and len(args) == 2:
        _, key = _optional(args[0])
        nullable, item = _optional(args[1])
        return pa.map_(
            pa.field("key", _arrow_type(key, column, element_type), nullable=False),
            pa.field("value", _arrow_type(item, column, element_type), nullable=nullable),
        )
    nested = _python_fields(typ) if isinstance(typ, type) else None
    if nested is not None:
        return pa.struct(
            [
                pa.field(name, _arrow_type(_optional(t)[1], column, element_type), nullable=_optional(t)[0])
                for name, t in nested
            ]
        )
    try:
        beam_type = schemas.typing_to_runner_api(typ)
    except (TypeError, ValueError, KeyError):
        beam_type = None
    if beam_type is not None and beam_type.WhichOneof("type_info") == "atomic_type":
        return arrow_type_compatibility.ATOMIC_TYPE_TO_PYARROW[beam_type.atomic_type]
    raise ValueError(
        f"CopyToS3: column {column!r} of {element_type!r} has type {typ!r}, which has no Arrow "
        "type in a Beam schema; pass schema=pa.schema([...])."
    )


def as_mapping(row: Any) -> Mapping[str, Any]:
    """A dict view of a row given as a dict, ``beam.Row`` or NamedTuple."""
    if type(row) is dict:  # the common case, without the cost of an ABC check per row
        return row
    if isinstance(row, Mapping):
        return row
    as_dict = getattr(row, "_asdict", None)
    if as_dict is not None:
        return as_dict()
    if hasattr(row, "as_dict"):
        return row.as_dict()
    raise RowError(f"a row must be a dict, beam.Row or NamedTuple, got {type(row).__name__}: {_short(row)}")


def rows_to_batch(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Convert rows to one record batch of ``schema``; raise :class:`RowError` if one does not fit.

    >>> rows_to_batch([{"id": 1, "doc": {"a": 1}}], pa.schema([("id", pa.int8()), ("doc", pa.json_())]))
    pyarrow.RecordBatch
    id: int8
    doc: extension<arrow.json>
    ----
    id: [1]
    doc: ["{"a":1}"]
    """
    names = set(schema.names)
    if not names.issuperset(set().union(*rows)):  # every row's keys at once, in C
        for row in rows:
            if not names.issuperset(row):
                raise RowError(
                    f"a row has columns that are not in the schema: {sorted(set(row) - names)}; "
                    f"the schema's columns are {schema.names}"
                )
    columns = [_column(rows, field) for field in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _column(rows: Sequence[Mapping[str, Any]], field: pa.Field) -> pa.Array:
    name = field.name
    try:  # dicts (the common case) in one C loop
        values = list(map(dict.get, rows, itertools.repeat(name)))  # type: ignore[arg-type]
    except TypeError:  # another Mapping
        values = [row.get(name) for row in rows]
    kinds = set(map(type, values)) if pa.types.is_timestamp(field.type) else set()
    array = _datetimes(values, field.type) if kinds == {datetime.datetime} else None
    if array is None:
        # pyarrow would take a Beam Timestamp as an int of seconds in the column's unit: convert.
        convert = converter(field.type, rows=_beam_timestamp() in kinds)
        try:
            array = _to_array([convert(v) for v in values] if convert else values, field.type)
        except _CONVERSION_ERRORS:
            array = _column_of_rows(values, field)
    if not field.nullable and array.null_count:
        index = array.is_null().to_pylist().index(True)
        state = "NULL" if name in rows[index] else "missing"
        raise RowError(
            f"column {name!r} expects {field.type} and is not nullable, but it is {state} in row "
            f"{_short(dict(rows[index]))}"
        )
    return array


def _to_array(values: List[Any], typ: pa.DataType) -> pa.Array:
    """``pa.array(values, typ)``, also where ``typ`` nests an extension type (a list of UUIDs, a
    struct with a JSON field), which pyarrow does not build from Python values: such a column
    is built with the extension's storage type and cast to ``typ``."""
    plain = _nested_storage(typ)
    if plain is typ:
        return pa.array(values, type=typ, from_pandas=False)
    return pa.array(values, type=plain, from_pandas=False).cast(typ)


def _nested_storage(typ: pa.DataType, nested: bool = False) -> pa.DataType:
    """``typ`` with every extension type below its top replaced by its storage type (``typ``
    itself, the same object, when it has none)."""
    if isinstance(typ, pa.BaseExtensionType):
        return _nested_storage(typ.storage_type, True) if nested else typ
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        inner = _nested_storage(typ.value_type, True)
        if inner is typ.value_type:
            return typ
        field = typ.value_field.with_type(inner)
        if pa.types.is_fixed_size_list(typ):
            return pa.list_(field, typ.list_size)
        return pa.large_list(field) if pa.types.is_large_list(typ) else pa.list_(field)
    if pa.types.is_map(typ):
        key, item = _nested_storage(typ.key_type, True), _nested_storage(typ.item_type, True)
        if key is typ.key_type and item is typ.item_type:
            return typ
        return pa.map_(typ.key_field.with_type(key), typ.item_field.with_type(item), typ.keys_sorted)
    if pa.types.is_struct(typ):
        fields = [typ.field(i) for i in range(typ.num_fields)]
        inner_types = [_nested_storage(f.type, True) for f in fields]
        if all(t is f.type for t, f in zip(inner_types, fields)):
            return typ
        return pa.struct([f.with_type(t) for f, t in zip(fields, inner_types)])
    return typ


def _beam_timestamp() -> type:
    from apache_beam.utils.timestamp import Timestamp

    return Timestamp


_EPOCHS = {True: datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), False: datetime.datetime(1970, 1, 1)}


def _datetimes(values: List[Any], typ: pa.TimestampType) -> Optional[pa.Array]:
    """A ``us`` or ``ns`` timestamp column of ``datetime`` values, through datetime's own
    subtraction: one C loop of ``value - epoch`` (which applies each value's UTC offset, as
    pyarrow does), whose timedeltas become a duration array viewed as ``typ``. pyarrow's own
    conversion asks each value's ``tzinfo`` for its offset through Python, at about four times
    the cost (0.24 against 0.06 s per million values). None when pyarrow's path must decide:
    another unit, a naive value in a zoned column (or the reverse), or a value beyond the
    unit's range (which pyarrow's path then names).

    >>> utc = datetime.timezone.utc
    >>> _datetimes([datetime.datetime(2026, 1, 1, 12, tzinfo=utc)], pa.timestamp("us", tz="UTC"))[0]
    <pyarrow.TimestampScalar: '2026-01-01T12:00:00.000000+0000'>
    >>> _datetimes([datetime.datetime(2026, 1, 1)], pa.timestamp("us", tz="UTC")) is None
    True
    """
    if typ.unit not in ("us", "ns"):
        return None
    try:
        deltas = list(map(operator.sub, values, itertools.repeat(_EPOCHS[typ.tz is not None])))
        return pa.array(deltas, pa.duration(typ.unit)).view(typ)
    except _CONVERSION_ERRORS:  # aware and naive mixed; beyond int64 nanoseconds
        return None


def _column_of_rows(values: List[Any], field: pa.Field) -> pa.Array:
    """Retry a refused column with ``beam.Row`` structs as dicts; else name the bad value."""
    convert = converter(field.type, rows=True)
    try:
        return _to_array([convert(v) for v in values] if convert else values, field.type)
    except _CONVERSION_ERRORS:
        pass
    for value in values:
        try:
            _to_array([convert(value) if convert else value], field.type)
        except _CONVERSION_ERRORS as cause:
            raise RowError(
                f"column {field.name!r} expects {field.type}, but a row holds {_short(value)} "
                f"({type(value).__name__}): {_why(value, field.type, cause)}"
            ) from None
    raise RowError(f"column {field.name!r} ({field.type}) cannot hold these values")


def _why(value: Any, typ: pa.DataType, cause: BaseException) -> str:
    """A plainer reason than pyarrow's for the common mismatches."""
    if pa.types.is_integer(typ) and isinstance(value, int) and not isinstance(value, bool):
        bits = typ.bit_width
        low, high = (0, 2**bits - 1) if pa.types.is_unsigned_integer(typ) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        if not low <= value <= high:
            return f"out of range: {typ} holds {low} to {high}"
    if pa.types.is_decimal(typ) and isinstance(value, decimal.Decimal) and value.is_finite():
        _, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)  # a finite decimal's ('n', 'N', 'F' are NaN and infinity)
        scale = max(0, -exponent)
        whole = max(0, len(digits) + exponent)
        if scale > typ.scale and value != value.quantize(decimal.Decimal(1).scaleb(-typ.scale)):
            return f"it has {scale} digits after the point, more than the column's scale {typ.scale}"
        if whole > typ.precision - typ.scale:
            return (
                f"it has {whole} digits before the point; decimal({typ.precision}, {typ.scale}) "
                f"holds at most {typ.precision - typ.scale}"
            )
    return _short_text(_first_line(cause), 160)


def _short_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def schema_to_json(schema: pa.Schema, source: Optional[pa.Schema] = None) -> List[Dict[str, Any]]:
    """The schema as the manifest stores it: name, Arrow type and nullability per column.

    ``schema`` is what the files hold; where ``source`` (the copy's schema) has another type
    for a column (a UUID written as text by ``ParquetFormat(types="compatible")``), the
    entry also names it as ``source_type``.

    >>> schema_to_json(pa.schema([("k", pa.string())]), pa.schema([("k", pa.uuid())]))
    [{'name': 'k', 'type': 'string', 'nullable': True, 'source_type': 'extension<arrow.uuid>'}]
    """
    entries = []
    for i, f in enumerate(schema):
        entry: Dict[str, Any] = {"name": f.name, "type": str(f.type), "nullable": f.nullable}
        if source is not None and not source.field(i).type.equals(f.type):
            entry["source_type"] = str(source.field(i).type)
        entries.append(entry)
    return entries

"""Python values pyarrow does not convert by itself, made ready for ``pyarrow.array``: JSON
(``str`` checked to parse, or ``dict``/``list``/numbers serialised compactly), UUID
(``uuid.UUID``, 16 bytes, or its text), and Beam ``Timestamp``, also nested in lists, structs
and maps. :func:`converter` builds one function per column that needs it, None otherwise.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Optional

import pyarrow as pa

from .errors import CoercionError

__all__ = ["converter"]

Convert = Callable[[Any], Any]


def converter(typ: pa.DataType, rows: bool = False) -> Optional[Convert]:
    """A function that readies one value of ``typ`` for pyarrow, or None if none is needed.

    ``rows=True`` also turns ``beam.Row`` values of struct types into dicts (pyarrow takes
    dicts and tuples only) and Beam ``Timestamp`` values into ``datetime``; the caller asks
    for it only when pyarrow refused a column.

    >>> converter(pa.int64()) is None
    True
    >>> converter(pa.json_())({"b": 1, "a": [True, None]})
    '{"b":1,"a":[true,null]}'
    >>> converter(pa.list_(pa.uuid()))(["00000000-0000-0000-0000-000000000001"])
    [b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01']
    """
    if isinstance(typ, pa.JsonType):
        return _json_text
    if isinstance(typ, pa.UuidType):
        return _uuid_bytes
    if rows and pa.types.is_timestamp(typ):
        return _instant
    if pa.types.is_map(typ):
        key, item = converter(typ.key_type, rows), converter(typ.item_type, rows)
        if key is None and item is None:
            return None
        return _map_of(key or _same, item or _same)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        inner = converter(typ.value_type, rows)
        return None if inner is None else _list_of(inner)
    if pa.types.is_struct(typ):
        fields = {typ.field(i).name: converter(typ.field(i).type, rows) for i in range(typ.num_fields)}
        fields = {name: conv for name, conv in fields.items() if conv is not None}
        return _struct_of(fields) if fields or rows else None
    return None


def _same(value: Any) -> Any:
    return value


def _json_text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise CoercionError("JSON bytes are not UTF-8") from None
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError as exc:
            raise CoercionError(f"a str is taken as JSON text, and this one does not parse ({exc})") from None
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CoercionError(f"cannot serialise it as JSON ({exc})") from None


def _uuid_bytes(value: Any) -> Optional[bytes]:
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 16:
            raise CoercionError(f"a UUID given as bytes must be 16 bytes long, not {len(value)}")
        return bytes(value)
    if isinstance(value, str):
        try:
            return uuid.UUID(value).bytes
        except ValueError:
            raise CoercionError("a str is not a UUID's text form") from None
    raise CoercionError("a UUID must be a uuid.UUID, 16 bytes or its text form")


def _instant(value: Any) -> Any:
    to_datetime = getattr(value, "to_utc_datetime", None)  # apache_beam.utils.timestamp.Timestamp
    return value if to_datetime is None else to_datetime(has_tz=True)


def _list_of(inner: Convert) -> Convert:
    def convert(value: Any) -> Any:
        return None if value is None else [inner(v) for v in value]

    return convert


def _map_of(key: Convert, item: Convert) -> Convert:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        pairs = value.items() if hasattr(value, "items") else value
        return [(key(k), item(v)) for k, v in pairs]

    return convert


def _struct_of(fields: dict) -> Convert:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        if hasattr(value, "as_dict"):  # beam.Row
            value = value.as_dict()
        elif hasattr(value, "_asdict"):  # NamedTuple
            value = value._asdict()
        if not hasattr(value, "items"):
            return value  # a tuple, or a wrong value that pyarrow names
        out = dict(value)
        for name, conv in fields.items():
            if name in out:
                out[name] = conv(out[name])
        return out

    return convert

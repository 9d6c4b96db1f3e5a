"""Values as PostgreSQL's output functions print them (``boolout``, ``float8out``, ...).

The CSV and text formats share these rules; they differ only in quoting and escaping.
Rendering is column-wise: one Arrow column in, one list of ``str`` (``None`` for NULL) out,
so that the per-type decision is made once per column rather than once per value.
"""

from __future__ import annotations

import datetime
import math
from typing import Callable, List, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

__all__ = ["render_column", "check_type"]

Renderer = Callable[[pa.Array], List[Optional[str]]]


def check_type(field: pa.Field) -> None:
    """Raise ``ValueError`` naming the column if PostgreSQL's text forms cannot hold it."""
    _renderer(field.type, field.name)


def render_column(array: pa.Array, name: str = "?") -> List[Optional[str]]:
    """Render one column as PostgreSQL text values.

    >>> render_column(pa.array([True, None, False]))
    ['t', None, 'f']
    """
    return _renderer(array.type, name)(array)


def _renderer(typ: pa.DataType, name: str) -> Renderer:
    if pt.is_boolean(typ):
        return lambda a: [None if v is None else ("t" if v else "f") for v in a.to_pylist()]
    if pt.is_integer(typ):
        return _via_cast
    if pt.is_floating(typ):
        return lambda a: [None if v is None else format_float(v, typ) for v in a.to_pylist()]
    if pt.is_string(typ) or pt.is_large_string(typ):
        return lambda a: a.to_pylist()
    if pt.is_binary(typ) or pt.is_large_binary(typ) or pt.is_fixed_size_binary(typ):
        return lambda a: [None if v is None else "\\x" + v.hex() for v in a.to_pylist()]
    if pt.is_date(typ):
        return lambda a: [None if v is None else format_date(v) for v in a.to_pylist()]
    if pt.is_timestamp(typ):
        utc = typ.tz is not None
        return lambda a: [None if v is None else format_timestamp(v, utc) for v in _timestamps(a)]
    raise ValueError(
        f"column {name!r}: type {typ} has no PostgreSQL text form in this format; "
        "use format='parquet' or cast the column")


def _via_cast(array: pa.Array) -> List[Optional[str]]:
    return pc.cast(array, pa.string()).to_pylist()


def format_float(value: float, typ: pa.DataType) -> str:
    """``float8out``/``float4out``: shortest text that reads back exactly."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if pt.is_float32(typ) or pt.is_float16(typ):
        import numpy as np

        text = str(np.float32(value))  # numpy prints float32's shortest round-trip text
    else:
        text = repr(float(value))
    return _pg_float_text(text)


def _pg_float_text(text: str) -> str:
    mantissa, _, exponent = text.partition("e")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    if exponent:
        sign = "-" if exponent.startswith("-") else "+"
        digits = exponent.lstrip("+-").rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    return mantissa


def format_date(value: datetime.date) -> str:
    """``date_out``: ISO ``YYYY-MM-DD`` with at least four year digits."""
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _timestamps(array: pa.Array) -> list:
    # Render from integers so that every unit (including nanoseconds) keeps its digits.
    unit = array.type.unit
    scale = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    ints = pc.cast(array, pa.int64()).to_pylist()
    return [None if v is None else divmod(v, scale) + (scale,) for v in ints]


_EPOCH = datetime.datetime(1970, 1, 1)


def format_timestamp(parts: tuple, utc: bool) -> str:
    """``timestamp_out``: ``YYYY-MM-DD HH:MM:SS[.ffffff]``, and ``+00`` for UTC values."""
    seconds, fraction, scale = parts
    moment = _EPOCH + datetime.timedelta(seconds=seconds)
    text = (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")
    if fraction:
        digits = str(fraction).rjust(len(str(scale)) - 1, "0").rstrip("0")
        text += "." + digits
    return text + ("+00" if utc else "")

"""Values as PostgreSQL's output functions print them (``boolout``, ``float8out``, ``array_out``...).

The CSV and text formats share these rules; they differ only in how a field is quoted or
escaped afterwards. Rendering is column-wise: :func:`column_renderer` looks at an Arrow type
once and returns a function from an Arrow array to an Arrow string array (NULL stays NULL),
so the per-type decision is made once per column, never once per value::

    pa.Array ──▶ renderer (chosen once per column) ──▶ pa.StringArray ──▶ CSV quoting / text escapes

The text is what PostgreSQL 12+ prints with its defaults (``DateStyle=ISO``,
``extra_float_digits=1``, ``bytea_output=hex``, ``TimeZone=UTC`` for values with a time
zone), so that ``COPY ... FROM`` loads it back exactly:

==========================  =====================================================================
Arrow type                  text
==========================  =====================================================================
bool                        ``t`` / ``f``
(u)int8..64, decimal        decimal digits; decimals with their scale (``1.50``)
float16/32/64               shortest text that reads back exactly; fixed-point for decimal
                            exponents -4 up to 15 (float4: 6), else ``1e+15``; ``NaN``,
                            ``Infinity``, ``-Infinity``, ``-0``
string, JSON                as is (NUL cannot be stored by PostgreSQL: an error)
binary                      ``\\x`` and lowercase hex
UUID                        ``8-4-4-4-12`` lowercase hex
date                        ``YYYY-MM-DD``, ``0044-03-15 BC`` before year 1
time                        ``HH:MM:SS[.fraction]``, trailing zeros of the fraction dropped
timestamp                   ``YYYY-MM-DD HH:MM:SS[.fraction]``, ``+00`` when it has a time zone
list                        ``{a,b,NULL}`` with ``array_out``'s element quoting; nested lists
                            are multi-dimensional arrays (they must be rectangular)
==========================  =====================================================================

Structs, maps and other types have no such text: :func:`check_type` rejects them when the
pipeline is built, naming the column.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..errors import EncodeError
from .base import uuid_text

__all__ = ["column_renderer", "render_column", "check_type", "format_float"]

Renderer = Callable[[pa.Array], pa.Array]

_UNITS_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
# array_out quotes an element that is empty, equals NULL (any case), or holds one of these
# (array_isspace: space, \t, \n, \v, \f, \r).
_ARRAY_QUOTE_RE = '^$|^[Nn][Uu][Ll][Ll]$|["\\\\{},\t\n\x0b\x0c\r ]'


def check_type(field: pa.Field) -> None:
    """Raise ``ValueError`` naming the column if PostgreSQL's text forms cannot hold its type.

    >>> check_type(pa.field("tags", pa.list_(pa.string())))
    >>> check_type(pa.field("address", pa.struct([("city", pa.string())])))
    Traceback (most recent call last):
    ...
    ValueError: column 'address': type struct<city: string> has no PostgreSQL COPY text form; ...
    """
    column_renderer(field.type, field.name)


def render_column(array: pa.Array, name: str = "?") -> pa.Array:
    """Render one column as PostgreSQL's text of each value (NULL stays NULL).

    >>> render_column(pa.array([True, None, False])).to_pylist()
    ['t', None, 'f']
    >>> render_column(pa.array([["a b", None, ""]])).to_pylist()
    ['{"a b",NULL,""}']
    """
    return column_renderer(array.type, name)(array)


def column_renderer(typ: pa.DataType, name: str) -> Renderer:
    """The function that renders arrays of ``typ`` (the decision made once per column).

    >>> column_renderer(pa.float64(), "x")(pa.array([1e15, 0.1, None])).to_pylist()
    ['1e+15', '0.1', None]
    """
    if isinstance(typ, pa.BaseExtensionType):
        return _extension_renderer(typ, name)
    if pt.is_dictionary(typ):
        inner = column_renderer(typ.value_type, name)
        return lambda a: inner(a.dictionary_decode())
    if pt.is_null(typ):
        return lambda a: pa.nulls(len(a), pa.string())
    if pt.is_boolean(typ):
        return lambda a: pc.if_else(a, "t", "f")
    if pt.is_integer(typ):
        return lambda a: pc.cast(a, pa.string())
    if pt.is_decimal(typ):
        return _render_numeric
    if pt.is_floating(typ):
        single = not pt.is_float64(typ)
        return lambda a: _render_floats(a, single)
    if pt.is_string(typ) or pt.is_large_string(typ) or pt.is_string_view(typ):
        return lambda a: _check_no_nul(pc.cast(a, pa.string()), name)
    if pt.is_binary(typ) or pt.is_large_binary(typ) or pt.is_fixed_size_binary(typ) or pt.is_binary_view(typ):
        return _render_bytea
    if pt.is_date(typ):
        return _render_dates
    if pt.is_time(typ):
        return _render_times
    if pt.is_timestamp(typ):
        utc = typ.tz is not None
        return lambda a: _render_timestamps(a, utc)
    if (
        pt.is_list(typ)
        or pt.is_large_list(typ)
        or pt.is_fixed_size_list(typ)
        or pt.is_list_view(typ)
        or pt.is_large_list_view(typ)
    ):
        return _list_renderer(typ, name)
    raise ValueError(
        f"column {name!r}: type {typ} has no PostgreSQL COPY text form; "
        "use format='parquet', or cast or flatten the column (for example to JSON text) first"
    )


# numbers -------------------------------------------------------------------------------
def _render_floats(array: pa.Array, single: bool) -> pa.Array:
    values = pc.fill_null(array, 0).to_numpy(zero_copy_only=False)
    if single:
        values = values.astype(np.float32)
        texts = [format_float(v, True) for v in values]
        return _with_nulls(texts, array)
    # Fast path: where PostgreSQL prints plain digits, its digits are the shortest round-trip
    # ones, as Arrow's cast writes them; the cast's exponent form (which Arrow picks by other
    # rules) and every other value take the per-value path.
    magnitude = np.abs(values)
    with np.errstate(invalid="ignore"):
        plain = (magnitude == 0) | ((magnitude >= 1e-4) & (magnitude < 1e14))
    cast = pc.cast(array, pa.string())
    exponent = pc.fill_null(pc.match_substring(cast, "e"), False).to_numpy(zero_copy_only=False)
    slow = ~plain | exponent
    if not slow.any():
        return cast
    texts = cast.to_pylist()
    for index in np.flatnonzero(slow).tolist():
        if texts[index] is not None:
            texts[index] = format_float(float(values[index]), False)
    return _with_nulls(texts, array)


def format_float(value: float, single: bool = False) -> str:
    """``float8out`` (``float4out`` when ``single``): shortest text that reads back exactly.

    >>> [format_float(v) for v in (1e15, 1e14, 1e-5, -0.0, 2.5, float("nan"))]
    ['1e+15', '100000000000000', '1e-05', '-0', '2.5', 'NaN']
    """
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    # Python's repr (numpy's str for float32) is the shortest round-trip text, the digits
    # PostgreSQL's Ryu code picks; only the layout differs...
    shortest = str(np.float32(value)) if single else repr(value)
    if abs(value) >= (2.0**20 if single else 2.0**49):
        shortest = _off_the_bounds(value, shortest, single)
    sign, digits, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)  # the value is finite here
    text = "".join(map(str, digits)).rstrip("0") or "0"
    if text == "0":
        return "-0" if sign else "0"
    point = len(digits) + exponent - 1  # the decimal exponent of the first digit
    if -4 <= point < (6 if single else 15):
        if point >= 0:
            whole, fraction = text[: point + 1].ljust(point + 1, "0"), text[point + 1 :]
            body = whole + ("." + fraction if fraction else "")
        else:
            body = "0." + "0" * (-point - 1) + text
    else:
        body = text[0] + ("." + text[1:] if len(text) > 1 else "")
        body += ("e-" if point < 0 else "e+") + f"{abs(point):02d}"
    return ("-" if sign else "") + body


def _off_the_bounds(value: float, shortest: str, single: bool) -> str:
    """...except that PostgreSQL's Ryu (built without STRICTLY_SHORTEST) excludes the bounds of
    the rounding interval, where Python includes them when the mantissa is even. A bound is a
    midpoint between two floats, which has so few decimal digits only for large numbers."""
    from fractions import Fraction

    kind = np.float32 if single else np.float64
    exact = Fraction(float(value))
    with np.errstate(over="ignore"):
        below, above = (float(np.nextafter(kind(value), kind(to))) for to in (-np.inf, np.inf))
    # Past the largest float, the gap above is taken to be the gap below (as Ryu does).
    gap_below = exact - Fraction(below) if np.isfinite(below) else Fraction(above) - exact
    gap_above = Fraction(above) - exact if np.isfinite(above) else gap_below
    low, high = exact - gap_below / 2, exact + gap_above / 2
    if Fraction(Decimal(shortest)) not in (low, high):
        return shortest
    for places in range(len(Decimal(shortest).as_tuple().digits), 17 if single else 25):
        text = f"{float(value):.{places}e}"  # correctly rounded to places + 1 digits
        if low < Fraction(Decimal(text)) < high:
            return text
    return repr(float(value))


def _render_numeric(array: pa.Array) -> pa.Array:
    # numeric_out prints plain digits with the scale (0.0000000000, 12300) where Arrow's
    # cast to string switches to an exponent (0E-10, 1.23E+4).
    return _with_nulls([None if v is None else format(v, "f") for v in array.to_pylist()], array)


# text and bytes ------------------------------------------------------------------------
def _check_no_nul(array: pa.Array, name: str) -> pa.Array:
    if pc.any(pc.match_substring(array, "\x00")).as_py():
        raise EncodeError(
            f"column {name!r}: a value holds the character NUL (\\x00), which PostgreSQL text "
            "cannot store; remove it or make the column binary"
        )
    return array


def _render_bytea(array: pa.Array) -> pa.Array:
    return _with_nulls([None if v is None else "\\x" + v.hex() for v in array.to_pylist()], array)


def _extension_renderer(typ: pa.BaseExtensionType, name: str) -> Renderer:
    if typ.extension_name == "arrow.json":
        inner = column_renderer(typ.storage_type, name)
        return lambda a: inner(a.storage)
    if typ.extension_name == "arrow.uuid":
        return uuid_text
    raise ValueError(
        f"column {name!r}: extension type {typ.extension_name} has no PostgreSQL COPY text form; "
        "cast the column to its storage type first"
    )


# dates and times -----------------------------------------------------------------------
def _civil(days: np.ndarray):
    """Proleptic Gregorian (year, month, day) of days since 1970-01-01 (H. Hinnant's algorithm)."""
    z = days.astype(np.int64) + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year.tolist(), month.tolist(), day.tolist()


def _date_text(y: int, m: int, d: int) -> str:
    # Year 0 is 1 BC; PostgreSQL writes the BC year with at least four digits.
    return f"{y:04d}-{m:02d}-{d:02d}" if y > 0 else f"{1 - y:04d}-{m:02d}-{d:02d}"


def _clock_text(seconds: int, fraction: int, width: int) -> str:
    hours, rest = divmod(seconds, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    if fraction:
        text += "." + f"{fraction:0{width}d}".rstrip("0")
    return text


def _ints(array: pa.Array) -> np.ndarray:
    return (
        pc.fill_null(array.view(pa.int64()) if array.type.bit_width == 64 else array.view(pa.int32()), 0)
        .to_numpy()
        .astype(np.int64)
    )


# Arrow's cast writes ISO dates and times for years 1 to 9999, as PostgreSQL does; other
# years (BC, five digits) take the per-value path.
_FAST_DAYS = (-719162, 2932896)  # 0001-01-01 and 9999-12-31, in days since 1970-01-01
# PostgreSQL's timestamp range: 4713 BC to 294276 AD.
_TIMESTAMP_YEARS = (-4712, 294276)


def _render_dates(array: pa.Array) -> pa.Array:
    raw = _ints(array)
    days = raw // 86_400_000 if pt.is_date64(array.type) else raw
    if len(days) and _FAST_DAYS[0] <= days.min() and days.max() <= _FAST_DAYS[1]:
        return pc.cast(array.cast(pa.date32()) if pt.is_date64(array.type) else array, pa.string())
    years, months, dd = _civil(days)
    texts = [_date_text(y, m, d) + (" BC" if y <= 0 else "") for y, m, d in zip(years, months, dd)]
    return _with_nulls(texts, array)


def _render_times(array: pa.Array) -> pa.Array:
    per_second = _UNITS_PER_SECOND[array.type.unit]
    width = len(str(per_second)) - 1
    seconds, fractions = np.divmod(_ints(array), per_second)
    texts = [_clock_text(s, f, width) for s, f in zip(seconds.tolist(), fractions.tolist())]
    return _with_nulls(texts, array)


def _render_timestamps(array: pa.Array, utc: bool) -> pa.Array:
    unit = array.type.unit
    per_second = _UNITS_PER_SECOND[unit]
    width = len(str(per_second)) - 1
    ints = _ints(array)
    days, rest = np.divmod(ints, 86400 * per_second)
    zone = "+00" if utc else ""
    if len(days) and _FAST_DAYS[0] <= days.min() and days.max() <= _FAST_DAYS[1]:
        # The cast writes every digit of the unit's fraction; PostgreSQL drops trailing zeros.
        texts = pc.cast(array.cast(pa.timestamp(unit)) if utc else array, pa.string())
        if width:
            # "…:10.500000" → "…:10.5", "…:10.000000" → "…:10" (the point stops the first trim)
            texts = pc.utf8_rtrim(pc.utf8_rtrim(texts, characters="0"), characters=".")
        return pc.binary_join_element_wise(texts, zone, "") if utc else texts
    seconds, fractions = np.divmod(rest, per_second)
    years, months, dd = _civil(days)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    for year, ok, value in zip(years, valid.tolist(), ints.tolist()):
        if ok and not _TIMESTAMP_YEARS[0] <= year <= _TIMESTAMP_YEARS[1]:
            raise EncodeError(
                f"timestamp {value} ({unit} since 1970) is in year {year}, outside PostgreSQL's "
                "timestamp range (4713 BC to 294276 AD)"
            )
    texts = [
        f"{_date_text(y, m, d)} {_clock_text(s, f, width)}{zone}" + (" BC" if y <= 0 else "")
        for y, m, d, s, f in zip(years, months, dd, seconds.tolist(), fractions.tolist())
    ]
    return _with_nulls(texts, array)


# arrays --------------------------------------------------------------------------------
def _list_renderer(typ: pa.DataType, name: str) -> Renderer:
    element = typ.value_type
    while isinstance(element, pa.BaseExtensionType) or pt.is_dictionary(element):
        element = element.storage_type if isinstance(element, pa.BaseExtensionType) else element.value_type
    nested = (
        pt.is_list(element)
        or pt.is_large_list(element)
        or pt.is_fixed_size_list(element)
        or pt.is_list_view(element)
        or pt.is_large_list_view(element)
    )
    inner = column_renderer(typ.value_type, name)

    def render(array: pa.Array) -> pa.Array:
        if pt.is_list_view(array.type) or pt.is_large_list_view(array.type):
            array = array.cast(pa.large_list(array.type.value_type))
        if nested:
            _check_rectangular(array, name)
        flat = array.flatten()
        texts = inner(flat)
        if not nested:
            texts = _quote_elements(texts)
        texts = pc.fill_null(texts, "NULL")
        lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy().astype(np.int64)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64())
        joined = pc.binary_join(pa.LargeListArray.from_arrays(offsets, texts), ",")
        joined = pc.binary_join_element_wise("{", joined, "}", "")
        return pc.if_else(array.is_null(), pa.scalar(None, pa.string()), pc.cast(joined, pa.string()))

    return render


def _quote_elements(texts: pa.Array) -> pa.Array:
    needs = pc.match_substring_regex(texts, _ARRAY_QUOTE_RE)
    escaped = pc.replace_substring(pc.replace_substring(texts, "\\", "\\\\"), '"', '\\"')
    return pc.if_else(needs, pc.binary_join_element_wise('"', escaped, '"', ""), texts)


def _check_rectangular(array: pa.Array, name: str) -> None:
    # PostgreSQL's multi-dimensional arrays are rectangular and have no NULL sub-arrays.
    def shape(value: list, depth: int) -> Tuple[int, ...]:
        if depth == 0 or not isinstance(value, list):
            return ()
        shapes = set()
        for item in value:
            if item is None and depth > 1:
                raise EncodeError(
                    f"column {name!r}: a nested list holds a NULL list, which a "
                    "PostgreSQL multi-dimensional array cannot hold"
                )
            shapes.add(shape(item, depth - 1))
        if len(shapes) > 1:
            raise EncodeError(
                f"column {name!r}: nested lists of different lengths (such as "
                f"{_short(value)}) are not a PostgreSQL multi-dimensional array; "
                "PostgreSQL arrays are rectangular"
            )
        return (len(value),) + (shapes.pop() if shapes else ())

    depth, typ = 0, array.type
    while hasattr(typ, "value_type") and not pt.is_dictionary(typ):
        depth, typ = depth + 1, typ.value_type
    for value in array.to_pylist():
        if value is not None:
            shape(value, depth)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _with_nulls(texts: Sequence[Optional[str]], like: pa.Array) -> pa.Array:
    if like.null_count:
        return pa.array(texts, pa.string(), mask=like.is_null().to_numpy(zero_copy_only=False))
    return pa.array(texts, pa.string())

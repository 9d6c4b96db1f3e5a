"""Bad rows (``max_bad_rows``): the dead-letter record, the limit, and finding bad rows by bisection.

A row that does not fit the schema, or a value the format cannot encode, fails the copy by
default. With ``max_bad_rows`` up to that many are left out and become dead letters
(:class:`BadRow`) instead. They are found where they are bad: ``Batch`` (:mod:`.batches`)
converts rows in batches, and only a batch that fails is split in halves (:func:`bisect`) until
each bad row is alone, so the good rows keep the batch path; ``Write`` (:mod:`.writer`) does the
same with the format's encoder. The dead letters travel with the rows (a small blob, then the
writers' :class:`~.messages.UploadReport`) to completion, which enforces :class:`BadRowLimit`
on the copy's total (a stream: the unit's) and outputs them once the copy has committed, with
the sink id and the unit: a retried bundle's dead letters replace the failed attempt's, as its
rows do, and a copy that fails outputs none.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import json
import math
import re
import uuid
from typing import Any, Callable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union

import apache_beam as beam
import pyarrow as pa

from .errors import CopyToS3Error

__all__ = ["BadRow", "BadRowLimit", "CopyOutputs", "bisect", "element_json", "BAD_ROWS_TAG"]

BAD_ROWS_TAG = "bad_rows"
"""The tag of the dead-letter output (``CopyToS3(...).with_bad_rows()``)."""

T = TypeVar("T")
R = TypeVar("R")


class BadRow(NamedTuple):
    """A dead letter: a row the copy left out, and why (a Beam schema'd row).

    >>> row = BadRow(element='{"id": "x"}', column="id", reason="column 'id' (int64): ...",
    ...              sink_id="nightly", unit=None)
    >>> row.column, beam.coders.registry.get_coder(BadRow).__class__.__name__
    ('id', 'RowCoder')

    Attributes:
      element: the element as the user gave it, as JSON text (:func:`element_json`).
      column: the column that does not fit, or None when the row as a whole does not.
      reason: the message the copy would have failed with.
      sink_id: the copy's sink id.
      unit: a stream's unit id (``20261207T030000Z-20261207T030500Z-p0``); None for a bounded copy.
    """

    element: str
    column: Optional[str]
    reason: str
    sink_id: str
    unit: Optional[str]


beam.coders.registry.register_coder(BadRow, beam.coders.RowCoder)


class CopyOutputs(NamedTuple):
    """What ``rows | CopyToS3(..., max_bad_rows=N).with_bad_rows()`` gives (``CopyToIceberg``
    too): the results, and the dead letters of the copies that committed (:class:`BadRow`).

    >>> CopyOutputs._fields
    ('results', 'bad_rows')
    """

    results: Any  # PCollection[CopyToResult]
    bad_rows: Any  # PCollection[BadRow]


def _json_default(value: Any) -> Any:
    """The JSON form of a value JSON has none for (see :func:`element_json`)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if hasattr(value, "to_utc_datetime"):  # a Beam Timestamp
        return value.to_utc_datetime(has_tz=True).isoformat()
    if hasattr(value, "_asdict"):
        return value._asdict()
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "tolist"):  # numpy values and arrays
        return value.tolist()
    return repr(value)


def element_json(element: Any) -> str:
    """The element as JSON text: as JSON writes it where JSON has the value; else bytes as
    base64, dates, times and datetimes in ISO 8601, decimals and UUIDs as strings, NaN and
    the infinities as strings, a NamedTuple or ``beam.Row`` as an object, and anything else as
    its ``repr``. An Arrow row is given as its Python values (``RecordBatch.to_pylist``).

    >>> import datetime, decimal
    >>> element_json({"id": 1, "raw": b"\\x00\\xff", "at": datetime.date(2026, 12, 7), "d": decimal.Decimal("1.50")})
    '{"id": 1, "raw": "AP8=", "at": "2026-12-07", "d": "1.50"}'
    >>> element_json({"x": float("nan")})
    '{"x": "NaN"}'
    """
    return json.dumps(_finite(element), default=_json_default, ensure_ascii=False)


def _finite(value: Any) -> Any:
    """``value`` with NaN and the infinities as strings (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class BadRowLimit:
    """How many bad rows a copy (a stream: each unit) may leave out: a count, or a fraction
    of the rows seen (copied plus bad). The default, 0, fails the copy on the first one.

    >>> BadRowLimit.parse(50).allows(50, 1000), BadRowLimit.parse(50).allows(51, 1000)
    (True, False)
    >>> limit = BadRowLimit.parse("0.1%")
    >>> limit.allows(100, 100_000), limit.allows(101, 100_000), str(limit)
    (True, False, '0.1%')
    """

    count: int = 0
    fraction: Optional[float] = None  # of the rows seen; None: ``count`` is the limit

    @classmethod
    def parse(cls, value: Union[int, str, "BadRowLimit", None]) -> "BadRowLimit":
        """From an int (``50``), a percentage string (``"0.1%"``) or a count string (``"50"``)."""
        if value is None:
            return cls()
        if isinstance(value, BadRowLimit):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return cls(count=value)
        if isinstance(value, str):
            text = value.strip()
            match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*%", text)
            if match and float(match.group(1)) <= 100:
                return cls(fraction=float(match.group(1)) / 100)
            if text.isdigit():
                return cls(count=int(text))
        raise ValueError(
            f"max_bad_rows must be a count (an int >= 0) or a percentage of the rows such as '0.1%', got {value!r}"
        )

    @property
    def enabled(self) -> bool:
        """Whether any bad row may be left out (else the copy fails on the first, as always)."""
        return self.count > 0 or bool(self.fraction)

    def allowed(self, seen: int) -> int:
        """How many bad rows ``seen`` rows (copied plus bad) may hold."""
        if self.fraction is None:
            return self.count
        return math.floor(self.fraction * seen + 1e-9)

    def allows(self, bad: int, seen: int) -> bool:
        """Whether ``bad`` bad rows among ``seen`` rows are within the limit."""
        return bad <= self.allowed(seen)

    def local_bound(self) -> Optional[int]:
        """A bound one bundle may apply alone (a count limit: more in one bundle is more in
        all), or None (a fraction needs the copy's total)."""
        return self.count if self.fraction is None else None

    def __str__(self) -> str:
        if self.fraction is None:
            return str(self.count)
        return f"{self.fraction * 100:g}%"


NO_BAD_ROWS = BadRowLimit()
"""The default limit: the first bad row fails the copy."""


def too_many(limit: BadRowLimit, bad: Sequence[BadRow], seen: int) -> str:
    """The error of a copy with more bad rows than ``limit`` allows (the first one's reason kept,
    the message the copy would have failed with without a limit).

    >>> too_many(BadRowLimit(2), [BadRow("{}", "id", "column 'id': no", "", None)] * 3, 10)
    "3 bad rows, more than max_bad_rows=2 allows (of 10 rows); the first: column 'id': no"
    """
    first = min(bad, key=lambda b: b.reason).reason if bad else "?"
    return f"{len(bad)} bad rows, more than max_bad_rows={limit} allows (of {seen} rows); the first: {first}"


class TooManyBadRows(CopyToS3Error):
    """Raised by :func:`bisect` once more bad items are found than its ``max_bad``; ``bad``
    holds the (index, error) pairs found."""

    def __init__(self, bad: List[Tuple[int, BaseException]]) -> None:
        super().__init__(f"{len(bad)} bad items")
        self.bad = bad


def bisect(
    items: T,
    size: int,
    convert: Callable[[T], R],
    split: Callable[[T, int, int], T],
    errors: Tuple[Type[BaseException], ...],
    max_bad: Optional[int] = None,
    first_error: Optional[BaseException] = None,
) -> Tuple[List[R], List[Tuple[int, BaseException]]]:
    """Find the items ``convert`` refuses by splitting ``items`` in halves.

    Returns the converted runs of good items, in order, and the (index, error) of each bad
    item. A run that converts is not split further, so ``k`` bad items among ``n`` cost about
    ``2 k log2(n)`` conversions of shrinking runs. ``first_error``: ``convert(items)`` failed
    already with it (not tried again). Raises :class:`TooManyBadRows` once more than ``max_bad``
    are found.

    >>> def convert(xs):
    ...     if any(x < 0 for x in xs):
    ...         raise ValueError("negative")
    ...     return sum(xs)
    >>> good, bad = bisect([1, 2, -3, 4, 5, -6, 7], 7, convert, lambda xs, a, b: xs[a:b], (ValueError,))
    >>> good, [i for i, _ in bad]
    ([1, 2, 9, 7], [2, 5])
    """
    good: List[R] = []
    bad: List[Tuple[int, BaseException]] = []

    def visit(part: T, start: int, stop: int, error: Optional[BaseException]) -> None:
        if error is None:
            try:
                good.append(convert(part))
                return
            except errors as exc:
                error = exc
        if stop - start == 1:
            bad.append((start, error))
            if max_bad is not None and len(bad) > max_bad:
                raise TooManyBadRows(bad)
            return
        middle = (stop - start) // 2
        visit(split(part, 0, middle), start, start + middle, None)
        visit(split(part, middle, stop - start), start + middle, stop, None)

    if size:
        visit(items, 0, size, first_error)
    return good, bad


def column_of_row(
    row: Mapping[str, Any], schema: pa.Schema, fits: Callable[[Sequence[Mapping[str, Any]], pa.Schema], Any]
) -> Optional[str]:
    """The first column of ``schema`` whose value in ``row`` does not fit (``fits`` raises), a
    column ``row`` has that ``schema`` lacks, or None."""
    extra = [name for name in row if name not in schema.names]
    if extra:
        return str(extra[0])
    for field in schema:
        one = {field.name: row[field.name]} if field.name in row else {}
        try:
            fits([one], pa.schema([field]))
        except Exception:  # noqa: BLE001 - any refusal names this column
            return field.name
    return None


def column_of_arrow(row: Any, schema: pa.Schema, fits: Callable[[Any, pa.Schema], Any]) -> Optional[str]:
    """The first column of ``schema`` that the one-row Arrow batch ``row`` does not fit
    (``fits(columns, schema)`` raises), a column ``row`` has that ``schema`` lacks, or None."""
    names = row.schema.names
    extra = [name for name in names if name not in schema.names]
    if extra:
        return str(extra[0])
    for field in schema:
        if field.name not in names:
            if not field.nullable:
                return field.name
            continue
        try:
            fits(row.select([field.name]), pa.schema([field]))
        except Exception:  # noqa: BLE001 - any refusal names this column
            return field.name
    return None

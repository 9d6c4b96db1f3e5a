"""Per-file column statistics (null count, min, max), as DuckDB's ``COPY ... (RETURN_STATS)``
and Redshift's ``MANIFEST VERBOSE`` give them: in each ``CopiedFile`` and manifest entry.
Parquet's come from the writer's footer, CSV/text's from the batches encoded. Values are
JSON-ready (ISO text for temporal values); NaN is left out of min/max, and strings longer
than :data:`MAX_TEXT` keep only their null count. Parquet's float and double columns also
count their NaNs (:func:`nan_counts`, over the batches encoded), as Iceberg's writers do.
"""

from __future__ import annotations

import datetime
import decimal
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ColumnStats", "StatsCounter", "nan_counts", "parquet_footer_stats", "stats_json", "stats_from_json"]

MAX_TEXT = 64


@dataclass(frozen=True)
class ColumnStats:
    """One column of one data file: ``null_count``, ``min``/``max`` (None when unknown), and
    ``nan_count`` (float and double columns of Parquet files; None otherwise)."""

    column: str
    null_count: int
    min: Any = None
    max: Any = None
    nan_count: Optional[int] = None


def _plain(value: Any) -> Any:
    """A JSON-ready value, or None when it is not worth keeping (NaN, a long string)."""
    if value is None or isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else (None if math.isnan(value) else str(value))
    if isinstance(value, (bytes, bytearray)):
        return None
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    text = str(value)
    return text if len(text) <= MAX_TEXT else None


def _has_min_max(typ: pa.DataType) -> bool:
    return (
        (
            pa.types.is_integer(typ)
            or pa.types.is_floating(typ)
            or pa.types.is_boolean(typ)
            or pa.types.is_string(typ)
            or pa.types.is_large_string(typ)
            or pa.types.is_temporal(typ)
            or pa.types.is_decimal(typ)
        )
        and not pa.types.is_duration(typ)
        and not pa.types.is_interval(typ)
    )


class StatsCounter:
    """Counts a file's statistics over the record batches an encoder gets (CSV, text)."""

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self._nulls = [0] * len(schema)
        self._min: List[Any] = [None] * len(schema)
        self._max: List[Any] = [None] * len(schema)
        self._min_max = [_has_min_max(f.type) for f in schema]

    def add(self, batch: pa.RecordBatch) -> None:
        for i in range(batch.num_columns):
            column = batch.column(i)
            self._nulls[i] += column.null_count
            if not self._min_max[i] or column.null_count == len(column):
                continue
            try:
                low, high = (v.as_py() for v in pc.min_max(column).values())
            except (pa.ArrowException, ValueError, OverflowError):  # e.g. a year Python cannot hold
                self._min_max[i] = False
                continue
            if low is None or low > high:  # only NaN (pyarrow < 20 gives inf, -inf)
                continue
            if self._min[i] is None or low < self._min[i]:
                self._min[i] = low
            if self._max[i] is None or high > self._max[i]:
                self._max[i] = high

    def result(self) -> Tuple[ColumnStats, ...]:
        return tuple(
            ColumnStats(f.name, self._nulls[i], _plain(self._min[i]), _plain(self._max[i]))
            for i, f in enumerate(self._schema)
        )


def parquet_footer_stats(metadata: Any) -> Tuple[ColumnStats, ...]:
    """The statistics of a Parquet file from its footer (``pyarrow.parquet.FileMetaData``),
    per leaf column, combined over the row groups."""
    names: List[str] = []
    nulls: Dict[str, int] = {}
    lows: Dict[str, Any] = {}
    highs: Dict[str, Any] = {}
    known: Dict[str, bool] = {}
    for i in range(len(metadata.schema)):  # every leaf column, also of a file without rows
        name = metadata.schema.column(i).path
        names.append(name)
        nulls[name], known[name] = 0, True
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            if name not in nulls:
                names.append(name)
                nulls[name], known[name] = 0, True
            stats = chunk.statistics
            if stats is None:
                known[name] = False
                continue
            nulls[name] += stats.null_count or 0
            if not stats.has_min_max:
                continue
            try:
                low, high = stats.min, stats.max
            except (ValueError, OverflowError):
                known[name] = False
                continue
            if name not in lows or low < lows[name]:
                lows[name] = low
            if name not in highs or high > highs[name]:
                highs[name] = high
    return tuple(
        ColumnStats(n, nulls[n], _plain(lows.get(n)) if known[n] else None, _plain(highs.get(n)) if known[n] else None)
        for n in names
    )


def nan_counts(data: Union[pa.Table, pa.RecordBatch]) -> Dict[str, int]:
    """The NaNs of each float and double leaf column of ``data``, by its Parquet path (``"f"``,
    ``"s.x"``, ``"xs.list.element"``; map values are not counted).

    >>> nan_counts(pa.table({"f": [1.0, float("nan"), None], "xs": [[float("nan")], [], None], "n": [1, 2, 3]}))
    {'f': 1, 'xs.list.element': 1}
    """
    out: Dict[str, int] = {}
    for field, column in zip(data.schema, data.columns):
        _count_nans(column, field.type, field.name, out)
    return out


def _count_nans(array: Any, typ: pa.DataType, path: str, out: Dict[str, int]) -> None:
    if pa.types.is_float32(typ) or pa.types.is_float64(typ):
        out[path] = out.get(path, 0) + (pc.sum(pc.is_nan(array)).as_py() or 0)
    elif pa.types.is_struct(typ):
        for i in range(typ.num_fields):
            _count_nans(pc.struct_field(array, [i]), typ.field(i).type, f"{path}.{typ.field(i).name}", out)
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        _count_nans(pc.list_flatten(array), typ.value_type, f"{path}.list.element", out)


def stats_json(stats: Tuple[ColumnStats, ...]) -> Dict[str, Dict[str, Any]]:
    """The manifest form: ``{column: {"null_count": n, "min": ..., "max": ...}}`` (and
    ``"nan_count"`` where counted)."""
    return {
        s.column: {
            "null_count": s.null_count,
            "min": s.min,
            "max": s.max,
            **({"nan_count": s.nan_count} if s.nan_count is not None else {}),
        }
        for s in stats
    }


def stats_from_json(body: Optional[Dict[str, Dict[str, Any]]]) -> Tuple[ColumnStats, ...]:
    """The inverse of :func:`stats_json`."""
    return tuple(
        ColumnStats(name, int(v.get("null_count", 0)), v.get("min"), v.get("max"), v.get("nan_count"))
        for name, v in (body or {}).items()
    )

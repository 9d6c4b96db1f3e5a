"""A table's partitions: which partition (and directory) each row of a copy into Iceberg goes to.

``partition_by`` expressions (:func:`parse_partition_by`) name a column and a transform, as
Iceberg's Spark DDL spells them: ``"region"`` (identity), ``"day(ts)"`` (or ``days``; also
``year``, ``month``, ``hour``), ``"bucket(16, id)"``, ``"truncate(4, name)"``, ``"void(x)"``.
:class:`TableLayout` routes rows by a table's partition spec: each field's transform is
pyiceberg's own, applied to the Arrow column (``Transform.pyarrow_transform``, which runs
pyiceberg-core), rows are split per partition, each partition's directory is named as
Iceberg names it (``ts_day=2024-01-01/id_bucket=3``) and its partition record travels with
its files, typed and JSON-ready (:func:`partition_json`, :func:`partition_value`): ``""`` is
``""`` and a null is null. Data files keep every column, the partition sources too.

pyiceberg is imported inside the functions: parsing needs only the standard library.
"""

from __future__ import annotations

import datetime
import functools
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.compute as pc

from .batches import split_runs
from .errors import RowError
from .layout import Part, partition_codes

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

__all__ = [
    "PartitionExpression",
    "TableLayout",
    "expression_text",
    "parse_partition_by",
    "partition_json",
    "partition_value",
    "table_layout_for",
]

_TRANSFORMS = {
    "identity": "identity",
    "year": "year",
    "years": "year",
    "month": "month",
    "months": "month",
    "day": "day",
    "days": "day",
    "hour": "hour",
    "hours": "hour",
    "bucket": "bucket",
    "truncate": "truncate",
    "void": "void",
}
_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*\((.*)\)\s*$", re.DOTALL)
_FIELD_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour", "bucket": "bucket"}


@dataclass(frozen=True)
class PartitionExpression:
    """One ``partition_by`` entry: a source column and pyiceberg's name of the transform
    (``"identity"``, ``"day"``, ``"bucket[16]"``, ``"truncate[4]"``...).

    >>> PartitionExpression("ts", "day").name, PartitionExpression("id", "bucket[16]").name
    ('ts_day', 'id_bucket')
    """

    column: str
    transform: str = "identity"

    @property
    def name(self) -> str:
        """The partition field's name, as Iceberg's Java ``PartitionSpec.Builder`` (and so
        Spark's ``CREATE TABLE ... PARTITIONED BY``) names it."""
        kind = self.transform.split("[")[0]
        if kind == "identity":
            return self.column
        if kind == "truncate":
            return f"{self.column}_trunc"
        if kind == "void":
            return f"{self.column}_null"
        return f"{self.column}_{_FIELD_SUFFIX[kind]}"

    def __str__(self) -> str:
        return expression_text(self.transform, self.column)


def expression_text(transform: str, column: str) -> str:
    """The ``partition_by`` spelling of ``transform`` (pyiceberg's name) on ``column``.

    >>> expression_text("bucket[16]", "id"), expression_text("day", "ts"), expression_text("identity", "p")
    ('bucket(16, id)', 'day(ts)', 'p')
    """
    kind, _, arg = transform.partition("[")
    if kind == "identity":
        return column
    if arg:
        return f"{kind}({arg.rstrip(']')}, {column})"
    return f"{kind}({column})"


def parse_partition_by(partition_by: Sequence[str]) -> Tuple[PartitionExpression, ...]:
    """``partition_by`` as expressions; ValueError naming the entry and the problem.

    >>> [str(e) for e in parse_partition_by(["region", "days(ts)", "bucket(16, id)", "truncate(name, 4)"])]
    ['region', 'day(ts)', 'bucket(16, id)', 'truncate(4, name)']
    >>> parse_partition_by(["week(ts)"])
    Traceback (most recent call last):
    ...
    ValueError: partition_by 'week(ts)': unknown transform 'week' (identity, year, month, day, hour, bucket, truncate, void)
    """
    out: List[PartitionExpression] = []
    for text in partition_by:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"partition_by {text!r}: give a column name or a transform such as 'day(ts)'")
        match = _CALL.match(text)
        if match is None:
            if any(c in text for c in "()"):
                raise ValueError(f"partition_by {text!r}: not a column name or a transform such as 'bucket(16, id)'")
            out.append(PartitionExpression(text))
            continue
        kind = _TRANSFORMS.get(match.group(1).lower())
        if kind is None:
            known = ", ".join(dict.fromkeys(_TRANSFORMS.values()))
            raise ValueError(f"partition_by {text!r}: unknown transform {match.group(1)!r} ({known})")
        args = [a.strip() for a in match.group(2).split(",")]
        if kind in ("bucket", "truncate"):
            numbers = [a for a in args if a.isdigit()]
            columns = [a for a in args if not a.isdigit()]
            if len(args) != 2 or len(numbers) != 1 or len(columns) != 1 or int(numbers[0]) < 1 or not columns[0]:
                raise ValueError(
                    f"partition_by {text!r}: {kind} takes a positive width and a column, as in '{kind}(16, id)'"
                )
            out.append(PartitionExpression(columns[0], f"{kind}[{int(numbers[0])}]"))
        else:
            if len(args) != 1 or not args[0]:
                raise ValueError(f"partition_by {text!r}: {kind} takes one column, as in '{kind}(ts)'")
            out.append(PartitionExpression(args[0], kind))
    for position, expression in enumerate(out):
        if expression.name in [e.name for e in out[:position]]:
            raise ValueError(f"partition column {expression.column!r} is given twice ({expression})")
    return tuple(out)


@dataclass(frozen=True)
class TableLayout:
    """Rows routed by a table's partition spec (see the module docstring); picklable, its spec
    and schema kept as Iceberg's JSON. The same interface as :class:`~.layout.Layout`.

    >>> from beam_s3_sink.iceberg_commit import iceberg_schema
    >>> arrow = pa.schema([("ts", pa.timestamp("us")), ("p", pa.string())])
    >>> layout = TableLayout.of(*reversed(iceberg_schema(arrow, ["day(ts)", "p"])))
    >>> batch = pa.record_batch([pa.array([0, 86_400_000_000, 0], pa.timestamp("us")), ["", None, ""]], schema=arrow)
    >>> [(p.directory, p.partition, p.rows.num_rows) for p in layout.split(batch, arrow)]
    [('ts_day=1970-01-01/p=', (('ts_day', '1970-01-01'), ('p', '')), 2), ('ts_day=1970-01-02/p=null', (('ts_day', '1970-01-02'), ('p', None)), 1)]
    """

    spec_json: str
    schema_json: str
    spec_id: int = 0
    keep_partition_columns: bool = True  # a table's data files hold every column

    @classmethod
    def of(cls, spec: PartitionSpec, schema: Schema) -> TableLayout:
        return cls(spec.model_dump_json(), schema.model_dump_json(), spec.spec_id)

    @functools.cached_property
    def _parsed(self) -> Tuple[Any, Any]:
        from pyiceberg.partitioning import PartitionSpec
        from pyiceberg.schema import Schema

        return PartitionSpec.model_validate_json(self.spec_json), Schema.model_validate_json(self.schema_json)

    @property
    def spec(self) -> PartitionSpec:
        return self._parsed[0]

    @property
    def schema(self) -> Schema:
        return self._parsed[1]

    @property
    def expressions(self) -> Tuple[PartitionExpression, ...]:
        """The spec's fields as ``partition_by`` expressions (void fields too)."""
        return tuple(PartitionExpression(self._source_name(f.source_id), str(f.transform)) for f in self.spec.fields)

    @property
    def partition_by(self) -> Tuple[str, ...]:
        """The spec's source columns (empty: not partitioned)."""
        return tuple(dict.fromkeys(e.column for e in self.expressions))

    def describe(self) -> str:
        """``day(ts), bucket(16, id)``, or ``nothing``."""
        return ", ".join(str(e) for e in self.expressions) or "nothing"

    def _source_name(self, source_id: int) -> str:
        name = self.schema.find_column_name(source_id)
        if name is None:
            raise ValueError(f"the partition spec names field id {source_id}, which the table's schema lacks")
        return name

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        return schema

    def check(self, schema: pa.Schema) -> None:
        """Raise ValueError, naming the field, its transform and the column, unless each
        transform applies to its column of ``schema`` (tried on no rows)."""
        self.split(pa.RecordBatch.from_pylist([], schema=schema), schema, check=True)

    def split(self, batch: pa.RecordBatch, schema: pa.Schema, check: bool = False) -> List[Part]:
        """The rows of ``batch`` per partition: (directory, partition record, rows)."""
        spec, iceberg = self._parsed
        transformed: List[pa.Array] = []
        types: List[IcebergType] = []
        for field in spec.fields:
            column = self._source_name(field.source_id)
            source = iceberg.find_field(field.source_id).field_type
            what = f"partition field {field.name!r} ({expression_text(str(field.transform), column)})"
            try:
                array = _column(batch, column)
                transformed.append(field.transform.pyarrow_transform(source)(array))
            except KeyError:
                raise ValueError(f"{what}: the copy has no column {column!r}") from None
            except (pa.ArrowException, ValueError, TypeError, NotImplementedError) as exc:
                if check:
                    raise ValueError(f"{what} cannot be computed on column {column!r} ({source}): {exc}") from None
                raise RowError(f"{what}: a value of column {column!r} has no partition: {exc}") from None
            types.append(field.transform.result_type(source))
        if check or not batch.num_rows:
            return []
        out = []
        for first, rows in split_runs(batch, partition_codes(transformed)):
            values = [_internal(t, a[first].as_py()) for t, a in zip(types, transformed)]
            # PartitionSpec.partition_to_path, without its partition type made again per call
            directory = "/".join(
                f"{quote_plus(f.name, safe='')}={quote_plus(f.transform.to_human_string(t, v), safe='')}"
                for f, t, v in zip(spec.fields, types, values)
            )
            partition = tuple((f.name, partition_json(t, v)) for f, t, v in zip(spec.fields, types, values))
            out.append(Part(directory, partition, rows))
        return out


def _column(batch: pa.RecordBatch, path: str) -> pa.Array:
    """The column ``path`` of ``batch`` (``"s.x"``: field ``x`` of struct column ``s``)."""
    if path in batch.schema.names:
        return batch.column(path)
    head, _, rest = path.partition(".")
    if not rest or head not in batch.schema.names:
        raise KeyError(path)
    array = batch.column(head)
    for name in rest.split("."):
        if not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
            raise KeyError(path)
        array = pc.struct_field(array, name)
    return array


def _internal(typ: IcebergType, value: Any) -> Any:
    """A partition value as a pyiceberg ``Record`` holds it: dates as days, times and
    timestamps as microseconds, UUIDs as 16 bytes; others as they are."""
    from pyiceberg.types import DateType, TimestampType, TimestamptzType, TimeType, UUIDType
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros, time_to_micros

    if value is None:
        return None
    if isinstance(typ, DateType) and isinstance(value, datetime.date):
        return date_to_days(value)
    if isinstance(typ, (TimestampType, TimestamptzType)) and isinstance(value, datetime.datetime):
        return datetime_to_micros(value)
    if isinstance(typ, TimeType) and isinstance(value, datetime.time):
        return time_to_micros(value)
    if isinstance(typ, UUIDType) and isinstance(value, (uuid.UUID, str)):
        return (value if isinstance(value, uuid.UUID) else uuid.UUID(value)).bytes
    return value


def partition_json(typ: IcebergType, value: Any) -> Any:
    """A partition record's value (of the field's result type ``typ``) in Iceberg's JSON
    single-value form: ``"2024-01-02"`` for a date (a day transform's too), ISO text for
    timestamps, text for decimals, hex for binary, as it is for numbers, strings and bools.

    >>> from pyiceberg.types import DateType, StringType
    >>> partition_json(DateType(), 19724), partition_json(StringType(), ""), partition_json(StringType(), None)
    ('2024-01-02', '', None)
    """
    from pyiceberg.conversions import to_json
    from pyiceberg.types import UUIDType

    if value is None:
        return None
    if isinstance(typ, UUIDType):
        return str(uuid.UUID(bytes=value))
    return to_json(typ, value)  # type: ignore[arg-type]  # a partition result type is primitive


def partition_value(typ: IcebergType, value: Any) -> Any:
    """The inverse of :func:`partition_json`: the record's value of a field of result type
    ``typ``, from its JSON form or a Python value (``datetime.date(2024, 1, 2)``).

    >>> from pyiceberg.types import DateType, DecimalType
    >>> partition_value(DateType(), "2024-01-02"), partition_value(DecimalType(4, 2), "1.50")
    (19724, Decimal('1.50'))
    """
    from pyiceberg.conversions import from_json
    from pyiceberg.types import PrimitiveType, StringType

    if isinstance(value, str) and isinstance(typ, PrimitiveType) and not isinstance(typ, StringType):
        value = from_json(typ, value)
    return _internal(typ, value)


def table_layout_for(
    spec: PartitionSpec, schema: Schema, partition_by: Optional[Sequence[PartitionExpression]]
) -> TableLayout:
    """The layout of a copy into a table whose current spec is ``spec``: that spec, which
    ``partition_by`` (when given) must name exactly; else ValueError naming both."""
    layout = TableLayout.of(spec, schema)
    if partition_by:
        theirs = [(e.column, e.transform) for e in layout.expressions if e.transform != "void"]
        mine = [(e.column, e.transform) for e in partition_by]
        if mine != theirs:
            given = [str(e) for e in partition_by]
            table = [str(e) for e in layout.expressions if e.transform != "void"]
            raise ValueError(
                f"the table is partitioned by {layout.describe()}, the copy by partition_by={given}: pass "
                f"partition_by={table} or leave it out (a copy writes with the table's current partition spec)"
            )
    return layout

"""The table side of a copy into Apache Iceberg, as CopyToIceberg's completion step calls it.

It owns three things, and nothing about S3 or Beam:

- **schemas**: the Iceberg schema a missing table is created with (:func:`iceberg_schema`), the
  Arrow schema the data files are written in, with Iceberg field ids (:func:`file_schema`), and
  the check that an existing table accepts a copy (:func:`check_schema`);
- **files**: a data file as the upload step describes it (:class:`TableFile`, statistics
  included) and its Iceberg ``DataFile`` (:func:`data_file`), with no re-reading of footers;
- **the commit**: exactly one snapshot that adds a copy's files, named by its sink id
  (:func:`commit`), and what a rerun or a cleanup asks of the table
  (:func:`committed_snapshot`, :func:`referenced_paths`).

A Delta Lake target would offer the same shape: ``TableFile`` in, one commit out, found again
by sink id. pyiceberg (0.12) is an optional extra: it is imported inside the functions, so
importing this module needs only pyarrow.
"""

from __future__ import annotations

import logging
import random
import struct
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

import pyarrow as pa

from beam_s3_sink.errors import CopyToS3Error
from beam_s3_sink.formats.stats import ColumnStats

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.types import IcebergType, NestedField

__all__ = [
    "MODES",
    "SINK_ID_PROPERTY",
    "UNIT_PROPERTY",
    "CommitConflictError",
    "TableFile",
    "check_schema",
    "commit",
    "committed_snapshot",
    "data_file",
    "file_schema",
    "iceberg_schema",
    "referenced_paths",
]

logger = logging.getLogger(__name__)

MODES = ("append", "overwrite", "overwrite_partitions")
SINK_ID_PROPERTY = "beam-s3-sink.sink-id"
UNIT_PROPERTY = "beam-s3-sink.unit"
BAD_ROWS_PROPERTY = "beam-s3-sink.bad-rows"  # max_bad_rows: the rows left out, when any


class CommitConflictError(CopyToS3Error):
    """Other writers kept committing first: :func:`commit` gave up after its attempts, and
    nothing of the copy is in the table."""


@dataclass(frozen=True)
class TableFile:
    """One Parquet data file of a copy, as the upload step saw it.

    ``stats`` hold one :class:`~beam_s3_sink.formats.stats.ColumnStats` per Parquet leaf column
    (``"a"``, ``"s.x"``, ``"tags.list.element"``), in the package's JSON-ready form;
    ``partition`` holds the file's partition record, by partition field name (its JSON-ready
    form: ``("ts_day", "2024-01-02")``, ``("id_bucket", 3)``, or a Python value), for the
    partition spec ``spec_id``, which must be the table's current spec when the file is
    committed (None: whatever spec is current).

    >>> TableFile("s3://b/t/data/f.parquet", rows=2, bytes=512, stats=(ColumnStats("a", 0, 1, 9),))
    TableFile(uri='s3://b/t/data/f.parquet', rows=2, bytes=512, stats=(ColumnStats(column='a', ...),), partition=(), spec_id=None)
    """

    uri: str
    rows: int
    bytes: int
    stats: Tuple[ColumnStats, ...] = ()
    partition: Tuple[Tuple[str, Any], ...] = ()
    spec_id: Optional[int] = None


# -- schemas ---------------------------------------------------------------------------------


def iceberg_schema(arrow_schema: pa.Schema, partition_by: Sequence[str] = ()) -> Tuple[Schema, PartitionSpec]:
    """The schema (fresh field ids, as the catalog assigns them) and the partition spec that a
    missing table is created with: one field per ``partition_by`` expression, a column name
    (identity) or a transform (``"day(ts)"``, ``"bucket(16, id)"``, ``"truncate(4, s)"``; see
    :func:`~beam_s3_sink.table_layout.parse_partition_by`), named as Iceberg's Java builder
    names it.

    >>> arrow = pa.schema([("day", pa.date32()), ("n", pa.int64()), ("ts", pa.timestamp("us"))])
    >>> schema, spec = iceberg_schema(arrow, ["day", "bucket(16, n)", "hours(ts)"])
    >>> [(f.field_id, f.name, str(f.field_type)) for f in schema.fields]
    [(1, 'day', 'date'), (2, 'n', 'long'), (3, 'ts', 'timestamp')]
    >>> [(f.source_id, f.field_id, f.name, str(f.transform)) for f in spec.fields]
    [(1, 1000, 'day', 'identity'), (2, 1001, 'n_bucket', 'bucket[16]'), (3, 1002, 'ts_hour', 'hour')]
    """
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.transforms import parse_transform
    from pyiceberg.types import PrimitiveType

    from beam_s3_sink.table_layout import parse_partition_by

    schema = assign_fresh_schema_ids(_to_iceberg(arrow_schema))
    top = {f.name: f for f in schema.fields}
    fields = []
    for position, expression in enumerate(parse_partition_by(partition_by)):
        name = expression.column
        if name not in top:
            raise ValueError(f"partition column {name!r} is not a column of the schema ({', '.join(top)})")
        source = top[name].field_type
        if not isinstance(source, PrimitiveType):
            raise ValueError(f"partition column {name!r} has type {source}: only a primitive column can be one")
        transform = parse_transform(expression.transform)
        if not transform.can_transform(source):
            raise ValueError(
                f"partition_by {str(expression)!r}: the {transform} transform does not apply to column {name!r} "
                f"of type {source}"
            )
        fields.append(
            PartitionField(
                source_id=top[name].field_id, field_id=1000 + position, transform=transform, name=expression.name
            )
        )
    return schema, PartitionSpec(*fields)


def file_schema(table_schema: Schema) -> pa.Schema:
    """The Arrow schema a data file is written in: the table's columns with their Iceberg field
    ids as ``PARQUET:field_id`` field metadata (nested fields too), which pyarrow's Parquet
    writer stores as the Parquet field ids. Strings, binaries and lists are the plain (not
    ``large_``) Arrow types; the upload casts each batch to this schema.

    >>> schema, _ = iceberg_schema(pa.schema([("n", pa.int32()), ("tags", pa.list_(pa.string()))]))
    >>> fields = file_schema(schema)
    >>> fields.field("n").type, fields.field("n").metadata
    (DataType(int32), {b'PARQUET:field_id': b'1'})
    >>> fields.field("tags").type.value_field.metadata
    {b'PARQUET:field_id': b'3'}
    """
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    arrow = schema_to_pyarrow(table_schema, include_field_ids=True)
    return pa.schema([_plain_field(f) for f in arrow])


def check_schema(table_schema: Schema, arrow_schema: pa.Schema) -> None:
    """Raise ValueError, naming each column and both types, unless the table accepts a copy
    of ``arrow_schema``.

    Accepted: the same columns by name, at every level (a missing or an extra column fails, an
    optional one too; nothing evolves), each of the Iceberg type that pyiceberg makes of the
    Arrow type, or of one Iceberg promotes to the table's (int to long, float to double,
    decimal(P, S) to decimal(P', S) with P <= P'), which the upload's cast to
    :func:`file_schema` widens. A required (not null) Iceberg column, list element or map value
    needs a non-nullable Arrow field; an optional one takes either.

    >>> schema, _ = iceberg_schema(pa.schema([("n", pa.int64())]))
    >>> check_schema(schema, pa.schema([("n", pa.int32())]))
    >>> check_schema(schema, pa.schema([("n", pa.string())]))
    Traceback (most recent call last):
    ...
    ValueError: the copy does not fit the table: column 'n' is long in the table, string (Arrow string) in the copy
    """
    columns: Dict[str, Tuple[NestedField, pa.DataType]] = {}
    problems: List[str] = []
    for field in arrow_schema:
        try:
            columns[field.name] = (_to_iceberg(pa.schema([field])).fields[0], field.type)
        except ValueError as e:
            problems.append(str(e))
    unconvertible = {f.name for f in arrow_schema} - set(columns)
    for field in table_schema.fields:
        if field.name in columns:
            copy, arrow_type = columns.pop(field.name)
            problems += _field_problems(field.name, field, copy, f" (Arrow {arrow_type})")
        elif field.name not in unconvertible:
            problems.append(f"column {field.name!r} ({field.field_type}) of the table is missing from the copy")
    problems += [
        f"column {name!r} ({arrow_type}) of the copy is not in the table (schema_evolution='add_columns' adds it)"
        for name, (_, arrow_type) in columns.items()
    ]
    if problems:
        raise ValueError("the copy does not fit the table: " + "; ".join(problems))


def _to_iceberg(arrow_schema: pa.Schema) -> Schema:
    """pyiceberg's own conversion (all field ids -1), with the column named on failure."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException

    unsupported = (UnsupportedPyArrowTypeException, TypeError, ValueError)
    try:
        return Catalog._convert_schema_if_needed(arrow_schema)
    except unsupported as e:
        for field in arrow_schema:
            try:
                Catalog._convert_schema_if_needed(pa.schema([field]))
            except unsupported as cause:
                reason = cause.__cause__ or cause
                raise ValueError(
                    f"column {field.name!r}: Arrow type {field.type} has no Iceberg type ({reason})"
                ) from e
        raise


def _field_problems(name: str, table: NestedField, copy: NestedField, arrow: str = "") -> List[str]:
    problems = _type_problems(name, table.field_type, copy.field_type, arrow)
    if table.required and not copy.required:
        problems.append(f"column {name!r} is required ({table.field_type}) in the table, nullable in the copy")
    return problems


def _type_problems(name: str, table: IcebergType, copy: IcebergType, arrow: str = "") -> List[str]:
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, ListType, LongType, MapType, StructType

    if isinstance(table, StructType) and isinstance(copy, StructType):
        mine = {f.name: f for f in copy.fields}
        found: List[str] = []
        for field in table.fields:
            path = f"{name}.{field.name}"
            if field.name in mine:
                found += _field_problems(path, field, mine.pop(field.name))
            else:
                found.append(f"column {path!r} ({field.field_type}) of the table is missing from the copy")
        return found + [
            f"column {name + '.' + n!r} ({f.field_type}) of the copy is not in the table" for n, f in mine.items()
        ]
    if isinstance(table, ListType) and isinstance(copy, ListType):
        return _field_problems(f"{name}.element", table.element_field, copy.element_field)
    if isinstance(table, MapType) and isinstance(copy, MapType):
        return _field_problems(f"{name}.key", table.key_field, copy.key_field) + _field_problems(
            f"{name}.value", table.value_field, copy.value_field
        )
    widens = (
        table == copy
        or (isinstance(table, LongType) and isinstance(copy, IntegerType))
        or (isinstance(table, DoubleType) and isinstance(copy, FloatType))
        or (
            isinstance(table, DecimalType)
            and isinstance(copy, DecimalType)
            and table.scale == copy.scale
            and copy.precision <= table.precision
        )
    )
    return [] if widens else [f"column {name!r} is {table} in the table, {copy}{arrow} in the copy"]


def _plain_field(field: pa.Field) -> pa.Field:
    """The field with ``large_`` strings, binaries and lists made plain; metadata kept."""
    typ = field.type
    if typ == pa.large_string():
        typ = pa.string()
    elif typ == pa.large_binary():
        typ = pa.binary()
    elif pa.types.is_large_list(typ) or pa.types.is_list(typ):
        typ = pa.list_(_plain_field(typ.value_field))
    elif pa.types.is_map(typ):
        typ = pa.map_(_plain_field(typ.key_field), _plain_field(typ.item_field))
    elif pa.types.is_struct(typ):
        typ = pa.struct([_plain_field(typ.field(i)) for i in range(typ.num_fields)])
    return field.with_type(typ)


# -- files -----------------------------------------------------------------------------------


def data_file(table: Table, f: TableFile, schema: Optional[Schema] = None) -> DataFile:
    """The Iceberg ``DataFile`` of ``f`` for ``table``'s current schema (or ``schema``, the one
    a commit that evolves the table writes with) and partition spec.

    Record count and size as given; per column, by field id: the null count, the value count
    (the row count, for a column not inside a list or a map) and the lower and upper bounds,
    following the table's metrics modes (``write.metadata.metrics.*``: by default strings
    truncated to 16 characters, and counts only for nested columns) as pyiceberg's own
    ``add_files`` does. A bound the statistics lack or that does not convert to the column's
    type is left out. The partition record is typed per field of the table's current spec,
    as its transform's result type (a day: days since 1970, a bucket: int, a truncate: the
    source column's type); NaN counts are those of float and double columns.

    For a table whose column 1 is ``n long``::

        df = data_file(table, TableFile(uri, rows=3, bytes=1024, stats=(ColumnStats("n", 1, 4, 7),)))
        df.null_value_counts, df.lower_bounds  # {1: 1}, {1: b"\\x04\\x00\\x00\\x00\\x00\\x00\\x00\\x00"}
    """
    from pyiceberg.io.pyarrow import MetricModeTypes, compute_statistics_plan, parquet_path_to_id_mapping
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    schema = schema or table.schema()
    ids = parquet_path_to_id_mapping(schema)
    plan = compute_statistics_plan(schema, table.properties)
    repeated = _repeated_ids(schema)
    value_counts: Dict[int, int] = {}
    null_counts: Dict[int, int] = {}
    nan_counts: Dict[int, int] = {}
    lower: Dict[int, bytes] = {}
    upper: Dict[int, bytes] = {}
    for stats in f.stats:
        field_id = ids.get(stats.column)
        collector = plan.get(field_id) if field_id is not None else None
        if field_id is None or collector is None or collector.mode.type == MetricModeTypes.NONE:
            continue
        if field_id not in repeated:
            value_counts[field_id] = f.rows
        null_counts[field_id] = stats.null_count
        if stats.nan_count is not None:  # float and double columns
            nan_counts[field_id] = stats.nan_count
        if collector.mode.type == MetricModeTypes.COUNTS:
            continue
        for bounds, value, is_upper in ((lower, stats.min, False), (upper, stats.max, True)):
            serialized = _bound(collector.iceberg_type, value, collector.mode.length, is_upper)
            if serialized is not None:
                bounds[field_id] = serialized
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f.uri,
        file_format=FileFormat.PARQUET,
        partition=_partition(table, f, schema),
        record_count=f.rows,
        file_size_in_bytes=f.bytes,
        value_counts=value_counts,
        null_value_counts=null_counts,
        nan_value_counts=nan_counts,
        lower_bounds=lower,
        upper_bounds=upper,
        sort_order_id=None,
        spec_id=table.metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
    )


def _repeated_ids(schema: Schema) -> Set[int]:
    """The field ids inside a list or a map, whose value count is not the row count."""
    from pyiceberg.schema import index_by_id
    from pyiceberg.types import ListType, MapType

    inside: Set[int] = set()
    for field in index_by_id(schema).values():
        if isinstance(field.field_type, (ListType, MapType)):
            inside |= set(index_by_id(field.field_type)) - {field.field_id}
    return inside


def _bound(typ: IcebergType, value: Any, truncate: Optional[int], is_upper: bool) -> Optional[bytes]:
    """A JSON-ready min/max as Iceberg's single-value bytes, or None when it does not convert."""
    from pyiceberg.conversions import from_json, to_bytes
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
        TimeType,
    )
    from pyiceberg.utils.truncate import truncate_upper_bound_text_string

    if value is None:
        return None
    try:
        if isinstance(typ, BooleanType) and isinstance(value, bool):
            return to_bytes(typ, value)
        if isinstance(typ, (IntegerType, LongType)) and isinstance(value, int) and not isinstance(value, bool):
            return to_bytes(typ, value)
        if isinstance(typ, (FloatType, DoubleType)) and isinstance(value, (int, float, str)):
            return to_bytes(typ, float(value))  # "inf", "-inf" too
        if isinstance(typ, StringType) and isinstance(value, str):
            text = (
                value
                if truncate is None
                else truncate_upper_bound_text_string(value, truncate)
                if is_upper
                else value[:truncate]
            )
            return None if text is None else to_bytes(typ, text)
        if isinstance(typ, DecimalType) and isinstance(value, (str, int)):
            exact = Decimal(value).quantize(Decimal(1).scaleb(-typ.scale))
            return to_bytes(typ, exact) if exact == Decimal(value) else None
        if isinstance(typ, (DateType, TimeType, TimestampType, TimestamptzType)) and isinstance(value, str):
            return to_bytes(typ, from_json(typ, value))
    except (ArithmeticError, TypeError, ValueError, struct.error) as e:  # struct.error: out of the type's range
        logger.debug("bound %r of type %s left out: %s", value, typ, e)
    return None


def _partition(table: Table, f: TableFile, schema: Schema) -> Any:
    """The partition record of ``f`` for its spec: per field, its value typed as the field's
    transform's result type (see :func:`~beam_s3_sink.table_layout.partition_value`)."""
    from pyiceberg.typedef import Record

    from beam_s3_sink.table_layout import expression_text, partition_value

    spec = table.spec()
    if f.spec_id is not None and f.spec_id != spec.spec_id:
        raise ValueError(
            f"the table's partition spec changed while the copy ran: its files are partitioned by spec "
            f"{f.spec_id} ({_describe(table.specs().get(f.spec_id), table)}), the table's is now spec {spec.spec_id} "
            f"({_describe(spec, table)}); nothing of the copy was committed: run it again"
        )
    values = dict(f.partition)
    record = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        if field.name not in values:
            raise ValueError(
                f"{f.uri}: no value for partition field {field.name!r} "
                f"({expression_text(str(field.transform), source.name)}; given: {sorted(values)})"
            )
        record.append(partition_value(field.transform.result_type(source.field_type), values[field.name]))
    return Record(*record)


def _describe(spec: Optional[PartitionSpec], table: Table) -> str:
    from beam_s3_sink.table_layout import TableLayout

    return "unknown" if spec is None else TableLayout.of(spec, table.schema()).describe()


# -- the commit ------------------------------------------------------------------------------


def commit(
    table: Table,
    files: Sequence[TableFile],
    mode: str,
    sink_id: str,
    unit: Optional[str] = None,
    max_attempts: int = 5,
    schema: Optional[pa.Schema] = None,
    bad_rows: int = 0,
) -> int:
    """Commit one snapshot that adds exactly ``files``, and return its id.

    ``schema`` (schema evolution): the Arrow schema, with field ids, that the files were
    written in; the columns of it the table lacks are added and its widenings applied, in the
    same commit (:func:`~beam_s3_sink.iceberg_evolution.evolve`, which raises
    ``SchemaChangedError`` if the table's schema changed so that the files' ids no longer fit).

    ``mode``: ``append``, a fast append; ``overwrite``, which also removes every data file the
    table held; ``overwrite_partitions``, which also removes the data files of the current
    partition spec whose partition is one of ``files``' (as Iceberg's ``ReplacePartitions``:
    files of an older spec stay; an unpartitioned table has one partition). ``files`` must be
    partitioned by the current spec (pyiceberg adds files with it): a spec that changed since
    they were written fails the commit with ValueError. The snapshot summary names ``sink_id`` (and ``unit``, a stream's window or
    pane) in :data:`SINK_ID_PROPERTY` and :data:`UNIT_PROPERTY`, and ``bad_rows`` (the rows
    ``max_bad_rows`` left out), when any, in :data:`BAD_ROWS_PROPERTY`.

    No ``files`` still commits a snapshot: ``overwrite`` then empties the table,
    ``overwrite_partitions`` removes nothing, and ``append`` adds nothing; each records the
    sink id, so a rerun finds the copy done.

    Idempotent: when a snapshot of ``sink_id`` (and ``unit``) exists, its id is returned and
    nothing is committed. On a commit conflict (another writer committed first; pyiceberg
    retries inside each attempt as the table's ``commit.retry.*`` properties say) the table is
    refreshed and the snapshot rebuilt on the new head, deletes recomputed, up to
    ``max_attempts`` times; then :class:`CommitConflictError`. An overwrite that loses a race
    to an append is thus ordered after it and removes its files too (under the default
    ``serializable`` isolation: a table set to ``write.delete.isolation-level=snapshot``, the
    property pyiceberg 0.12 consults here, lets its own retry keep the append's files). Any other failure (an unreachable
    catalog, an unknown outcome) is raised as pyiceberg raised it; a rerun finds out whether
    the snapshot landed.

    For example, at the completion step (``table = catalog.load_table("analytics.orders")``)::

        snapshot_id = commit(table, files, "overwrite_partitions", sink_id="copy-1")
        commit(table, files, "overwrite_partitions", sink_id="copy-1") == snapshot_id  # a rerun: nothing new
    """
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
    properties = {SINK_ID_PROPERTY: sink_id, **({UNIT_PROPERTY: unit} if unit is not None else {})}
    if bad_rows:
        properties[BAD_ROWS_PROPERTY] = str(bad_rows)
    last: Optional[Exception] = None
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            time.sleep(min(2.0, 0.05 * 2 ** (attempt - 2)) * random.uniform(0.5, 1.0))  # 25 ms, 50 ms, ...: jittered
            table.refresh()
        done = committed_snapshot(table, sink_id, unit)
        if done is not None:
            return done.snapshot_id
        try:
            return _commit_once(table, files, mode, properties, schema)
        except (CommitFailedException, ValidationException) as e:
            last = e
            logger.warning(
                "Iceberg table %s: commit of sink %s (attempt %d of %d) lost to a concurrent commit: %s",
                ".".join(table.name()),
                sink_id,
                attempt,
                max_attempts,
                e,
            )
    raise CommitConflictError(
        f"Iceberg table {'.'.join(table.name())}: the {mode} of sink {sink_id}"
        f"{f' (unit {unit})' if unit is not None else ''} ({len(files)} files) did not commit in {max_attempts} "
        f"attempts: other writers committed first each time (last: {last}). Nothing of it is in the table; "
        "rerun the copy with the same sink id."
    ) from last


def _commit_once(
    table: Table, files: Sequence[TableFile], mode: str, properties: Dict[str, str], schema: Optional[pa.Schema] = None
) -> int:
    from pyiceberg.manifest import ManifestContent

    from beam_s3_sink.iceberg_evolution import evolve

    transaction = table.transaction()
    evolved = evolve(transaction, schema, ".".join(table.name())) if schema is not None else None
    added = [data_file(table, f, evolved) for f in files]
    update = transaction.update_snapshot(snapshot_properties=properties)
    producer: Any
    if mode == "append":
        producer = update.fast_append()
    else:
        producer = update.overwrite()
        spec_id = table.metadata.default_spec_id  # pyiceberg adds files with the current spec
        written = {(spec_id, f.partition) for f in added}
        snapshot = table.current_snapshot()
        for manifest in snapshot.manifests(table.io) if snapshot is not None else ():
            if manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                old = entry.data_file
                if mode == "overwrite" or (old.spec_id, old.partition) in written:
                    producer.delete_data_file(old)
    with producer:
        for new in added:
            producer.append_data_file(new)
    transaction.commit_transaction()
    return int(producer.snapshot_id)


def committed_snapshot(table: Table, sink_id: str, unit: Optional[str] = None) -> Optional[Snapshot]:
    """The snapshot whose summary names ``sink_id`` (and ``unit``; none when ``unit`` is None),
    among all the table's snapshots (newest first), or None. A snapshot expired since is gone.

    For example, at initialization::

        done = committed_snapshot(table, sink_id)
        if done is not None:
            ...  # report done.snapshot_id again; upload and commit nothing
    """
    for snapshot in sorted(table.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms), reverse=True):
        summary = snapshot.summary
        if summary is not None and summary[SINK_ID_PROPERTY] == sink_id and summary[UNIT_PROPERTY] == unit:
            return snapshot
    return None


def referenced_paths(table: Table, every_snapshot: bool = False) -> Set[str]:
    """The paths of every file (data, and delete files) that the table's current snapshot
    references (``every_snapshot``: that any of its snapshots references, so that time travel
    keeps working): what a cleanup of a copy that completed its uploads but never committed
    must keep. (Only a copy's own commit adds its files, so its uncommitted ones are in no
    older snapshot either.)

    For example, before deleting a crashed copy's completed files::

        keep = referenced_paths(table)
        orphans = [uri for uri in completed_uris if uri not in keep]
    """
    snapshots = table.snapshots() if every_snapshot else [table.current_snapshot()]
    manifests = {m.manifest_path: m for s in snapshots if s is not None for m in s.manifests(table.io)}
    return {
        entry.data_file.file_path
        for manifest in manifests.values()
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=not every_snapshot)
    }

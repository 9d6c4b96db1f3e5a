"""The table side of a copy into a Delta Lake table, as CopyToDelta's steps call it.

The same shape as :mod:`.iceberg_commit` (``TableFile`` in, one commit out, found again by
sink id), and nothing about Beam:

- **schemas**: the Delta schema a missing table is created with (:func:`delta_schema`), the
  Arrow schema the data files are written in (:func:`file_schema`), and the check that an
  existing table accepts a copy (:func:`check_schema`, the rules and messages of
  :func:`.iceberg_commit.check_schema`);
- **files**: Hive directories with each file's partition values as Delta serializes them
  (:class:`DeltaLayout`, :func:`partition_text`), and the ``add`` action of a
  :class:`~.iceberg_commit.TableFile` from the statistics its upload collected
  (:func:`stats_json`, :func:`add_action`);
- **the commit**: one version per copy (per unit of a stream) through delta-rs, with an
  application transaction (``txn``: app id the sink id, version :func:`unit_version`) and the
  sink id, unit and bad rows in its commit info (:func:`commit`), and what a rerun asks of the
  table (:func:`committed_version`); delta-rs's S3 settings from an :class:`~.S3Config`
  (:func:`storage_options`).

``deltalake`` (delta-rs) is an optional extra, imported inside the functions.
"""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import unquote

import pyarrow as pa

from .errors import CommittedCopyError, CopyToS3Error
from .iceberg_commit import TableFile
from .layout import Layout
from .results import StreamUnit

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from .config import S3Config

__all__ = [
    "BAD_ROWS_KEY",
    "MODES",
    "SINK_ID_KEY",
    "UNIT_KEY",
    "DeltaCommitConflictError",
    "DeltaLayout",
    "add_action",
    "check_schema",
    "check_table_features",
    "commit",
    "committed_version",
    "versioned_history",
    "delta_schema",
    "file_schema",
    "open_table",
    "partition_text",
    "stats_json",
    "storage_options",
    "unit_version",
]

logger = logging.getLogger(__name__)

MODES = ("append", "overwrite", "overwrite_partitions")
SINK_ID_KEY = "beam-s3-sink.sink-id"  # commit info keys: the same names as Iceberg's summary
UNIT_KEY = "beam-s3-sink.unit"
BAD_ROWS_KEY = "beam-s3-sink.bad-rows"
HISTORY_LIMITS = (16, 1024, None)
"""How many of the newest commits :func:`committed_version` reads, in turn, until it finds one."""
BOUNDED_VERSION = 0
"""The application transaction version of a bounded copy (its one commit)."""

_INTEGERS = {pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long"}
_UNSIGNED = {pa.uint8(): "short", pa.uint16(): "integer", pa.uint32(): "long"}  # the next wider signed type
_ARROW = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_WIDER = {("long", "integer"), ("long", "short"), ("long", "byte"), ("integer", "short"), ("integer", "byte")}
_WIDER |= {("short", "byte"), ("double", "float")}
_MIN_MAX = ("byte", "short", "integer", "long", "float", "double", "string", "date", "timestamp", "timestamp_ntz")


class DeltaCommitConflictError(CopyToS3Error):
    """Other writers kept committing first: :func:`commit` gave up, and nothing of the copy
    is in the table."""


# -- schemas ---------------------------------------------------------------------------------


def delta_type(typ: pa.DataType, column: str) -> Any:
    """The Delta type (its JSON form: ``"long"``, ``{"type": "array", ...}``) of an Arrow
    type; ValueError naming ``column`` when Delta has none.

    >>> delta_type(pa.uint16(), "n"), delta_type(pa.timestamp("ns", tz="UTC"), "at")
    ('integer', 'timestamp')
    >>> delta_type(pa.time64("us"), "t")
    Traceback (most recent call last):
    ...
    ValueError: column 't': Arrow type time64[us] has no Delta Lake type
    """
    t = pa.types
    if typ in _INTEGERS:
        return _INTEGERS[typ]
    if typ in _UNSIGNED:
        return _UNSIGNED[typ]
    if t.is_float32(typ) or t.is_float64(typ):
        return "float" if t.is_float32(typ) else "double"
    if t.is_string(typ) or t.is_large_string(typ) or t.is_string_view(typ):
        return "string"
    if t.is_binary(typ) or t.is_large_binary(typ) or t.is_binary_view(typ) or t.is_fixed_size_binary(typ):
        return "binary"
    if t.is_boolean(typ):
        return "boolean"
    if t.is_date(typ):
        return "date"
    if t.is_timestamp(typ):
        return "timestamp" if typ.tz is not None else "timestamp_ntz"  # microseconds: finer is cast
    if t.is_decimal(typ) and typ.precision <= 38:
        return f"decimal({typ.precision},{typ.scale})"
    if t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ):
        element = typ.value_field
        return {
            "type": "array",
            "elementType": delta_type(element.type, f"{column}.element"),
            "containsNull": element.nullable,
        }
    if t.is_map(typ):
        return {
            "type": "map",
            "keyType": delta_type(typ.key_type, f"{column}.key"),
            "valueType": delta_type(typ.item_type, f"{column}.value"),
            "valueContainsNull": typ.item_field.nullable,
        }
    if t.is_struct(typ):
        return {"type": "struct", "fields": [_delta_field(typ.field(i), column) for i in range(typ.num_fields)]}
    raise ValueError(f"column {column!r}: Arrow type {typ} has no Delta Lake type")


def _delta_field(field: pa.Field, parent: str = "") -> Dict[str, Any]:
    name = f"{parent}.{field.name}" if parent else field.name
    return {"name": field.name, "type": delta_type(field.type, name), "nullable": field.nullable, "metadata": {}}


def delta_schema(arrow_schema: pa.Schema, partition_by: Sequence[str] = ()) -> Dict[str, Any]:
    """The Delta schema (its JSON form) a missing table is created with; ValueError naming
    each column Delta has no type for, and each partition column that cannot be one.

    >>> delta_schema(pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.date32())]))["fields"][0]
    {'name': 'id', 'type': 'long', 'nullable': False, 'metadata': {}}
    """
    problems, fields = [], []
    for field in arrow_schema:
        try:
            fields.append(_delta_field(field))
        except ValueError as e:
            problems.append(str(e))
    types = {f["name"]: f["type"] for f in fields}
    for name in partition_by:
        if name not in arrow_schema.names:
            problems.append(
                f"partition column {name!r} is not a column of the schema ({', '.join(arrow_schema.names)})"
            )
        elif name in types and types[name] not in ("byte", "short", "integer", "long", "string", "boolean", "date"):
            problems.append(
                f"partition column {name!r} is {_text(types[name])}: partition by an integer, string, boolean or "
                "date column"
            )
    if problems:
        raise ValueError("; ".join(problems))
    return {"type": "struct", "fields": fields}


def arrow_type(typ: Any) -> pa.DataType:
    """The Arrow type a data file holds for a Delta type (JSON form).

    >>> arrow_type("decimal(12,2)"), arrow_type({"type": "array", "elementType": "long", "containsNull": True})
    (Decimal128Type(decimal128(12, 2)), ListType(list<element: int64>))
    """
    if isinstance(typ, str):
        if typ.startswith("decimal("):
            precision, scale = typ[len("decimal(") : -1].split(",")
            return pa.decimal128(int(precision), int(scale))
        if typ not in _ARROW:
            raise ValueError(f"Delta type {typ} is not one a copy writes")
        return _ARROW[typ]
    kind = typ["type"]
    if kind == "array":
        return pa.list_(pa.field("element", arrow_type(typ["elementType"]), typ.get("containsNull", True)))
    if kind == "map":
        return pa.map_(
            arrow_type(typ["keyType"]),
            pa.field("value", arrow_type(typ["valueType"]), typ.get("valueContainsNull", True)),
        )
    return pa.struct([pa.field(f["name"], arrow_type(f["type"]), f.get("nullable", True)) for f in typ["fields"]])


def file_schema(table_schema: Mapping[str, Any], arrow_schema: pa.Schema) -> pa.Schema:
    """The schema a copy of ``arrow_schema`` is written in: the table's types (a copy's
    ``int32`` into a ``long`` column is widened), nullable where the copy is. The upload
    casts each batch to it; the layout leaves the partition columns out of the files.

    >>> table = delta_schema(pa.schema([("n", pa.int64()), ("s", pa.large_string())]))
    >>> file_schema(table, pa.schema([("n", pa.int32()), ("s", pa.string())])).types
    [DataType(int64), DataType(string)]
    """
    types = {f["name"]: f["type"] for f in table_schema["fields"]}
    return pa.schema([pa.field(f.name, arrow_type(types[f.name]), f.nullable) for f in arrow_schema])


def check_schema(table_schema: Mapping[str, Any], arrow_schema: pa.Schema) -> None:
    """Raise ValueError, naming each column and both types, unless the table accepts a copy
    of ``arrow_schema``: the same columns by name at every level (nothing evolves), each of
    the Delta type :func:`delta_type` makes of the Arrow type or of one the table's widens
    (byte, short, int to long or int; float to double; decimal(P, S) to decimal(P', S) with
    P <= P'); a not-null column needs a non-nullable Arrow field.

    >>> table = delta_schema(pa.schema([("n", pa.int64())]))
    >>> check_schema(table, pa.schema([("n", pa.int32())]))
    >>> check_schema(table, pa.schema([("n", pa.string())]))
    Traceback (most recent call last):
    ...
    ValueError: the copy does not fit the table: column 'n' is long in the table, string (Arrow string) in the copy
    """
    problems: List[str] = []
    copy: Dict[str, Tuple[Dict[str, Any], pa.DataType]] = {}
    for field in arrow_schema:
        try:
            copy[field.name] = (_delta_field(field), field.type)
        except ValueError as e:
            problems.append(str(e))
    unconvertible = set(arrow_schema.names) - set(copy)
    for field in table_schema["fields"]:
        if field["name"] in copy:
            mine, typ = copy.pop(field["name"])
            problems += _field_problems(field["name"], field, mine, f" (Arrow {typ})")
        elif field["name"] not in unconvertible:
            problems.append(f"column {field['name']!r} ({_text(field['type'])}) of the table is missing from the copy")
    problems += [f"column {name!r} ({typ}) of the copy is not in the table" for name, (_, typ) in copy.items()]
    if problems:
        raise ValueError("the copy does not fit the table: " + "; ".join(problems))


def _field_problems(name: str, table: Mapping[str, Any], copy: Mapping[str, Any], arrow: str = "") -> List[str]:
    problems = _type_problems(name, table["type"], copy["type"], arrow)
    if not table.get("nullable", True) and copy.get("nullable", True):
        problems.append(f"column {name!r} is required ({_text(table['type'])}) in the table, nullable in the copy")
    return problems


def _type_problems(name: str, table: Any, copy: Any, arrow: str = "") -> List[str]:
    if isinstance(table, dict) and isinstance(copy, dict) and table["type"] == copy["type"]:
        if table["type"] == "struct":
            mine = {f["name"]: f for f in copy["fields"]}
            found: List[str] = []
            for field in table["fields"]:
                path = f"{name}.{field['name']}"
                if field["name"] in mine:
                    found += _field_problems(path, field, mine.pop(field["name"]))
                else:
                    found.append(f"column {path!r} ({_text(field['type'])}) of the table is missing from the copy")
            return found + [
                f"column {name + '.' + n!r} ({_text(f['type'])}) of the copy is not in the table"
                for n, f in mine.items()
            ]
        if table["type"] == "array":
            return _field_problems(
                f"{name}.element",
                {"type": table["elementType"], "nullable": table.get("containsNull", True)},
                {"type": copy["elementType"], "nullable": copy.get("containsNull", True)},
            )
        return _type_problems(f"{name}.key", table["keyType"], copy["keyType"]) + _field_problems(
            f"{name}.value",
            {"type": table["valueType"], "nullable": table.get("valueContainsNull", True)},
            {"type": copy["valueType"], "nullable": copy.get("valueContainsNull", True)},
        )
    widens = table == copy or (isinstance(table, str) and isinstance(copy, str) and _widens(table, copy))
    return [] if widens else [f"column {name!r} is {_text(table)} in the table, {_text(copy)}{arrow} in the copy"]


def _widens(table: str, copy: str) -> bool:
    if (table, copy) in _WIDER:
        return True
    if table.startswith("decimal(") and copy.startswith("decimal("):
        (tp, ts), (cp, cs) = (t[len("decimal(") : -1].split(",") for t in (table, copy))
        return ts == cs and int(cp) <= int(tp)
    return False


def _text(typ: Any) -> str:
    """A Delta type as Spark's DDL spells it: ``long``, ``array<string>``, ``struct<x: int>``."""
    if isinstance(typ, str):
        return typ
    if typ["type"] == "array":
        return f"array<{_text(typ['elementType'])}>"
    if typ["type"] == "map":
        return f"map<{_text(typ['keyType'])}, {_text(typ['valueType'])}>"
    return "struct<" + ", ".join(f"{f['name']}: {_text(f['type'])}" for f in typ["fields"]) + ">"


# -- what a table asks of its writers --------------------------------------------------------

#: Writer features a copy honours (some only as :func:`check_table_features` says); a table with
#: any other is refused before anything is uploaded. (delta-rs 1.6 itself refuses to commit to a
#: table with rowTracking, domainMetadata or inCommitTimestamp, as Spark 4.1 sets them: but only
#: at the commit, after the upload.)
HONOURED_FEATURES = frozenset(
    {
        "appendOnly",  # overwrites refused when delta.appendOnly is true
        "invariants",  # refused when a column has one (a SQL expression: not evaluated here)
        "checkConstraints",  # refused when the table has one (the same)
        "generatedColumns",  # refused when a column is generated
        "identityColumns",  # refused when a column is an identity column
        "columnMapping",  # refused unless delta.columnMapping.mode is none
        "deletionVectors",  # appends only: an overwrite's removes would have to name each file's vector
        "changeDataFeed",  # adds and removes with dataChange: readers derive the changes
        "timestampNtz",
        "vacuumProtocolCheck",
        "typeWidening",  # the files are written in the table's (widened) types
    }
)


def check_table_features(
    writer_version: int,
    writer_features: Optional[Sequence[str]],
    configuration: Mapping[str, Optional[str]],
    schema: Mapping[str, Any],
    mode: str = "append",
) -> None:
    """Raise ValueError, naming each one, unless a copy in ``mode`` honours everything the table
    asks of its writers (its protocol's ``writer_features``, its ``configuration``, its schema's
    column metadata): CopyToDelta writes plain Parquet by column name, evaluates no SQL, and
    removes files without deletion vectors.

    >>> check_table_features(2, None, {}, {"fields": []})
    >>> check_table_features(7, ["columnMapping", "rowTracking"], {"delta.columnMapping.mode": "name"}, {"fields": []})
    Traceback (most recent call last):
    ...
    ValueError: the table asks what CopyToDelta cannot honour: writer feature(s) rowTracking; delta.columnMapping.mode = name (its files name columns by physical name, a copy's by column name)
    """
    problems: List[str] = []
    unknown = sorted(set(writer_features or ()) - HONOURED_FEATURES)
    if unknown:
        problems.append(f"writer feature(s) {', '.join(unknown)}")
    mapping = configuration.get("delta.columnMapping.mode") or "none"
    if mapping != "none":
        problems.append(
            f"delta.columnMapping.mode = {mapping} (its files name columns by physical name, a copy's by column name)"
        )
    constraints = sorted(k[len("delta.constraints.") :] for k in configuration if k.startswith("delta.constraints."))
    if constraints:
        problems.append(f"CHECK constraint(s) {', '.join(constraints)} (not evaluated by a copy)")
    for field in schema.get("fields", ()):
        metadata = field.get("metadata") or {}
        if "delta.invariants" in metadata:
            problems.append(f"column {field['name']!r} has an invariant (not evaluated by a copy)")
        if "delta.generationExpression" in metadata:
            problems.append(f"column {field['name']!r} is generated ({metadata['delta.generationExpression']})")
        if any(k.startswith("delta.identity.") for k in metadata):
            problems.append(f"column {field['name']!r} is an identity column")
    if mode != "append":
        if (configuration.get("delta.appendOnly") or "false").lower() == "true":
            problems.append(f"delta.appendOnly = true (mode {mode!r} removes files)")
        if "deletionVectors" in (writer_features or ()):
            problems.append(f"deletion vectors (mode {mode!r} would remove files without their vectors)")
    if writer_version > 7:
        problems.append(f"writer version {writer_version}")
    if problems:
        raise ValueError("the table asks what CopyToDelta cannot honour: " + "; ".join(problems))


def check_table(table: DeltaTable, mode: str = "append") -> None:
    """:func:`check_table_features` of a loaded table."""
    protocol, metadata = table.protocol(), table.metadata()
    check_table_features(
        protocol.min_writer_version,
        protocol.writer_features,
        metadata.configuration,
        table_schema_of(table),
        mode,
    )


# -- files -----------------------------------------------------------------------------------


def partition_text(value: Any) -> Optional[str]:
    """A partition value as Delta's ``partitionValues`` serializes it: None for a null, and
    for ``""`` too (Delta's protocol: an empty string is a null partition value, as Spark
    writes it), ``true``/``false``, ``2024-01-02``, numbers and strings as text.

    >>> partition_text(True), partition_text(datetime.date(2024, 1, 2)), partition_text(7), partition_text("")
    ('true', '2024-01-02', '7', None)
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True)
class DeltaLayout(Layout):
    """Hive directories (``p=v/``, a null or ``""`` in ``p=__HIVE_DEFAULT_PARTITION__``; see
    :meth:`directory`), the
    partition columns left out of the files, as Delta writers lay a table out; each file
    carries its partition values as :func:`partition_text` serializes them.

    >>> layout = DeltaLayout(partition_by=("p",))
    >>> schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    >>> batch = pa.record_batch([[1, 2, 3], ["a/b c", "", None]], schema=schema)
    >>> [(p.directory, p.partition, p.rows.num_rows) for p in layout.split(batch, schema)]
    [('p=a%2Fb%20c', (('p', 'a/b c'),), 1), ('p=__HIVE_DEFAULT_PARTITION__', (('p', None),), 1), ('p=__HIVE_DEFAULT_PARTITION__', (('p', None),), 1)]
    """

    def directory(self, row: Mapping[str, Any], schema: pa.Schema) -> str:
        """Hive's escaping, and a space as ``%20``, as delta-rs names its directories (Polars'
        ``read_delta`` 1.x cannot read a file whose key holds a space)."""
        return super().directory(row, schema).replace(" ", "%20")

    def partition_record(self, values: Mapping[str, Any]) -> Tuple[Tuple[str, Any], ...]:
        return tuple((name, partition_text(values[name])) for name in self.partition_by)


def _stat(typ: Any, value: Any, is_max: bool) -> Any:
    """A min or max (the upload's JSON-ready form) as Delta's stats hold it, or None to leave
    it out: numbers as numbers (decimals exact), strings, dates, timestamps in milliseconds
    (Spark's precision: a max rounded up, a min down, so that no row falls outside)."""
    if value is None or typ not in _MIN_MAX and not (isinstance(typ, str) and typ.startswith("decimal(")):
        return None
    if typ in ("byte", "short", "integer", "long"):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if typ in ("float", "double"):
        return value if isinstance(value, (int, float)) and math.isfinite(value) else None
    if typ.startswith("decimal("):
        return decimal.Decimal(value) if isinstance(value, (str, int)) else None
    if not isinstance(value, str):
        return None
    if typ in ("string", "date"):
        return value
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    micros = moment.microsecond % 1000
    if micros:
        moment -= datetime.timedelta(microseconds=micros)
        if is_max:
            moment += datetime.timedelta(milliseconds=1)
    if typ == "timestamp":
        if moment.tzinfo is None:
            return None
        return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return moment.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def stats_json(f: TableFile, table_schema: Mapping[str, Any], partition_by: Sequence[str] = ()) -> str:
    """The ``stats`` of ``f``'s add action, from the statistics its upload collected:
    ``numRecords``, and per column (top-level and inside structs; not lists or maps, whose
    Parquet statistics count elements) ``nullCount``, ``minValues`` and ``maxValues``
    (strings the upload kept, numbers, dates, timestamps; not booleans or binaries).

    >>> from beam_s3_sink.formats.stats import ColumnStats
    >>> table = delta_schema(pa.schema([("n", pa.int64()), ("d", pa.decimal128(5, 2)), ("tags", pa.list_(pa.string()))]))
    >>> f = TableFile("s3://b/t/f.parquet", 3, 100, (ColumnStats("n", 1, 2, 9), ColumnStats("d", 0, "1.50", "2.25"),
    ...                                               ColumnStats("tags.list.element", 0)))
    >>> stats_json(f, table)
    '{"numRecords": 3, "minValues": {"n": 2, "d": 1.50}, "maxValues": {"n": 9, "d": 2.25}, "nullCount": {"n": 1, "d": 0}}'
    """
    types: Dict[Tuple[str, ...], Any] = {
        (f_["name"],): f_["type"] for f_ in table_schema["fields"] if f_["name"] not in partition_by
    }
    for path, typ in list(types.items()):
        types.update(_struct_leaves(path, typ))
    low: Dict[str, Any] = {}
    high: Dict[str, Any] = {}
    nulls: Dict[str, Any] = {}
    for column in f.stats:
        path = tuple(column.column.split("."))
        typ = types.get(path)
        if typ is None or isinstance(typ, dict):
            continue
        _put(nulls, path, column.null_count)
        for into, value, is_max in ((low, column.min, False), (high, column.max, True)):
            stat = _stat(typ, value, is_max)
            if stat is not None:
                _put(into, path, stat)
    return _json({"numRecords": f.rows, "minValues": low, "maxValues": high, "nullCount": nulls})


def _struct_leaves(path: Tuple[str, ...], typ: Any) -> Dict[Tuple[str, ...], Any]:
    if not (isinstance(typ, dict) and typ["type"] == "struct"):
        return {}
    out: Dict[Tuple[str, ...], Any] = {}
    for field in typ["fields"]:
        inner = path + (field["name"],)
        out[inner] = field["type"]
        out.update(_struct_leaves(inner, field["type"]))
    return out


def _put(into: Dict[str, Any], path: Tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        into = into.setdefault(name, {})
    into[path[-1]] = value


def _json(value: Any) -> str:
    """JSON with decimals written as exact numbers (``json`` would need floats)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, decimal.Decimal):
        return str(value)
    return json.dumps(value)


def relative_path(uri: str, table_uri: str) -> str:
    """The path of data file ``uri`` relative to the table's root, unescaped: delta-rs
    URL-encodes it in the log (``p=a%2Fb/f.parquet`` is logged as ``p=a%252Fb/f.parquet``).

    >>> relative_path("s3://b/t/p=a%2Fb/f.parquet", "s3://b/t")
    'p=a%2Fb/f.parquet'
    """
    root = table_uri.rstrip("/") + "/"
    if not uri.startswith(root):
        raise ValueError(f"data file {uri} is not under the table's root {root}")
    return uri[len(root) :]


def add_action(
    f: TableFile, table_uri: str, table_schema: Mapping[str, Any], partition_by: Sequence[str], modified_ms: int
) -> Any:
    """delta-rs's ``AddAction`` of ``f``: its path, size, partition values and stats."""
    from deltalake.transaction import AddAction

    values = dict(f.partition)
    missing = [name for name in partition_by if name not in values]
    if missing:
        raise ValueError(f"{f.uri}: no value for partition column(s) {missing} (given: {sorted(values)})")
    return AddAction(
        relative_path(f.uri, table_uri),
        f.bytes,
        {name: values[name] for name in partition_by},
        modified_ms,
        True,
        stats_json(f, table_schema, partition_by),
    )


# -- the store -------------------------------------------------------------------------------


def storage_options(config: S3Config) -> Dict[str, str]:
    """delta-rs's S3 settings (object_store's ``AWS_*`` keys) for ``config``; they hold
    secrets: never log them. Credentials are the config's static keys, else what its session
    resolves (a profile, an assumed role, boto3's chain) at the time of the call.

    ``conditional_put=etag``: each commit writes its log entry with ``If-None-Match``, so that
    two writers cannot both write version N (AWS S3, MinIO, SeaweedFS and moto honour it);
    a store that does not needs a lock instead (delta-rs's DynamoDB locking provider).

    >>> from beam_s3_sink import S3Config
    >>> options = storage_options(S3Config(endpoint_url="http://127.0.0.1:9000", region_name="us-east-1",
    ...                                    access_key_id="k", secret_access_key="s", path_style=True))
    >>> {k: v for k, v in sorted(options.items()) if k != "AWS_SECRET_ACCESS_KEY"}
    {'AWS_ACCESS_KEY_ID': 'k', 'AWS_ALLOW_HTTP': 'true', 'AWS_ENDPOINT_URL': 'http://127.0.0.1:9000', 'AWS_REGION': 'us-east-1', 'AWS_VIRTUAL_HOSTED_STYLE_REQUEST': 'false', 'conditional_put': 'etag'}
    """
    options = {"conditional_put": "etag"}
    if config.endpoint_url:
        options["AWS_ENDPOINT_URL"] = config.endpoint_url
        if config.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if config.region_name:
        options["AWS_REGION"] = config.region_name
    if config.path_style is not None:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if config.path_style else "true"
    if config.verify is False:
        options["AWS_ALLOW_INVALID_CERTIFICATES"] = "true"
    if config.access_key_id and config.secret_access_key and config.role_arn is None:
        key, secret, token = config.access_key_id, config.secret_access_key, config.session_token
    else:
        credentials = config.make_session().get_credentials()
        if credentials is None:
            return options  # object_store's own chain (instance metadata, environment)
        frozen = credentials.get_frozen_credentials()
        key, secret, token = frozen.access_key, frozen.secret_key, frozen.token
    options.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    if token:
        options["AWS_SESSION_TOKEN"] = token
    return options


def open_table(table_uri: str, options: Mapping[str, str]) -> Optional[DeltaTable]:
    """The table at ``table_uri``, or None when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_uri, storage_options=dict(options))
    except TableNotFoundError:
        return None


def table_schema_of(table: DeltaTable) -> Dict[str, Any]:
    """The table's schema, in its JSON form."""
    schema: Dict[str, Any] = json.loads(table.schema().to_json())
    return schema


# -- the commit ------------------------------------------------------------------------------


def unit_version(unit: Optional[StreamUnit]) -> int:
    """The application transaction version of a commit: :data:`BOUNDED_VERSION` for a bounded
    copy; for a stream's unit, its window's end in microseconds since the epoch, times 1000,
    plus its pane (the global window's: the pane), so that later units have larger versions.

    >>> unit_version(None), unit_version(StreamUnit(None, None, pane=3, timing="EARLY"))
    (0, 3)
    >>> utc = datetime.timezone.utc
    >>> unit_version(StreamUnit(datetime.datetime(1970, 1, 1, tzinfo=utc), datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), 0, "ON_TIME"))
    1000000000
    """
    if unit is None:
        return BOUNDED_VERSION
    if unit.end is None:
        return unit.pane
    end = unit.end.astimezone(datetime.timezone.utc) - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (end // datetime.timedelta(microseconds=1)) * 1000 + unit.pane


def committed_version(table: DeltaTable, sink_id: str, unit: Optional[StreamUnit] = None) -> Optional[int]:
    """The table version that committed ``sink_id`` (and ``unit``; none when ``unit`` is
    None), or None.

    The application transaction of ``sink_id`` holds the largest :func:`unit_version` it
    committed (:func:`commit` never lowers it, even for a unit that commits after a later
    one), so a smaller one answers "not committed" without reading the log; otherwise the
    commit infos are searched, newest first (:func:`versioned_history`). A bounded copy whose
    transaction is there but whose commit info is not (Delta deletes log entries past their
    retention once a checkpoint holds them) raises :class:`~.errors.CommittedCopyError`: it
    is committed, in a version no longer known.
    """
    table.update_incremental()
    done = table.transaction_version(sink_id)
    if done is None or done < unit_version(unit):
        return None
    unit_id = unit.id if unit is not None else None
    for limit in HISTORY_LIMITS:  # a commit just made, or a unit replayed, is among the newest
        entries = versioned_history(table, limit)
        for version, entry in entries:
            if entry.get(SINK_ID_KEY) == sink_id and entry.get(UNIT_KEY) == unit_id:
                return version
        if limit is None or len(entries) < limit:
            break
    if unit is None:  # the transaction proves the commit; Delta removed its log entry (past its retention)
        raise CommittedCopyError(
            f"copy {sink_id!r} committed into this table (its application transaction says so) in a version "
            "whose commit Delta has since removed from the log (older than delta.logRetentionDuration): "
            "nothing is copied again; use a new sink id to copy the data once more"
        )
    return None


def versioned_history(
    table: DeltaTable, limit: Optional[int] = None, attempts: int = 5
) -> List[Tuple[int, Dict[str, Any]]]:
    """The table's ``limit`` newest commit infos (None: all), newest first, each with its
    version. (delta-rs's ``history()``
    reads the newest commits in the store but numbers them down from the version the table
    object has loaded: a commit landing in between shifts every number. The table is loaded
    again after reading, and the history read again, until no commit landed meanwhile.)"""
    for _ in range(attempts):
        table.update_incremental()
        loaded = table.version()
        entries = table.history(limit)
        table.update_incremental()
        if table.version() == loaded:
            return [(loaded - i, entry) for i, entry in enumerate(entries)]
    raise DeltaCommitConflictError(f"the table's history kept changing while read ({attempts} times)")


def commit(
    table_uri: str,
    files: Sequence[TableFile],
    mode: str,
    sink_id: str,
    schema: Mapping[str, Any],
    partition_by: Sequence[str],
    options: Mapping[str, str],
    unit: Optional[StreamUnit] = None,
    bad_rows: int = 0,
    max_attempts: int = 5,
) -> int:
    """Commit one version that adds exactly ``files`` (creating the table with ``schema`` and
    ``partition_by`` when it is missing), and return it.

    ``schema`` and ``partition_by`` are those the files were written for: an existing table must
    still accept them (another writer may have created it, or changed it, meanwhile), else
    ValueError and nothing is committed.

    ``mode``: ``append``; ``overwrite``, which also removes every file of the version it
    reads; ``overwrite_partitions``, which removes the files of the partitions ``files`` are
    in (an unpartitioned table has one). The commit carries the application transaction
    (``sink_id``, :func:`unit_version`) and, in its commit info, :data:`SINK_ID_KEY`,
    :data:`UNIT_KEY` (a stream's unit) and :data:`BAD_ROWS_KEY` (when any).

    Idempotent: a version of ``sink_id`` (and ``unit``) is returned and nothing committed.
    delta-rs retries a commit that lost to a concurrent one when they do not conflict (two
    appends); a conflict (two commits of one sink id: one application transaction) is
    retried here from a fresh read of the table, up to ``max_attempts``, then
    :class:`DeltaCommitConflictError`. An overwrite racing an append: see the README's
    Delta section for what delta-rs decides.

    For example, at the completion step::

        version = commit("s3://lake/t", files, "append", "copy-1", schema, (), options)
        commit("s3://lake/t", files, "append", "copy-1", schema, (), options) == version  # nothing new
    """
    from deltalake.exceptions import CommitFailedError, DeltaError

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    unit_id = unit.id if unit is not None else None
    metadata = {SINK_ID_KEY: sink_id, **({UNIT_KEY: unit_id} if unit_id is not None else {})}
    if bad_rows:
        metadata[BAD_ROWS_KEY] = str(bad_rows)
    last: Optional[Exception] = None
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            time.sleep(min(2.0, 0.05 * 2 ** (attempt - 2)) * random.uniform(0.5, 1.0))
        try:
            return _commit_once(table_uri, files, mode, sink_id, schema, partition_by, options, unit, metadata)
        except (CommitFailedError, _TableExists) as e:
            last = e
        except DeltaError as e:
            if "already exists" not in str(e).lower() and "conflict" not in str(e).lower():
                raise
            last = e
        logger.warning(
            "Delta table %s: commit of sink %s (attempt %d of %d) lost to a concurrent commit: %s",
            table_uri,
            sink_id,
            attempt,
            max_attempts,
            last,
        )
    raise DeltaCommitConflictError(
        f"Delta table {table_uri}: the {mode} of sink {sink_id}{f' (unit {unit_id})' if unit_id else ''} "
        f"({len(files)} files) did not commit in {max_attempts} attempts: other writers committed first each "
        f"time (last: {last}). Nothing of it is in the table; rerun the copy with the same sink id."
    ) from last


def _landed(table_uri: str, options: Mapping[str, str], sink_id: str, unit: Optional[StreamUnit]) -> Optional[int]:
    """The version of ``sink_id`` (and ``unit``) in the table, or None (also when it cannot be read)."""
    try:
        table = open_table(table_uri, options)
        return committed_version(table, sink_id, unit) if table is not None else None
    except Exception:  # noqa: BLE001  (unreadable: the caller's error stands)
        return None


class _TableExists(DeltaCommitConflictError):
    """Another writer created the table first."""


def _commit_once(
    table_uri: str,
    files: Sequence[TableFile],
    mode: str,
    sink_id: str,
    schema: Mapping[str, Any],
    partition_by: Sequence[str],
    options: Mapping[str, str],
    unit: Optional[StreamUnit],
    metadata: Dict[str, str],
) -> int:
    from deltalake import Schema
    from deltalake.transaction import CommitProperties, RemoveAction, Transaction, create_table_with_add_actions

    now = int(time.time() * 1000)
    table = open_table(table_uri, options)
    latest = table.transaction_version(sink_id) if table is not None else None
    version = max(unit_version(unit), latest if latest is not None else -1)  # never lowered: see committed_version
    properties = CommitProperties(custom_metadata=dict(metadata), app_transactions=[Transaction(sink_id, version)])
    if table is None:
        adds = [add_action(f, table_uri, schema, partition_by, now) for f in files]
        try:
            create_table_with_add_actions(
                table_uri,
                Schema.from_json(json.dumps(schema)),
                adds,
                mode="error",
                partition_by=list(partition_by),
                storage_options=dict(options),
                commit_properties=properties,
            )
        except Exception as e:
            if open_table(table_uri, options) is not None:  # another writer created it: append to it
                raise _TableExists(str(e)) from e
            raise
        return 0
    done = committed_version(table, sink_id, unit)
    if done is not None:
        return done
    check_table(table, mode)
    table_schema = table_schema_of(table)
    columns = list(table.metadata().partition_columns)
    if columns != list(partition_by):  # the table changed (or appeared) since the files were written
        raise ValueError(
            f"Delta table {table_uri} is partitioned by {columns}, the copy's files by {list(partition_by)}: "
            "nothing of the copy was committed; run it again"
        )
    in_files = pa.schema(
        [pa.field(f["name"], arrow_type(f["type"]), f.get("nullable", True)) for f in schema["fields"]]
    )
    check_schema(table_schema, in_files)
    adds = [add_action(f, table_uri, table_schema, columns, now) for f in files]
    removes = []
    if mode != "append":
        written = {tuple(dict(f.partition).get(c) for c in columns) for f in files}
        current = pa.table(table.get_add_actions(flatten=False)).to_pylist()
        for old in current:
            values = {c: partition_text((old["partition"] or {}).get(c)) for c in columns}
            if mode == "overwrite" or tuple(values.values()) in written:
                removes.append(RemoveAction(unquote(old["path"]), True, now, old["size_bytes"], values))
    try:
        table.create_write_transaction(
            [*adds, *removes], "append", table.schema(), partition_by=columns, commit_properties=properties
        )
    except Exception:
        # delta-rs may fail after writing the log entry (its post-commit steps): the files are the
        # table's then, and must not be deleted as a failed copy's
        landed = _landed(table_uri, options, sink_id, unit)
        if landed is None:
            raise
        logger.warning("Delta table %s: sink %s committed version %s, then delta-rs failed", table_uri, sink_id, landed)
        return landed
    # Committed: from here on nothing may fail the copy (its files are the table's now).
    try:
        committed = committed_version(table, sink_id, unit)  # delta-rs may have retried on top of others
    except Exception as e:  # noqa: BLE001  (the history could not be read: report the version after)
        logger.warning(
            "Delta table %s: could not find the version of sink %s in the history: %s", table_uri, sink_id, e
        )
        committed = None
    return committed if committed is not None else int(table.version())

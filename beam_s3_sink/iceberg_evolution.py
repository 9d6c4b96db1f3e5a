"""Schema evolution of an Iceberg table by a copy, when asked (``schema_evolution="add_columns"``).

A copy's data files are uploaded before its commit, so the field ids they hold are decided at
initialization. The evolved schema is computed there, as pyiceberg's ``UpdateSchema`` assigns
the ids (the table's ``last-column-id`` + 1, + 2, ... in the copy's column order), without
committing anything (:func:`evolved_schema`); the files are written with those ids. The commit
stages the same changes on the table as it is then, in the transaction that adds the snapshot
(:func:`evolve`): one commit adds the columns and the rows. If the table's schema changed in
between so that a column would get another id (or type) than the files hold, it raises
:class:`SchemaChangedError` and commits nothing; a rerun writes files for the new schema.

The changes, and nothing else:

- a column of the copy that the table lacks (at any level of a struct, a list's element
  struct or a map's value struct) is added as an optional column;
- a column whose type Iceberg widens to the copy's (int to long, float to double, decimal(P, S)
  to decimal(P', S) with P < P') takes the copy's type.

Everything else (a column of the table missing from the copy, a type that does not widen, a
required column the copy may leave null) is refused as without evolution
(:func:`~.iceberg_commit.check_schema`). pyiceberg (0.12) is imported inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import pyarrow as pa

from .errors import CopyToS3Error

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.update.schema import UpdateSchema
    from pyiceberg.types import IcebergType

__all__ = ["SCHEMA_EVOLUTIONS", "SchemaChangedError", "evolve", "evolved_schema", "stage_changes"]

SCHEMA_EVOLUTIONS = ("add_columns",)
"""The values of ``schema_evolution`` besides None (no evolution: a copy must fit the table)."""


class SchemaChangedError(CopyToS3Error):
    """The table's schema changed between a copy's initialization and its commit so that the
    copy's files no longer carry the field ids of their columns: nothing was committed."""


def stage_changes(update: UpdateSchema, table_schema: Schema, arrow_schema: pa.Schema) -> List[str]:
    """Stage on ``update`` the columns of ``arrow_schema`` that ``table_schema`` lacks (as
    optional columns) and the widenings it allows; return what was staged, one line each.

    >>> from pyiceberg.table.update.schema import UpdateSchema
    >>> from beam_s3_sink.iceberg_commit import iceberg_schema
    >>> table, _ = iceberg_schema(pa.schema([("id", pa.int32())]))
    >>> update = UpdateSchema(None, schema=table)  # a table's: table.update_schema()
    >>> stage_changes(update, table, pa.schema([("id", pa.int64()), ("note", pa.string())]))
    ["column 'id' widened from int to long", "column 'note' (string) added"]
    """
    from beam_s3_sink.iceberg_commit import _to_iceberg

    copy = _to_iceberg(arrow_schema)
    return _stage_struct(update, (), table_schema.as_struct(), copy.as_struct())


def _stage_struct(update: Any, path: Tuple[str, ...], table: Any, copy: Any) -> List[str]:
    changes: List[str] = []
    for field in copy.fields:
        mine = table.field_by_name(field.name)
        here = path + (field.name,)
        if mine is None:
            update.add_column(here, field.field_type, required=False)
            changes.append(f"column {'.'.join(here)!r} ({field.field_type}) added")
        else:
            changes += _stage_type(update, here, mine.field_type, field.field_type)
    return changes


def _stage_type(update: Any, path: Tuple[str, ...], table: IcebergType, copy: IcebergType) -> List[str]:
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(table, StructType) and isinstance(copy, StructType):
        return _stage_struct(update, path, table, copy)
    if isinstance(table, ListType) and isinstance(copy, ListType):
        return _stage_type(update, path + ("element",), table.element_type, copy.element_type)
    if isinstance(table, MapType) and isinstance(copy, MapType):
        return _stage_type(update, path + ("value",), table.value_type, copy.value_type)
    if table != copy and widens(table, copy):
        update.update_column(path, field_type=copy)
        return [f"column {'.'.join(path)!r} widened from {table} to {copy}"]
    return []  # the same type, or a problem check_schema names


def widens(table: IcebergType, copy: IcebergType) -> bool:
    """Whether Iceberg's schema evolution widens a column of type ``table`` to ``copy``.

    >>> from pyiceberg.types import DecimalType, IntegerType, LongType
    >>> widens(IntegerType(), LongType()), widens(LongType(), IntegerType())
    (True, False)
    >>> widens(DecimalType(10, 2), DecimalType(12, 2)), widens(DecimalType(10, 2), DecimalType(12, 3))
    (True, False)
    """
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    return (
        (isinstance(table, IntegerType) and isinstance(copy, LongType))
        or (isinstance(table, FloatType) and isinstance(copy, DoubleType))
        or (
            isinstance(table, DecimalType)
            and isinstance(copy, DecimalType)
            and table.scale == copy.scale
            and table.precision < copy.precision
        )
    )


def evolved_schema(table: Table, arrow_schema: pa.Schema) -> Tuple[Schema, List[str]]:
    """The schema ``table`` would have once evolved to take a copy of ``arrow_schema`` (new
    columns with the ids pyiceberg assigns them), and the changes; nothing is committed.

    At initialization, before any upload::

        schema, changes = evolved_schema(table, copy_schema)
        check_schema(schema, copy_schema)       # what evolution cannot fix is refused
        file_schema(schema)                     # the files' columns and field ids
    """
    update = table.update_schema()  # its own transaction, never committed
    changes = stage_changes(update, table.schema(), arrow_schema)
    return (update._apply() if changes else table.schema()), changes


def evolve(transaction: Transaction, written: pa.Schema, table_name: str = "the table") -> Schema:
    """Stage on ``transaction`` the schema changes that let the table take files written in
    ``written`` (an Arrow schema with ``PARQUET:field_id`` metadata, as decided at
    initialization) and return the schema the snapshot is written with. Raises
    :class:`SchemaChangedError` when the changes would give a column of ``written`` another
    field id or type than the files hold.

    At commit, in the snapshot's transaction::

        schema = evolve(transaction, init.settings.schema)
        data_files = [data_file(table, f, schema) for f in files]
    """
    current = transaction.table_metadata.schema()
    update = transaction.update_schema()
    changes = stage_changes(update, current, written)
    schema = update._apply() if changes else current
    problem = _id_mismatch(schema, written)
    if problem is not None:
        raise SchemaChangedError(
            f"{table_name}: its schema changed while the copy ran (now schema {current.schema_id}): {problem}. "
            "Nothing was committed; rerun the copy, which writes its files for the table's new schema."
        )
    if changes:
        update.commit()  # into the transaction: committed with the snapshot
    return schema


def _id_mismatch(schema: Schema, written: pa.Schema) -> Optional[str]:
    """How ``written`` (with field ids) differs from the columns ``schema`` gives them, or None."""
    from beam_s3_sink.iceberg_commit import file_schema

    table = file_schema(schema)
    for field in written:
        if field.name not in table.names:
            return f"column {field.name!r} is no longer in the table"
        problem = _field_mismatch(field.name, table.field(field.name), field)
        if problem is not None:
            return problem
    return None


def _field_mismatch(path: str, table: pa.Field, written: pa.Field) -> Optional[str]:
    """The first field, depth first, whose field id or type differs between the two."""
    mine, theirs = _field_id(table), _field_id(written)
    if mine != theirs:
        return f"column {path!r} has field id {mine} in the table, {theirs} in the copy's files"
    a, b = table.type, written.type
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        for child in b:
            index = a.get_field_index(child.name)
            if index < 0:
                return f"column {path + '.' + child.name!r} is no longer in the table"
            problem = _field_mismatch(f"{path}.{child.name}", a.field(index), child)
            if problem is not None:
                return problem
        return None
    if (pa.types.is_list(a) and pa.types.is_list(b)) or (pa.types.is_large_list(a) and pa.types.is_large_list(b)):
        return _field_mismatch(f"{path}.element", a.value_field, b.value_field)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return _field_mismatch(f"{path}.key", a.key_field, b.key_field) or _field_mismatch(
            f"{path}.value", a.item_field, b.item_field
        )
    if a != b:
        return f"column {path!r} is {a} in the table, {b} in the copy's files"
    return None


def _field_id(field: pa.Field) -> str:
    return (field.metadata or {}).get(b"PARQUET:field_id", b"?").decode()

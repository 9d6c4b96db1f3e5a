"""The Arrow schema of a copy, and turning buffered rows into Arrow record batches.

The schema is fixed when the pipeline is built: given as a ``pyarrow.Schema``, or derived
from the PCollection's Beam schema (``NamedTuple`` or ``beam.Row`` element types) with
Beam's own Arrow helpers. Rows (dicts, ``beam.Row`` or NamedTuples) are converted to Arrow
in batches by pyarrow, never value by value in Python; when pyarrow refuses a batch, the
rows are checked one column at a time to name the column, the type and the offending value.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import pyarrow as pa

__all__ = ["resolve_schema", "rows_to_batch", "RowError", "as_mapping", "schema_to_json"]


class RowError(ValueError):
    """A row does not fit the schema: names the column, the expected type and the value."""


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
            f"The element type is {element_type!r}.")
    return derived


def _from_beam_type(element_type: Any) -> Optional[pa.Schema]:
    from apache_beam.typehints import arrow_type_compatibility, schemas

    if element_type is None or element_type is Any:
        return None
    try:
        fields = schemas.named_fields_from_element_type(element_type)
    except (TypeError, ValueError, KeyError):
        return None
    untyped = [name for name, typ in fields if typ is Any]
    if untyped:
        raise ValueError(
            f"CopyToS3: the Beam schema of {element_type!r} leaves columns {untyped} untyped (Any). "
            "Annotate them with concrete types (note that Beam cannot read string annotations, as "
            "'from __future__ import annotations' makes them), or pass schema=pa.schema([...]).")
    beam_schema = schemas.schema_from_element_type(element_type)
    try:
        return arrow_type_compatibility.arrow_schema_from_beam_schema(beam_schema)
    except NotImplementedError as exc:
        raise ValueError(
            f"CopyToS3: cannot derive an Arrow schema from the Beam schema of {element_type!r} "
            f"({exc}); pass schema=pa.schema([...]).") from None


def as_mapping(row: Any) -> Mapping[str, Any]:
    """A dict view of a row given as a dict, ``beam.Row`` or NamedTuple."""
    if isinstance(row, Mapping):
        return row
    as_dict = getattr(row, "_asdict", None)
    if as_dict is not None:
        return as_dict()
    if hasattr(row, "as_dict"):
        return row.as_dict()
    raise RowError(
        f"a row must be a dict, beam.Row or NamedTuple, got {type(row).__name__}: {_short(row)}")


def rows_to_batch(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Convert rows to one record batch of ``schema``; raise :class:`RowError` if one does not fit."""
    try:
        columns = [pa.array([row.get(name) for row in rows], type=field.type, from_pandas=False)
                   for name, field in zip(schema.names, schema)]
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise _explain(rows, schema, exc) from None
    for field, column in zip(schema, batch.columns):
        if not field.nullable and column.null_count:
            index = column.is_null().to_pylist().index(True)
            raise RowError(
                f"column {field.name!r} ({field.type}, not nullable) is missing or NULL in row "
                f"{_short(dict(rows[index]))}")
    extra = _unknown_columns(rows, schema)
    if extra:
        raise RowError(f"a row has columns that are not in the schema: {sorted(extra)}; "
                       f"the schema's columns are {schema.names}")
    return batch


def _unknown_columns(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> set:
    names = set(schema.names)
    first = rows[0] if rows else {}
    return set(first) - names


def _explain(rows: Sequence[Mapping[str, Any]], schema: pa.Schema, exc: BaseException) -> RowError:
    for field in schema:
        for row in rows:
            value = row.get(field.name)
            try:
                pa.array([value], type=field.type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as cause:
                return RowError(
                    f"column {field.name!r} expects {field.type}, but a row holds "
                    f"{_short(value)} ({type(value).__name__}): {_first_line(cause)}")
    return RowError(f"rows do not fit the schema {schema}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def schema_to_json(schema: pa.Schema) -> List[Dict[str, Any]]:
    """The schema as the manifest stores it: name, Arrow type and nullability per column."""
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]

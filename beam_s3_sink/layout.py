"""Hive-style partitions: which directory under ``P/`` a row's file goes to.

``partition_by=["day", "country"]`` writes each row to ``P/day=<v>/country=<v>/ID-...``, the
layout Hive, Spark, Trino/Athena, DuckDB and pyarrow read back as columns. Names and values
are escaped as Hive's ``FileUtils.escapePathName`` does (``%XX`` for ``" # % ' * / : = ? \\ { [ ] ^``,
DEL and control characters); NULL and ``""`` become ``__HIVE_DEFAULT_PARTITION__``. Partition
columns are left out of the files unless ``keep_partition_columns=True``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, List, Mapping, NamedTuple, Optional, Protocol, Tuple
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batches import split_runs
from .errors import RowError

__all__ = ["Layout", "Part", "Partitioning", "escape_path_name", "partition_codes", "DEFAULT_PARTITION"]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(chr(c) for c in range(0x20))


def escape_path_name(text: str) -> str:
    """``text`` escaped as one Hive path segment.

    >>> escape_path_name("a/b=c d%")
    'a%2Fb%3Dc d%25'
    """
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _is_partition_type(typ: pa.DataType) -> bool:
    t = pa.types
    return t.is_integer(typ) or t.is_string(typ) or t.is_large_string(typ) or t.is_boolean(typ) or t.is_date(typ)


class Part(NamedTuple):
    """The rows of a batch that go to one partition's files (see :meth:`Layout.split`)."""

    directory: str  # the partition's ``col=value/...`` path under the data prefix ("" without partitions)
    partition: Tuple[Tuple[str, Any], ...]  # a table's partition record, JSON-ready, by field name; () for Hive
    rows: pa.RecordBatch  # in the file schema


class Partitioning(Protocol):
    """What the writer routes rows by: :class:`Layout` (Hive directories, for ``CopyToS3``) or
    a table's :class:`~beam_s3_sink.table_layout.TableLayout`."""

    @property
    def partition_by(self) -> Tuple[str, ...]:
        """The partition (source) columns; empty: no partitions."""
        ...

    def check(self, schema: pa.Schema) -> None: ...

    def file_schema(self, schema: pa.Schema) -> pa.Schema: ...

    def split(self, batch: pa.RecordBatch, schema: pa.Schema) -> List[Part]: ...


def partition_codes(columns: List[pa.Array]) -> np.ndarray:
    """One int per row, equal for rows whose values (a null distinct from any value, ``""``
    too) are equal in every column: a dictionary index per column, combined.

    >>> partition_codes([pa.array(["a", "", None, "a"])]).tolist()
    [0, 1, 2, 0]
    """
    code = np.zeros(len(columns[0]) if columns else 0, dtype=np.int64)
    for column in columns:
        encoded = pc.dictionary_encode(column)
        width = len(encoded.dictionary) + 1
        code = code * width + pc.fill_null(encoded.indices, width - 1).to_numpy(zero_copy_only=False)
    return code


@dataclass(frozen=True)
class Layout:
    """How rows are spread over directories under ``P/``: no partitions by default.

    >>> layout = Layout(partition_by=("day",))
    >>> schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    >>> layout.check(schema); layout.file_schema(schema).names
    ['id']
    >>> layout.directory({"id": 1, "day": "a/b"}, schema)
    'day=a%2Fb'

    Attributes:
      partition_by: the partition columns, outermost first.
      keep_partition_columns: also write the partition columns into the files.
    """

    partition_by: Tuple[str, ...] = ()
    keep_partition_columns: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.partition_by, str):
            object.__setattr__(self, "partition_by", (self.partition_by,))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ValueError(f"CopyToS3: partition_by repeats a column: {list(self.partition_by)}")

    def check(self, schema: pa.Schema) -> None:
        """Raise ``ValueError`` (at pipeline construction) for partition columns that cannot be used."""
        for name in self.partition_by:
            if name not in schema.names:
                raise ValueError(f"CopyToS3: partition_by column {name!r} is not in the schema {schema.names}")
            typ = schema.field(name).type
            if not _is_partition_type(typ):
                raise ValueError(
                    f"CopyToS3: partition_by column {name!r} has type {typ}; partition by integer, "
                    "string, bool or date columns (cast other types first)"
                )
        if self.partition_by and not self.keep_partition_columns and len(self.partition_by) == len(schema):
            raise ValueError(
                "CopyToS3: every column is a partition column, so the files would have no "
                "column; pass keep_partition_columns=True or partition by fewer columns"
            )

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of the data files: ``schema`` without the partition columns, unless kept."""
        if self.keep_partition_columns or not self.partition_by:
            return schema
        return pa.schema([f for f in schema if f.name not in self.partition_by], metadata=schema.metadata)

    def directory(self, row: Mapping[str, Any], schema: pa.Schema) -> str:
        """The ``col=value/...`` directory of ``row`` (``""`` without partitions).

        Raises :class:`~beam_s3_sink.errors.RowError` naming the column when a value does not
        fit its type."""
        segments = []
        for name in self.partition_by:
            value = _typed(row.get(name), name, schema.field(name).type)
            segments.append(f"{escape_path_name(name)}={_text(value)}")
        return "/".join(segments)

    def split(self, batch: pa.RecordBatch, schema: pa.Schema) -> List[Part]:
        """The rows of ``batch`` (of ``schema``) per partition directory, in the file schema:
        one code per row (:func:`partition_codes`), then :func:`~.batches.split_runs`.

        >>> layout = Layout(partition_by=("day",))
        >>> schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
        >>> batch = pa.record_batch([[1, 2, 3], ["a", "b", "a"]], schema=schema)
        >>> [(p.directory, p.rows.num_rows) for p in layout.split(batch, schema)]
        [('day=a', 2), ('day=b', 1)]
        """
        code = partition_codes([batch.column(name) for name in self.partition_by])
        file_schema = self.file_schema(schema)
        out = []
        for first, part in split_runs(batch, code):
            try:
                values = {name: batch.column(name)[first].as_py() for name in self.partition_by}
            except (ValueError, OverflowError) as exc:  # e.g. a date Python's datetime cannot hold
                raise RowError(f"a partition value has no directory name: {exc}") from None
            columns = [part.column(name) for name in file_schema.names]
            out.append(
                Part(
                    self.directory(values, schema),
                    self.partition_record(values),
                    pa.RecordBatch.from_arrays(columns, schema=file_schema),
                )
            )
        return out

    def partition_record(self, values: Mapping[str, Any]) -> Tuple[Tuple[str, Any], ...]:
        """What a file of the partition of ``values`` carries to its commit: nothing here
        (its key names the partition); a Delta table's typed values (:mod:`.delta_commit`)."""
        return ()

    def values(self, key: str) -> Tuple[Tuple[str, Optional[str]], ...]:
        """The partition values (as text; None for NULL) that a data file's key names.

        >>> Layout(partition_by=("day",)).values("p/day=a%2Fb/ID-0001.parquet")
        (('day', 'a/b'),)
        """
        segments = dict(s.split("=", 1) for s in key.split("/")[:-1] if "=" in s)
        found = {unquote(k): unquote(v) for k, v in segments.items()}
        return tuple((n, None if found[n] == DEFAULT_PARTITION else found[n]) for n in self.partition_by)


def _typed(value: Any, name: str, typ: pa.DataType) -> Any:
    if value is None:
        return None
    try:
        return pa.scalar(value, type=typ).as_py()
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise RowError(
            f"partition column {name!r} expects {typ}, but a row holds {value!r} ({type(value).__name__}): {exc}"
        ) from None


def _text(value: Optional[Any]) -> str:
    if value is None or value == "":
        return DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return escape_path_name(str(value))

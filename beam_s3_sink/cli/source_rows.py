"""``--max_bad_rows`` in a source: its rows that do not fit the schema, found value by value and
handed to the copy as rows.

Without the flag, a CSV or JSON Lines value that does not fit the schema fails the copy, naming
the file. With it, only the block pyarrow refused is read again, more slowly::

    CSV block   ─▶ as text ─▶ each column converted as the CSV reader converts it ─┬▶ rows that fit: one table
    JSON block  ─▶ lines split in halves (bad_rows.bisect) until each refused one  ─┘  rows that do not: dicts
                   is alone
    any block   ─▶ rows with a NULL in a NOT NULL column ─────────────────────────────▶ dicts

A row that does not fit goes on as a dict: each value that converts as the typed value the reader
makes of it, each value that does not as the file holds it (CSV: its text). The copy's ``Batch``
then finds it as it finds any bad row: counted against ``max_bad_rows``, a dead letter naming the
column and the value (``column 'qty' expects int32, but a row holds 'abc' (str)``). A line that is
not a JSON object, or a CSV record with the wrong number of fields, still fails the copy: that is
a broken file, not a bad value. :class:`TablesAndRowsCoder` carries both kinds of element.
"""

from __future__ import annotations

import functools
import io
import json
import pickle
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Type

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from beam_s3_sink.bad_rows import bisect

__all__ = ["TableOrRow", "TablesAndRowsCoder", "split_csv_text", "split_json_lines", "split_null_rows"]

_REFUSED = (pa.ArrowException, ValueError)
"""What a conversion of text raises for a value that does not fit (ValueError: a bytea's hex)."""


class TableOrRow:
    """The element type of a source read with ``--max_bad_rows``: a ``pyarrow.Table`` of rows that
    fit the schema, or a dict, one row that does not (a marker for :class:`TablesAndRowsCoder`;
    never instantiated)."""


class TablesAndRowsCoder(beam.coders.Coder):
    """Tables as :class:`~beam_s3_sink.cli.sources.ArrowTableCoder` codes them, rows pickled.

    >>> coder = TablesAndRowsCoder()
    >>> coder.decode(coder.encode({"id": "x"})), coder.decode(coder.encode(pa.table({"id": [1]}))).num_rows
    ({'id': 'x'}, 1)
    """

    _TABLE, _ROW = b"T", b"R"

    def __init__(self) -> None:
        from beam_s3_sink.cli.sources import ArrowTableCoder

        self._tables = ArrowTableCoder()

    def encode(self, value: Any) -> bytes:
        if isinstance(value, pa.Table):
            return self._TABLE + self._tables.encode(value)
        return self._ROW + pickle.dumps(value)

    def decode(self, encoded: bytes) -> Any:
        if encoded[:1] == self._TABLE:
            return self._tables.decode(encoded[1:])
        return pickle.loads(encoded[1:])

    def estimate_size(self, value: Any) -> int:
        return int(value.nbytes) if isinstance(value, pa.Table) else len(pickle.dumps(value))

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return TableOrRow


# CSV ------------------------------------------------------------------------------------------
def split_csv_text(
    text: pa.Table, schema: pa.Schema, read: Callable[[bytes, pa.Schema], pa.Table]
) -> Tuple[Optional[pa.Table], List[Dict[str, Any]]]:
    """CSV records read as text → (the records that fit, converted; the others, as dicts).

    ``read(csv_bytes, schema)`` is the source's own conversion (a CSV with a header line in, a
    table of ``schema`` out), so that a value converts here exactly as it would have there.

    >>> import pyarrow.csv as pacsv
    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    >>> read = lambda data, s: pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(column_types=s))
    >>> good, bad = split_csv_text(pa.table({"id": ["1", "x", "3"], "name": ["a", "b", "c"]}), schema, read)
    >>> good.column("id").to_pylist(), bad
    ([1, 3], [{'id': 'x', 'name': 'b'}])
    """
    fields = [f for f in schema if f.name in text.column_names]
    refused: Dict[int, Set[str]] = {}
    converted: Dict[str, _Converted] = {}
    for field in fields:  # each column converted once: its runs of good values, its bad indexes
        column = text.select([field.name])
        convert = functools.partial(_convert, field=field, read=read)
        runs, bad = bisect(column, column.num_rows, convert, _slice, _REFUSED)
        converted[field.name] = _Converted(runs, [index for index, _ in bad], field.type)
        for index, _ in bad:
            refused.setdefault(index, set()).add(field.name)
    keep = np.array([i for i in range(text.num_rows) if i not in refused], np.int64)
    good = None
    if len(keep):
        good = text.take(pa.array(keep))
        for field in fields:
            index = good.column_names.index(field.name)
            good = good.set_column(index, field.name, converted[field.name].at(keep))
    rows = []
    for i in sorted(refused):  # values that convert as converted, the others as their text
        row = text.slice(i, 1).to_pylist()[0]
        for field in fields:
            if field.name not in refused[i]:
                row[field.name] = converted[field.name].at(np.array([i], np.int64))[0].as_py()
        rows.append(row)
    return good, rows


class _Converted:
    """One column converted by :func:`~beam_s3_sink.bad_rows.bisect`: its good runs in order,
    without the rows at ``bad``."""

    def __init__(self, runs: List[pa.Table], bad: List[int], type_: pa.DataType) -> None:
        self._values = pa.concat_tables(runs).column(0) if runs else pa.chunked_array([], type_)
        self._bad = np.array(sorted(bad), np.int64)

    def at(self, rows: np.ndarray) -> pa.ChunkedArray:
        """The converted values of ``rows`` (none of them bad in this column)."""
        return self._values.take(pa.array(rows - np.searchsorted(self._bad, rows)))


def _convert(text: pa.Table, field: pa.Field, read: Callable[[bytes, pa.Schema], pa.Table]) -> pa.Table:
    """One column of text converted, a row for every record: a second column of ``""`` keeps
    the line of a NULL from being empty (the reader skips empty lines)."""
    padded = text.append_column(field.name + "#", pa.array([""] * text.num_rows, pa.string()))
    return read(_as_csv(padded), pa.schema([field])).select([field.name])


def _as_csv(text: pa.Table) -> bytes:
    """Text columns back as CSV: a NULL as an empty field, a string quoted (so ``""`` stays '')."""
    out = io.BytesIO()
    pacsv.write_csv(text, out, pacsv.WriteOptions(quoting_style="needed"))
    return out.getvalue()


def _slice(table: pa.Table, start: int, stop: int) -> pa.Table:
    return table.slice(start, stop - start)


# JSON Lines -----------------------------------------------------------------------------------
def split_json_lines(
    lines: List[bytes],
    schema: pa.Schema,
    parse: Callable[[List[bytes], pa.Schema], pa.Table],
    refused: Tuple[Type[BaseException], ...],
) -> Tuple[List[pa.Table], List[Dict[str, Any]]]:
    """JSON lines → (tables of the lines that fit; the other lines' objects, as dicts).

    ``parse(lines, schema)`` is the source's own parser; ``refused``, what it raises for a line
    that does not fit. A refused line that is not a JSON object raises ``ValueError``.

    >>> import pyarrow.json as pajson
    >>> schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("s"))])
    >>> def parse(lines, s):
    ...     options = pajson.ParseOptions(explicit_schema=s)
    ...     return pajson.read_json(io.BytesIO(b"\\n".join(lines)), parse_options=options)
    >>> lines = [b'{"id": 1, "ts": "2026-12-07 10:00:00"}', b'{"id": "x", "ts": "2026-12-07 11:00:00"}']
    >>> good, bad = split_json_lines(lines, schema, parse, (pa.ArrowException,))
    >>> [t.num_rows for t in good], bad
    ([1], [{'id': 'x', 'ts': datetime.datetime(2026, 12, 7, 11, 0)}])
    """
    good, bad = bisect(lines, len(lines), lambda part: parse(part, schema), _list_slice, refused)
    rows = []
    for index, error in bad:
        try:
            value = json.loads(lines[index])
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ValueError(f"a line is not a JSON object ({error}): {lines[index][:120].decode('utf-8', 'replace')}")
        rows.append(_json_row(value, schema, parse, refused))
    return good, rows


def _json_row(
    value: Dict[str, Any],
    schema: pa.Schema,
    parse: Callable[[List[bytes], pa.Schema], pa.Table],
    refused: Tuple[Type[BaseException], ...],
) -> Dict[str, Any]:
    """One object: each field the parser converts alone as converted, the others as given."""
    row = dict(value)
    for name, given in value.items():
        if name in schema.names and given is not None:
            field = schema.field(name)
            try:
                row[name] = parse([json.dumps({name: given}).encode()], pa.schema([field])).column(0)[0].as_py()
            except refused:
                pass
    return row


def _list_slice(items: List[bytes], start: int, stop: int) -> List[bytes]:
    return items[start:stop]


# NOT NULL -------------------------------------------------------------------------------------
def split_null_rows(table: pa.Table, schema: pa.Schema) -> Tuple[pa.Table, List[Dict[str, Any]]]:
    """``table`` → (its rows with a value in every NOT NULL column; the others, as dicts).

    >>> schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    >>> good, bad = split_null_rows(pa.table({"id": [1, None]}), schema)
    >>> good.num_rows, bad
    (1, [{'id': None}])
    """
    required = [f.name for f in schema if not f.nullable and f.name in table.column_names]
    if not any(table.column(name).null_count for name in required):
        return table, []
    missing = pc.is_null(table.column(required[0]))
    for name in required[1:]:
        missing = pc.or_(missing, pc.is_null(table.column(name)))
    return table.filter(pc.invert(missing)), table.filter(missing).to_pylist()

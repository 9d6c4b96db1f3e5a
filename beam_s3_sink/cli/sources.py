"""The sources ``beam-s3-copy`` reads: CSV, JSON Lines and Parquet files, or generated orders.

Files are matched by a glob through Beam's ``FileSystems``, so a pattern may be local or
``s3://`` (Beam's S3 file system, configured by the ``--s3_*`` pipeline flags), and ``.gz`` /
``.bz2`` / ``.zst`` files are decompressed by their extension. Every file source turns its data into
Arrow tables of the copy's schema and hands them to :class:`~beam_s3_sink.CopyToS3` as they
are (no Python value per row)::

    parquet  MatchFiles ─▶ row groups (footers) ─┐
    csv      MatchFiles ────────────────────────┼─▶ Reshuffle ─▶ pyarrow reader ─▶ check against ─▶ tables
    jsonl    MatchFiles ────────────────────────┘               (row group,        schema, with
                                                                  open_csv blocks,  the file's name
                                                                  JSON line blocks) (count rows, bytes)
    generate Create(shards) ─▶ orders_shard ─▶ rows

Parquet is read a row group at a time (``ParquetFile.read_row_group``), so that the row groups
of one large file spread over the workers; CSV with pyarrow's streaming ``open_csv`` per file
(a quoted field may hold a line break), JSON Lines in blocks of whole lines with
``pyarrow.json``. pyarrow parses the text straight into the schema's types (not Beam's
pandas-based ``ReadFromCsv``/``ReadFromJson``), so that integers with NULLs, decimals and
timestamps with a zone arrive exactly. ``.gz``/``.bz2``/``.zst`` files are decompressed by
pyarrow's codecs while the compressed bytes read are counted for the progress line.

Before the pipeline is built, :func:`plan_source` checks what can be checked from here: that
the pattern matches readable files, and that the first file's first block fits the schema
(the one given, or the one it infers). Nothing is written to S3 when that check fails.

A value that does not fit the schema fails the copy, naming the file; with ``--max_bad_rows``
the block it is in is read again value by value, and its rows that do not fit go on as dicts
for the copy to count and leave out (:mod:`.source_rows`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_s3_sink import arrow_input
from beam_s3_sink.cli.orders import ORDERS_SCHEMA, SHARD_ROWS, orders_shard
from beam_s3_sink.cli.progress import RowCounter
from beam_s3_sink.cli.source_rows import (
    TableOrRow,
    TablesAndRowsCoder,
    split_csv_text,
    split_json_lines,
    split_null_rows,
)
from beam_s3_sink.errors import BatchError, CopyToS3Error

__all__ = ["SourceError", "Source", "parse_source", "plan_source", "source_totals", "ReadSource"]

KINDS = ("csv", "jsonl", "parquet")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSED = (".gz", ".bz2", ".zst", ".deflate", ".lzma")
SAMPLE_BYTES = 1 << 20
JSON_BATCH_LINES = 2000
CSV_PARSE = pacsv.ParseOptions(newlines_in_values=True)
"""A quoted CSV field may hold a line break (as PostgreSQL's CSV writes one): pyarrow then cuts
blocks where the quotes allow, not at any line break."""


class SourceError(CopyToS3Error, ValueError):
    """The source cannot be read, or its data does not fit the schema; says which and why."""


@dataclass(frozen=True)
class Source:
    """What to read: ``kind`` is csv, jsonl, parquet or generate.

    >>> parse_source("generate:1000")
    Source(kind='generate', pattern='', rows=1000)
    """

    kind: str
    pattern: str = ""
    rows: int = 0

    def describe(self) -> str:
        if self.kind == "generate":
            return f"{self.rows:,} generated orders"
        return f"{self.kind} files {self.pattern}"


def parse_source(text: str, kind: Optional[str] = None) -> Source:
    """The source a ``--source`` flag names; ``kind`` overrides the kind the extension implies.

    >>> parse_source("data/*.csv.gz").kind
    'csv'
    """
    if text.startswith("generate:"):
        count = text[len("generate:") :]
        if not count.isdigit():
            raise SourceError(f"--source {text}: write generate:ROWS with a row count, e.g. generate:100000")
        return Source("generate", rows=int(count))
    if kind is None:
        name = text.lower()
        for suffix in _COMPRESSED:
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        kind = next((k for ext, k in _EXTENSIONS.items() if name.endswith(ext)), None)
        if kind is None:
            raise SourceError(
                f"--source {text}: cannot tell the format from the name; pass --source_format {'|'.join(KINDS)}"
            )
    return Source(kind, pattern=text)


def plan_source(source: Source, schema: Optional[pa.Schema], keep_bad: bool = False) -> pa.Schema:
    """Check that ``source`` is readable and return the copy's schema.

    The schema is ``schema`` if given, else Parquet's own (the first file's), else inferred
    from the first block of the first CSV or JSON file. The first block is read with it, so
    that a schema that does not fit the data fails here, before anything is written. With
    ``keep_bad`` (``--max_bad_rows``) a value that does not fit is the copy's to judge, so the
    block's columns are checked, not its values.
    """
    if source.kind == "generate":
        if schema is not None:
            raise SourceError("--schema does not apply to --source generate:ROWS (its schema is fixed)")
        return ORDERS_SCHEMA
    path = first_file(source.pattern)
    try:
        if source.kind == "parquet":
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                file_schema = pq.read_schema(f)
            chosen = schema or file_schema
            conform(file_schema.empty_table(), chosen)
            return chosen
        with FileSystems.open(path) as f:
            sample = f.read(SAMPLE_BYTES)
        if source.kind == "csv":
            return _plan_csv(sample, schema, len(sample) < SAMPLE_BYTES, keep_bad)
        return _plan_json(sample, schema, len(sample) < SAMPLE_BYTES, keep_bad)
    except SourceError as exc:
        raise SourceError(f"{path}: {exc}") from None
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise SourceError(f"{path}: {_first_line(exc)}") from None


def first_file(pattern: str) -> str:
    """The first file the glob matches; :class:`SourceError` when none does."""
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception as exc:  # Beam raises BeamIOError with the cause of each pattern
        raise SourceError(f"cannot list {pattern}: {_first_line(exc)}") from None
    files = sorted(m.path for m in matched if m.size_in_bytes > 0)
    if not files:
        raise SourceError(f"no non-empty file matches {pattern}")
    return files[0]


def _plan_csv(sample: bytes, schema: Optional[pa.Schema], complete: bool, keep_bad: bool) -> pa.Schema:
    if not complete:  # read whole lines only: cut after the last line break
        sample = sample[: sample.rfind(b"\n") + 1]
    if schema is not None and keep_bad:
        text = pa.schema([pa.field(f.name, pa.string()) for f in schema])
        text_reader = pacsv.open_csv(
            io.BytesIO(sample), parse_options=CSV_PARSE, convert_options=csv_convert_options(text)
        )
        check_columns(text_reader.schema, schema)
        return schema
    reader = pacsv.open_csv(io.BytesIO(sample), parse_options=CSV_PARSE, convert_options=csv_convert_options(schema))
    table = reader.read_all()
    if schema is not None:
        table = decode_bytea(table, schema)
    chosen = schema or _nullable(table.schema)
    conform(table, chosen)
    return chosen


def _plan_json(sample: bytes, schema: Optional[pa.Schema], complete: bool, keep_bad: bool) -> pa.Schema:
    lines = sample.splitlines() if complete else sample.splitlines()[:-1]
    if schema is None:
        try:
            table = pajson.read_json(io.BytesIO(b"\n".join(lines)))
        except pa.ArrowInvalid as exc:
            raise SourceError(
                f"cannot infer a schema from the first lines ({_first_line(exc)}); pass --schema"
            ) from None
        return _nullable(table.schema)
    if keep_bad:
        split_json_lines(lines, schema, parse_json_lines, (pa.ArrowException, SourceError))
    else:
        parse_json_lines(lines, schema)
    return schema


def csv_convert_options(schema: Optional[pa.Schema]) -> pacsv.ConvertOptions:
    """CSV conversion as PostgreSQL reads CSV: an unquoted empty field is NULL, ``""`` is '',
    booleans may be ``t``/``f``; binary columns are read as text for :func:`decode_bytea`."""
    types = None
    if schema is not None:
        types = {f.name: pa.string() if pa.types.is_binary(f.type) else f.type for f in schema}
    return pacsv.ConvertOptions(
        column_types=types,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        true_values=["t", "true", "True", "TRUE", "1"],
        false_values=["f", "false", "False", "FALSE", "0"],
    )


def read_csv_text(data: bytes, schema: pa.Schema) -> pa.Table:
    """CSV bytes (a header line, then records) converted as the source converts a file."""
    table = pacsv.read_csv(
        io.BytesIO(data),
        parse_options=CSV_PARSE,
        convert_options=csv_convert_options(schema),
    )
    return decode_bytea(table, schema)


def decode_bytea(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Binary columns of a CSV: PostgreSQL's ``\\x`` hex form decoded, other text as UTF-8 bytes."""
    for field in schema:
        if pa.types.is_binary(field.type) and field.name in table.column_names:
            values = [
                None if v is None else bytes.fromhex(v[2:]) if v.startswith("\\x") else v.encode()
                for v in table.column(field.name).to_pylist()
            ]
            table = table.set_column(table.column_names.index(field.name), field.name, pa.array(values, pa.binary()))
    return table


def parse_json_lines(lines: List[bytes], schema: pa.Schema) -> pa.Table:
    """Parse JSON Lines into ``schema``; a field the schema does not have is an error."""
    options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    table = pajson.read_json(io.BytesIO(b"\n".join(lines)), parse_options=options)
    return conform(table, schema)


def explain_json(lines: List[bytes], schema: pa.Schema, exc: BaseException) -> str:
    """Which line of a batch pyarrow refused, and why, for the error message."""
    for line in lines:
        shown = line[:120].decode("utf-8", "replace")
        try:
            value = json.loads(line)
        except ValueError as cause:
            return f"a line is not JSON ({cause}): {shown}"
        extra = sorted(set(value) - set(schema.names)) if isinstance(value, dict) else []
        if extra:
            return f"a JSON line has field(s) {extra} that are not in the schema {schema.names}: {shown}"
        try:
            parse_json_lines([line], schema)
        except (pa.ArrowException, SourceError) as cause:
            return f"a JSON line does not fit the schema ({_first_line(cause)}): {shown}"
    return f"JSON lines do not fit the schema: {_first_line(exc)}"


def check_columns(data: pa.Schema, schema: pa.Schema) -> None:
    """:class:`SourceError` unless the data has exactly the columns of ``schema``."""
    missing = [n for n in schema.names if n not in data.names]
    extra = [n for n in data.names if n not in schema.names]
    if missing or extra:
        raise SourceError(
            "the data's columns do not match the schema: "
            + "; ".join(
                part
                for part in (f"missing {missing}" if missing else "", f"not in the schema {extra}" if extra else "")
                if part
            )
            + f" (the data has {data.names})"
        )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the columns and types of ``schema`` (any cast every value
    survives, :func:`beam_s3_sink.arrow_input.conform`), or :class:`SourceError`."""
    check_columns(table.schema, schema)
    try:
        return arrow_input.conform(table, schema, "the data", lossless=False)
    except BatchError as exc:
        raise SourceError(str(exc)) from None


class ArrowTableCoder(beam.coders.Coder):
    """A Beam coder for ``pyarrow.Table`` elements: Arrow's IPC stream format, and a size
    estimate (``nbytes``) that encodes nothing.

    Beam weighs sampled elements of every PCollection for its byte-count metrics by encoding
    them; with its default coder for unknown types, a PCollection of large tables is pickled
    whole ten to thirty times a bundle for that alone. A pipeline that makes tables can give
    its PCollection this coder (the CLI does, for the tables it reads)::

        beam.coders.registry.register_coder(pa.Table, ArrowTableCoder)
        tables = files | beam.ParDo(ReadTables()).with_output_types(pa.Table)

    >>> coder = ArrowTableCoder()
    >>> table = pa.table({"id": [1, 2]})
    >>> coder.decode(coder.encode(table)).equals(table), coder.estimate_size(table) == table.nbytes
    (True, True)
    """

    def encode(self, value: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, value.schema) as writer:
            writer.write_table(value)
        return sink.getvalue().to_pybytes()

    def decode(self, encoded: bytes) -> pa.Table:
        return pa.ipc.open_stream(encoded).read_all()

    def estimate_size(self, value: pa.Table) -> int:
        return int(value.nbytes)

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return pa.Table


def _nullable(schema: pa.Schema) -> pa.Schema:
    """An inferred schema: every column nullable, and all-NULL columns as strings."""
    return pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type) else f.type) for f in schema])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_PYARROW_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}


def _open_raw(path: str) -> Any:
    """The file's bytes as stored (compressed or not), for counting bytes read."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _decompressed(raw: Any, path: str) -> Any:
    """A pyarrow stream of the file's decompressed bytes (pyarrow's codecs, by extension),
    or Beam's decompressing reader for the codecs pyarrow lacks."""
    lower = path.lower()
    for suffix, codec in _PYARROW_CODECS.items():
        if lower.endswith(suffix):
            return pa.input_stream(raw, compression=codec)
    if lower.endswith((".deflate", ".lzma")):
        raw.close()
        return FileSystems.open(path)
    return pa.PythonFile(raw, mode="r")


class _ReadBatches(beam.DoFn):
    """One file (CSV, JSON Lines) or one Parquet row group in, Arrow tables of the schema out.

    No Python value per row: pyarrow parses into the schema's types and the tables go to
    CopyToS3 as they are. Every table is checked against the schema with the file's name,
    so a file that does not fit fails naming the file and the column."""

    def __init__(self, schema: pa.Schema, counter: RowCounter, kind: str, keep_bad: bool = False) -> None:
        self._schema = schema
        self._counter = counter
        self._kind = kind
        self._keep_bad = keep_bad  # --max_bad_rows: rows that do not fit go on as dicts (source_rows)

    def setup(self) -> None:
        self._counter.setup()

    def process(self, element: Any) -> Iterator[Any]:
        if self._kind == "parquet":
            path, group = element
            tables: Iterator[Tuple[Any, int]] = self._read_row_group(path, group)
        else:
            path = element
            tables = self._read_csv(path) if self._kind == "csv" else self._read_json(path)
        for table, size in tables:
            if isinstance(table, dict):  # a row that does not fit (--max_bad_rows): the copy judges it
                self._counter.add(1, size)
                yield table
                continue
            rows: List[Dict[str, Any]] = []
            if self._keep_bad:
                table, rows = split_null_rows(table, self._schema)
            try:
                table = conform(table, self._schema)
            except SourceError as exc:
                raise SourceError(f"{path}: {exc}") from None
            self._counter.add(table.num_rows + len(rows), size)
            yield table
            yield from rows

    def _read_row_group(self, path: str, group: int) -> Iterator[Tuple[pa.Table, int]]:
        try:
            with _parquet_file(path) as f:
                parquet = pq.ParquetFile(f)
                table = parquet.read_row_group(group)
                size = parquet.metadata.row_group(group).total_byte_size
        except (OSError, pa.ArrowException) as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None
        yield table, size

    def _read_csv(self, path: str) -> Iterator[Tuple[Any, int]]:
        read = 0  # records handed on
        try:
            for table, size in self._csv_blocks(path, self._schema):
                table = decode_bytea(table, self._schema)
                read += table.num_rows
                yield table, size
        except (pa.ArrowException, ValueError) as exc:  # ValueError: a bytea's hex
            if not self._keep_bad:
                if isinstance(exc, ValueError):
                    raise
                raise SourceError(f"{path}: {_first_line(exc)}") from None
            yield from self._read_csv_values(path, skip=read)

    def _read_csv_values(self, path: str, skip: int) -> Iterator[Tuple[Any, int]]:
        """The file again as text from record ``skip`` on, value by value (:mod:`.source_rows`)."""
        text_schema = pa.schema([pa.field(f.name, pa.string()) for f in self._schema])
        try:
            for text, size in self._csv_blocks(path, text_schema):
                dropped = min(skip, text.num_rows)
                text, skip = text.slice(dropped), skip - dropped
                if not text.num_rows:
                    continue
                good, rows = split_csv_text(text, self._schema, read_csv_text)
                for index, element in enumerate(([good] if good is not None else []) + rows):
                    yield element, size if index == 0 else 0
        except pa.ArrowException as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None

    @staticmethod
    def _csv_blocks(path: str, schema: pa.Schema) -> Iterator[Tuple[pa.Table, int]]:
        """The file's records in blocks, converted to ``schema``'s types, and the bytes each took."""
        with _open_raw(path) as raw:
            reader = pacsv.open_csv(
                _decompressed(raw, path),
                read_options=pacsv.ReadOptions(block_size=SAMPLE_BYTES),
                parse_options=CSV_PARSE,
                convert_options=csv_convert_options(schema),
            )
            done = 0
            for batch in reader:
                position = _tell(raw, done)
                yield pa.Table.from_batches([batch]), position - done
                done = position

    def _read_json(self, path: str) -> Iterator[Tuple[pa.Table, int]]:
        """JSON Lines in blocks of whole lines, each parsed by ``pyarrow.json`` into the schema."""
        with _open_raw(path) as raw:
            stream = _decompressed(raw, path)
            rest, done = b"", 0
            while True:
                block = stream.read(SAMPLE_BYTES)
                data = rest + block
                cut = data.rfind(b"\n") + 1 if block else len(data)
                data, rest = data[:cut], data[cut:]
                lines = [line for line in data.splitlines() if line.strip()]
                if lines:
                    position = _tell(raw, done)
                    yield from self._parse_json(path, lines, position - done)
                    done = position
                if not block:
                    return

    def _parse_json(self, path: str, lines: List[bytes], size: int) -> Iterator[Tuple[Any, int]]:
        try:
            yield parse_json_lines(lines, self._schema), size
            return
        except (pa.ArrowException, SourceError) as exc:
            if not self._keep_bad:
                raise SourceError(f"{path}: {explain_json(lines, self._schema, exc)}") from None
        try:
            tables, rows = split_json_lines(lines, self._schema, parse_json_lines, (pa.ArrowException, SourceError))
        except ValueError as exc:
            raise SourceError(f"{path}: {exc}") from None
        for table in tables:
            yield table, size
            size = 0
        for row in rows:
            yield row, size
            size = 0

    def finish_bundle(self) -> None:
        self._counter.flush()

    def teardown(self) -> None:
        self._counter.flush()


def _tell(raw: Any, default: int) -> int:
    try:
        return int(raw.tell())
    except (OSError, ValueError, AttributeError):
        return default


def _parquet_file(path: str) -> Any:
    """A local Parquet file by its path (pyarrow reads it natively), else Beam's file system."""
    import contextlib
    import os

    if "://" not in path and os.path.exists(path):
        return contextlib.nullcontext(path)
    return _open_raw(path)


class _RowGroups(beam.DoFn):
    """A Parquet file's path in, (path, row group) out, one per row group in its footer."""

    def process(self, path: str) -> Iterator[Tuple[str, int]]:
        try:
            with _parquet_file(path) as f:
                groups = pq.ParquetFile(f).metadata.num_row_groups
        except (OSError, pa.ArrowException) as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None
        for group in range(groups):
            yield path, group


def source_totals(source: Source) -> Tuple[Optional[int], Optional[int]]:
    """(rows, bytes) the source holds, for the progress line: Parquet's rows from the footers,
    the files' bytes for CSV and JSON Lines, the row count for generate; None where unknown."""
    if source.kind == "generate":
        return source.rows, None
    try:
        matched = FileSystems.match([source.pattern])[0].metadata_list
    except Exception:  # noqa: BLE001 - planning already said whether it matches
        return None, None
    if source.kind != "parquet":
        return None, sum(m.size_in_bytes for m in matched)
    rows = 0
    for m in matched:
        if m.size_in_bytes > 0:
            try:
                with _parquet_file(m.path) as f:
                    rows += pq.ParquetFile(f).metadata.num_rows
            except (OSError, pa.ArrowException):
                return None, None
    return rows, None


class _Generate(beam.DoFn):
    def __init__(self, rows: int, counter: RowCounter) -> None:
        self._rows = rows
        self._counter = counter

    def setup(self) -> None:
        self._counter.setup()

    def process(self, shard: int) -> Iterator[Dict[str, Any]]:
        count = 0
        for row in orders_shard(shard, self._rows):
            count += 1
            yield row
        self._counter.add(count)

    def finish_bundle(self) -> None:
        self._counter.flush()


class ReadSource(beam.PTransform):
    """Read ``source`` as Arrow tables of ``schema`` (rows, dicts, for generate), counting rows read
    on ``counter``.

    >>> with beam.Pipeline() as p:
    ...     rows = p | ReadSource(parse_source("generate:3"), ORDERS_SCHEMA, RowCounter())
    ...     _ = rows | beam.combiners.Count.Globally() | beam.Map(print)
    3
    """

    def __init__(self, source: Source, schema: pa.Schema, counter: RowCounter, keep_bad: bool = False) -> None:
        super().__init__()
        self._source = source
        self._schema = schema
        self._counter = counter
        self._keep_bad = keep_bad

    def expand(self, p: beam.pvalue.PBegin) -> beam.PCollection:
        source, counter = self._source, self._counter
        if source.kind == "generate":
            shards = list(range((source.rows + SHARD_ROWS - 1) // SHARD_ROWS))
            return p | "Shards" >> beam.Create(shards) | "Generate" >> beam.ParDo(_Generate(source.rows, counter))
        from apache_beam.io import fileio

        paths = (
            p
            | "Match" >> fileio.MatchFiles(source.pattern)
            | "Paths" >> beam.FlatMap(lambda m: [m.path] if m.size_in_bytes > 0 else [])
        )
        if source.kind == "parquet":
            paths = paths | "RowGroups" >> beam.ParDo(_RowGroups())
        # Beam finds a PCollection's coder in its registry by element type: without one for
        # tables, it pickles sampled tables whole to weigh them (see ArrowTableCoder).
        beam.coders.registry.register_coder(pa.Table, ArrowTableCoder)
        beam.coders.registry.register_coder(TableOrRow, TablesAndRowsCoder)
        read = _ReadBatches(self._schema, counter, source.kind, self._keep_bad)
        return (
            paths
            | "Reshuffle" >> beam.Reshuffle()
            | "ReadBatches" >> beam.ParDo(read).with_output_types(TableOrRow if self._keep_bad else pa.Table)
        )

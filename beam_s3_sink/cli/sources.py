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


def plan_source(source: Source, schema: Optional[pa.Schema]) -> pa.Schema:
    """Check that ``source`` is readable and return the copy's schema.

    The schema is ``schema`` if given, else Parquet's own (the first file's), else inferred
    from the first block of the first CSV or JSON file. The first block is read with it, so
    that a schema that does not fit the data fails here, before anything is written.
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
            return _plan_csv(sample, schema, complete=len(sample) < SAMPLE_BYTES)
        return _plan_json(sample, schema, complete=len(sample) < SAMPLE_BYTES)
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


def _plan_csv(sample: bytes, schema: Optional[pa.Schema], complete: bool) -> pa.Schema:
    if not complete:  # read whole lines only: cut after the last line break
        sample = sample[: sample.rfind(b"\n") + 1]
    reader = pacsv.open_csv(io.BytesIO(sample), convert_options=csv_convert_options(schema))
    table = reader.read_all()
    if schema is not None:
        table = decode_bytea(table, schema)
    chosen = schema or _nullable(table.schema)
    conform(table, chosen)
    return chosen


def _plan_json(sample: bytes, schema: Optional[pa.Schema], complete: bool) -> pa.Schema:
    lines = sample.splitlines() if complete else sample.splitlines()[:-1]
    if schema is None:
        try:
            table = pajson.read_json(io.BytesIO(b"\n".join(lines)))
        except pa.ArrowInvalid as exc:
            raise SourceError(
                f"cannot infer a schema from the first lines ({_first_line(exc)}); pass --schema"
            ) from None
        return _nullable(table.schema)
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


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the columns and types of ``schema`` (any cast every value
    survives, :func:`beam_s3_sink.arrow_input.conform`), or :class:`SourceError`."""
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in schema.names]
    if missing or extra:
        raise SourceError(
            "the data's columns do not match the schema: "
            + "; ".join(
                part
                for part in (f"missing {missing}" if missing else "", f"not in the schema {extra}" if extra else "")
                if part
            )
            + f" (the data has {table.column_names})"
        )
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

    def __init__(self, schema: pa.Schema, counter: RowCounter, kind: str) -> None:
        self._schema = schema
        self._counter = counter
        self._kind = kind

    def setup(self) -> None:
        self._counter.setup()

    def process(self, element: Any) -> Iterator[pa.Table]:
        if self._kind == "parquet":
            path, group = element
            tables: Iterator[Tuple[pa.Table, int]] = self._read_row_group(path, group)
        else:
            path = element
            tables = self._read_csv(path) if self._kind == "csv" else self._read_json(path)
        for table, size in tables:
            try:
                table = conform(table, self._schema)
            except SourceError as exc:
                raise SourceError(f"{path}: {exc}") from None
            self._counter.add(table.num_rows, size)
            yield table

    def _read_row_group(self, path: str, group: int) -> Iterator[Tuple[pa.Table, int]]:
        try:
            with _parquet_file(path) as f:
                parquet = pq.ParquetFile(f)
                table = parquet.read_row_group(group)
                size = parquet.metadata.row_group(group).total_byte_size
        except (OSError, pa.ArrowException) as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None
        yield table, size

    def _read_csv(self, path: str) -> Iterator[Tuple[pa.Table, int]]:
        try:
            with _open_raw(path) as raw:
                reader = pacsv.open_csv(
                    _decompressed(raw, path),
                    read_options=pacsv.ReadOptions(block_size=SAMPLE_BYTES),
                    convert_options=csv_convert_options(self._schema),
                )
                done = 0
                for batch in reader:
                    position = _tell(raw, done)
                    yield decode_bytea(pa.Table.from_batches([batch]), self._schema), position - done
                    done = position
        except pa.ArrowException as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None

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
                    try:
                        table = parse_json_lines(lines, self._schema)
                    except pa.ArrowException as exc:
                        raise SourceError(f"{path}: {explain_json(lines, self._schema, exc)}") from None
                    position = _tell(raw, done)
                    yield table, position - done
                    done = position
                if not block:
                    return

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

    def __init__(self, source: Source, schema: pa.Schema, counter: RowCounter) -> None:
        super().__init__()
        self._source = source
        self._schema = schema
        self._counter = counter

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
        return (
            paths
            | "Reshuffle" >> beam.Reshuffle()
            | "ReadBatches" >> beam.ParDo(_ReadBatches(self._schema, counter, source.kind)).with_output_types(pa.Table)
        )

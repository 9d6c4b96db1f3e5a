"""The sources ``copy_to_s3`` reads: CSV, JSON Lines and Parquet files, or generated orders.

Files are matched by a glob through Beam's ``FileSystems``, so a pattern may be local or
``s3://`` (Beam's S3 file system, configured by the ``--s3_*`` pipeline flags), and ``.gz`` /
``.bz2`` / ``.zst`` files are decompressed by their extension. Every source turns its data into
Arrow batches of the copy's schema, then into rows for :class:`~beam_s3_sink.CopyToS3`::

    parquet  ReadFromParquetBatched ─▶ tables ──────────────┐
    jsonl    ReadFromText ─▶ BatchElements ─▶ pyarrow.json ─┤
    csv      MatchFiles ─▶ ReadMatches ─▶ pyarrow.csv ──────┼─▶ check against schema ─▶ rows
    generate Create(shards) ─▶ orders_shard ────────────────┘   (and count rows read)

CSV is read per file, not with ``ReadFromText``, because a quoted CSV field may hold a line
break; pyarrow's readers (not Beam's pandas-based ``ReadFromCsv``/``ReadFromJson``) parse the
text straight into the schema's types, so that integers with NULLs, decimals and timestamps
with a zone arrive exactly.

Before the pipeline is built, :func:`plan_source` checks what can be checked from here: that
the pattern matches readable files, and that the first file's first block fits the schema
(the one given, or the one it infers). Nothing is written to S3 when that check fails.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

import apache_beam as beam
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipelines.orders import ORDERS_SCHEMA, SHARD_ROWS, orders_shard
from pipelines.progress import RowCounter

__all__ = ["SourceError", "Source", "parse_source", "plan_source", "ReadSource"]

KINDS = ("csv", "jsonl", "parquet")
_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
               ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = (".gz", ".bz2", ".zst", ".deflate", ".lzma")
SAMPLE_BYTES = 1 << 20
JSON_BATCH_LINES = 2000


class SourceError(ValueError):
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
        count = text[len("generate:"):]
        if not count.isdigit():
            raise SourceError(f"--source {text}: write generate:ROWS with a row count, e.g. generate:100000")
        return Source("generate", rows=int(count))
    if kind is None:
        name = text.lower()
        for suffix in _COMPRESSED:
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        kind = next((k for ext, k in _EXTENSIONS.items() if name.endswith(ext)), None)
        if kind is None:
            raise SourceError(f"--source {text}: cannot tell the format from the name; pass --source_format "
                              f"{'|'.join(KINDS)}")
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
            raise SourceError(f"cannot infer a schema from the first lines ({_first_line(exc)}); "
                              "pass --schema") from None
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
        column_types=types, null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False,
        true_values=["t", "true", "True", "TRUE", "1"], false_values=["f", "false", "False", "FALSE", "0"])


def decode_bytea(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Binary columns of a CSV: PostgreSQL's ``\\x`` hex form decoded, other text as UTF-8 bytes."""
    for field in schema:
        if pa.types.is_binary(field.type) and field.name in table.column_names:
            values = [None if v is None else bytes.fromhex(v[2:]) if v.startswith("\\x") else v.encode()
                      for v in table.column(field.name).to_pylist()]
            table = table.set_column(table.column_names.index(field.name), field.name,
                                     pa.array(values, pa.binary()))
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
    """``table`` with exactly the columns and types of ``schema``, or :class:`SourceError`."""
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in schema.names]
    if missing or extra:
        raise SourceError("the data's columns do not match the schema: "
                          + "; ".join(part for part in (
                              f"missing {missing}" if missing else "",
                              f"not in the schema {extra}" if extra else "") if part)
                          + f" (the data has {table.column_names})")
    table = table.select(schema.names)
    for field, column in zip(schema, table.columns):
        if not field.nullable and column.null_count:
            raise SourceError(f"column {field.name!r} is NOT NULL in the schema, but the data has NULLs in it")
        if column.type != field.type:
            try:
                column.cast(field.type)
            except (pa.ArrowException, ValueError) as exc:
                raise SourceError(f"column {field.name!r} is {column.type} in the data and cannot be read as "
                                  f"{field.type}: {_first_line(exc)}") from None
    return table.cast(schema)


def _nullable(schema: pa.Schema) -> pa.Schema:
    """An inferred schema: every column nullable, and all-NULL columns as strings."""
    return pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type) else f.type) for f in schema])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _ToRows(beam.DoFn):
    """Arrow tables (or JSON line batches) of one source in, rows of the schema out, counted."""

    def __init__(self, schema: pa.Schema, counter: RowCounter, parse: str) -> None:
        self._schema = schema
        self._counter = counter
        self._parse = parse

    def setup(self) -> None:
        self._counter.setup()

    def process(self, element: Any) -> Iterator[Dict[str, Any]]:
        if self._parse == "csv":
            tables: Iterator[pa.Table] = self._read_csv(element)
        elif self._parse == "jsonl":
            tables = iter([self._parse_json(element)])
        else:
            tables = iter([element])
        where = element.metadata.path if self._parse == "csv" else f"a {self._parse} batch"
        for table in tables:
            try:
                table = conform(table, self._schema)
            except SourceError as exc:
                raise SourceError(f"{where}: {exc}") from None
            self._counter.add(table.num_rows)
            yield from table.to_pylist()

    def _read_csv(self, readable: Any) -> Iterator[pa.Table]:
        path = readable.metadata.path
        try:
            with readable.open() as f:
                reader = pacsv.open_csv(f, read_options=pacsv.ReadOptions(block_size=SAMPLE_BYTES),
                                        convert_options=csv_convert_options(self._schema))
                for batch in reader:
                    yield decode_bytea(pa.Table.from_batches([batch]), self._schema)
        except pa.ArrowException as exc:
            raise SourceError(f"{path}: {_first_line(exc)}") from None

    def _parse_json(self, lines: List[Any]) -> pa.Table:
        encoded = [line.encode("utf-8") if isinstance(line, str) else line for line in lines]
        try:
            return parse_json_lines(encoded, self._schema)
        except pa.ArrowException as exc:
            raise SourceError(explain_json(encoded, self._schema, exc)) from None

    def finish_bundle(self) -> None:
        self._counter.flush()

    def teardown(self) -> None:
        self._counter.flush()


class _Generate(beam.DoFn):
    def __init__(self, rows: int, counter: RowCounter) -> None:
        self._rows = rows
        self._counter = counter

    def setup(self) -> None:
        self._counter.setup()

    def process(self, shard: int) -> Iterator[Dict[str, Any]]:
        count = 0
        for count, row in enumerate(orders_shard(shard, self._rows), 1):
            yield row
        self._counter.add(count)

    def finish_bundle(self) -> None:
        self._counter.flush()


class ReadSource(beam.PTransform):
    """Read ``source`` as rows (dicts) of ``schema``, counting rows read on ``counter``.

    >>> rows = p | ReadSource(parse_source("in/*.csv"), schema, RowCounter())  # doctest: +SKIP
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
        if source.kind == "parquet":
            tables = p | "ReadParquet" >> beam.io.ReadFromParquetBatched(source.pattern)
        elif source.kind == "jsonl":
            tables = (p | "ReadLines" >> beam.io.ReadFromText(source.pattern)
                      | "SkipBlank" >> beam.Filter(lambda line: bool(line.strip()))
                      | "Batch" >> beam.BatchElements(min_batch_size=JSON_BATCH_LINES,
                                                      max_batch_size=JSON_BATCH_LINES))
        else:
            from apache_beam.io import fileio

            tables = (p | "Match" >> fileio.MatchFiles(source.pattern)
                      | "Open" >> fileio.ReadMatches()
                      | "Reshuffle" >> beam.Reshuffle())
        return tables | "ToRows" >> beam.ParDo(_ToRows(self._schema, counter, source.kind))


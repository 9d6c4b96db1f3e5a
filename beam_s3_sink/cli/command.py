"""``beam-s3-copy`` (or ``python -m beam_s3_sink.cli``): copy a data set to S3 with CopyToS3, or
into an Apache Iceberg table with CopyToIceberg, or a Delta Lake table with CopyToDelta, from
the shell.

::

    flags ─▶ plan: parse, match the source, settle and check the schema ─▶ print the schema
          ─▶ pipeline: ReadSource ─▶ CopyToS3 (--output), CopyToIceberg (--table) or
             CopyToDelta (--delta) ─▶ run, with a progress line (rows read)
          ─▶ read the copy's manifest (or the table's snapshot, or version) ─▶ print the summary table

Everything that can be checked before the pipeline runs is checked in the plan (flags, the
destination URI, the format options, that the source is readable and that its first block
fits the schema); a failure there prints one line and exits with 2, having written nothing.
A copy that fails while it runs exits with 1: CopyToS3 then leaves no data visible (and
CopyToIceberg the table's current snapshot unchanged). For ``--table`` the plan also loads the
catalog and checks that an existing table accepts the copy (:mod:`.table`); the catalog's
secrets never appear in what the command prints or logs.

The same command runs on other runners: Beam's own flags (``--runner``, ``--s3_*``,
``--setup_file``, ``--flink_master`` ...) pass through. The modules beside this one hold
its parts: :mod:`.sources` (what it reads), :mod:`.schema_text` (the ``--schema`` flag),
:mod:`.progress` (the progress line), :mod:`.console` (where its report and error lines go),
:mod:`.runner` (the runner when none is named), :mod:`.orders` (the ``generate:`` data set)
and :mod:`.table` (``--table``/``--catalog``: the Iceberg side), :mod:`.delta` (``--delta``:
the Delta Lake side).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn, Optional, Sequence, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions, StandardOptions
from apache_beam.runners.runner import PipelineState

from beam_s3_sink import CopyToIceberg, CopyToS3, S3Config
from beam_s3_sink.cli.console import PROG, Console
from beam_s3_sink.cli.delta import DeltaTarget, DeltaVersion, parse_delta_uri
from beam_s3_sink.cli.progress import ProgressLine, RowCounter
from beam_s3_sink.cli.runner import with_default_runner
from beam_s3_sink.cli.schema_text import SchemaSyntaxError, format_schema, load_schema
from beam_s3_sink.cli.sources import KINDS, ReadSource, Source, SourceError, parse_source, plan_source, source_totals
from beam_s3_sink.cli.table import (
    CatalogError,
    CommittedCopy,
    Secrets,
    TableTarget,
    catalog_with_s3_flags,
    describe_catalog,
    parse_catalog,
    parse_table,
    s3_flags_given,
)
from beam_s3_sink.clients import shared_client
from beam_s3_sink.errors import CopyToS3Error, S3RequestError
from beam_s3_sink.formats import resolve_format
from beam_s3_sink.s3 import read_object
from beam_s3_sink.transform import parse_size

if TYPE_CHECKING:
    from beam_s3_sink.delta import CopyToDelta

__all__ = ["main", "build_parser", "plan_copy", "CopyPlan", "UsageError"]


EPILOG = f"""\
examples:
  # CSV files (with a header) to Parquet, the schema inferred from the first file
  {PROG} --source 'data/orders-*.csv' --output s3://my-bucket/exports/orders

  # JSON Lines on S3 to PostgreSQL CSV, with a schema
  {PROG} --source 's3://raw/events/*.jsonl.gz' --format csv --header \\
      --schema 'id:int64!,kind:string,amount:decimal(12,2),at:timestamp[us,UTC]' \\
      --output s3://my-bucket/exports/events

  # a generated trial data set to gzipped JSON Lines, against a local S3-compatible server
  {PROG} --source generate:100000 --output s3://scratch/trial --format jsonl \\
      --compression gzip --s3_endpoint_url http://127.0.0.1:9000

  # check every row without writing anything (exit 1 if a row would fail)
  {PROG} --source 'data/orders-*.csv' --format csv --output s3://my-bucket/exports/orders --dry-run

  # remove what a crashed copy with sink id 'nightly' left (nothing of any other copy)
  {PROG} --abort nightly --output s3://my-bucket/exports/orders

  # on a Flink job server (docs/runners.md: Spark, Prism, Dataflow)
  {PROG} --source generate:100000 --output s3://my-bucket/exports/orders-flink \\
      --runner PortableRunner --job_endpoint localhost:8099 --parallelism 2 --environment_type LOOPBACK

schema text form: name:type[!],... where ! means NOT NULL; types are pyarrow names (int64,
  float64, bool, string, binary, date32, time64[us], timestamp[us], timestamp[us,UTC],
  decimal(12,2), list<string> ...). --schema FILE.json reads a list of
  {{"name", "type", "nullable"}} objects, such as a copy's manifest.

Beam pipeline flags (--runner, default FnApiRunner: in this process; --direct_num_workers,
  --s3_endpoint_url, --s3_region_name, --setup_file, --flink_master, --job_endpoint,
  --environment_type, --project, --region, --temp_location ...) pass through to
  Beam; unknown flags are an error, except those after a lone "--", passed on unchecked.
  S3 credentials come from --s3_access_key_id/--s3_secret_access_key, else boto3's chain
  (AWS_ACCESS_KEY_ID, ~/.aws, instance roles).

exit status: 0 the copy finished; 1 the copy failed while it ran (no data visible);
  2 bad flags, an unreadable source or a schema that does not fit the data (nothing written).

clean-up: {PROG} --abort SINK_ID --output s3://BUCKET/PATH [--force] removes what an
  incomplete (crashed or failed) copy left: its data files, pending uploads, sentinel and
  claim, nothing else; a finished copy only with --force. With --table NS.TABLE --catalog
  CATALOG instead of --output: the pending uploads and uncommitted files of a table copy
  (never a committed one's).

Iceberg table: --table NS.TABLE --catalog CATALOG instead of --output copies into an Apache
  Iceberg table with CopyToIceberg, as one snapshot (Parquet files; a missing table is created,
  partitioned by --partition_by), e.g.
  {PROG} --source 'data/orders-*.csv' --table sales.orders --catalog @catalog.json
  CATALOG is a JSON object of pyiceberg catalog properties ('{{"type": "sql", "uri":
  "sqlite:///catalog.db", "warehouse": "s3://my-bucket/warehouse"}}'), @FILE.json holding one,
  or a catalog name pyiceberg resolves (~/.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__URI ...).
  Its secrets (keys holding secret, token, credential or password) are never shown; @FILE
  keeps them off the command line. --mode append (default), overwrite (replace every row) or
  overwrite_partitions (replace the partitions the copy writes). The summary names the table
  and the snapshot.

Delta Lake table: --delta s3://BUCKET/PATH instead of --output copies into the Delta table at
  that root with CopyToDelta, as one version (Parquet files; a missing table is created,
  partitioned by --partition_by columns; an existing one keeps its own), e.g.
  {PROG} --source 'data/orders-*.csv' --delta s3://my-bucket/tables/orders --mode overwrite
  --mode as for --table. The store is reached with the --s3_* flags, else boto3's chain, and
  must honour If-None-Match (AWS S3, MinIO, SeaweedFS). The summary names the version;
  {PROG} --abort SINK_ID --delta s3://BUCKET/PATH cleans up a crashed copy (never a committed one).
"""

# format option flag -> the format objects' field it sets
FORMAT_OPTIONS = {
    "header": "header",
    "delimiter": "delimiter",
    "null": "null",
    "quote": "quote",
    "escape": "escape",
    "force_quote": "force_quote",
    "compression": "compression",
    "compression_level": "compression_level",
    "row_group_bytes": "row_group_size",  # ParquetFormat's row_group_size is encoded bytes
}

IF_EXISTS = ("error", "append", "replace")  # CopyToS3's if_exists (beam_s3_sink/if_exists.py)
TABLE_MODES = ("append", "overwrite", "overwrite_partitions")  # CopyToIceberg's modes
DEFAULT_FILE_SIZE = "256MB"  # --max_file_size when not given (a table's own target size first)
# --output's own flags, which mean nothing for --table
OUTPUT_ONLY = ("if_exists", "num_batches", "keep_partition_columns")
MIN_ROW_GROUP_BYTES = 1024  # ParquetFormat's least row_group_size

# flags the command had once -> what to write instead (an error line, exit 2)
REMOVED_FLAGS = {
    "--row_group_size": "--row_group_size is gone: it set encoded bytes per row group, not rows; "
    "write --row_group_bytes SIZE instead, e.g. --row_group_bytes 4MiB",
    "--encode_threads": "--encode_threads is gone (encoding on more threads measured no faster, for "
    "about 50 MiB more memory per thread); drop it",
}


class UsageError(CopyToS3Error, ValueError):
    """A flag, the source or the schema is wrong: exit 2, nothing written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise UsageError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    """The CLI's own flags; Beam's pass through."""
    parser = _Parser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
        description="Copy a data set (CSV, JSON Lines or Parquet files, local or on S3, or a generated\n"
        "one) to S3 as Parquet, PostgreSQL CSV or text, or JSON Lines, with beam_s3_sink's\n"
        "CopyToS3: data files appear only when the whole copy has succeeded, with a\n"
        "manifest listing them; or (--table) into an Apache Iceberg table as one snapshot,\n"
        "with CopyToIceberg. Prints the schema, a progress line and a summary.",
    )
    source = parser.add_argument_group("source")
    source.add_argument(
        "--source",
        required=True,
        metavar="GLOB|generate:ROWS",
        help="files to read (a local or s3:// glob; .gz/.bz2/.zst are decompressed), or "
        "generate:ROWS for a generated data set of web-shop orders",
    )
    source.add_argument(
        "--source_format",
        choices=KINDS,
        help="the files' format; default: from the extension (.csv, .jsonl/.ndjson/.json, "
        ".parquet). CSV files must have a header line",
    )
    source.add_argument(
        "--schema",
        metavar="TEXT|FILE.json",
        help="the columns to copy, e.g. 'id:int64!,name:string'; default: Parquet's own, "
        "or inferred from the first block of the first CSV/JSON file",
    )
    out = parser.add_argument_group("destination (CopyToS3 options)")
    out.add_argument(
        "--output",
        metavar="s3://BUCKET/PATH",
        help="where to copy to (or --table); the path must be empty (but for an earlier run of "
        "--sink_id), unless --if_exists append or replace",
    )
    out.add_argument(
        "--format", default="parquet", metavar="parquet|csv|text|jsonl", help="the output format (default parquet)"
    )
    out.add_argument(
        "--max_file_size",
        default=None,
        metavar="SIZE",
        help=f"bytes per data file, e.g. 64MiB or 1GB (default {DEFAULT_FILE_SIZE}; with --table, the "
        "table's write.target-file-size-bytes when it has one)",
    )
    out.add_argument(
        "--dry-run",
        "--dry_run",
        dest="dry_run",
        action="store_true",
        help="read and check every row against the schema and the format, write nothing to S3, "
        "and report the rows that would fail (exit 1 if any)",
    )
    out.add_argument(
        "--sink_id", help="names every object of the copy; rerunning with the same id is idempotent (default: a new id)"
    )
    out.add_argument(
        "--if_exists",
        choices=IF_EXISTS,
        help="objects under --output that this copy did not write: error (default: refuse to "
        "copy), append (leave them), replace (delete them once the copy has committed)",
    )
    out.add_argument(
        "--partition_by",
        type=_columns,
        metavar="COL[,COL...]",
        help="write Hive-style directories PATH/COL=VALUE/... (integer, string, bool or date "
        "columns); the columns are left out of the files unless --keep_partition_columns. With "
        "--table: a new table's partitions, columns or transforms such as day(ts) or bucket(16, id) "
        "(an existing table is written with its own partition spec, which --partition_by must "
        "then name)",
    )
    out.add_argument(
        "--keep_partition_columns",
        action="store_true",
        help="with --partition_by: also keep the partition columns in the files",
    )
    out.add_argument(
        "--num_batches",
        type=_positive_int,
        metavar="N",
        help="spread the rows over N batches by a hash of each row, each written by one worker "
        "as ID-batch-<bbbb>-<nnnn> files (a rerun of the same data writes the same keys; default: "
        "no shuffle, each worker writes files of the rows it reads)",
    )
    out.add_argument(
        "--max_bad_rows",
        metavar="N|P%",
        help="leave up to N bad rows (or P%% of the rows) out of the copy instead of failing it: a "
        "value that does not fit --schema (or the schema inferred), a NULL in a NOT NULL column, a "
        "value the format cannot encode; one more fails the copy as without it. The summary says "
        "how many (default 0: the first fails the copy)",
    )
    out.add_argument(
        "--bad_rows",
        metavar="s3://BUCKET/PATH",
        help="with --max_bad_rows: write the rows left out there as JSON Lines (element, column, "
        "reason, sink_id, unit), by a second copy with the same guarantees (sink id ID-bad-rows)",
    )
    table = parser.add_argument_group("destination: an Iceberg table (CopyToIceberg options, instead of --output)")
    table.add_argument(
        "--table",
        metavar="NS.TABLE",
        help="copy into this Apache Iceberg table as one snapshot (created if missing; Parquet "
        "files; --partition_by, --max_file_size, --sink_id and --dry-run apply)",
    )
    table.add_argument(
        "--catalog",
        metavar="JSON|@FILE|NAME",
        help="with --table: pyiceberg catalog properties as a JSON object, @FILE.json holding "
        "one, or a catalog name pyiceberg resolves; its secrets are never shown",
    )
    table.add_argument(
        "--schema_evolution",
        choices=("add_columns",),
        help="with --table: add the copy's columns that the table lacks (optional columns) and "
        "widen int to long, float to double, decimal precision, in the copy's own commit "
        "(default: a copy that does not fit the table is refused)",
    )
    table.add_argument(
        "--mode",
        choices=TABLE_MODES,
        help="with --table or --delta: append (default), overwrite (replace every row) or "
        "overwrite_partitions (replace the partitions the copy writes)",
    )
    delta = parser.add_argument_group("destination: a Delta Lake table (CopyToDelta options, instead of --output)")
    delta.add_argument(
        "--delta",
        metavar="s3://BUCKET/PATH",
        help="copy into the Delta Lake table at this root as one version (created if missing; "
        "Parquet files; --mode, --partition_by, --max_file_size, --sink_id and --dry-run apply)",
    )
    parser.add_argument("--verbose", action="store_true", help="show Beam's own log (INFO and up)")
    fmt = parser.add_argument_group("format options")
    fmt.add_argument("--header", action="store_true", default=None, help="csv: write a header line")
    fmt.add_argument("--delimiter", help="csv, text: the field delimiter (csv ',', text tab)")
    fmt.add_argument("--null", help="csv, text: the text of NULL (csv empty, text \\N)")
    fmt.add_argument("--quote", help='csv: the quote character (default ")')
    fmt.add_argument("--escape", help="csv: the escape before a quote (default: the quote)")
    fmt.add_argument("--force_quote", metavar="COLS|*", help="csv: quote these columns always (comma list, or *)")
    fmt.add_argument(
        "--compression",
        help="parquet: snappy (default), zstd, gzip, brotli, lz4 or none; "
        "csv, text, jsonl: gzip or zstd (default none)",
    )
    fmt.add_argument("--compression_level", type=int, help="parquet: the codec's level")
    fmt.add_argument(
        "--row_group_bytes",
        type=_row_group_bytes,
        metavar="SIZE",
        help="parquet: encoded bytes per row group, e.g. 4MiB (at least 1KiB, at most "
        "--max_file_size; default an eighth of --max_file_size, from 16KiB to 4MiB)",
    )
    return parser


def _positive_int(text: str) -> int:
    """``--num_batches``: a whole number from 1 up (CopyToS3 checks the upper bound)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 up, got {text!r}")
    return int(text)


def _columns(text: str) -> Tuple[str, ...]:
    """``--partition_by``: a comma list of column names (with ``--table``, also transforms such
    as ``day(ts)`` or ``bucket(16, id)``, whose commas do not separate), none empty or repeated."""
    names = tuple(name.strip() for name in re.split(r",(?![^()]*\))", text))
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty column name; write COL[,COL...]")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{text!r} names column(s) {repeated} more than once")
    return names


def _row_group_bytes(text: str) -> int:
    """``--row_group_bytes``: a size such as ``4MiB``, at least ``MIN_ROW_GROUP_BYTES``."""
    try:
        size = parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write bytes, or e.g. 64KiB or 4MiB") from None
    if size < MIN_ROW_GROUP_BYTES:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_ROW_GROUP_BYTES} bytes (1KiB), got {text!r}")
    return size


@dataclass(frozen=True)
class CopyPlan:
    """A checked copy, ready to run: nothing has been written yet."""

    source: Source
    schema: pa.Schema
    transform: Union[CopyToS3, CopyToIceberg, "CopyToDelta"]
    format_name: str
    output: str  # --output's URI, "table NS.TABLE" for --table, "Delta table s3://..." for --delta
    pipeline: beam.Pipeline
    progress_dir: Optional[str]  # where local workers report rows read; None for remote ones
    total_rows: Optional[int] = None  # for the progress line: Parquet footers' rows, generate's rows
    total_bytes: Optional[int] = None  # CSV/JSON Lines: the files' bytes
    dry_run: bool = False
    result_path: Optional[str] = None  # --dry-run: where the result is kept (local workers)
    table: Optional[TableTarget] = None  # --table: the table, its catalog and the secrets to mask
    mode: Optional[str] = None  # --table: CopyToIceberg's mode
    earlier: Optional[CommittedCopy] = None  # --table: the snapshot this --sink_id committed before
    max_bad_rows: bool = False  # --max_bad_rows given: the summary says how many were left out
    bad_rows_uri: Optional[str] = None  # --bad_rows: where the rows left out go (JSON Lines)
    delta: Optional[DeltaTarget] = None  # --delta: the table's root and its store
    earlier_version: Optional[int] = None  # --delta: the version this --sink_id committed before

    def mask(self, text: str) -> str:
        """``text`` with the catalog's secrets masked (no change for ``--output``)."""
        return self.table.secrets.mask(text) if self.table is not None else text


def plan_copy(argv: Sequence[str], progress_dir: Optional[str] = None) -> CopyPlan:
    """Parse and check everything that can be checked before the pipeline runs, and build it.

    ``progress_dir`` is where local workers report rows read (see :mod:`beam_s3_sink.cli.progress`).

    >>> plan_copy(["--source", "generate:10", "--output", "s3://bucket/p"]).schema.names[:2]
    ['order_id', 'customer_id']
    """
    argv = list(argv)
    passed_on: List[str] = []
    if "--" in argv:
        argv, passed_on = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args, beam_args = build_parser().parse_known_args(argv)
    _check_beam_flags(beam_args)
    target = _check_destination(args)
    mask = target.secrets.mask if target is not None else (lambda text: text)
    pipeline_args = with_default_runner(beam_args + passed_on)
    earlier: Optional[CommittedCopy] = None
    delta: Optional[DeltaTarget] = None
    earlier_version: Optional[int] = None
    try:
        FileSystems.set_options(PipelineOptions(pipeline_args))  # Beam's S3 file system reads --s3_*
        schema = load_schema(args.schema) if args.schema else None
        source = parse_source(args.source, args.source_format)
        _check_flags(args)
        schema = plan_source(source, schema, keep_bad=_keeps_bad_rows(args))
        _check_partition_columns(args.partition_by or (), schema, table=target is not None)
        options = PipelineOptions(pipeline_args)
        transform: Union[CopyToS3, CopyToIceberg, CopyToDelta]
        if args.delta is not None:
            transform, delta, earlier_version = _delta_copy(args, schema, S3Config.from_pipeline_options(options))
        elif target is None:
            transform = CopyToS3(
                args.output,
                format=_format(args),
                schema=schema,
                max_file_size=args.max_file_size or DEFAULT_FILE_SIZE,
                sink_id=args.sink_id,
                validate_only=args.dry_run,
                if_exists=args.if_exists or "error",
                num_batches=args.num_batches,
                partition_by=args.partition_by or (),
                keep_partition_columns=args.keep_partition_columns,
                max_bad_rows=args.max_bad_rows or 0,
            )
        else:
            flags = S3Config.from_pipeline_options(options)
            if s3_flags_given(flags):  # the data files' store, as for --output; and pyiceberg's
                merged = catalog_with_s3_flags(target.catalog, flags)
                target = dataclasses.replace(target, catalog=merged, secrets=Secrets.of(merged))
                target.secrets.install()
            # A dry run touches no catalog (as CopyToIceberg's validate_only): rows and Parquet only.
            partition_by = (
                (args.partition_by or ())
                if args.dry_run
                else target.check(schema, args.partition_by, args.schema_evolution)[0]
            )
            s3 = flags if s3_flags_given(flags) else None if args.dry_run else target.named_s3()
            transform = CopyToIceberg(
                target.name,
                catalog=target.catalog,
                mode=args.mode or "append",
                schema=schema,
                partition_by=partition_by,
                max_file_size=args.max_file_size,
                sink_id=args.sink_id,
                s3=s3,
                validate_only=args.dry_run,
                schema_evolution=args.schema_evolution,
                max_bad_rows=args.max_bad_rows or 0,
            )
            if args.sink_id and not args.dry_run:
                earlier = target.committed_copy(transform.sink_id, files=False)
        local = progress_dir if _workers_are_local(options) else None
        pipeline = beam.Pipeline(options=options)
        rows = pipeline | "Read" >> ReadSource(source, schema, RowCounter(local), keep_bad=_keeps_bad_rows(args))
        label = "CopyToDelta" if delta is not None else "CopyToS3" if target is None else "CopyToIceberg"
        if args.bad_rows is not None:
            outputs = rows | label >> transform.with_bad_rows()  # checks the format against the schema
            copied = outputs.results
            _ = outputs.bad_rows | "CopyBadRows" >> CopyToS3(
                args.bad_rows, format="jsonl", sink_id=f"{transform.sink_id}-bad-rows"
            )
        else:
            copied = rows | label >> transform  # checks the format against the schema
        result_path = None
        if args.dry_run:
            import os

            result_path = os.path.join(progress_dir or tempfile.mkdtemp(prefix="beam-s3-copy-"), "result.pickle")
            copied | "KeepResult" >> beam.Map(_keep_result, result_path)
    except (SchemaSyntaxError, SourceError) as exc:
        raise UsageError(mask(str(exc))) from None
    except (ValueError, TypeError) as exc:
        message = (
            str(exc).replace("CopyToS3: ", "", 1).replace("CopyToIceberg: ", "", 1).replace("CopyToDelta: ", "", 1)
        )
        raise UsageError(mask(as_flags(message))) from None
    total_rows, total_bytes = source_totals(source)
    return CopyPlan(
        source,
        schema,
        transform,
        "parquet" if target is not None or delta is not None else args.format.lower(),
        f"Delta table {delta.uri}"
        if delta is not None
        else args.output.rstrip("/")
        if target is None
        else f"table {target.name}",
        pipeline,
        local,
        total_rows,
        total_bytes,
        bool(args.dry_run),
        result_path,
        target,
        (args.mode or "append") if target is not None or delta is not None else None,
        earlier,
        bool(args.max_bad_rows),
        args.bad_rows.rstrip("/") if args.bad_rows else None,
        delta,
        earlier_version,
    )


def _delta_copy(
    args: argparse.Namespace, schema: pa.Schema, flags: S3Config
) -> Tuple["CopyToDelta", DeltaTarget, Optional[int]]:
    """``--delta``: the checked table (a dry run touches none), the CopyToDelta, and the
    version an earlier run of ``--sink_id`` committed."""
    from beam_s3_sink.delta import CopyToDelta

    delta = DeltaTarget(parse_delta_uri(args.delta), flags)
    partition_by = (args.partition_by or ()) if args.dry_run else delta.check(schema, args.partition_by)[0]
    transform = CopyToDelta(
        delta.uri,
        mode=args.mode or "append",
        schema=schema,
        partition_by=partition_by,
        max_file_size=args.max_file_size,
        sink_id=args.sink_id,
        s3=flags if s3_flags_given(flags) else None,
        validate_only=args.dry_run,
        max_bad_rows=args.max_bad_rows or 0,
    )
    earlier = delta.committed_version(transform.sink_id) if args.sink_id and not args.dry_run else None
    return transform, delta, earlier


def _keep_result(result: Any, path: str) -> None:
    import pickle

    with open(path, "wb") as f:
        pickle.dump(result, f)


def _check_destination(args: argparse.Namespace) -> Optional[TableTarget]:
    """Exactly one of ``--output``, ``--table`` and ``--delta``, and only the flags that apply to
    it; for ``--table``, the table and its catalog (nothing loaded yet). Checked before the source
    is read."""
    given = [flag for flag in ("output", "table", "delta") if getattr(args, flag) is not None]
    if len(given) != 1:
        which = "one is needed" if not given else f"not {' and '.join('--' + g for g in given)}"
        raise UsageError(
            f"give exactly one of --output s3://BUCKET/PATH, --table NS.TABLE and --delta s3://BUCKET/PATH ({which})"
        )
    if args.delta is not None:
        _check_delta_flags(args)
        return None
    if args.table is None:
        given = [flag for flag in ("catalog", "mode", "schema_evolution") if getattr(args, flag) is not None]
        if given:
            also = " or --delta s3://BUCKET/PATH" if given[0] == "mode" else ""
            raise UsageError(f"--{given[0]} applies only with --table NS.TABLE{also}")
        return None
    for flag in OUTPUT_ONLY:
        if getattr(args, flag) not in (None, False):
            hint = " (for a table, --mode append, overwrite or overwrite_partitions)" if flag == "if_exists" else ""
            raise UsageError(f"--{flag} applies only with --output, not with --table{hint}")
    if args.format.strip().lower() != "parquet":
        raise UsageError(
            f"--format {args.format}: an Iceberg table (--table) is written as Parquet only; drop --format"
        )
    options = sorted(f"--{flag}" for flag in FORMAT_OPTIONS if getattr(args, flag) is not None)
    if options:
        raise UsageError(
            f"{', '.join(options)} do(es) not apply to --table: CopyToIceberg writes Parquet with its own settings"
        )
    if args.catalog is None:
        raise UsageError(
            "--table needs --catalog: a JSON object of pyiceberg catalog properties, @FILE.json, or a catalog name"
        )
    try:
        name = parse_table(args.table)
        catalog = parse_catalog(args.catalog)
    except (CatalogError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    import importlib.util

    if importlib.util.find_spec("pyiceberg") is None:
        raise UsageError("--table needs pyiceberg, which is not installed: pip install 'beam_s3_sink[iceberg]'")
    secrets = Secrets.of(catalog)
    secrets.install()  # the log too: --verbose shows Beam's and pyiceberg's records
    return TableTarget(name, catalog, secrets)


def _check_delta_flags(args: argparse.Namespace) -> None:
    """``--delta``: only the flags that apply to it, the URI, and deltalake installed."""
    for flag in ("catalog", "schema_evolution"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} applies only with --table NS.TABLE, not with --delta")
    for flag in OUTPUT_ONLY:
        if getattr(args, flag) not in (None, False):
            hint = " (for a table, --mode append, overwrite or overwrite_partitions)" if flag == "if_exists" else ""
            raise UsageError(f"--{flag} applies only with --output, not with --delta{hint}")
    if args.format.strip().lower() != "parquet":
        raise UsageError(f"--format {args.format}: a Delta table (--delta) is written as Parquet only; drop --format")
    options = sorted(f"--{flag}" for flag in FORMAT_OPTIONS if getattr(args, flag) is not None)
    if options:
        raise UsageError(
            f"{', '.join(options)} do(es) not apply to --delta: CopyToDelta writes Parquet with its own settings"
        )
    try:
        parse_delta_uri(args.delta)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    import importlib.util

    if importlib.util.find_spec("deltalake") is None:
        raise UsageError("--delta needs deltalake, which is not installed: pip install 'beam_s3_sink[delta]'")


def _keeps_bad_rows(args: argparse.Namespace) -> bool:
    """Whether ``--max_bad_rows`` lets bad rows through: then the source hands on the rows that
    do not fit the schema for the copy to judge (:mod:`.source_rows`). A bad value is the
    transform's to refuse."""
    from beam_s3_sink.bad_rows import BadRowLimit

    try:
        return BadRowLimit.parse(args.max_bad_rows or 0).enabled
    except (TypeError, ValueError):
        return False


def _check_flags(args: argparse.Namespace) -> None:
    """What the flags say together, checked before the source is read."""
    if args.bad_rows is not None:
        if not args.max_bad_rows:
            raise UsageError("--bad_rows applies only with --max_bad_rows N|P%")
        if args.dry_run:
            raise UsageError("--bad_rows does not apply to --dry-run, which writes nothing (it lists the bad rows)")
    if args.keep_partition_columns and not args.partition_by:
        raise UsageError("--keep_partition_columns applies only with --partition_by COL[,COL...]")
    if args.row_group_bytes is not None:
        max_file_size = parse_size(args.max_file_size or DEFAULT_FILE_SIZE)  # a bad one: ValueError, a usage error
        if args.row_group_bytes > max_file_size:
            raise UsageError(
                f"--row_group_bytes {args.row_group_bytes:,} is more than --max_file_size {max_file_size:,} "
                "bytes: a file holds at least one row group"
            )


def _check_partition_columns(columns: Sequence[str], schema: pa.Schema, table: bool = False) -> None:
    """Every ``--partition_by`` column is one of the source's (CopyToS3 checks their types);
    for a table, the column of each transform (``day(ts)``: ``ts``)."""
    if table:
        from beam_s3_sink.table_layout import parse_partition_by

        try:
            columns = [e.column for e in parse_partition_by(columns)]
        except ValueError as exc:
            raise UsageError(f"--partition_by: {exc}") from None
    missing = [name for name in columns if name not in schema.names]
    if missing:
        which = f"column {missing[0]!r} is" if len(missing) == 1 else f"columns {', '.join(map(repr, missing))} are"
        raise UsageError(
            f"--partition_by {which} not in the source's schema; its columns are {', '.join(schema.names)}"
        )


def _format(args: argparse.Namespace) -> Any:
    """The format object: the format named by --format, with the options given."""
    fmt = resolve_format(args.format)
    given: Dict[str, Any] = {flag: getattr(args, flag) for flag in FORMAT_OPTIONS if getattr(args, flag) is not None}
    if "force_quote" in given:
        given["force_quote"] = (
            True
            if given["force_quote"] == "*"
            else tuple(c.strip() for c in given["force_quote"].split(",") if c.strip())
        )
    assert dataclasses.is_dataclass(fmt) and not isinstance(fmt, type)  # every format is one (formats/base.py)
    names = {f.name for f in dataclasses.fields(fmt)}
    foreign = sorted(f"--{flag}" for flag in given if FORMAT_OPTIONS[flag] not in names)
    if foreign:
        raise UsageError(f"{', '.join(foreign)} do(es) not apply to --format {args.format}")
    fields = {FORMAT_OPTIONS[flag]: value for flag, value in given.items()}
    return dataclasses.replace(fmt, **fields) if fields else fmt


def _check_beam_flags(beam_args: List[str]) -> None:
    """Beam silently drops flags it does not know: here a typo is an error instead."""
    parsers: List[argparse.ArgumentParser] = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)
    _, unknown = parsers[0].parse_known_args(beam_args)
    flags = [a for a in unknown if a.startswith("-")]
    if flags or unknown:
        known = [o for action in parsers[0]._actions for o in action.option_strings]
        known += [o for action in build_parser()._actions for o in action.option_strings]
        import difflib

        if not flags:
            raise UsageError(f"unexpected argument {unknown[0]!r}: every value follows its flag (see --help)")
        name = flags[0].split("=", 1)[0]
        if name in REMOVED_FLAGS:
            raise UsageError(REMOVED_FLAGS[name])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UsageError(f"unknown flag {name}{hint} (see --help)")


def run(plan: CopyPlan, out: Any = None) -> int:
    """Run the copy with a progress line, then print the summary (to ``out``, default the
    ``sys.stdout`` of the call); the exit status."""
    console = Console.standard(out)
    verb = "Checking (dry run, nothing is written)" if plan.dry_run else "Copying"
    where = plan.output
    if plan.table is not None:
        where = f"{plan.output} ({describe_catalog(plan.table.catalog)})"
    if (plan.table is not None or plan.delta is not None) and not plan.dry_run:
        where += f", mode {plan.mode},"
    console.say(
        plan.mask(
            f"{verb} {plan.source.describe()} to {where} as {plan.format_name}, "
            f"sink id {plan.transform.sink_id}, with {len(plan.schema)} columns:"
        ),
        format_schema(plan.schema),
    )
    started = time.monotonic()
    try:
        with ProgressLine(plan.progress_dir, total_rows=plan.total_rows, total_bytes=plan.total_bytes) as progress:
            progress.result = plan.pipeline.run()
            state = progress.result.wait_until_finish()
    except Exception as exc:  # the runner's wrapping of the worker's error: keep its message
        message = as_flags(one_line_error(exc))
        if plan.table is not None:
            message = for_table(message, plan.table.name)
        if plan.delta is not None:
            message = for_delta(message)
        console.error(plan.mask(f"the copy failed: {message}"))
        return 1
    if state != PipelineState.DONE:
        console.error(f"the pipeline ended in state {state}")
        return 1
    if plan.dry_run:
        return print_dry_run(plan, console)
    if plan.table is not None:
        return print_table_summary(plan, time.monotonic() - started, console)
    if plan.delta is not None:
        return print_delta_summary(plan, time.monotonic() - started, console)
    return print_summary(plan, time.monotonic() - started, console)


def print_dry_run(plan: CopyPlan, console: Console) -> int:
    """The dry run's report: rows checked, rows that would fail and the first ones; 0 if none."""
    import pickle

    with open(plan.result_path or "", "rb") as f:
        result = pickle.load(f)
    lines = [
        f"\nDry run (nothing written to {plan.output}): {result.rows:,} rows checked, "
        f"{result.invalid_rows:,} would fail",
        *(f"  {line}" for line in result.invalid),
    ]
    if result.invalid_rows > len(result.invalid):
        lines.append(f"  ... and {result.invalid_rows - len(result.invalid)} more")
    console.say(*lines)
    return 1 if result.invalid_rows else 0


def _workers_are_local(options: PipelineOptions) -> bool:
    runner = (options.view_as(StandardOptions).runner or "DirectRunner").lower()
    environment = (options.view_as(PortableOptions).environment_type or "").upper()
    return runner in ("directrunner", "direct", "fnapirunner", "prismrunner") or environment == "LOOPBACK"


def print_summary(plan: CopyPlan, elapsed: float, console: Console) -> int:
    """Read the copy's manifest and print the summary table; 0, or 1 if there is none."""
    import json

    manifest_uri = f"{plan.output}/_{plan.transform.sink_id}-manifest.json"
    bucket, _, key = manifest_uri[len("s3://") :].partition("/")
    # The pipeline's own client when it ran in this process (no second botocore model load).
    client, _ = shared_client(S3Config.from_pipeline_options(plan.pipeline.options))
    try:
        manifest = json.loads(read_object(client, bucket, key))
    except (S3RequestError, ValueError) as exc:
        console.error(f"the pipeline finished but its manifest {manifest_uri} cannot be read: {one_line_error(exc)}")
        return 1
    rows, files, size = manifest["rows"], manifest["files"], manifest["bytes"]
    rate = f" ({rows / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
    table = [
        ("rows", f"{rows:,}"),
        ("files", f"{files:,}"),
        ("bytes", f"{size:,} ({_human(size)})"),
        ("time", f"{elapsed:.1f} s{rate}"),
        ("manifest", manifest_uri),
    ]
    if plan.max_bad_rows:
        table.insert(1, ("bad rows", _bad_rows_text(plan, manifest.get("bad_rows", 0))))
    lines = ["\nCopy finished:", *(f"  {name:<9} {value}" for name, value in table)]
    lines += [
        f"    {entry['meta']['record_count']:>12,} rows {entry['meta']['content_length']:>14,} B  {entry['url']}"
        for entry in manifest["entries"][:10]
    ]
    if len(manifest["entries"]) > 10:
        lines.append(f"    ... and {len(manifest['entries']) - 10} more (see the manifest)")
    console.say(*lines)
    return 0


def print_table_summary(plan: CopyPlan, elapsed: float, console: Console) -> int:
    """Read the snapshot the copy committed (found by its sink id) and print the summary table;
    0, or 1 if the table has no snapshot of the copy."""
    assert plan.table is not None
    name, sink_id = plan.table.name, plan.transform.sink_id
    try:
        copy = plan.table.committed_copy(sink_id)
    except Exception as exc:  # the catalog or the table's files: say which, no secret
        console.error(plan.mask(f"the pipeline finished but table {name} cannot be read: {one_line_error(exc)}"))
        return 1
    if copy is None:
        console.error(f"the pipeline finished but table {name} has no snapshot of sink id {sink_id}")
        return 1
    rate = f" ({copy.rows / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
    how = copy.operation
    if plan.earlier is not None and plan.earlier.snapshot_id == copy.snapshot_id:
        how += f", committed by an earlier run of sink id {sink_id}: nothing new"
    elif not copy.current:
        how += ", no longer the table's current snapshot"
    table = [
        ("table", f"{name} ({describe_catalog(plan.table.catalog)})"),
        ("snapshot", f"{copy.snapshot_id} ({how})"),
        ("rows", f"{copy.rows:,}"),
        ("files", f"{copy.files:,}"),
        ("bytes", f"{copy.bytes:,} ({_human(copy.bytes)})"),
    ]
    if plan.max_bad_rows:
        table.append(("bad rows", _bad_rows_text(plan, copy.bad_rows)))
    if copy.removed_files or plan.mode != "append":
        table.append(("replaced", f"{copy.removed_rows:,} rows in {copy.removed_files:,} file(s)"))
    table += [("time", f"{elapsed:.1f} s{rate}"), ("metadata", copy.metadata_location)]
    console.say(*(plan.mask(line) for line in _finished_lines(table, copy.added)))
    return 0


def _finished_lines(table: Sequence[Tuple[str, str]], added: Sequence[Tuple[str, int, int]]) -> List[str]:
    """A table copy's summary: its (label, value) rows, then the first ten files it added."""
    lines = ["\nCopy finished:", *(f"  {label:<9} {value}" for label, value in table)]
    lines += [f"    {rows:>12,} rows {size:>14,} B  {uri}" for uri, rows, size in added[:10]]
    if len(added) > 10:
        lines.append(f"    ... and {len(added) - 10} more")
    return lines


def print_delta_summary(plan: CopyPlan, elapsed: float, console: Console) -> int:
    """Read the version the copy committed (found by its sink id) and print the summary table;
    0, or 1 if the table has no version of the copy."""
    assert plan.delta is not None
    uri, sink_id = plan.delta.uri, plan.transform.sink_id
    try:
        copy: Optional[DeltaVersion] = plan.delta.committed_copy(sink_id)
    except Exception as exc:  # the store, the log
        console.error(f"the pipeline finished but Delta table {uri} cannot be read: {one_line_error(exc)}")
        return 1
    if copy is None:
        console.error(f"the pipeline finished but Delta table {uri} has no version of sink id {sink_id}")
        return 1
    rate = f" ({copy.rows / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
    how = str(plan.mode) + (", created the table" if copy.version == 0 else "")
    if plan.earlier_version == copy.version:
        how = f"committed by an earlier run of sink id {sink_id}: nothing new"
    elif not copy.current:
        how += ", no longer the table's current version"
    table = [
        ("table", f"{uri} (Delta Lake)"),
        ("version", f"{copy.version} ({how})"),
        ("rows", f"{copy.rows:,}"),
        ("files", f"{copy.files:,}"),
        ("bytes", f"{copy.bytes:,} ({_human(copy.bytes)})"),
    ]
    if plan.max_bad_rows:
        table.append(("bad rows", _bad_rows_text(plan, copy.bad_rows)))
    if copy.removed_files or plan.mode != "append":
        rows = f"{copy.removed_rows:,} rows" if copy.removed_rows is not None else "rows"
        table.append(("replaced", f"{rows} in {copy.removed_files:,} file(s)"))
    table += [("time", f"{elapsed:.1f} s{rate}"), ("log", copy.log)]
    console.say(*_finished_lines(table, copy.added))
    return 0


def _bad_rows_text(plan: CopyPlan, count: int) -> str:
    """The summary's ``bad rows`` value: how many were left out, and where they went."""
    where = f" (written to {plan.bad_rows_uri})" if plan.bad_rows_uri else ""
    return f"{count:,} left out{where}"


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} TiB"


_KNOWN_ERRORS = re.compile(r"(?:CopyToS3Error|SourceError|RowError): (.+)")


def one_line_error(exc: BaseException) -> str:
    """The message a person can act on, out of a runner's wrapped, multi-line error."""
    text = str(exc)
    found = _KNOWN_ERRORS.findall(text)
    if found:
        line = found[-1]
    else:
        lines = [part.strip() for part in text.splitlines() if part.strip()]
        line = lines[-1] if lines else type(exc).__name__
    return re.sub(r"\s*\[while running '[^']*'\]", "", line).strip()


# CopyToS3's spelling of an option in its messages -> the command's flag
_FLAG_SPELLINGS = (
    (re.compile(r"^(num_batches|partition_by|max_file_size|if_exists|sink_id)\b"), r"--\1"),
    (re.compile(r"\bif_exists='append' or 'replace'"), "--if_exists append or replace"),
    (re.compile(r"\bif_exists='(\w+)'"), r"--if_exists \1"),
    (re.compile(r"\bkeep_partition_columns=True"), "--keep_partition_columns"),
    (re.compile(r"\bschema_evolution='(\w+)'"), r"--schema_evolution \1"),
)


def for_table(message: str, table: str) -> str:
    """A CopyToIceberg failure, which reads as CopyToS3's (with a placeholder ``s3://`` URI), as
    a failure of the copy into ``table``.

    >>> for_table("CopyToS3 to s3://iceberg-table/a/b (sink_id 'n') failed: table a.b: refused", "a.b")
    'the copy into table a.b (sink id n) failed: table a.b: refused'
    """
    return re.sub(
        r"^CopyToS3 to \S+ \(sink_id '([^']*)'\) failed: ",
        lambda m: f"the copy into table {table} (sink id {m[1]}) failed: ",
        message,
    )


def for_delta(message: str) -> str:
    """A CopyToDelta failure as a failure of the copy into the table.

    >>> for_delta("CopyToDelta to s3://lake/t (sink_id 'n') failed: the pipeline stopped")
    'the copy into Delta table s3://lake/t (sink id n) failed: the pipeline stopped'
    """
    return re.sub(
        r"^CopyTo(?:Delta|S3) to (\S+) \(sink_id '([^']*)'\) failed: ",
        lambda m: f"the copy into Delta table {m[1]} (sink id {m[2]}) failed: ",
        message,
    )


def as_flags(message: str) -> str:
    """A CopyToS3 message with its option names written as the command's flags.

    >>> as_flags("num_batches must be an int from 1 to 10000, got 0")
    '--num_batches must be an int from 1 to 10000, got 0'
    >>> as_flags("s3://b/p is not empty: ...; or pass if_exists='append' or 'replace'. Nothing was written.")
    's3://b/p is not empty: ...; or pass --if_exists append or replace. Nothing was written.'
    """
    for pattern, flag in _FLAG_SPELLINGS:
        message = pattern.sub(flag, message)
    return message


def abort_main(argv: Sequence[str], out: Any = None) -> int:
    """``--abort SINK_ID --output s3://... [--force]``: remove what an incomplete copy left
    (:func:`beam_s3_sink.abort_copy`) and print it; with ``--table NS.TABLE --catalog ...``
    instead, what an uncommitted table copy left (:func:`beam_s3_sink.abort_table_copy`); with
    ``--delta s3://...``, what an uncommitted Delta copy left (:func:`beam_s3_sink.abort_delta_copy`).
    0 done, 2 refused or bad flags, 1 S3 failed."""
    console = Console.standard(out)
    from beam_s3_sink import CommittedCopyError, abort_copy

    parser = _Parser(
        prog=f"{PROG} --abort",
        description="Remove what an incomplete copy left: its data "
        "files, pending multipart uploads, sentinel and claim; nothing else.",
    )
    parser.add_argument("--abort", required=True, metavar="SINK_ID", help="the copy to remove")
    parser.add_argument("--output", metavar="s3://BUCKET/PATH", help="where the copy was going")
    parser.add_argument("--table", metavar="NS.TABLE", help="the Iceberg table the copy was going to")
    parser.add_argument("--catalog", metavar="JSON|@FILE|NAME", help="with --table: the table's catalog")
    parser.add_argument("--delta", metavar="s3://BUCKET/PATH", help="the Delta Lake table the copy was going to")
    parser.add_argument("--force", action="store_true", help="also remove a copy that finished (its data!)")
    secrets = Secrets()
    try:
        args, beam_args = parser.parse_known_args(list(argv))
        _check_beam_flags(beam_args)
        config = S3Config.from_pipeline_options(PipelineOptions(beam_args))
        if [args.output, args.table, args.delta].count(None) != 2:
            raise UsageError(
                "give exactly one of --output s3://BUCKET/PATH, --table NS.TABLE and --delta s3://BUCKET/PATH"
            )
        if args.delta is not None:
            if args.catalog is not None or args.force:
                raise UsageError(
                    "--catalog applies only with --table NS.TABLE"
                    if args.catalog is not None
                    else "--force applies only with --output: a Delta copy that committed is the table's "
                    "(delete its rows with the table's engine)"
                )
            from beam_s3_sink.cli import delta as delta_cli

            report = delta_cli.abort(parse_delta_uri(args.delta), args.abort, config)
        elif args.table is None:
            if args.catalog is not None:
                raise UsageError("--catalog applies only with --table NS.TABLE")
            report = abort_copy(args.output, args.abort, s3=config, force=args.force)
        else:
            if args.force:
                raise UsageError(
                    "--force applies only with --output: a table copy that committed is the table's "
                    "(delete its rows with the table's engine)"
                )
            if args.catalog is None:
                raise UsageError(
                    "--table needs --catalog: a JSON object of pyiceberg catalog properties, @FILE.json, or a name"
                )
            from beam_s3_sink.cli import table as table_cli

            catalog = parse_catalog(args.catalog)
            secrets = Secrets.of(catalog)
            secrets.install()
            given = s3_flags_given(config)
            target = TableTarget(
                parse_table(args.table), catalog_with_s3_flags(catalog, config) if given else catalog, secrets
            )
            report = table_cli.abort(target, args.abort, config if given else target.named_s3())
    except (UsageError, ValueError, CommittedCopyError) as exc:
        console.error(secrets.mask(f"error: {str(exc).replace('CopyToS3: ', '', 1)}"))
        return 2
    except S3RequestError as exc:
        console.error(secrets.mask(f"the clean-up failed: {exc}"))
        return 1
    except Exception as exc:  # the catalog's or pyiceberg's own, with --table: one line, no secret
        console.error(secrets.mask(f"the clean-up failed: {type(exc).__name__}: {one_line_error(exc)}"))
        return 1
    console.say(secrets.mask(report.describe()))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", force=True)
    if any(a == "--abort" or a.startswith("--abort=") for a in argv):
        return abort_main(argv)
    # Beam logs a failed worker's traceback; the CLI prints the one line that matters instead.
    logging.getLogger().setLevel(logging.INFO if "--verbose" in argv else logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="beam-s3-copy-") as progress_dir:
        try:
            plan = plan_copy(argv, progress_dir)
        except UsageError as exc:
            Console.standard().error(f"error: {exc}")
            return 2
        return run(plan)

"""``CopyToS3``: the composite transform that wires the three steps together.

It writes Parquet, PostgreSQL ``COPY`` CSV or text, or JSON Lines files (the format objects of
:mod:`.formats`); the steps below are the same for every format.

::

    p ─▶ Initialize (Start: Create([None]) ─▶ Run: _InitializeFn) ───InitOutcome──────────────────────┐
           errors ─AsList─┘                      │ AsSingleton                                       │ AsSingleton
                                                 ▼                                                   ▼
    rows ─▶ Upload ┬ DirectRunner: Gather ─▶ Write (per bundle) ────UploadReport*─▶ Complete (Merge ─▶ Run) ─▶ CopyToResult
                   ├ other runners: Spill ─(key, Arrow blob)─▶ Group ─▶ Write ──┘ (one report per spill key)
                   │                (fused upstream, no side input)   (AsSingleton init)
                   └ num_batches: AssignShards ─▶ Group ─▶ Write ──┘ (one report per shard)

The three steps are composites named after them, so a runner's graph shows ``Initialize``,
``Upload`` and ``Complete``; a "shard" is one of the ``num_batches`` groups of rows (its files
are ``P/ID-batch-<bbbb>-<nnnn>``).

Which upload path a copy takes is decided when the pipeline is built, by the runner
(:func:`shuffles_spills`): Beam's Python DirectRunner runs whole-input bundles, fuses a
side-input consumer with its producer and keeps ``GroupByKey`` data in memory, so there each
bundle writes its own (few, large) files; the portable runners (Flink, Spark, Prism,
Dataflow) cut small bundles and their fusers never fuse a side-input consumer with what
feeds it, so there the rows become Arrow blobs in a step with no side input, and files span
bundles (:mod:`.spill`).

Everything that can be checked without S3 is checked here, when the pipeline is built: the
URI, the format and its options against the schema, the sizes. Nothing here touches the
network: clients are made on the workers.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import AsList, AsSingleton, PCollection
from apache_beam.transforms.display import DisplayDataItem

from .arrow_upload import _ArrowAssignShardFn, _ArrowUploadFn, takes_batches
from .completion import MergeReports, _CompleteFn
from .config import S3Config, resolve_config
from .formats import Format, resolve_format
from .if_exists import check_if_exists
from .initialization import _InitializeFn
from .keys import MAX_BATCHES, CopyKeys, new_sink_id, parse_s3_uri, validate_sink_id
from .layout import DEFAULT_MAX_OPEN_FILES, Layout
from .messages import Gathered
from .schema import resolve_schema
from .sharding import _AssignShardFn, _ShardUploadFn
from .spill import _ArrowSpillFn, _SpillFn, _WriteSpilledFn
from .upload import _GatherFn, _UploadFn
from .validate import MergeValidation, _ReportValidationFn, _ValidateFn

__all__ = ["CopyToS3", "parse_size"]

DEFAULT_MAX_FILE_SIZE = 256 * 2**20
MIN_FILE_SIZE = 1024
MAX_PARTS = 10_000
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_size(size: Union[int, str]) -> int:
    """Bytes from an int or a string such as ``"256MB"`` (10**6) or ``"64MiB"`` (2**20).

    >>> parse_size("1MiB"), parse_size("2 MB"), parse_size(4096)
    (1048576, 2000000, 4096)
    """
    if isinstance(size, bool):
        raise ValueError(f"CopyToS3: max_file_size must be a number of bytes, got {size!r}")
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(size))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(
            f"CopyToS3: max_file_size {size!r} is not a size; write bytes as an int or a string "
            "such as '256MB' or '64MiB'"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def shuffles_spills(pipeline: beam.Pipeline) -> bool:
    """Whether the upload step spills rows as Arrow blobs through a ``GroupByKey``
    (:mod:`.spill`): on every runner but Beam's Python DirectRunner (in-process or
    multi-process), which fuses side-input consumers, keeps ``GroupByKey`` data in memory and
    runs whole-input bundles, so that its per-bundle :class:`_UploadFn` writes few files
    directly."""
    from apache_beam.runners.direct.direct_runner import DirectRunner, SwitchingDirectRunner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return not isinstance(pipeline.runner, (DirectRunner, SwitchingDirectRunner, FnApiRunner))


class CopyToS3(beam.PTransform):
    """Copy a bounded PCollection to S3 as Parquet or CSV; output exactly one CopyToResult.

    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    >>> with beam.Pipeline() as p:
    ...     result = (p | beam.Create([{"id": 1, "name": "a"}, {"id": "x", "name": "b"}])
    ...                 | CopyToS3("s3://bucket/exports/orders", format="csv", schema=schema,
    ...                            validate_only=True))  # a dry run; without it, the copy
    ...     _ = result | beam.Map(lambda r: print(r.rows, r.invalid_rows))
    2 1

    Args:
      uri: ``s3://bucket[/path]``; the path must be empty but for objects of this sink id.
      format: ``"parquet"``, ``"csv"``, or a format object such as ``CsvFormat(header=True)``.
      schema: a ``pyarrow.Schema``; optional when the PCollection has a Beam schema.
        Elements may be rows or ``pyarrow.Table``/``RecordBatch`` batches, mixed; batches
        are conformed to the schema (columns by name, lossless casts; see
        :mod:`beam_s3_sink.arrow_input`).
      max_file_size: bytes per data file (an int, or a string such as ``"256MB"``).
      sink_id: names every object of this copy; reruns with the same id are idempotent.
        Default: a fresh id made when the pipeline is built.
      s3: an :class:`S3Config`; default: the pipeline's S3Options, else boto3's chain.
      errors: a PCollection of upstream errors; any element aborts the copy before it writes.
      fail_on_error: raise :class:`CopyToS3Error` (failing the pipeline) on error; False
        reports the error in the result instead.
      if_exists: what to do with objects under the path that this copy did not write:
        ``"error"`` (default), ``"append"`` (leave them), or ``"replace"`` (delete them once
        the new copy has committed).
      num_batches: spread rows over this many batches by a stable hash of each row, through
        a ``GroupByKey``; each batch is written by one worker as ``P/ID-batch-<bbbb>-<nnnn>``,
        so a rerun of the same data writes the same keys. Default None: no shuffle, files
        per bundle.
      partition_by: column names; write Hive-style ``P/col=value/...`` directories.
      keep_partition_columns: also keep the partition columns in the files (default: left
        out, their values are in the path).
      max_open_files: at most this many partition files open at once per worker; when more
        are needed the largest is finished first.
      encode_threads: without ``partition_by``, a worker encodes its Arrow input past 64 MiB
        into this many files at once, each on its own thread (default 1; more uses idle cores
        of a single process, for about 45 MiB more memory per thread).
      validate_only: a dry run: check every row against the schema and the format, write
        nothing (no S3 request), and report the rows that would fail (:mod:`.validate`).
    """

    def __init__(
        self,
        uri: str,
        format: Union[str, Format] = "parquet",
        schema: Optional[pa.Schema] = None,
        max_file_size: Union[int, str] = DEFAULT_MAX_FILE_SIZE,
        sink_id: Optional[str] = None,
        s3: Optional[S3Config] = None,
        errors: Optional[PCollection] = None,
        fail_on_error: bool = True,
        if_exists: str = "error",
        num_batches: Optional[int] = None,
        partition_by: Sequence[str] = (),
        keep_partition_columns: bool = False,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        label: Optional[str] = None,
        validate_only: bool = False,
        encode_threads: int = 1,
    ) -> None:
        super().__init__(label)
        self._location = parse_s3_uri(uri)
        self._format = resolve_format(format)
        self._schema = schema
        self._max_file_size = parse_size(max_file_size)
        if self._max_file_size < MIN_FILE_SIZE:
            raise ValueError(
                f"CopyToS3: max_file_size must be at least {MIN_FILE_SIZE} bytes, got {self._max_file_size}"
            )
        self._sink_id = validate_sink_id(sink_id) if sink_id is not None else new_sink_id()
        if s3 is not None and not isinstance(s3, S3Config):
            raise TypeError(f"CopyToS3: s3 must be an S3Config, got {type(s3).__name__}")
        self._s3 = s3
        self._errors = errors
        self._fail_on_error = bool(fail_on_error)
        self._if_exists = check_if_exists(if_exists)
        if num_batches is not None and (
            isinstance(num_batches, bool) or not isinstance(num_batches, int) or not 1 <= num_batches <= MAX_BATCHES
        ):
            raise ValueError(f"CopyToS3: num_batches must be an int from 1 to {MAX_BATCHES}, got {num_batches!r}")
        self._num_batches = num_batches
        columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
        self._layout = Layout(columns, bool(keep_partition_columns), max_open_files, encode_threads)
        self._validate_only = bool(validate_only)
        self._resolved: Optional[Any] = None  # (schema, S3Config) once expanded, for display_data

    @property
    def sink_id(self) -> str:
        """The id that names every object this copy writes."""
        return self._sink_id

    def expand(self, rows: PCollection) -> PCollection:
        schema = resolve_schema(self._schema, rows.element_type)
        self._format.check_schema(schema)
        self._layout.check(schema)
        config = resolve_config(self._s3, rows.pipeline.options)
        if self._max_file_size > config.part_size * MAX_PARTS:
            raise ValueError(
                f"CopyToS3: max_file_size {self._max_file_size} needs more than {MAX_PARTS} parts of "
                f"{config.part_size} bytes; raise S3Config.part_size"
            )
        self._resolved = (schema, config)
        keys = CopyKeys(self._location, self._sink_id)
        if self._validate_only:  # dry run: no S3 request at all (see .validate)
            return (
                rows
                | "Validate" >> beam.ParDo(_ValidateFn(self._format, schema, self._layout))
                | "MergeChecks" >> beam.CombineGlobally(MergeValidation())
                | "Report" >> beam.ParDo(_ReportValidationFn(keys))
            )
        pipeline = rows.pipeline
        init = pipeline | "Initialize" >> _Initialize(keys, config, self._if_exists, self._errors)
        writers = (keys, config, self._format, schema, self._max_file_size, self._layout)
        reports = rows | "Upload" >> _Upload(writers, schema, self._num_batches, init)
        return reports | "Complete" >> _Complete(keys, config, self._format, schema, self._fail_on_error, init)

    def default_label(self) -> str:
        return f"CopyToS3({self._location.uri})"

    def display_data(self) -> Dict[str, Any]:
        """The copy's options, as a runner's UI shows them (Dataflow's step panel, Flink's
        plan): where, the format and its options, the sizes and layout, the S3 endpoint and
        region. Never a credential: of the S3 settings only the endpoint (without any user
        info in its URL) and the region are shown.

        >>> copy = CopyToS3("s3://bucket/exports", format="csv", sink_id="nightly", num_batches=4)
        >>> from apache_beam.transforms.display import DisplayData
        >>> items = {i.key: i.value for i in DisplayData.create_from(copy).items}
        >>> items["uri"], items["format"], items["sink_id"], items["num_batches"]
        ('s3://bucket/exports', 'csv', 'nightly', 4)
        """
        schema, config = self._resolved if self._resolved is not None else (self._schema, self._s3)
        options = self._format.describe()["options"]
        return {
            "uri": DisplayDataItem(self._location.uri, label="Destination"),
            "format": DisplayDataItem(self._format.name, label="Format"),
            "format_options": DisplayDataItem(
                ", ".join(f"{k}={v!r}" for k, v in options.items()) or None, label="Format options"
            ).drop_if_none(),
            "schema": DisplayDataItem(None if schema is None else _schema_text(schema), label="Schema").drop_if_none(),
            "max_file_size": DisplayDataItem(self._max_file_size, label="Maximum file size (bytes)"),
            "sink_id": DisplayDataItem(self._sink_id, label="Sink id"),
            "if_exists": DisplayDataItem(self._if_exists, label="If objects exist"),
            "fail_on_error": DisplayDataItem(self._fail_on_error, label="Fail the pipeline on error"),
            "num_batches": DisplayDataItem(self._num_batches, label="Shards (num_batches)").drop_if_none(),
            "partition_by": DisplayDataItem(
                ", ".join(self._layout.partition_by) or None, label="Partition columns"
            ).drop_if_none(),
            "validate_only": DisplayDataItem(self._validate_only, label="Dry run").drop_if_default(False),
            "encode_threads": DisplayDataItem(self._layout.encode_threads, label="Encode threads").drop_if_default(1),
            "s3_endpoint": DisplayDataItem(
                None if config is None else _without_user_info(config.endpoint_url), label="S3 endpoint"
            ).drop_if_none(),
            "s3_region": DisplayDataItem(
                None if config is None else config.region_name, label="S3 region"
            ).drop_if_none(),
        }


def _schema_text(schema: pa.Schema) -> str:
    """``id: int64, name: string`` (one line; pyarrow's own text spans lines and metadata)."""
    return ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema)


def _without_user_info(url: Optional[str]) -> Optional[str]:
    """An endpoint URL without ``user:password@`` (a secret some write there).

    >>> _without_user_info("http://key:secret@minio:9000/"), _without_user_info(None)
    ('http://minio:9000/', None)
    """
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


class _Initialize(beam.PTransform):
    """Step 1 (:mod:`.initialization`): one :class:`~beam_s3_sink.messages.InitOutcome`, read by the
    other two steps as a singleton side input."""

    def __init__(self, keys: CopyKeys, config: S3Config, if_exists: str, errors: Optional[PCollection]) -> None:
        super().__init__()
        self._keys, self._config, self._if_exists, self._errors = keys, config, if_exists, errors

    def expand(self, pipeline: Any) -> PCollection:
        errors = self._errors if self._errors is not None else (pipeline | "NoUpstreamErrors" >> beam.Create([]))
        return (
            pipeline
            | "Start" >> beam.Create([None])
            | "Run" >> beam.ParDo(_InitializeFn(self._keys, self._config, self._if_exists), AsList(errors))
        )


class _Upload(beam.PTransform):
    """Step 2 (:mod:`.upload`, :mod:`.spill`, :mod:`.sharding`): rows in, one
    :class:`~beam_s3_sink.messages.UploadReport` per bundle, spill key or shard out."""

    def __init__(
        self, writers: Tuple[Any, ...], schema: pa.Schema, num_batches: Optional[int], init: PCollection
    ) -> None:
        """``writers``: the upload DoFns' arguments (keys, S3 config, format, schema, maximum file
        size, layout), given to whichever upload DoFn the runner and the options call for."""
        super().__init__()
        self._writers, self._schema, self._num_shards, self._init = writers, schema, num_batches, init

    def expand(self, rows: PCollection) -> PCollection:
        batched = takes_batches(rows.element_type)  # a batched DoFn's pa.Table batches as they are
        args = self._writers
        init = AsSingleton(self._init)
        if self._num_shards is None and not shuffles_spills(rows.pipeline):
            if batched:
                return rows | "Write" >> beam.ParDo(_ArrowUploadFn(*args), init)
            gathered = rows | "Gather" >> beam.ParDo(_GatherFn()).with_output_types(Gathered)  # GatheredCoder
            return gathered | "Write" >> beam.ParDo(_UploadFn(*args), init)
        if self._num_shards is None:
            return (
                rows
                | "Spill" >> beam.ParDo((_ArrowSpillFn if batched else _SpillFn)(self._schema))
                | "Group" >> beam.GroupByKey()
                | "Write" >> beam.ParDo(_WriteSpilledFn(*args), init)
            )
        return (
            rows
            | "AssignShards"
            >> beam.ParDo((_ArrowAssignShardFn if batched else _AssignShardFn)(self._schema, self._num_shards))
            | "Group" >> beam.GroupByKey()
            | "Write" >> beam.ParDo(_ShardUploadFn(*args), init)
        )


class _Complete(beam.PTransform):
    """Step 3 (:mod:`.completion`): the reports merged into one, then committed (or abandoned)
    into the one :class:`~beam_s3_sink.results.CopyToResult`."""

    def __init__(
        self, keys: CopyKeys, config: S3Config, fmt: Format, schema: pa.Schema, fail_on_error: bool, init: PCollection
    ) -> None:
        super().__init__()
        self._keys, self._config, self._format, self._schema = keys, config, fmt, schema
        self._fail_on_error, self._init = fail_on_error, init

    def expand(self, reports: PCollection) -> PCollection:
        return (
            reports
            | "Merge" >> beam.CombineGlobally(MergeReports())
            | "Run"
            >> beam.ParDo(
                _CompleteFn(self._keys, self._config, self._format, self._schema, self._fail_on_error),
                AsSingleton(self._init),
            )
        )

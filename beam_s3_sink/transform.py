"""``CopyToS3``: the composite transform that wires the three steps of a copy together.

The package's architecture, in one picture (each box names the module that owns it)::

    p ─▶ Initialize: Create([None]) ─▶ _InitializeFn ─InitOutcome─┬──────────────────────────────┐
          errors ─AsList─┘   (initialization.py, claim.py)      │ AsSingleton                  │ AsSingleton
                                                                 ▼                              ▼
    rows ─▶ InGlobalWindow ─▶ Upload: Batch ──(key, Arrow blob)──▶ [GroupByKey] ─▶ Write ──UploadReport*──▶ Complete: Merge ─▶ Run ─▶ CopyToResult
                                      (batches.py: rows and Arrow   per_bundle: none   (upload.py,        (completion.py: complete the
                                       elements become batches)     grouped: by writer   writer.py,        uploads, manifest, sentinel)
                                                                    group or batch no.  formats/, s3.py)

    max_bad_rows (bad_rows.py): a bad row is found where it is bad, by bisection (Batch: a row or an Arrow
    value that does not fit; Write: a value the format cannot encode), and travels with the data
          Batch ──(key, dead-letter blob)──▶ Write ──UploadReport.dead_letters──▶ Complete: the limit, on the
          copy's (a unit's) total ─▶ once committed: BadRow* (tagged "bad_rows") ─▶ .with_bad_rows().bad_rows

    inside Write, per open file:  batches ─▶ encode thread ─▶ format encoder ─▶ MultipartStream ─▶ S3 parts
                                  (≤ ENCODE_AHEAD queued)     (one row group,   (part_size buffers, ≤ max_concurrency
                                                               or lines)          in flight; never completed here)

    a stream (stream.py): no side input anywhere, so that Flink can checkpoint it (stream_init.py)
    p ─▶ Initialize (once, at the start) ─InitOutcome───────────────────────────────────────────────┐
    rows in their windows (or EveryInterval: triggering_frequency) ─▶ Batch per window              │ Flatten +
          ─▶ GroupByKey (the trigger fires panes) ─▶ Write ─▶ Complete per firing: one unit ─▶ CopyToResult per unit
                                                    │         │                        └─▶ Finish ◀─┘ GroupByKey,
                                   each initializes itself, once per DoFn instance           once the stream has ended
                                   (idempotent; removes nothing): the checks, claim, sentinel, a table's settings

    three targets, one upload path: each brings its initialization, its partitioning and its commit
      CopyToS3       _InitializeFn (initialization.py)  Layout (layout.py)            _CompleteFn: manifest, sentinel
      CopyToIceberg  _TableInitFn (iceberg.py)          TableLayout (table_layout.py) one snapshot (iceberg_commit.py)
      CopyToDelta    _DeltaInitFn (delta.py)            DeltaLayout (delta_commit.py) one version (delta_commit.py)
    (the two tables' copies are one _TableCopy, table_copy.py: their shared options, and these steps wired)

Initialization checks the path and writes the sentinel once; every writer uploads its files
without completing them and reports them; completion completes what the reports name, aborts
every other upload of the copy, writes the manifest and removes the sentinel (a stream: per
unit, its manifest; the sentinel goes when the stream ends, and a stream's ``Write`` and
``Complete`` run its initialization themselves instead of reading it). So a failed or
retried bundle's files never become visible, and a copy is all or nothing. Which upload graph
runs is decided in one place, :func:`upload_graph`. Everything that can be checked without S3
(the URI, the format and its options against the schema, the sizes, the windowing) is
checked here, when the pipeline is built; nothing here touches the network.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Union
from urllib.parse import urlsplit, urlunsplit

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import AsList, AsSingleton, PCollection
from apache_beam.transforms.display import DisplayDataItem
from apache_beam.transforms.window import GlobalWindows

from .bad_rows import BAD_ROWS_TAG, NO_BAD_ROWS, BadRow, BadRowLimit, CopyOutputs
from .batches import Batches, _ArrowBatchFn, _BatchFn, _StreamBatchFn, takes_batches
from .completion import MergeReports, _CompleteFn
from .config import S3Config, resolve_config
from .errors import CopyToS3Error
from .formats import Format, resolve_format
from .if_exists import check_if_exists
from .initialization import _InitializeFn
from .keys import MAX_BATCHES, CopyKeys, new_sink_id, parse_s3_uri, validate_sink_id
from .layout import Layout
from .schema import resolve_schema
from .stream import _FinishStream, _FinishStreamFn, stream_windowing
from .stream_init import InitializedInStep, _InitializeStreamFn
from .upload import _WriteFn
from .validate import validate_rows
from .writer import DEFAULT_MAX_OPEN_FILES, WriteSettings

__all__ = ["CopyToS3", "parse_size", "upload_graph", "UPLOAD_GRAPHS"]

DEFAULT_MAX_FILE_SIZE = 256 * 2**20
MIN_FILE_SIZE = 1024
MAX_PARTS = 10_000
UPLOAD_GRAPHS = ("auto", "per_bundle", "grouped")
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


def parse_size(size: Union[int, str], option: str = "max_file_size") -> int:
    """Bytes from an int or a string such as ``"256MB"`` (10**6) or ``"64MiB"`` (2**20).

    >>> parse_size("1MiB"), parse_size("2 MB"), parse_size(4096)
    (1048576, 2000000, 4096)
    """
    if isinstance(size, bool):
        raise ValueError(f"CopyToS3: {option} must be a number of bytes, got {size!r}")
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(size))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(
            f"CopyToS3: {option} {size!r} is not a size; write bytes as an int or a string such as '256MB' or '64MiB'"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def upload_graph(pipeline: beam.Pipeline, requested: str = "auto", num_batches: Optional[int] = None) -> str:
    """The upload graph a copy takes: ``"per_bundle"`` or ``"grouped"`` (see the module diagram).

    The rule: ``num_batches`` is always ``"grouped"`` (by batch number). Otherwise ``"per_bundle"``
    (``Write`` fused with ``Batch``, one writer per bundle) where Beam's Python DirectRunner
    runs the pipeline (in-process or multi-process, also when its default
    ``SwitchingDirectRunner`` hands a pipeline to Prism): it runs whole-input bundles, fuses
    side-input consumers and keeps ``GroupByKey`` data in memory, so a shuffle would hold the
    whole copy. ``"grouped"`` on every other runner (Flink, Spark, Prism, Dataflow): they cut
    small bundles, which would each make a small file, and their fusers never fuse a
    side-input consumer with its producer; so rows become Arrow blobs in ``Batch`` (fused
    upstream, no side input) and a ``GroupByKey`` gathers them into files spanning bundles.
    ``requested`` (``CopyToS3(upload_graph=...)``) other than ``"auto"`` overrides the rule.

    >>> upload_graph(beam.Pipeline()), upload_graph(beam.Pipeline(), "grouped"), upload_graph(beam.Pipeline(), num_batches=4)
    ('per_bundle', 'grouped', 'grouped')
    """
    from apache_beam.runners.direct.direct_runner import DirectRunner, SwitchingDirectRunner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    if num_batches is not None:
        return "grouped"
    if requested != "auto":
        return requested
    in_process = isinstance(pipeline.runner, (DirectRunner, SwitchingDirectRunner, FnApiRunner))
    return "per_bundle" if in_process else "grouped"


def check_upload_graph(requested: str) -> str:
    """``requested`` if it names an upload graph, else ``ValueError``."""
    if requested not in UPLOAD_GRAPHS:
        raise ValueError(f"upload_graph must be one of {list(UPLOAD_GRAPHS)}, got {requested!r}")
    return requested


class CopyToS3(beam.PTransform):
    """Copy a PCollection to S3 as Parquet, CSV, text or JSON Lines; output exactly one
    :class:`~beam_s3_sink.CopyToResult` (a stream: one per committed unit, see below).

    >>> schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    >>> with beam.Pipeline() as p:
    ...     result = (p | beam.Create([{"id": 1, "name": "a"}, {"id": "x", "name": "b"}])
    ...                 | CopyToS3("s3://bucket/exports/orders", format="csv", schema=schema,
    ...                            validate_only=True))  # a dry run; without it, the copy
    ...     _ = result | beam.Map(lambda r: print(r.rows, r.invalid_rows))
    2 1

    Args:
      uri: ``s3://bucket[/path]``; the path must be empty but for objects of this sink id.
      format: ``"parquet"``, ``"csv"``, ``"text"``, ``"jsonl"``, or a format object such as
        ``CsvFormat(header=True)``.
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
        so a rerun of the same data writes the same keys. Default None: no such spread.
      partition_by: column names; write Hive-style ``P/col=value/...`` directories.
      keep_partition_columns: also keep the partition columns in the files (default: left
        out, their values are in the path).
      max_open_files: at most this many partition files open at once per writer; when more
        are needed the largest is finished first.
      validate_only: a dry run: check every row against the schema and the format, write
        nothing (no S3 request), and report the rows that would fail (:mod:`.validate`).
      upload_graph: ``"auto"`` (default: :func:`upload_graph` decides by the runner),
        ``"per_bundle"`` or ``"grouped"``.
      triggering_frequency: seconds; for an unbounded PCollection in the global window,
        commit it in event-time intervals of this length (``FixedWindows``), one unit each.
      max_bad_rows: how many bad rows (a row that does not fit the schema, a value the format
        cannot encode) the copy leaves out instead of failing: a count, or a percentage of
        the rows such as ``"0.1%"``; a stream's limit holds per unit. Default 0: the first bad
        row fails the copy. The rows left out are counted (``CopyToResult.bad_rows``, the
        manifest) and, with :meth:`with_bad_rows`, output as dead letters (:mod:`.bad_rows`).

    An unbounded PCollection (a stream) is committed unit by unit (:mod:`.stream`): each pane
    its windows' trigger fires, or each ``triggering_frequency`` interval in the global window,
    is all or nothing and committed once, with its own manifest ``P/_ID-<unit>.manifest.json``;
    the output holds one result per unit, naming its window and pane (``result.unit``).
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
        upload_graph: str = "auto",
        triggering_frequency: Optional[float] = None,
        max_bad_rows: Union[int, str] = 0,
    ) -> None:
        super().__init__(label)
        self._bad_rows = BadRowLimit.parse(max_bad_rows)
        self._with_bad_rows = False
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
        self._layout = Layout(columns, bool(keep_partition_columns))
        if isinstance(max_open_files, bool) or not isinstance(max_open_files, int) or max_open_files < 1:
            raise ValueError(f"CopyToS3: max_open_files must be a positive int, got {max_open_files!r}")
        self._max_open_files = max_open_files
        self._validate_only = bool(validate_only)
        self._upload_graph = check_upload_graph(upload_graph)
        self._triggering_frequency = triggering_frequency
        self._settings: Optional[WriteSettings] = None  # once expanded, for display_data

    @property
    def sink_id(self) -> str:
        """The id that names every object this copy writes."""
        return self._sink_id

    def with_bad_rows(self) -> "CopyToS3":
        r"""This copy, whose output is a :class:`~.bad_rows.CopyOutputs`: ``.results`` (the
        ``CopyToResult``\ s) and ``.bad_rows`` (the dead letters, :class:`~.bad_rows.BadRow`,
        a PCollection with a Beam schema), as Beam's ``with_exception_handling`` does.

        >>> copy = CopyToS3("s3://bucket/orders", schema=pa.schema([("id", pa.int64())]), max_bad_rows=50)
        >>> copy.with_bad_rows() is not copy
        True
        """
        return with_bad_rows(self)

    def expand(self, rows: PCollection) -> PCollection:
        stream = not rows.is_bounded
        if stream:
            refuse_for_streams(
                "CopyToS3",
                num_batches=self._num_batches is not None,
                if_exists=self._if_exists == "replace",
                errors=self._errors is not None,
                validate_only=self._validate_only,
                upload_graph=self._upload_graph == "per_bundle",
            )
        rows = stream_windowing(rows, self._triggering_frequency, "CopyToS3") if stream else _one_window(rows, "input")
        schema = resolve_schema(self._schema, rows.element_type)
        self._format.check_schema(schema)
        self._layout.check(schema)
        config = resolve_config(self._s3, rows.pipeline.options)
        if self._max_file_size > config.part_size * MAX_PARTS:
            raise ValueError(
                f"CopyToS3: max_file_size {self._max_file_size} needs more than {MAX_PARTS} parts of "
                f"{config.part_size} bytes; raise S3Config.part_size"
            )
        keys = CopyKeys(self._location, self._sink_id)
        settings = self._settings = WriteSettings(
            keys,
            config,
            self._format,
            schema,
            self._max_file_size,
            self._layout,
            self._max_open_files,
            bad_rows=self._bad_rows,
        )
        if self._validate_only:  # dry run: no S3 request at all (see .validate)
            return bad_rows_outputs(
                CopyOutputs(rows | "Validate" >> validate_rows(settings), None), self._with_bad_rows
            )
        init_fn = _InitializeFn(keys, config, self._if_exists, stream)
        init = rows.pipeline | "Initialize" >> _Initialize(init_fn, self._errors, stream)
        in_step = InitializedInStep(init_fn) if stream else None  # a stream's steps read no side input
        graph = "grouped" if stream else upload_graph(rows.pipeline, self._upload_graph, self._num_batches)
        reports = rows | "Upload" >> _Upload(settings, graph, self._num_batches, init, in_step)
        complete_fn = _CompleteFn(settings, self._fail_on_error, stream, in_step)
        outputs = reports | "Complete" >> _Complete(complete_fn, init, stream, self._bad_rows)
        if stream:
            _ = outputs.results | "Finish" >> _FinishStream(_FinishStreamFn(settings), init)
        return bad_rows_outputs(outputs, self._with_bad_rows)

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
        settings = self._settings
        schema = settings.schema if settings is not None else self._schema
        config = settings.config if settings is not None else self._s3
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
            "num_batches": DisplayDataItem(self._num_batches, label="Batches (num_batches)").drop_if_none(),
            "partition_by": DisplayDataItem(
                ", ".join(self._layout.partition_by) or None, label="Partition columns"
            ).drop_if_none(),
            "validate_only": DisplayDataItem(self._validate_only, label="Dry run").drop_if_default(False),
            "upload_graph": DisplayDataItem(self._upload_graph, label="Upload graph").drop_if_default("auto"),
            "triggering_frequency": DisplayDataItem(
                self._triggering_frequency, label="Triggering frequency (s)"
            ).drop_if_none(),
            "max_bad_rows": DisplayDataItem(str(self._bad_rows), label="Bad rows left out, at most").drop_if_default(
                "0"
            ),
            "s3_endpoint": DisplayDataItem(
                None if config is None else _without_user_info(config.endpoint_url), label="S3 endpoint"
            ).drop_if_none(),
            "s3_region": DisplayDataItem(
                None if config is None else config.region_name, label="S3 region"
            ).drop_if_none(),
        }


_NOT_FOR_STREAMS = {
    "num_batches": "num_batches: its batch keys would be the same in every unit",
    "if_exists": "if_exists='replace': it deletes what was there once the copy has finished, and a stream does not",
    "validate_only": "validate_only: a dry run reports once, at the end of its input",
    "errors": (
        "errors input: it would be read as a side input before any unit commits, and Flink cannot "
        "checkpoint a stream's step that reads one; filter the stream upstream instead"
    ),
    "upload_graph": "upload_graph='per_bundle': a stream's files span bundles (the grouped graph)",
    "mode": "mode='overwrite': it would replace the whole table at every unit",
}


def refuse_for_streams(transform: str, **options: bool) -> None:
    """Raise, naming it, for the first option set (True) that an unbounded input cannot take.

    >>> refuse_for_streams("CopyToS3", num_batches=False, validate_only=True)
    Traceback (most recent call last):
    beam_s3_sink.errors.CopyToS3Error: CopyToS3: the input is unbounded, which takes no validate_only: a dry run reports once, at the end of its input
    """
    for option, is_set in options.items():
        if is_set:
            raise CopyToS3Error(f"{transform}: the input is unbounded, which takes no {_NOT_FOR_STREAMS[option]}")


def with_bad_rows(transform: Any) -> Any:
    """A copy of ``transform`` (``CopyToS3``, a table copy) whose output is a
    :class:`~.bad_rows.CopyOutputs` (the results, and the dead letters)."""
    import copy

    twin = copy.copy(transform)
    twin._with_bad_rows = True
    return twin


def bad_rows_outputs(outputs: CopyOutputs, with_bad_rows: bool) -> Any:
    """A copy's output: its results, or with ``with_bad_rows`` the :class:`CopyOutputs`, whose
    dead letters are an empty PCollection where none can be (``max_bad_rows`` 0; a dry run,
    which leaves no row out but reports them, see :mod:`.validate`)."""
    if not with_bad_rows:
        return outputs.results
    if outputs.bad_rows is not None:
        return outputs
    none = outputs.results.pipeline | "NoBadRows" >> beam.Create([]).with_output_types(BadRow)
    return CopyOutputs(outputs.results, none)


def _one_window(pcoll: PCollection, what: str, label: str = "InGlobalWindow") -> PCollection:
    """``pcoll`` in the global window (as Beam's ``iobase.WriteImpl`` does): a bounded
    PCollection in any windowing is one copy, each element once per window it is in (an
    element of two sliding windows is two rows, as ``Count`` sees it). An unbounded ``errors``
    input is refused (it is read once, before the copy starts)."""
    if not pcoll.is_bounded:
        producer = pcoll.producer.full_label if pcoll.producer is not None else str(pcoll)
        raise CopyToS3Error(
            f"CopyToS3: the {what} PCollection of {producer!r} is unbounded (a stream); it is read "
            "once, before the copy writes anything, so it must be bounded."
        )
    if isinstance(pcoll.windowing.windowfn, GlobalWindows) and pcoll.windowing.is_default():
        return pcoll
    return pcoll | label >> beam.WindowInto(GlobalWindows())


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
    """Step 1 (:mod:`.initialization`, or a table's): ``init_fn`` runs once, with the ``errors``
    input as a side input; its one ``InitOutcome`` is read by the other steps as a singleton.
    A stream's runs once at its start without a side input (it takes no ``errors``), and only
    its end reads the outcome; its other steps initialize themselves (:mod:`.stream_init`)."""

    def __init__(self, init_fn: beam.DoFn, errors: Optional[PCollection], stream: bool = False) -> None:
        super().__init__()
        self._init_fn, self._errors, self._stream = init_fn, errors, stream

    def expand(self, pipeline: Any) -> PCollection:
        if self._stream:
            return pipeline | "Start" >> beam.Create([None]) | "Run" >> beam.ParDo(_InitializeStreamFn(self._init_fn))
        if self._errors is None:
            errors = pipeline | "NoUpstreamErrors" >> beam.Create([])
        else:
            errors = _one_window(self._errors, "errors", "ErrorsInGlobalWindow")
        return pipeline | "Start" >> beam.Create([None]) | "Run" >> beam.ParDo(self._init_fn, AsList(errors))


class _Upload(beam.PTransform):
    """Step 2 (:mod:`.batches`, :mod:`.upload`): rows in, one ``UploadReport`` per writer out."""

    def __init__(
        self,
        settings: WriteSettings,
        graph: str,
        num_batches: Optional[int],
        init: PCollection,
        stream_init: Optional[InitializedInStep] = None,
    ) -> None:
        super().__init__()
        self._settings, self._graph, self._num_batches, self._init = settings, graph, num_batches, init
        self._stream_init = stream_init  # a stream's: Write initializes itself, no side input
        self._stream = stream_init is not None

    def expand(self, rows: PCollection) -> PCollection:
        grouped = self._graph == "grouped"
        if self._stream:
            batch_fn = _StreamBatchFn
        else:
            batch_fn = _ArrowBatchFn if takes_batches(rows.element_type) else _BatchFn
        batch = beam.ParDo(batch_fn(self._settings.schema, grouped, self._num_batches, limit=self._settings.bad_rows))
        if grouped:
            blobs = rows | "Batch" >> batch | "Group" >> beam.GroupByKey()
        else:
            blobs = rows | "Batch" >> batch.with_output_types(Batches)
        if self._stream:
            return blobs | "Write" >> beam.ParDo(_WriteFn(self._settings, grouped, self._stream_init), None)
        return blobs | "Write" >> beam.ParDo(_WriteFn(self._settings, grouped), AsSingleton(self._init))


class _Complete(beam.PTransform):
    """Step 3 (:mod:`.completion`): the reports merged into one, then committed (or abandoned)
    by ``complete_fn`` into the one ``CopyToResult``; a stream's, per window firing (a unit),
    by a ``complete_fn`` that initializes itself (no side input: :mod:`.stream_init`). Its
    output: the results and the dead letters of the copies committed (``bad_rows``; None when
    ``max_bad_rows`` is 0: no bad row is ever left out)."""

    def __init__(
        self, complete_fn: beam.DoFn, init: PCollection, stream: bool = False, bad_rows: BadRowLimit = NO_BAD_ROWS
    ) -> None:
        super().__init__()
        self._complete_fn, self._init, self._stream = complete_fn, init, stream
        self._bad_rows = bad_rows

    def expand(self, reports: PCollection) -> CopyOutputs:
        merge = beam.CombineGlobally(MergeReports())
        merged = reports | "Merge" >> (merge.without_defaults() if self._stream else merge)
        run = beam.ParDo(self._complete_fn, None if self._stream else AsSingleton(self._init))
        if not self._bad_rows.enabled:
            return CopyOutputs(merged | "Run" >> run, None)
        outputs = merged | "Run" >> run.with_outputs(BAD_ROWS_TAG, main="results")
        bad_rows = outputs[BAD_ROWS_TAG]
        bad_rows.element_type = BadRow
        return CopyOutputs(outputs.results, bad_rows)

"""``_TableCopy``: what a copy into a table is, whatever the table: the base of ``CopyToIceberg``
(:mod:`.iceberg`) and ``CopyToDelta`` (:mod:`.delta`).

A table copy takes ``CopyToS3``'s options (schema, max_file_size, sink_id, s3, errors,
fail_on_error, validate_only, max_open_files, upload_graph, triggering_frequency,
max_bad_rows) and a ``mode`` and ``partition_by``, checked here when the pipeline is built,
and runs ``CopyToS3``'s three steps (:mod:`.transform`) into Parquet files with the exact
types; the target brings what is its own::

    _TableCopy.expand ─▶ table_input: a stream's refusals and windows (units), else the global window
        ─▶ the schema, ParquetFormat(types="exact")
        ─▶ _target: where the files go, the S3 settings, the layout asked for        (the target's)
        ─▶ validate_only: validate_rows, the result named by _dry_run_uri            (the target's)
           else table_steps: Initialize, Upload, Commit (and a stream's Finish), with
           the initialization, completion and end of stream of _steps                (the target's)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import PCollection
from apache_beam.transforms.display import DisplayDataItem

from .bad_rows import BadRowLimit, CopyOutputs
from .completion import _CompleteFn
from .config import S3Config
from .formats import ParquetFormat
from .keys import CopyKeys, new_sink_id, validate_sink_id
from .schema import resolve_schema
from .stream import _FinishStream, _FinishStreamFn, stream_windowing
from .stream_init import InitializedInStep
from .transform import (
    DEFAULT_MAX_FILE_SIZE,
    MIN_FILE_SIZE,
    _Complete,
    _Initialize,
    _one_window,
    _Upload,
    bad_rows_outputs,
    check_upload_graph,
    parse_size,
    refuse_for_streams,
    upload_graph,
    with_bad_rows,
)
from .validate import validate_rows
from .writer import WriteSettings

_Copy = TypeVar("_Copy", bound="_TableCopy")

#: A table's completion, made with a stream's :class:`~.stream_init.InitializedInStep` (else None).
CompleteFactory = Callable[[Optional[InitializedInStep]], _CompleteFn]


class _TableCopy(beam.PTransform):
    """The base of the table copies: their shared options, checked when the pipeline is built
    (``mode`` among the target's modes, ``max_bad_rows``, ``partition_by``, ``max_file_size``,
    ``sink_id``, ``upload_graph``; a ``ValueError`` names :attr:`TRANSFORM`), :attr:`sink_id`,
    :meth:`with_bad_rows`, the display data they share and :meth:`expand`. A subclass checks its
    own arguments, then calls this ``__init__``; it brings :attr:`TRANSFORM`, ``default_label``
    and the hooks :meth:`_partitions`, :meth:`_target`, :meth:`_dry_run_uri` and :meth:`_steps`.
    """

    TRANSFORM: str  # the public name: in errors, refusals and labels

    def __init__(
        self,
        label: Optional[str],
        mode: str,
        modes: Sequence[str],
        *,
        schema: Optional[pa.Schema],
        partition_by: Sequence[str],
        max_file_size: Optional[Union[int, str]],
        sink_id: Optional[str],
        s3: Optional[S3Config],
        errors: Optional[PCollection],
        fail_on_error: bool,
        validate_only: bool,
        max_open_files: int,
        upload_graph: str,
        triggering_frequency: Optional[float],
        max_bad_rows: Union[int, str],
    ) -> None:
        super().__init__(label)
        if mode not in modes:
            raise ValueError(f"{self.TRANSFORM}: mode must be one of {list(modes)}, got {mode!r}")
        self._mode = mode
        self._bad_rows = BadRowLimit.parse(max_bad_rows)
        self._with_bad_rows = False
        self._schema = schema
        self._partition_by = self._partitions((partition_by,) if isinstance(partition_by, str) else tuple(partition_by))
        # None: the default (CopyToIceberg: the table's write.target-file-size-bytes, else this).
        self._file_size_given = max_file_size is not None
        self._max_file_size = parse_size(max_file_size) if max_file_size is not None else DEFAULT_MAX_FILE_SIZE
        if self._max_file_size < MIN_FILE_SIZE:
            raise ValueError(f"{self.TRANSFORM}: max_file_size must be at least {MIN_FILE_SIZE} bytes")
        self._sink_id = validate_sink_id(sink_id) if sink_id is not None else new_sink_id()
        self._s3, self._errors, self._fail_on_error = s3, errors, bool(fail_on_error)
        self._validate_only, self._max_open_files = bool(validate_only), max_open_files
        self._upload_graph = check_upload_graph(upload_graph)
        self._triggering_frequency = triggering_frequency

    @staticmethod
    def _partitions(partition_by: Sequence[str]) -> Tuple[Any, ...]:
        """``partition_by`` as the target keeps it (here: the column names)."""
        return tuple(partition_by)

    @property
    def sink_id(self) -> str:
        """The id that names this copy's files and its commit (an Iceberg snapshot, a Delta
        version's application transaction)."""
        return self._sink_id

    def with_bad_rows(self: _Copy) -> _Copy:
        """This copy, whose output is a :class:`~beam_s3_sink.CopyOutputs` (``.results``,
        ``.bad_rows``), as :meth:`beam_s3_sink.CopyToS3.with_bad_rows`."""
        return with_bad_rows(self)

    def _display_data(self, target: Dict[str, DisplayDataItem], **options: DisplayDataItem) -> Dict[str, Any]:
        """The display data: ``target`` (the table), the mode, the target's own ``options``,
        then the sink id and the sizes and partitions the copy was given."""
        return {
            **target,
            "mode": DisplayDataItem(self._mode, label="Mode"),
            **options,
            "sink_id": DisplayDataItem(self._sink_id, label="Sink id"),
            "partition_by": DisplayDataItem(
                ", ".join(str(e) for e in self._partition_by) or None, label="Partition columns"
            ).drop_if_none(),
            "max_file_size": DisplayDataItem(
                self._max_file_size if self._file_size_given else None, label="Maximum file size (bytes)"
            ).drop_if_none(),
        }

    def expand(self, rows: PCollection) -> PCollection:
        stream = not rows.is_bounded
        rows = table_input(
            rows,
            self.TRANSFORM,
            self._triggering_frequency,
            validate_only=self._validate_only,
            upload_graph=self._upload_graph == "per_bundle",
            mode=self._mode == "overwrite",
            errors=self._errors is not None,
        )
        schema = resolve_schema(self._schema, rows.element_type)
        fmt = ParquetFormat(types="exact")
        fmt.check_schema(schema)
        keys, config, layout = self._target(schema, rows.pipeline.options)
        settings = WriteSettings(
            keys, config, fmt, schema, self._max_file_size, layout, self._max_open_files, bad_rows=self._bad_rows
        )
        if self._validate_only:
            results = rows | "Validate" >> validate_rows(settings, self._dry_run_uri())
            return bad_rows_outputs(CopyOutputs(results, None), self._with_bad_rows)
        init_fn, complete_fn, finish_fn = self._steps(settings, stream)
        outputs = table_steps(
            rows, settings, init_fn, complete_fn, finish_fn, self._errors, self._upload_graph, self._bad_rows
        )
        return bad_rows_outputs(outputs, self._with_bad_rows)

    def _target(self, schema: pa.Schema, options: Any) -> Tuple[CopyKeys, S3Config, Any]:
        """Where the copy's files go (until initialization knows the table's own), the S3
        settings (``options``: the pipeline's) and the layout the copy asks for, checked against
        ``schema`` when the pipeline is built (a ``ValueError`` naming :attr:`TRANSFORM`)."""
        raise NotImplementedError

    def _dry_run_uri(self) -> str:
        """What a dry run's result names as its ``uri``."""
        raise NotImplementedError

    def _steps(self, settings: WriteSettings, stream: bool) -> Tuple[beam.DoFn, CompleteFactory, _FinishStreamFn]:
        """The target's initialization, completion (one commit) and end of stream."""
        raise NotImplementedError


def table_input(
    rows: PCollection,
    transform: str,
    triggering_frequency: Optional[float],
    **refused: bool,
) -> PCollection:
    """A table copy's rows as its steps take them: a stream windowed into units (options in
    ``refused`` that are set are refused, see :func:`~.transform.refuse_for_streams`), a bounded
    input in the global window."""
    if rows.is_bounded:
        return _one_window(rows, "input")
    refuse_for_streams(transform, **refused)
    return stream_windowing(rows, triggering_frequency, transform)


def table_steps(
    rows: PCollection,
    settings: WriteSettings,
    init_fn: beam.DoFn,
    complete_fn: CompleteFactory,
    finish_fn: _FinishStreamFn,
    errors: Optional[PCollection],
    requested_graph: str,
    bad_rows: BadRowLimit,
) -> CopyOutputs:
    """The three steps of a copy into a table (``CopyToIceberg``, ``CopyToDelta``), wired as
    ``CopyToS3`` wires its own: each target brings its initialization (``init_fn``), its
    completion (``complete_fn``, made with the stream's :class:`~.stream_init.InitializedInStep`)
    and the end of its streams (``finish_fn``); the upload is shared."""
    stream = not rows.is_bounded
    init = rows.pipeline | "Initialize" >> _Initialize(init_fn, errors, stream)
    in_step = InitializedInStep(init_fn) if stream else None  # a stream's steps read no side input
    graph = "grouped" if stream else upload_graph(rows.pipeline, requested_graph)
    reports = rows | "Upload" >> _Upload(settings, graph, None, init, in_step)
    outputs = reports | "Commit" >> _Complete(complete_fn(in_step), init, stream, bad_rows)
    if stream:
        _ = outputs.results | "Finish" >> _FinishStream(finish_fn, init)
    return outputs

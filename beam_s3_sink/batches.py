"""``num_batches=N``: rows spread over N batches by a stable hash, one writer per batch.

::

    rows ─▶ AssignBatchFn ─(batch, row)─▶ GroupByKey ─▶ BatchUploadFn ─BundleReport per batch─▶ Gather
            blake2b(row) % N                           files P/ID-batch-<bbbb>-<nnnn>.<ext>

A row's batch is ``blake2b(its JSON Lines text) % N``: the row rendered as
:func:`~beam_s3_sink.formats.jsonl.render_lines` does (its values in schema order, by fixed
rules), hashed with BLAKE2b, never Python's per-process ``hash()``. So it is the same on every
worker and every run, and a rerun of the same data writes the same keys. A batch is written by
one worker (the file-writing code is :class:`~beam_s3_sink.writer.FileWriter`, as for
bundles). A retried batch writes the same keys again under new upload ids; completion
completes only the uploads of the committed reports and aborts the others, matched by
(key, upload id).

Rows are hashed after conversion to Arrow, in buffered batches, so that ``1`` and ``1.0`` in
a float column hash alike. A row that does not fit the schema goes to batch 0, where the
writer reports it with the usual message.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, List, Mapping, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .formats.jsonl import render_lines
from .results import InitState
from .schema import RowError, as_mapping, rows_to_batch
from .upload import UploadBase

__all__ = ["batch_numbers", "AssignBatchFn", "BatchUploadFn"]

_BUFFER_ROWS = 1024


def batch_numbers(rows: List[Mapping[str, Any]], schema: pa.Schema, num_batches: int) -> List[int]:
    """The batch of each row, ``blake2b(row as JSON Lines) % num_batches``.

    >>> schema = pa.schema([("id", pa.int64())])
    >>> batch_numbers([{"id": 1}, {"id": 1}, {"id": 2}], schema, 4)
    [1, 1, 2]
    """
    try:
        lines = render_lines(rows_to_batch(rows, schema))
    except (RowError, pa.ArrowException, TypeError, ValueError):
        if len(rows) == 1:
            return [0]  # does not fit: batch 0's writer reports it
        return [n for row in rows for n in batch_numbers([row], schema, num_batches)]
    return [int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "big") % num_batches
            for line in lines]


class AssignBatchFn(beam.DoFn):
    """Keys each row by its batch number (buffering rows to hash them in Arrow batches)."""

    def __init__(self, schema: pa.Schema, num_batches: int) -> None:
        self._schema = schema
        self._num_batches = num_batches

    def start_bundle(self) -> None:
        self._buffer: List[Mapping[str, Any]] = []

    def process(self, row: Any) -> Iterable[Tuple[int, Any]]:
        try:
            self._buffer.append(dict(as_mapping(row)))
        except RowError:
            yield 0, row  # not a row: batch 0's writer reports it
            return
        if len(self._buffer) >= _BUFFER_ROWS:
            yield from self._flush()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        for pair in self._flush():
            yield WindowedValue(pair, GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _flush(self) -> List[Tuple[int, Any]]:
        rows, self._buffer = self._buffer, []
        if not rows:
            return []
        return list(zip(batch_numbers(rows, self._schema, self._num_batches), rows))


class BatchUploadFn(UploadBase):
    """Writes one batch's rows into ``P/ID-batch-<bbbb>-<nnnn>.<ext>``; emits its report."""

    def process(self, element: Tuple[int, Iterable[Any]], state: InitState) -> Iterable[Any]:
        if state.error is not None or state.done is not None:
            return
        batch, rows = element
        extension = self._format.extension
        writer = self._writer(
            lambda directory, number: self._keys.batch_file(batch, number, extension, directory))
        for row in rows:
            writer.add(row)
        report = writer.finish()
        self._log_error(writer)
        self._retries_counter.inc(self._retries.drain())
        yield report

"""``num_batches=N``: rows spread over N shards by a stable hash, one writer per shard.

The public option is ``num_batches`` and the files are ``P/ID-batch-<bbbb>-<nnnn>`` (the
contract, see DESIGN.md); inside the package such a group of rows is a *shard*, so that
"batch" always means an Arrow record batch.

::

    rows ──────▶ _AssignShardFn ─(shard, row)────────▶ GroupByKey ─▶ _ShardUploadFn ─UploadReport per shard─▶ Complete
    Arrow batch ─▶ (conform) ─(shard, sub-batch)─┘                 files P/ID-batch-<bbbb>-<nnnn>.<ext>
                 row_hashes(rows) % N

A row's shard is ``row_hashes(...) % N`` (:mod:`.arrow_hash`: a 64-bit hash of its values in
schema order, computed a column at a time with numpy), never Python's per-process
``hash()``. So it is the same on every worker and every run, and a rerun of the same data
writes the same keys. Rows and Arrow batches are both conformed to the copy's schema before
they are hashed, so a dict row and the same values in a ``RecordBatch`` go to the same shard;
a record batch element is split into one sub-batch per shard (an argsort and a ``take``). A
shard is written by one worker (the file-writing code is
:class:`~beam_s3_sink.writer.FileWriter`, as for bundles). A retried shard writes the same keys
again under new upload ids; completion completes only the uploads of the committed reports and
aborts the others, matched by (key, upload id).

Rows are hashed after conversion to Arrow, in buffered record batches, so that ``1`` and
``1.0`` in a float column hash alike. A row or a record batch that does not fit the schema
goes to shard 0, where the writer reports it with the usual message.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Mapping, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .arrow_hash import row_hashes
from .arrow_input import ARROW_TYPES, conform_batches
from .errors import BatchError, RowError
from .messages import InitOutcome
from .schema import as_mapping, rows_to_batch
from .upload import _UploadBase

__all__ = ["shard_numbers", "split_by_shard"]

_BUFFER_ROWS = 1024


def shard_numbers(rows: List[Mapping[str, Any]], schema: pa.Schema, num_shards: int) -> List[int]:
    """The shard of each row, ``row_hashes(rows as a record batch of schema) % num_shards``.

    >>> schema = pa.schema([("id", pa.int64())])
    >>> shard_numbers([{"id": 1}, {"id": 1}, {"id": 2}], schema, 4)
    [1, 1, 0]
    """
    try:
        batch = rows_to_batch(rows, schema)
    except (RowError, pa.ArrowException, TypeError, ValueError):
        if len(rows) == 1:
            return [0]  # does not fit: shard 0's writer reports it
        return [n for row in rows for n in shard_numbers([row], schema, num_shards)]
    return (row_hashes(batch) % np.uint64(num_shards)).astype(np.int64).tolist()


def split_by_shard(batch: pa.RecordBatch, num_shards: int) -> List[Tuple[int, pa.RecordBatch]]:
    """(shard, sub-batch) for each shard the rows of ``batch`` hash to.

    >>> [(n, b.num_rows) for n, b in split_by_shard(pa.record_batch({"id": [1, 1, 2]}), 4)]
    [(0, 1), (1, 2)]
    """
    numbers = (row_hashes(batch) % np.uint64(num_shards)).astype(np.int64)
    order = np.argsort(numbers, kind="stable")
    ordered = numbers[order]
    starts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), batch.num_rows]
    taken = batch.take(pa.array(order))
    return [(int(ordered[a]), taken.slice(a, b - a)) for a, b in zip(starts, starts[1:])]


class _AssignShardFn(beam.DoFn):
    """Keys each row by its shard (buffering rows to hash them in Arrow record batches)."""

    def __init__(self, schema: pa.Schema, num_shards: int) -> None:
        self._schema = schema
        self._num_shards = num_shards

    def start_bundle(self) -> None:
        self._buffer: List[Mapping[str, Any]] = []

    def process(self, row: Any) -> Iterable[Tuple[int, Any]]:
        if type(row) is not dict and isinstance(row, ARROW_TYPES):
            yield from self._split(row)
            return
        try:
            self._buffer.append(dict(as_mapping(row)))
        except RowError:
            yield 0, row  # not a row: shard 0's writer reports it
            return
        if len(self._buffer) >= _BUFFER_ROWS:
            yield from self._flush()

    def _split(self, data: Any) -> Iterable[Tuple[int, Any]]:
        try:
            batches = conform_batches(data, self._schema)
        except BatchError:
            yield 0, data  # does not fit: shard 0's writer reports it
            return
        for batch in batches:
            yield from split_by_shard(batch, self._num_shards)

    def finish_bundle(self) -> Iterable[WindowedValue]:
        for pair in self._flush():
            yield WindowedValue(pair, GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _flush(self) -> List[Tuple[int, Any]]:
        rows, self._buffer = self._buffer, []
        if not rows:
            return []
        return list(zip(shard_numbers(rows, self._schema, self._num_shards), rows))


class _ShardUploadFn(_UploadBase):
    """Writes one shard's rows into ``P/ID-batch-<bbbb>-<nnnn>.<ext>``; emits its report."""

    def process(self, element: Tuple[int, Iterable[Any]], state: InitOutcome) -> Iterable[Any]:
        if state.error is not None or state.done is not None:
            return
        shard, rows = element
        extension = self._format.extension
        writer = self._writer(lambda directory, number: self._keys.shard_file(shard, number, extension, directory))
        for row in rows:
            writer.add(row)
        report = writer.finish()
        self._log_error(writer)
        self._count_retries()
        yield report

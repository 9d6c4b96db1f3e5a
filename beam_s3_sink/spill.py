"""The upload step on portable runners (Flink, Spark, Prism, Dataflow): files that span bundles.

A runner that cuts small bundles (Flink: 1,000 elements or 1 s) would give one small file per
bundle if every bundle wrote its own files, and the JVM runners' fuser never fuses a ``ParDo``
that reads a side input with the transforms upstream of it, so a row-consuming step with the
init side input makes the runner encode, ship and decode every row (measured on Flink: that
alone was most of a copy's cost). So on these runners the rows go through a step with no side
input, fused with whatever produces them, that only turns them into compact Arrow blobs; a
``GroupByKey`` gathers each producer's blobs, and one writer per key writes them into files::

    rows ─▶ _SpillFn (fused upstream, no S3, no side input) ──(key, blob)──▶ GroupByKey
            rows → Arrow batches → one Arrow IPC stream (ZSTD) per ≈ BLOB_BYTES
            key = "<instance token>-<group>"; a new group every ≈ GROUP_BYTES
                                                   │ (key, [blob, ...])
                                                   ▼
            _WriteSpilledFn (AsSingleton(init)) ─ FileWriter.add_batch ─▶ pending files
                                                   │ one UploadReport per key
                                                   ▼
                                     Complete: Merge ─▶ Run (completion.py)

Guarantees, as for bundles (see :mod:`.upload`):

* A blob is an ordinary output of the bundle that made it: if that bundle fails or is retried,
  the runner discards its outputs, so its rows reach the ``GroupByKey`` exactly once.
* ``_WriteSpilledFn`` completes nothing; a failed or retried attempt's uploads are in no
  committed report, so completion aborts them (matched by key and upload id), and the retry
  writes under a fresh token.
* Memory is bounded: ``_SpillFn`` holds at most one blob's rows (``BLOB_BYTES`` of Arrow data
  plus a chunk of Python rows); a key's group holds at most about ``GROUP_BYTES`` of Arrow data
  (a runner may hand the whole group to the worker at once), and its writer decodes one blob
  at a time into the usual bounded buffers of :mod:`.writer`.
* A chunk of rows that does not convert to the schema is shipped as the rows themselves
  (pickled), and the writer reports the row with its usual message, naming the column.
* ``pyarrow.RecordBatch``/``Table`` elements (and a batched ``DoFn``'s tables, through
  :class:`_ArrowSpillFn`) are conformed to the schema once and go into the blob as they are;
  one that does not fit travels as it is and the writer reports it, naming the column.

Files per worker: one DoFn instance per concurrent bundle, each with one key per
``GROUP_BYTES`` of data, so a copy smaller than ``GROUP_BYTES`` per instance gives one file per
instance (two at parallelism 2), and a larger one files of up to ``max_file_size``.

The DirectRunner (in-process or multi-process) fuses side-input consumers and keeps
``GroupByKey`` data in memory, and cuts whole-input bundles: there the per-bundle
:class:`~beam_s3_sink.upload._UploadFn` writes directly, with no shuffle.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Mapping, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.internal import pickler
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .arrow_input import conform_batches, is_arrow
from .errors import RowError
from .keys import new_token
from .messages import InitOutcome
from .schema import as_mapping, rows_to_batch
from .upload import _UploadBase

__all__ = ["encode_blob", "decode_blob", "BLOB_BYTES", "GROUP_BYTES"]

BLOB_BYTES = 8 * 2**20
"""Arrow bytes of rows per blob, at most (about): what a ``_SpillFn`` holds."""
GROUP_BYTES = 64 * 2**20
"""Arrow bytes per key, about: what one ``_WriteSpilledFn`` call receives at once."""
MAX_CHUNK_ROWS = 16384
_ARROW, _ROWS = b"A", b"P"


def encode_blob(batches: List[pa.RecordBatch], schema: pa.Schema, compression: str = "zstd") -> bytes:
    """Batches as one Arrow IPC stream, prefixed by a tag byte.

    >>> schema = pa.schema([("id", pa.int64())])
    >>> blob = encode_blob([pa.record_batch([[1, 2]], schema=schema)], schema)
    >>> [b.num_rows for b in decode_blob(blob)]
    [2]
    """
    sink = pa.BufferOutputStream()
    sink.write(_ARROW)
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as out:
        for batch in batches:
            out.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _encode_rows(rows: List[Any]) -> bytes:
    return _ROWS + pickler.dumps(list(rows))


def decode_blob(blob: bytes) -> Iterator[Any]:
    """The record batches of a blob (or, for rows that did not convert, the rows)."""
    tag, body = blob[:1], memoryview(blob)[1:]
    if tag == _ROWS:
        yield from pickler.loads(bytes(body))
        return
    with pa.ipc.open_stream(pa.py_buffer(body)) as reader:
        yield from reader


class _SpillFn(beam.DoFn):
    """Turns rows into keyed Arrow IPC blobs; touches no S3 and reads no side input."""

    def __init__(self, schema: pa.Schema, blob_bytes: int = BLOB_BYTES, group_bytes: int = GROUP_BYTES) -> None:
        self._schema = schema
        self._blob_bytes = blob_bytes
        self._group_bytes = group_bytes

    def setup(self) -> None:
        self._instance = new_token()
        self._group = 0
        self._in_group = 0  # Arrow bytes sent under the current key

    def start_bundle(self) -> None:
        self._rows: List[Mapping[str, Any]] = []
        self._batches: List[pa.RecordBatch] = []
        self._held = 0
        self._chunk_rows = 1024

    def process(self, row: Any) -> Iterable[Tuple[str, bytes]]:
        if type(row) is dict:  # the common case, kept lean: this runs once per row
            rows = self._rows
            rows.append(row)
            return self._convert() if len(rows) >= self._chunk_rows else ()
        if is_arrow(row):
            return self._add_arrow(row)
        try:
            self._rows.append(as_mapping(row))
        except RowError:
            return [self._send_rows([row])]  # not a row: the writer reports it
        if len(self._rows) >= self._chunk_rows:
            return self._convert()
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        out = list(self._convert())
        if self._batches:
            out.append(self._send())
        for pair in out:
            yield WindowedValue(pair, GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _convert(self) -> List[Tuple[str, bytes]]:
        rows, self._rows = self._rows, []
        if not rows:
            return []
        try:
            batch = rows_to_batch(rows, self._schema)
        except (RowError, pa.ArrowException, TypeError, ValueError, OverflowError):
            return [self._send_rows(rows)]
        per_row = max(1, batch.nbytes // batch.num_rows)
        self._chunk_rows = max(1, min(MAX_CHUNK_ROWS, self._blob_bytes // 8 // per_row))
        self._batches.append(batch)
        self._held += batch.nbytes
        return [self._send()] if self._held >= self._blob_bytes else []

    def _add_arrow(self, data: Any) -> List[Tuple[str, bytes]]:
        """A ``RecordBatch``/``Table`` element: conformed once and held as it is (no Python
        value per row); one that does not fit is shipped as it is, for the writer to report."""
        out = self._convert()  # rows that came before it go first
        try:
            batches = conform_batches(data, self._schema)
        except (ValueError, TypeError, pa.ArrowException):
            out.append(self._send_rows([data]))
            return out
        for batch in batches:
            self._batches.append(batch)
            self._held += batch.nbytes
        if self._held >= self._blob_bytes:
            out.append(self._send())
        return out

    def _key(self, size: int) -> str:
        if self._in_group and self._in_group + size > self._group_bytes:
            self._group, self._in_group = self._group + 1, 0
        self._in_group += size
        return f"{self._instance}-{self._group:06d}"

    def _send(self) -> Tuple[str, bytes]:
        batches, self._batches, held, self._held = self._batches, [], self._held, 0
        return self._key(held), encode_blob(batches, self._schema)

    def _send_rows(self, rows: List[Any]) -> Tuple[str, bytes]:
        return self._key(0), _encode_rows(rows)


class _ArrowSpillFn(_SpillFn):
    """:class:`_SpillFn` that also takes a batched ``DoFn``'s ``pa.Table`` batches as they are
    (see :mod:`.arrow_upload`)."""

    def get_input_batch_type(self, input_element_type: Any) -> Any:
        return pa.Table

    @beam.DoFn.yields_elements
    def process_batch(self, batch: pa.Table) -> Iterable[Tuple[str, bytes]]:
        return self._add_arrow(batch)


class _WriteSpilledFn(_UploadBase):
    """Writes one key's blobs into ``P/ID-<token>-<nnnn>.<ext>``; emits one report per key."""

    def process(self, element: Tuple[str, Iterable[bytes]], state: InitOutcome) -> Iterable[Any]:
        if state.error is not None or state.done is not None:
            return
        _, blobs = element
        token, extension = new_token(), self._format.extension
        writer = self._writer(lambda directory, number: self._keys.data_file(token, number, extension, directory))
        for blob in blobs:
            for item in decode_blob(blob):
                if isinstance(item, pa.RecordBatch):
                    writer.add_batch(item)
                else:
                    writer.add(item)
            if writer.error is not None:
                break
        report = writer.finish()
        self._log_error(writer)
        self._count_retries()
        yield report

"""Writing rows into data files: the part of the upload step shared by bundles, spill keys and shards.

A :class:`FileWriter` takes rows and writes them into pending (not completed) multipart
uploads, one sequence of files per partition directory (a single sequence without
``partition_by``). Per open file, three buffering layers bound what a worker holds::

    rows ─▶ row buffer ─(≈ batch_bytes)─▶ RecordBatch ─▶ encoder ─▶ MultipartStream ─▶ S3 parts
            Python dicts                  pyarrow  ▲      Parquet:    part_size bytes,
    add_batch(RecordBatch) ───────────────────────┘      ≤ 1 row     ≤ max_concurrency parts
      (split by partition with take)                      group       in flight on a pool

Arrow elements are encoded on a thread of their own when the writer is given one
(``encode_pools``, as the upload DoFns do): pyarrow encodes without holding the GIL, so a
bundle's next batch is read and conformed while the last one is encoded. At most
``ENCODE_AHEAD`` batches wait for that thread; only it touches open files while it has work,
and the caller's thread waits for it before finishing, failing, or reporting files (Beam's
metrics live in the caller's thread)::

    caller: batch ─▶ conform ─submit─▶ ≤ ENCODE_AHEAD queued ─▶ encode thread: encoder ─▶ parts

A writer given more than one encode thread (``encode_pools``: the layout's ``encode_threads``)
spreads large Arrow input over *lanes*, one open file each, so that more cores encode: the
Parquet encoding of one file is a copy's critical path, and pyarrow encodes a file on one
thread. Without ``partition_by``, once the writer has taken ``LANES_FROM`` bytes of Arrow
batches into its first file, each batch of at least ``LANE_SPLIT_FROM`` bytes is sliced (no
copy) into one run of rows per lane, and each lane encodes its slices on its own thread, in
order. So the lanes encode halves of one batch at once and hold no more batches than one lane
would (each open file adds its encoder and part buffers: about 45 MiB on TPC-H lineitem). Sizes
and order alone decide (never timing), so the same input makes the same files (numbered in the
order the lanes open them); a copy of less than ``LANES_FROM`` bytes of batches, or of rows,
still makes one file, and so does ``partition_by`` (its files are already many)::

    batches ─▶ first LANES_FROM bytes, small batches ─▶ lane 0 ─▶ encode thread 0 ─▶ file 1 ─▶ (when full) 3
               then each batch: first half of its rows ─┘
                                second half ───────────▶ lane 1 ─▶ encode thread 1 ─▶ file 2 ─▶ (when full) 4

The row buffer's batches take the thread only to encode: converting rows holds the GIL,
and handing a batch to another thread costs a GIL switch (up to 5 ms) while the caller
converts the next rows. So a batch the encoder would only hold (a Parquet row group still
filling) is written in the caller's thread, and a batch that completes a row group goes to
the thread, with up to ``ROWS_AHEAD`` later batches queued behind it while it is encoded::

    caller: rows ─▶ RecordBatch ─▶ encoder.buffers(batch)? ─yes, thread idle─▶ encoder (here)
                                                          └─no─▶ submit ─▶ encode thread

A file is closed when it reaches ``max_file_size`` and the sequence's next one is opened.
With partitions, memory stays bounded however many partitions the rows spread over:

* at most ``max_open_files`` files are open at once; opening one more first closes
  (finishes) the largest open file, and that partition's later rows go to its next file;
* the row buffers of all partitions hold at most ``max_open_files`` times one buffer's rows
  (``buffer_bytes`` of Arrow data); past that, the largest buffer is written out.

So rows that cycle over more partitions than files may be open are still gathered into
buffer-sized runs, rather than a file per row.

Arrow elements (``RecordBatch``/``Table``, see :mod:`.arrow_input`) skip the row buffer: each
is conformed to the schema once, split by partition with Arrow compute (a dictionary code
per partition column, one stable argsort, a ``take`` per partition) and handed to the
encoders as it is::

    batch ─▶ conform ─▶ [partition_by: codes ─▶ argsort ─▶ take per partition] ─▶ encoder

``finish`` closes everything and returns the :class:`~beam_s3_sink.messages.UploadReport`; the
first error stops the writer, aborts what it had open and becomes the report's error. The
errors that stop it are the package's (:data:`HANDLED`: a row or a batch that does not fit,
a value the format cannot encode, a refused request); anything else is a bug and fails the
bundle, which the runner retries.

Used by :class:`~beam_s3_sink.upload._UploadFn` (one writer per bundle, files named by a
fresh token), :class:`~beam_s3_sink.spill._WriteSpilledFn` (one writer per spill key, fed
Arrow batches with ``add_batch``, files named by a fresh token per attempt) and
:class:`~beam_s3_sink.sharding._ShardUploadFn` (one writer per shard, files named by the shard
number, so that a rerun writes the same keys).
"""

from __future__ import annotations

import collections
import dataclasses
import io
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

from .arrow_input import ARROW_TYPES, conform_batches
from .config import S3Config
from .errors import CopyToS3Error, EncodeError, RowError
from .formats.base import ENCODE_ERRORS, FileEncoder, Format
from .layout import Layout
from .messages import PendingFile, UploadReport
from .s3 import MultipartStream, PartBuffers
from .schema import as_mapping, rows_to_batch

__all__ = ["FileWriter"]

_log = logging.getLogger(__name__)
BATCH_BYTES = 4 * 2**20
MAX_BATCH_ROWS = 16384
ENCODE_AHEAD = 1  # batches queued for the encode thread when add/add_batch returns, at most (double buffering)
ROWS_AHEAD = 8  # the row buffer's batches (each about buffer_bytes) queued behind a row group, at most
LANES_FROM = 64 * 2**20  # Arrow bytes of batches a writer puts in one file before it uses its other lanes
LANE_SPLIT_FROM = 2**20  # Arrow bytes of a batch worth slicing over the lanes (smaller ones go to lane 0)

NameFn = Callable[[str, int], str]  # (partition directory, file number) -> key


# What stops a writer and becomes its report's error: a row or a batch that does not fit the
# schema (RowError, BatchError), a value the format cannot encode (EncodeError, pyarrow's
# errors: ENCODE_ERRORS), a refused request (S3RequestError). All but pyarrow's derive from
# CopyToS3Error; anything else is a bug and fails the bundle.
HANDLED = (CopyToS3Error, pa.ArrowException)


def _encodes(fmt: Format, batch: pa.RecordBatch) -> bool:
    try:
        encoder = fmt.open(batch.schema, io.BytesIO(), 2**62)
        encoder.write(batch)
        encoder.close()
    except ENCODE_ERRORS:  # we only ask whether it works
        return False
    return True


def _show_value(array: pa.Array, row: int, limit: int = 80) -> str:
    try:
        text = repr(array[row].as_py())
    except (ValueError, OverflowError):  # e.g. a timestamp Python's datetime cannot hold
        text = array.slice(row, 1).to_string().strip("[] \n")  # "<value out of range: ...>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Sequence:
    """The files of one partition directory (or of one lane of it): a row buffer and at most
    one open file."""

    def __init__(self, directory: str, lane: int = 0) -> None:
        self.directory = directory
        self.lane = lane
        self.buffer: List[Mapping[str, Any]] = []
        self.stream: Optional[MultipartStream] = None
        self.encoder: Optional[FileEncoder] = None

    @property
    def key(self) -> Tuple[str, int]:
        return self.directory, self.lane

    @property
    def size(self) -> int:
        return self.stream.tell() if self.stream is not None else 0


class FileWriter:
    """Writes rows into pending data files; see the module docstring.

    >>> from beam_s3_sink import CsvFormat
    >>> writer = FileWriter(client, pool, S3Config(), CsvFormat(), pa.schema([("id", pa.int64())]),
    ...                     256 * 2**20, "bucket", lambda directory, n: f"p/part-{n:04d}.csv")
    >>> writer.add({"id": 1}); writer.add({"id": 2}); report = writer.finish()
    >>> report.rows, [f.key for f in report.files]  # pending: completion makes them visible
    (2, ['p/part-0001.csv'])
    """

    def __init__(
        self,
        client: Any,
        pool: ThreadPoolExecutor,
        config: S3Config,
        fmt: Format,
        schema: pa.Schema,
        max_file_size: int,
        bucket: str,
        name: NameFn,
        layout: Layout = Layout(),
        on_file: Callable[[PendingFile], None] = lambda f: None,
        buffer_bytes: int = BATCH_BYTES,
        encode_pools: Sequence[ThreadPoolExecutor] = (),
    ) -> None:
        self._client = client
        self._pool = pool
        self._config = config
        self._format = fmt
        self._schema = schema
        self._file_schema = layout.file_schema(schema)
        self._max_file_size = max_file_size
        self._bucket = bucket
        self._name = name
        self._layout = layout
        self._on_file = on_file
        self._sequences: Dict[Tuple[str, int], _Sequence] = {}
        self._opened: Dict[Tuple[str, int], _Sequence] = {}  # sequences with an open file
        self._file_numbers: Dict[str, int] = {}  # the last file number per directory
        self._files_lock = threading.Lock()  # the lanes' encode threads open and close files
        self._buffer_bytes = buffer_bytes
        self._batch_rows = min(1024, MAX_BATCH_ROWS)  # rows per buffer, from the last batch's size
        self._buffered = 0  # rows in all buffers
        self._done: List[PendingFile] = []
        self._current: Optional[_Sequence] = None
        self._unpartitioned: Optional[_Sequence] = None  # the one sequence without partition_by
        self._encode_pools = tuple(encode_pools)  # one per lane; none: encode in the caller's thread
        self._lanes = max(1, min(len(self._encode_pools), layout.max_open_files))
        self._lanes_used = 1
        self._batch_bytes = 0  # Arrow bytes of batches taken without partition_by
        self._encoding: Deque["Future[None]"] = collections.deque()
        # Every open file's parts in flight and the one it fills, recycled (see .s3).
        self._part_buffers = PartBuffers(config.part_size, keep=config.max_concurrency + self._lanes)
        self._encode_failed = False  # set by the encode thread: later batches are dropped
        self._reported = 0  # files of self._done given to on_file
        self.error: Optional[str] = None

    def add(self, row: Any) -> None:
        """Buffer one row (dict, ``beam.Row`` or NamedTuple); a no-op after an error."""
        if self.error is not None:
            return
        if type(row) is not dict and isinstance(row, ARROW_TYPES):
            self.add_arrow(row)
            return
        try:
            mapping = as_mapping(row)
            if not self._layout.partition_by:
                # The common case, kept lean: this runs once per row.
                sequence = self._unpartitioned or self._sequence("")
                sequence.buffer.append(mapping)
                self._buffered += 1
                if len(sequence.buffer) >= self._batch_rows:
                    self._flush_rows(sequence)
                return
            sequence = self._sequence(self._layout.directory(mapping, self._schema))
            sequence.buffer.append(self._layout.file_row(mapping))
            self._buffered += 1
            if len(sequence.buffer) >= self._batch_rows:
                self._flush_rows(sequence)
            elif self._buffered > self._layout.max_open_files * self._batch_rows:
                self._flush_rows(max(self._sequences.values(), key=lambda s: len(s.buffer)))
        except HANDLED as exc:
            self._fail(exc)

    def add_rows(self, rows: List[Any]) -> None:
        """:meth:`add` each of ``rows`` (rows or Arrow batches), with one call for a list of
        dicts when there is no ``partition_by`` (the common case: the upload step's
        :class:`~beam_s3_sink.messages.Gathered` lists)."""
        if self.error is not None:
            return
        if self._layout.partition_by or set(map(type, rows)) != {dict}:  # one C loop
            for row in rows:
                self.add(row)
            return
        sequence = self._unpartitioned or self._sequence("")
        sequence.buffer.extend(rows)
        self._buffered += len(rows)
        try:
            while len(sequence.buffer) >= self._batch_rows:
                self._flush_rows(sequence, self._batch_rows)
        except HANDLED as exc:
            self._fail(exc)

    def add_arrow(self, data: Any, source: Optional[str] = None) -> None:
        """Conform a ``RecordBatch`` or ``Table`` to the schema (see :mod:`.arrow_input`) and
        write it with :meth:`add_batch`; a batch that does not fit fails the writer, naming
        the column, both types and ``source``."""
        if self.error is not None:
            return
        try:
            batches = conform_batches(data, self._schema, source)
        except HANDLED as exc:
            self._fail(exc)
            return
        for batch in batches:
            self.add_batch(batch)

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Write a record batch of exactly the copy's schema (no Python value per row).

        With ``partition_by`` the batch is split by partition with Arrow compute; every
        partition's part goes to its sequence's open file, as rows do, so ``max_file_size``,
        row-group sizes and ``max_open_files`` hold alike. A no-op after an error."""
        if self.error is not None or not batch.num_rows:
            return
        try:
            if not self._layout.partition_by:
                for sequence, part in self._lanes_for(batch):
                    self._flush_rows(sequence)  # rows buffered before the batch go first
                    self._encode(sequence, part)
                return
            for directory, part in self._partitions(batch):
                sequence = self._sequence(directory)
                self._flush_rows(sequence)
                self._encode(sequence, part)
        except HANDLED as exc:
            self._fail(exc)

    def _lanes_for(self, batch: pa.RecordBatch) -> List[Tuple[_Sequence, pa.RecordBatch]]:
        """(unpartitioned sequence, rows) pairs for ``batch``: all of it to the first lane until
        the writer has taken ``LANES_FROM`` bytes of batches, and for batches under
        ``LANE_SPLIT_FROM``; else an equal run of its rows per lane (slices: no copy)."""
        taken = self._batch_bytes
        self._batch_bytes += batch.nbytes
        if self._lanes == 1 or taken < LANES_FROM or batch.nbytes < LANE_SPLIT_FROM or batch.num_rows < self._lanes:
            return [(self._unpartitioned or self._sequence(""), batch)]
        self._lanes_used = self._lanes
        bounds = [batch.num_rows * lane // self._lanes for lane in range(self._lanes + 1)]
        return [
            (self._sequence("", lane), batch.slice(start, end - start))
            for lane, (start, end) in enumerate(zip(bounds, bounds[1:]))
        ]

    def _partitions(self, batch: pa.RecordBatch) -> List[Any]:
        """(directory, file batch) per partition in ``batch``: one code per row (a
        dictionary index per partition column, combined), one stable argsort, one take."""
        import numpy as np
        import pyarrow.compute as pc

        code = np.zeros(batch.num_rows, dtype=np.int64)
        for name in self._layout.partition_by:
            encoded = pc.dictionary_encode(batch.column(name))
            width = len(encoded.dictionary) + 1
            indices = pc.fill_null(encoded.indices, width - 1).to_numpy(zero_copy_only=False)
            code = code * width + indices
        names = self._file_schema.names
        if (code == code[0]).all():
            runs = [(0, batch)]
        else:
            order = np.argsort(code, kind="stable")
            ordered = code[order]
            starts = np.flatnonzero(np.diff(ordered)) + 1
            taken = batch.take(pa.array(order))
            bounds = [0, *starts.tolist(), batch.num_rows]
            runs = [(int(order[a]), taken.slice(a, b - a)) for a, b in zip(bounds, bounds[1:])]
        out = []
        for first, part in runs:
            try:
                values = {name: batch.column(name)[first].as_py() for name in self._layout.partition_by}
            except (ValueError, OverflowError) as exc:  # e.g. a date Python's datetime cannot hold
                raise RowError(f"a partition value has no directory name: {exc}") from None
            directory = self._layout.directory(values, self._schema)
            out.append(
                (directory, pa.RecordBatch.from_arrays([part.column(n) for n in names], schema=self._file_schema))
            )
        return out

    # the encode thread ------------------------------------------------------------------
    def _encode(self, sequence: "_Sequence", batch: pa.RecordBatch, rows: bool = False) -> None:
        """Encode ``batch`` into ``sequence``'s files: on the encode thread, waiting while more
        than ``ENCODE_AHEAD`` batches are queued (an error of an earlier batch is raised here).

        ``rows=True`` (the row buffer's batches): a batch the open file's encoder would only
        hold (:meth:`~.formats.base.FileEncoder.buffers`) is written in the caller's thread
        when the encode thread is idle, since a hand-off costs a GIL switch (up to
        ``sys.getswitchinterval()``, 5 ms) while the caller converts the next rows; the others
        (a Parquet row group to encode) go to the thread, and up to ``ROWS_AHEAD`` row batches
        queue behind one, so that conversion goes on while the group is encoded."""
        if not self._encode_pools:
            self._write_explained(sequence, batch)
        elif rows and self._idle() and sequence.encoder is not None and sequence.encoder.buffers(batch):
            self._write_explained(sequence, batch)
        else:
            pool = self._encode_pools[sequence.lane]  # one thread: a lane's batches stay in order
            self._encoding.append(pool.submit(self._encode_task, sequence, batch))
            ahead = ROWS_AHEAD if rows else ENCODE_AHEAD * self._lanes_used
            while len(self._encoding) > ahead:
                self._encoding.popleft().result()
        self._report_files()

    def _idle(self) -> bool:
        """Whether the encode thread has no batch left (raising the first error of those done)."""
        while self._encoding and self._encoding[0].done():
            self._encoding.popleft().result()
        return not self._encoding

    def _encode_task(self, sequence: "_Sequence", batch: pa.RecordBatch) -> None:
        if self._encode_failed:  # an earlier batch failed: the caller fails the writer
            return
        try:
            self._write_explained(sequence, batch)
        except BaseException:
            self._encode_failed = True
            raise

    def _drain(self) -> None:
        """Wait until every submitted batch is encoded; raise the first error among them."""
        error: Optional[BaseException] = None
        while self._encoding:
            try:
                self._encoding.popleft().result()
            except BaseException as exc:  # re-raised below, once the thread is idle
                error = error or exc
        if error is not None:
            raise error
        self._report_files()

    def _report_files(self) -> None:
        """Give the files closed since the last call to ``on_file`` (in the caller's thread)."""
        while self._reported < len(self._done):
            self._reported += 1
            self._on_file(self._done[self._reported - 1])

    def _write_explained(self, sequence: "_Sequence", batch: pa.RecordBatch) -> None:
        try:
            self._write(sequence, batch)
        except ENCODE_ERRORS as exc:  # explained: the column and the value
            raise EncodeError(self._explain_encode_error(batch, exc)) from exc

    def _sequence(self, directory: str, lane: int = 0) -> _Sequence:
        sequence = self._sequences.get((directory, lane))
        if sequence is None:
            sequence = self._sequences[directory, lane] = _Sequence(directory, lane)
        if not directory and not lane:
            self._unpartitioned = sequence
        return sequence

    def finish(self) -> UploadReport:
        """Write what is buffered, finish every file's parts; return the report (or the error)."""
        if self.error is None:
            try:
                for sequence in self._sequences.values():
                    self._flush_rows(sequence)
                self._drain()
                for sequence in self._sequences.values():
                    self._close_file(sequence)
                self._report_files()
            except HANDLED as exc:
                self._fail(exc)
        if self.error is not None:
            return UploadReport(error=self.error)
        return UploadReport(
            files=tuple(self._done), rows=sum(f.rows for f in self._done), bytes=sum(f.bytes for f in self._done)
        )

    @property
    def open_files(self) -> int:
        """How many files are open now (at most ``max_open_files``), once the encoder is idle."""
        self._drain()
        return len(self._opened)

    # buffering ------------------------------------------------------------------------
    def _flush_rows(self, sequence: _Sequence, limit: Optional[int] = None) -> None:
        """Write the sequence's buffered rows (its first ``limit`` rows, if given) as one batch."""
        if not sequence.buffer:
            return
        if limit is None or limit >= len(sequence.buffer):
            rows, sequence.buffer = sequence.buffer, []
        else:
            rows, sequence.buffer = sequence.buffer[:limit], sequence.buffer[limit:]
        self._buffered -= len(rows)
        batch = rows_to_batch(rows, self._file_schema)
        per_row = max(1, batch.nbytes // max(1, batch.num_rows))
        self._batch_rows = max(1, min(MAX_BATCH_ROWS, self._buffer_bytes // per_row))
        self._encode(sequence, batch, rows=True)

    def _write(self, sequence: _Sequence, batch: Optional[pa.RecordBatch]) -> None:
        while batch is not None and batch.num_rows:
            if sequence.encoder is None:
                self._open_file(sequence)
            assert sequence.encoder is not None
            batch = sequence.encoder.write(batch)
            if batch is not None or sequence.encoder.full:
                self._close_file(sequence)

    # files ----------------------------------------------------------------------------
    def _open_file(self, sequence: _Sequence) -> None:
        # Lanes never evict each other (there are at most max_open_files of them, and only
        # without partition_by), so the largest file closed here is never another thread's.
        if len(self._opened) >= self._layout.max_open_files:
            largest = max(self._opened.values(), key=lambda s: s.size)
            _log.debug("%d files open: closing the largest, in %r", len(self._opened), largest.directory)
            self._close_file(largest)
        with self._files_lock:
            self._opened[sequence.key] = sequence
            number = self._file_numbers[sequence.directory] = self._file_numbers.get(sequence.directory, 0) + 1
        key = self._name(sequence.directory, number)
        self._current = sequence
        sequence.stream = MultipartStream(
            self._client,
            self._bucket,
            key,
            part_size=self._config.part_size,
            pool=self._pool,
            max_in_flight=max(1, self._config.max_concurrency // self._lanes),  # the lanes' parts share it
            create_args=self._config.objects.data_file_args(self._format.content_type),
            part_args=self._config.objects.part_args(),
            buffers=self._part_buffers,
        )
        sequence.encoder = self._format.open(self._file_schema, sequence.stream, self._max_file_size)

    def _close_file(self, sequence: _Sequence) -> None:
        if sequence.encoder is None or sequence.stream is None:
            return
        encoder, stream = sequence.encoder, sequence.stream
        try:
            encoder.close()
        except ENCODE_ERRORS as exc:
            raise EncodeError(
                f"the {self._format.name} format could not finish a file: {type(exc).__name__}: {exc}"
            ) from exc
        pending = dataclasses.replace(stream.finish(rows=encoder.rows), stats=encoder.stats())  # .stats
        sequence.encoder = sequence.stream = None
        with self._files_lock:
            self._opened.pop(sequence.key, None)
            self._done.append(pending)
        _log.debug(
            "uploaded %s: %d rows, %d bytes, %d parts (pending)",
            pending.key,
            pending.rows,
            pending.bytes,
            len(pending.parts),
        )

    def _explain_encode_error(self, batch: pa.RecordBatch, exc: BaseException) -> str:
        """Name the column and the value the format could not encode (on the error path only:
        it re-encodes the batch column by column, then that column row by row)."""
        what = f"the {self._format.name} format cannot encode"
        for index, field in enumerate(self._file_schema):
            column = batch.select([index])
            if _encodes(self._format, column):
                continue
            for row in range(column.num_rows):
                if not _encodes(self._format, column.slice(row, 1)):
                    return (
                        f"{what} column {field.name!r} ({field.type}), value "
                        f"{_show_value(column.column(0), row)}: "
                        f"{type(exc).__name__}: {exc}"
                    )
            return f"{what} column {field.name!r} ({field.type}): {type(exc).__name__}: {exc}"
        return f"{what} a row: {type(exc).__name__}: {exc}"

    def _fail(self, exc: BaseException) -> None:
        for future in self._encoding:  # let the encode thread go idle before aborting
            future.exception()
        self._encoding.clear()
        current = self._current
        if current is not None and current.stream is not None:
            key = current.stream.key
        else:
            directory = current.directory if current else ""
            key = self._name(directory, self._file_numbers.get(directory, 0) + 1)
        self.error = f"{exc} (while writing s3://{self._bucket}/{key}; nothing was made visible)"
        for sequence in self._sequences.values():
            if sequence.stream is not None:
                sequence.stream.abort()
            sequence.encoder = sequence.stream = None
            sequence.buffer = []

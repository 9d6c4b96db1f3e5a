"""Writing record batches into pending data files: :class:`FileWriter` and its :class:`WriteSettings`.

A writer keeps one sequence of files per partition (its layout routes the rows; one without),
closes a file at ``max_file_size`` and opens the next, and keeps memory bounded: at most
``max_open_files`` files open (opening one more first finishes the largest), and with
partitions at most ``max_open_files`` batches' worth of rows waiting for their directory's
file (past that, the largest waiting run is written). Batches are encoded on the writer's
encode thread when it has one, with at most ``ENCODE_AHEAD`` queued, so that the caller
converts the next rows while pyarrow (which releases the GIL) encodes. The first error stops
the writer, aborts what it had open and becomes its report's error. With ``max_bad_rows``
(``WriteSettings.bad_rows``) the rows of each partition are first checked by the format
(``Format.check_values``: Parquet converts the columns it must, a line format renders its
lines, which go to the encode thread with the rows and are written as they are, so a batch is
rendered once); the rows of a batch that fails are found by :func:`~.bad_rows.bisect` and left
out as dead letters, counted in the report with those ``Batch`` sent.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, Hashable, List, Optional, Tuple, Union

import pyarrow as pa

from .arrow_input import conform
from .bad_rows import BadRow, BadRowLimit, TooManyBadRows, bisect, element_json
from .batches import BATCH_BYTES, HANDLED, Batcher, Batches, BlobError, dead_letters_of, decode_blob
from .config import S3Config
from .errors import EncodeError, RowError
from .formats.base import ENCODE_ERRORS, FileEncoder, Format
from .keys import CopyKeys
from .layout import Layout, Part, Partitioning
from .messages import PendingFile, UploadReport
from .s3 import MultipartStream, PartBuffers

__all__ = ["FileWriter", "WriteSettings", "DEFAULT_MAX_OPEN_FILES"]

_log = logging.getLogger(__name__)
DEFAULT_MAX_OPEN_FILES = 16
ENCODE_AHEAD = 1  # batches queued for the encode thread when add_batch returns, at most
NameFn = Callable[[str, int], str]  # (partition directory, file number) -> key
Rows = Tuple[pa.RecordBatch, Optional[pa.Array]]  # rows in the file schema, and what check_values made of them


@dataclasses.dataclass(frozen=True)
class WriteSettings:
    """What every writer of one copy shares: where, in which format, and the limits.

    >>> from beam_s3_sink import CsvFormat
    >>> from beam_s3_sink.keys import S3Location
    >>> settings = WriteSettings(CopyKeys(S3Location("bucket", "p"), "id"), S3Config(), CsvFormat(),
    ...                          pa.schema([("id", pa.int64())]), 256 * 2**20)
    >>> settings.max_open_files
    16
    """

    keys: CopyKeys
    config: S3Config = dataclasses.field(repr=False)  # e.g. validate_rows' label shows the repr: no access key id
    format: Format
    schema: pa.Schema
    max_file_size: int
    layout: Partitioning = Layout()  # Hive directories, or a table's TableLayout (.table_layout)
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    bad_rows: BadRowLimit = BadRowLimit()  # max_bad_rows (.bad_rows): 0, the first bad row fails the copy

    def __post_init__(self) -> None:
        opened = self.max_open_files
        if isinstance(opened, bool) or not isinstance(opened, int) or opened < 1:
            raise ValueError(f"CopyToS3: max_open_files must be a positive int, got {opened!r}")


def _encodes(fmt: Format, batch: pa.RecordBatch) -> bool:
    try:
        encoder = fmt.open(batch.schema, io.BytesIO(), 2**62)
        encoder.write(batch)
        encoder.close()
    except ENCODE_ERRORS:  # we only ask whether it works
        return False
    return True


def _slice(batch: pa.RecordBatch, start: int, stop: int) -> pa.RecordBatch:
    return batch.slice(start, stop - start)


def _show_value(array: pa.Array, row: int, limit: int = 80) -> str:
    try:
        text = repr(array[row].as_py())
    except (ValueError, OverflowError):  # e.g. a timestamp Python's datetime cannot hold
        text = array.slice(row, 1).to_string().strip("[] \n")  # "<value out of range: ...>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Sequence:
    """The files of one partition: the batches waiting for it and its open file."""

    def __init__(self, directory: str, partition: Tuple[Tuple[str, Any], ...] = ()) -> None:
        self.directory = directory
        self.partition = partition
        self.waiting: List[Rows] = []
        self.waiting_bytes = 0
        self.stream: Optional[MultipartStream] = None
        self.encoder: Optional[FileEncoder] = None

    @property
    def size(self) -> int:
        return self.stream.tell() if self.stream is not None else 0


class FileWriter:
    """Writes batches (or elements, through a :class:`~.batches.Batcher`) into pending files.

    >>> from beam_s3_sink import CsvFormat
    >>> from beam_s3_sink.keys import S3Location
    >>> settings = WriteSettings(CopyKeys(S3Location("bucket", "p"), "id"), S3Config(), CsvFormat(),
    ...                          pa.schema([("id", pa.int64())]), 256 * 2**20)
    >>> writer = FileWriter(client, pool, settings, lambda directory, n: f"p/part-{n:04d}.csv")
    >>> writer.add({"id": 1}); writer.add({"id": 2}); report = writer.finish()
    >>> report.rows, [f.key for f in report.files]  # pending: completion makes them visible
    (2, ['p/part-0001.csv'])
    """

    def __init__(
        self,
        client: Any,
        pool: ThreadPoolExecutor,
        settings: WriteSettings,
        name: NameFn,
        on_file: Callable[[PendingFile], None] = lambda f: None,
        encode_pool: Optional[ThreadPoolExecutor] = None,
        buffer_bytes: int = BATCH_BYTES,
    ) -> None:
        self._client = client
        self._pool = pool
        self._settings = settings
        self._config: S3Config = settings.config
        self._format = settings.format
        self._layout = settings.layout
        self._file_schema = settings.layout.file_schema(settings.schema)
        self._name = name
        self._on_file = on_file
        self._encode_pool = encode_pool
        self._buffer_bytes = buffer_bytes
        self._batcher: Optional[Batcher] = None  # made by the first add()
        self._sequences: Dict[Hashable, _Sequence] = {}  # by partition: (directory, partition record)
        self._opened: Dict[int, _Sequence] = {}  # sequences with an open file, by id()
        self._file_numbers: Dict[str, int] = {}  # the last file number per directory
        self._waiting_bytes = 0
        self._encoding: Deque["Future[None]"] = collections.deque()
        self._part_buffers = PartBuffers(self._config.part_size, keep=self._config.max_concurrency + 1)
        self._encode_failed = False  # set on the encode thread: later batches are dropped
        self._current: Optional[_Sequence] = None
        self._done: List[PendingFile] = []
        self._reported = 0  # files of self._done given to on_file
        self._limit: BadRowLimit = settings.bad_rows
        self.dead_letters: List[BadRow] = []  # from Batch's blobs and from screening
        self.error: Optional[str] = None

    # input ------------------------------------------------------------------------------
    def add(self, element: Any) -> None:
        """Take one row or Arrow element; a no-op after an error."""
        if self.error is not None:
            return
        if self._batcher is None:
            self._batcher = Batcher(self._settings.schema, self._buffer_bytes, self._limit)
        try:
            batches = self._batcher.add(element)
        except HANDLED as exc:
            self._fail(exc)
            return
        self.dead_letters.extend(self._batcher.take_bad())
        for batch in batches:
            self.add_batch(batch)

    def add_blob(self, blob: Union[bytes, Batches]) -> None:
        """Take the batches of a blob (:func:`~.batches.decode_blob`); an error blob fails the
        writer; a dead-letter blob's rows are kept for the report."""
        bad = dead_letters_of(blob)
        if bad is not None:
            self.dead_letters.extend(bad)
            return
        try:
            for batch in decode_blob(blob):
                self.add_batch(batch)
        except (BlobError, pa.ArrowException) as exc:
            self._fail(exc)

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Write a batch of exactly the copy's schema, split by partition; a no-op after an error."""
        if self.error is not None or not batch.num_rows:
            return
        try:
            if batch.schema is not self._settings.schema and not batch.schema.equals(self._settings.schema):
                batch = conform(batch, self._settings.schema)  # a table's types (int into long)
            parts = self._checked_parts(batch)
            if not self._layout.partition_by:
                for split, checked in parts:  # one part, or none once screening left no row
                    self._encode(self._sequence(split), [(split.rows, checked)])
                return
            for split, checked in parts:
                sequence = self._sequence(split)
                size = split.rows.nbytes + (checked.nbytes if checked is not None else 0)  # lines wait too
                sequence.waiting.append((split.rows, checked))
                sequence.waiting_bytes += size
                self._waiting_bytes += size
                if sequence.waiting_bytes >= self._buffer_bytes:
                    self._write_waiting(sequence)
            while self._waiting_bytes > self._settings.max_open_files * self._buffer_bytes:
                self._write_waiting(max(self._sequences.values(), key=lambda s: s.waiting_bytes))
        except HANDLED as exc:
            self._fail(exc)

    def finish(self) -> UploadReport:
        """Write what waits, finish every file's parts; return the report (or the error)."""
        if self.error is None:
            try:
                if self._batcher is not None:
                    for batch in self._batcher.flush():
                        self.add_batch(batch)
                for sequence in list(self._sequences.values()):
                    self._write_waiting(sequence)
                self._drain()
                for sequence in self._sequences.values():
                    self._close_file(sequence)
                self._report_files()
            except HANDLED as exc:
                self._fail(exc)
        if self.error is not None:
            return UploadReport(error=self.error)
        return UploadReport(
            files=tuple(self._done),
            rows=sum(f.rows for f in self._done),
            bytes=sum(f.bytes for f in self._done),
            dead_letters=tuple(self.dead_letters),
        )

    @property
    def open_files(self) -> int:
        """How many files are open now (at most ``max_open_files``), once the encoder is idle."""
        self._drain()
        return len(self._opened)

    # partitions -------------------------------------------------------------------------
    def _parts(self, batch: pa.RecordBatch) -> List[Part]:
        """``batch``'s rows per partition, in the file schema (all of them, without partitions)."""
        if not batch.num_rows:  # every row screened out
            return []
        if not self._layout.partition_by:
            return [Part("", (), batch)]
        return self._layout.split(batch, self._settings.schema)

    def _checked_parts(self, batch: pa.RecordBatch) -> List[Tuple[Part, Optional[pa.Array]]]:
        """``batch``'s parts (:meth:`_parts`), each with what ``Format.check_values`` made of its
        rows when ``max_bad_rows`` is set (a line format's lines, for the encoder to write: each
        part is rendered once), else None. A batch that a check refuses (or that the layout
        cannot split) is screened whole, as the rows came (:meth:`_screen`), and then split
        again: its good rows go unchecked, to be rendered by the encoder."""
        if not self._limit.enabled:
            return [(part, None) for part in self._parts(batch)]
        try:
            parts = self._parts(batch)
            return [(part, self._format.check_values(part.rows)) for part in parts]
        except (*ENCODE_ERRORS, RowError):  # a row is bad: which one, in the whole batch
            return [(part, None) for part in self._parts(self._screen(batch))]

    def _sequence(self, part: Part) -> _Sequence:
        """The sequence of ``part``'s partition (two partitions may share a directory: a
        table's ``p=null`` holds the null and the string ``"null"``, each in files of its own)."""
        route = (part.directory, part.partition)
        sequence = self._sequences.get(route)
        if sequence is None:
            sequence = self._sequences[route] = _Sequence(part.directory, part.partition)
        return sequence

    def _write_waiting(self, sequence: _Sequence) -> None:
        waiting, sequence.waiting = sequence.waiting, []
        self._waiting_bytes -= sequence.waiting_bytes
        sequence.waiting_bytes = 0
        if waiting:
            self._encode(sequence, waiting)

    # encoding ---------------------------------------------------------------------------
    def _encode(self, sequence: _Sequence, batches: List[Rows]) -> None:
        """Encode ``batches`` (each with what the format's check made of it, or None) into
        ``sequence``'s files, on the encode thread if there is one (an error of an earlier
        batch is raised here)."""
        if self._encode_pool is None:
            self._write(sequence, batches)
        else:
            self._encoding.append(self._encode_pool.submit(self._encode_task, sequence, batches))
            while len(self._encoding) > ENCODE_AHEAD:
                self._encoding.popleft().result()
        self._report_files()

    def _encode_task(self, sequence: _Sequence, batches: List[Rows]) -> None:
        if self._encode_failed:  # an earlier batch failed: the caller fails the writer
            return
        try:
            self._write(sequence, batches)
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
        """Give the files closed since the last call to ``on_file`` (in the caller's thread,
        where Beam's metrics live)."""
        while self._reported < len(self._done):
            self._reported += 1
            self._on_file(self._done[self._reported - 1])

    def _write(self, sequence: _Sequence, batches: List[Rows]) -> None:
        for batch, checked in batches:
            rest: Optional[pa.RecordBatch] = batch
            try:
                while rest is not None and rest.num_rows:
                    if sequence.encoder is None:
                        self._open_file(sequence)
                    assert sequence.encoder is not None
                    if checked is None:
                        rest = sequence.encoder.write(rest)
                    else:
                        rest = sequence.encoder.write(rest, checked)
                        if rest is not None:  # the rows that did not fit are the last ones
                            checked = checked.slice(len(checked) - rest.num_rows)
                    if rest is not None or sequence.encoder.full:
                        self._close_file(sequence)
            except ENCODE_ERRORS as exc:  # explained: the column and the value
                raise EncodeError(self._explain_encode_error(batch, exc)) from exc

    # files ------------------------------------------------------------------------------
    def _open_file(self, sequence: _Sequence) -> None:
        if len(self._opened) >= self._settings.max_open_files:
            largest = max(self._opened.values(), key=lambda s: s.size)
            _log.debug("%d files open: closing the largest, in %r", len(self._opened), largest.directory)
            self._close_file(largest)
        self._opened[id(sequence)] = sequence
        number = self._file_numbers[sequence.directory] = self._file_numbers.get(sequence.directory, 0) + 1
        self._current = sequence
        sequence.stream = MultipartStream(
            self._client,
            self._settings.keys.location.bucket,
            self._name(sequence.directory, number),
            part_size=self._config.part_size,
            pool=self._pool,
            max_in_flight=self._config.max_concurrency,
            create_args=self._config.objects.data_file_args(self._format.content_type),
            part_args=self._config.objects.part_args(),
            buffers=self._part_buffers,
        )
        sequence.encoder = self._format.open(self._file_schema, sequence.stream, self._settings.max_file_size)

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
        pending = dataclasses.replace(
            stream.finish(rows=encoder.rows), stats=encoder.stats(), partition=sequence.partition
        )
        sequence.encoder = sequence.stream = None
        self._opened.pop(id(sequence), None)
        self._done.append(pending)
        _log.debug("uploaded %s (pending): %d rows, %d bytes", pending.key, pending.rows, pending.bytes)

    def _explain_encode_error(self, batch: pa.RecordBatch, exc: BaseException) -> str:
        """Name the column and the value the format could not encode (on the error path only:
        it re-encodes the batch column by column, then that column row by row)."""
        return self._explain(batch, exc)[1]

    def _explain(self, batch: pa.RecordBatch, exc: BaseException) -> Tuple[Optional[str], str]:
        """(the column, the message) of :meth:`_explain_encode_error`."""
        what = f"the {self._format.name} format cannot encode"
        for index, field in enumerate(self._file_schema):
            column = batch.select([index])
            if _encodes(self._format, column):
                continue
            for row in range(column.num_rows):
                if not _encodes(self._format, column.slice(row, 1)):
                    value = _show_value(column.column(0), row)
                    why = f"{what} column {field.name!r} ({field.type}), value {value}: {type(exc).__name__}: {exc}"
                    return field.name, why
            return field.name, f"{what} column {field.name!r} ({field.type}): {type(exc).__name__}: {exc}"
        return None, f"{what} a row: {type(exc).__name__}: {exc}"

    # bad rows -----------------------------------------------------------------------------
    def _file_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch``'s columns that the files hold (a partition column may be left out)."""
        if batch.schema.names == self._file_schema.names:
            return batch
        columns = [batch.column(name) for name in self._file_schema.names]
        return pa.RecordBatch.from_arrays(columns, schema=self._file_schema)

    def _check_encodes(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        try:
            self._format.check_values(self._file_columns(batch))
        except ENCODE_ERRORS as exc:
            raise EncodeError(str(exc)) from exc
        return batch

    def _screen(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` without the rows the format cannot encode (each a dead letter)."""
        bound = self._limit.local_bound()
        left = None if bound is None else bound - len(self.dead_letters)
        try:
            good, bad = bisect(batch, batch.num_rows, self._check_encodes, _slice, ENCODE_ERRORS, left)
        except TooManyBadRows as too_many:
            index, error = too_many.bad[0]
            reason = self._explain(self._file_columns(batch.slice(index, 1)), error.__cause__ or error)[1]
            raise EncodeError(
                f"more than max_bad_rows={self._limit} bad rows in one writer; the first: {reason}"
            ) from error
        for index, error in bad:
            row = batch.slice(index, 1)
            column, reason = self._explain(self._file_columns(row), error.__cause__ or error)
            self.dead_letters.append(BadRow(element_json(row.to_pylist()[0]), column, reason, "", None))
        return (
            pa.Table.from_batches(good, schema=batch.schema).combine_chunks().to_batches()[0]
            if good
            else batch.slice(0, 0)
        )

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
        self.error = f"{exc} (while writing s3://{self._settings.keys.location.bucket}/{key}; nothing was made visible)"
        for sequence in self._sequences.values():
            if sequence.stream is not None:
                sequence.stream.abort()
            sequence.encoder = sequence.stream = None
            sequence.waiting = []

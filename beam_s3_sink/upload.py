"""Step 2, upload: every worker encodes its rows and uploads them, completing nothing.

Per bundle, per open data file, three buffering layers bound what a worker holds::

    rows ─▶ row buffer ─(≈ batch_bytes)─▶ RecordBatch ─▶ encoder ─▶ MultipartStream ─▶ S3 parts
            Python dicts                  pyarrow         Parquet:    part_size bytes,
                                                          ≤ 1 row     ≤ max_concurrency parts
                                                          group       in flight on a pool

A file is closed when it reaches ``max_file_size`` and the next one is opened. At the end of
the bundle the last parts are uploaded and the bundle emits one :class:`BundleReport`: for each
file its key, upload id, part ETags, rows and bytes. Nothing is completed here, so the uploads
of a bundle that fails or is retried never become visible; completion aborts them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, List, Mapping, Optional

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .config import S3Config
from .formats.base import FileEncoder, Format
from .keys import CopyKeys, new_token
from .results import BundleReport, InitState, PendingFile
from .s3 import MultipartStream, RetryCounter, S3RequestError
from .schema import RowError, as_mapping, rows_to_batch

__all__ = ["UploadFn"]

_log = logging.getLogger(__name__)
NAMESPACE = "beam_s3_sink"
BATCH_BYTES = 4 * 2**20
MAX_BATCH_ROWS = 16384


class EncodeError(ValueError):
    """The format could not encode a value; the message names the column and the value."""


def _encodes(fmt: Format, batch: pa.RecordBatch) -> bool:
    import io

    try:
        encoder = fmt.open(batch.schema, io.BytesIO(), 2**62)
        encoder.write(batch)
        encoder.close()
    except Exception:  # noqa: BLE001 - we only ask whether it works
        return False
    return True


def _show_value(array: pa.Array, row: int, limit: int = 80) -> str:
    try:
        text = repr(array[row].as_py())
    except Exception:  # noqa: BLE001 - e.g. a timestamp Python's datetime cannot hold
        text = array.slice(row, 1).to_string().strip("[] \n")  # "<value out of range: ...>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_HANDLED = (RowError, S3RequestError, EncodeError, ValueError, TypeError, pa.ArrowException)


class UploadFn(beam.DoFn):
    """Encodes and uploads rows; emits one :class:`BundleReport` per bundle that saw rows."""

    def __init__(self, keys: CopyKeys, config: S3Config, fmt: Format, schema: pa.Schema,
                 max_file_size: int) -> None:
        self._keys = keys
        self._config = config
        self._format = fmt
        self._schema = schema
        self._max_file_size = max_file_size
        self._rows_counter = Metrics.counter(NAMESPACE, "rows")
        self._bytes_counter = Metrics.counter(NAMESPACE, "bytes")
        self._files_counter = Metrics.counter(NAMESPACE, "files")
        self._parts_counter = Metrics.counter(NAMESPACE, "parts")
        self._retries_counter = Metrics.counter(NAMESPACE, "retries")
        self._client: Any = None
        self._pool: Optional[ThreadPoolExecutor] = None

    def setup(self) -> None:
        self._client = self._config.make_client()
        self._retries = RetryCounter.attach(self._client)
        self._pool = ThreadPoolExecutor(self._config.max_concurrency, thread_name_prefix="s3-part")

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def start_bundle(self) -> None:
        self._token = new_token()
        self._buffer: List[Mapping[str, Any]] = []
        self._batch_rows = 1024
        self._stream: Optional[MultipartStream] = None
        self._encoder: Optional[FileEncoder] = None
        self._done: List[PendingFile] = []
        self._error: Optional[str] = None
        self._active = False

    def process(self, row: Any, state: InitState) -> Iterable[Any]:
        if state.error is not None or state.done is not None or self._error is not None:
            return ()
        self._active = True
        try:
            self._buffer.append(as_mapping(row))
            if len(self._buffer) >= self._batch_rows:
                self._flush_rows()
                self._retries_counter.inc(self._retries.drain())
        except _HANDLED as exc:
            self._fail(exc)
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        if not self._active:
            return
        if self._error is None:
            try:
                self._flush_rows()
                self._close_file()
            except _HANDLED as exc:
                self._fail(exc)
            except Exception as exc:  # noqa: BLE001 - an encoder failing to end its file
                self._fail(EncodeError(f"the {self._format.name} format could not finish a file: "
                                       f"{type(exc).__name__}: {exc}"))
        self._retries_counter.inc(self._retries.drain())
        if self._error is not None:
            report = BundleReport(error=self._error)
        else:
            report = BundleReport(files=tuple(self._done), rows=sum(f.rows for f in self._done),
                                  bytes=sum(f.bytes for f in self._done))
        yield WindowedValue(report, GlobalWindow().max_timestamp(), [GlobalWindow()])

    # buffering ------------------------------------------------------------------------
    def _flush_rows(self) -> None:
        if not self._buffer:
            return
        rows, self._buffer = self._buffer, []
        batch = rows_to_batch(rows, self._schema)
        per_row = max(1, batch.nbytes // max(1, batch.num_rows))
        self._batch_rows = max(1, min(MAX_BATCH_ROWS, BATCH_BYTES // per_row))
        try:
            self._write(batch)
        except S3RequestError:
            raise
        except Exception as exc:  # noqa: BLE001 - any encoder failure: explained, not lost
            raise EncodeError(self._explain_encode_error(batch, exc)) from exc

    def _write(self, batch: Optional[pa.RecordBatch]) -> None:
        while batch is not None and batch.num_rows:
            if self._encoder is None:
                self._open_file()
            assert self._encoder is not None
            batch = self._encoder.write(batch)
            if batch is not None or self._encoder.full:
                self._close_file()

    # files ----------------------------------------------------------------------------
    def _open_file(self) -> None:
        key = self._keys.data_file(self._token, len(self._done) + 1, self._format.extension)
        assert self._pool is not None
        self._stream = MultipartStream(
            self._client, self._keys.location.bucket, key, part_size=self._config.part_size,
            pool=self._pool, max_in_flight=self._config.max_concurrency,
            create_args=self._config.objects.data_file_args(self._format.extension),
            part_args=self._config.objects.part_args())
        self._encoder = self._format.open(self._schema, self._stream, self._max_file_size)

    def _close_file(self) -> None:
        if self._encoder is None or self._stream is None:
            return
        encoder, stream = self._encoder, self._stream
        encoder.close()
        pending = stream.finish(rows=encoder.rows)
        self._encoder = self._stream = None
        self._done.append(pending)
        self._rows_counter.inc(pending.rows)
        self._bytes_counter.inc(pending.bytes)
        self._files_counter.inc()
        self._parts_counter.inc(len(pending.parts))
        _log.debug("uploaded %s: %d rows, %d bytes, %d parts (pending)",
                   pending.key, pending.rows, pending.bytes, len(pending.parts))

    def _explain_encode_error(self, batch: pa.RecordBatch, exc: BaseException) -> str:
        """Name the column and the value the format could not encode (on the error path only:
        it re-encodes the batch column by column, then that column row by row)."""
        what = f"the {self._format.name} format cannot encode"
        for index, field in enumerate(self._schema):
            column = batch.select([index])
            if _encodes(self._format, column):
                continue
            for row in range(column.num_rows):
                if not _encodes(self._format, column.slice(row, 1)):
                    return (f"{what} column {field.name!r} ({field.type}), value "
                            f"{_show_value(column.column(0), row)}: "
                            f"{type(exc).__name__}: {exc}")
            return f"{what} column {field.name!r} ({field.type}): {type(exc).__name__}: {exc}"
        return f"{what} a row: {type(exc).__name__}: {exc}"

    def _fail(self, exc: BaseException) -> None:
        key = self._stream.key if self._stream else self._keys.data_file(
            self._token, len(self._done) + 1, self._format.extension)
        self._error = f"{exc} (while writing s3://{self._keys.location.bucket}/{key}; nothing was made visible)"
        _log.error("copy %s failed: %s", self._keys.sink_id, self._error)
        if self._stream is not None:
            self._stream.abort()
        self._encoder = self._stream = None
        self._buffer = []

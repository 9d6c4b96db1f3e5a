"""Step 2, upload: workers encode their rows and upload them, completing nothing.

Three DoFns upload, all built on :class:`UploadBase` (the shared client, the part pool, the
metrics) and :class:`~beam_s3_sink.writer.FileWriter` (the buffering layers that bound
memory):

* :class:`UploadFn`, here, on the DirectRunner: per bundle, one writer takes the bundle's rows
  and writes them into data files named by a fresh token (``P/ID-<token>-<nnnn>.<ext>``, in
  partition directories with ``partition_by``);
* :class:`~beam_s3_sink.spill.WriteSpilledFn` on every other runner: one writer per spill key,
  over the Arrow blobs that many small bundles made (:mod:`.spill`);
* :class:`~beam_s3_sink.batches.BatchUploadFn` with ``num_batches``: one writer per batch.

::

    bundle ─▶ UploadFn.process(row) ─▶ FileWriter ─▶ pending multipart uploads
                                                        │ finish_bundle: last parts
                                                        ▼
                                         one BundleReport (key, upload id, ETags, rows, bytes)

At the end of its bundle (or key, or batch) the writer uploads the last parts and the DoFn
emits one :class:`BundleReport`. Nothing is completed here, so the uploads of a bundle that
fails or is retried never become visible; completion aborts them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Optional

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .config import S3Config
from .formats.base import Format
from .keys import CopyKeys, new_token
from .layout import Layout
from .results import InitState, PendingFile
from .clients import shared_client
from .writer import EncodeError, FileWriter

__all__ = ["UploadFn", "UploadBase", "EncodeError"]

_log = logging.getLogger(__name__)
NAMESPACE = "beam_s3_sink"


class UploadBase(beam.DoFn):
    """What every upload DoFn shares: the client, the part pool, the metrics, and making a
    :class:`FileWriter` whose files are named by ``name(directory, number)``."""

    def __init__(self, keys: CopyKeys, config: S3Config, fmt: Format, schema: pa.Schema,
                 max_file_size: int, layout: Layout = Layout()) -> None:
        self._keys = keys
        self._config = config
        self._format = fmt
        self._schema = schema
        self._max_file_size = max_file_size
        self._layout = layout
        self._rows_counter = Metrics.counter(NAMESPACE, "rows")
        self._bytes_counter = Metrics.counter(NAMESPACE, "bytes")
        self._files_counter = Metrics.counter(NAMESPACE, "files")
        self._parts_counter = Metrics.counter(NAMESPACE, "parts")
        self._retries_counter = Metrics.counter(NAMESPACE, "retries")
        self._client: Any = None
        self._pool: Optional[ThreadPoolExecutor] = None

    def setup(self) -> None:
        self._client, self._retries = shared_client(self._config)
        self._pool = ThreadPoolExecutor(self._config.max_concurrency, thread_name_prefix="s3-part")

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _writer(self, name: Any) -> FileWriter:
        return FileWriter(self._client, self._pool, self._config, self._format, self._schema,
                          self._max_file_size, self._keys.location.bucket, name, self._layout,
                          on_file=self._count_file)

    def _count_file(self, pending: PendingFile) -> None:
        self._rows_counter.inc(pending.rows)
        self._bytes_counter.inc(pending.bytes)
        self._files_counter.inc()
        self._parts_counter.inc(len(pending.parts))

    def _log_error(self, writer: FileWriter) -> None:
        if writer.error is not None:
            _log.error("copy %s failed: %s", self._keys.sink_id, writer.error)


class UploadFn(UploadBase):
    """Encodes and uploads rows; emits one :class:`BundleReport` per bundle that saw rows."""

    def start_bundle(self) -> None:
        token, extension = new_token(), self._format.extension
        self._file_writer = self._writer(
            lambda directory, number: self._keys.data_file(token, number, extension, directory))
        self._active = False

    def process(self, row: Any, state: InitState) -> Iterable[Any]:
        if state.error is not None or state.done is not None:
            return ()
        self._active = True
        self._file_writer.add(row)
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        if not self._active:
            return
        report = self._file_writer.finish()
        self._log_error(self._file_writer)
        self._retries_counter.inc(self._retries.drain())
        yield WindowedValue(report, GlobalWindow().max_timestamp(), [GlobalWindow()])

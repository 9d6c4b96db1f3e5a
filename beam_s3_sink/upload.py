"""Step 2, upload: workers encode their rows and upload them, completing nothing.

Three DoFns upload (the ``Upload`` step of :class:`~beam_s3_sink.CopyToS3`), all built on :class:`_UploadBase` (the shared client, the part pool, the
metrics) and :class:`~beam_s3_sink.writer.FileWriter` (the buffering layers that bound
memory):

* :class:`_UploadFn`, here, on the DirectRunner: per bundle, one writer takes the bundle's rows
  and writes them into data files named by a fresh token (``P/ID-<token>-<nnnn>.<ext>``, in
  partition directories with ``partition_by``). It reads the initialization's outcome as a
  side input, and Beam's price for calling such a DoFn is about twice a plain one's (its
  per-window invoker), so :class:`_GatherFn`, with no side input, first gathers the rows into
  :class:`~beam_s3_sink.messages.Gathered` lists of up to ``GATHER_ROWS``;
* :class:`~beam_s3_sink.spill._WriteSpilledFn` on every other runner: one writer per spill key,
  over the Arrow blobs that many small bundles made (:mod:`.spill`);
* :class:`~beam_s3_sink.sharding._ShardUploadFn` with ``num_batches``: one writer per shard.

::

    bundle ─▶ _GatherFn ─Gathered─▶ _UploadFn.process ─▶ FileWriter ─▶ pending multipart uploads
                                                                            │ finish_bundle: last parts
                                                                            ▼
                                                             one UploadReport (key, upload id, ETags, rows, bytes)

At the end of its bundle (or spill key, or shard) the writer uploads the last parts and the DoFn
emits one :class:`~beam_s3_sink.messages.UploadReport`. Nothing is completed here, so the uploads of a bundle that
fails or is retried never become visible; completion aborts them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, List, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .arrow_input import ARROW_TYPES
from .clients import _S3DoFn
from .config import S3Config
from .formats.base import Format
from .keys import CopyKeys, new_token
from .layout import Layout
from .messages import Gathered, InitOutcome, PendingFile
from .writer import FileWriter

__all__: List[str] = []  # its DoFns are private: CopyToS3 wires them

_log = logging.getLogger(__name__)

# Elements per Gathered list: enough that the side-input DoFn's per-call price vanishes, few
# enough that a list of large rows holds no more than the writer's first row buffer (1,024 rows).
GATHER_ROWS = 256


class _UploadBase(_S3DoFn):
    """What every upload DoFn adds to :class:`~beam_s3_sink.clients._S3DoFn`: the part pool,
    the size metrics, and making a :class:`FileWriter` whose files are named by
    ``name(directory, number)``."""

    def __init__(
        self,
        keys: CopyKeys,
        config: S3Config,
        fmt: Format,
        schema: pa.Schema,
        max_file_size: int,
        layout: Layout = Layout(),
    ) -> None:
        super().__init__(config)
        self._keys = keys
        self._format = fmt
        self._schema = schema
        self._max_file_size = max_file_size
        self._layout = layout
        self._rows_counter = self._counter("rows")
        self._bytes_counter = self._counter("bytes")
        self._files_counter = self._counter("files")
        self._parts_counter = self._counter("parts")
        self._pool: Optional[ThreadPoolExecutor] = None
        self._encode_pools: Tuple[ThreadPoolExecutor, ...] = ()

    def setup(self) -> None:
        super().setup()
        self._pool = ThreadPoolExecutor(self._config.max_concurrency, thread_name_prefix="s3-part")
        # One thread per lane (see .writer; a thread starts when its lane first has a batch).
        self._encode_pools = tuple(
            ThreadPoolExecutor(1, thread_name_prefix=f"encode-{lane}") for lane in range(self._layout.encode_threads)
        )

    def teardown(self) -> None:
        for pool in (*self._encode_pools, self._pool):
            if pool is not None:
                pool.shutdown(wait=True)

    def _writer(self, name: Any) -> FileWriter:
        """A writer whose files are named by ``name(directory, number)``, encoding on the
        layout's ``encode_threads`` (more than one only for large Arrow input: :mod:`.writer`)."""
        assert self._pool is not None, "setup() makes the pool"
        return FileWriter(
            self._client,
            self._pool,
            self._config,
            self._format,
            self._schema,
            self._max_file_size,
            self._keys.location.bucket,
            name,
            self._layout,
            on_file=self._count_file,
            encode_pools=self._encode_pools,
        )

    def _count_file(self, pending: PendingFile) -> None:
        self._rows_counter.inc(pending.rows)
        self._bytes_counter.inc(pending.bytes)
        self._files_counter.inc()
        self._parts_counter.inc(len(pending.parts))

    def _log_error(self, writer: FileWriter) -> None:
        if writer.error is not None:
            _log.error("copy %s failed: %s", self._keys.sink_id, writer.error)


class _GatherFn(beam.DoFn):
    """Gathers a bundle's elements into :class:`Gathered` lists of up to ``GATHER_ROWS``, in
    order; an Arrow batch ends its list (a list of tables would hold too much)."""

    def start_bundle(self) -> None:
        self._elements: List[Any] = []

    def process(self, element: Any) -> Iterable[Gathered]:
        elements = self._elements
        elements.append(element)
        if len(elements) >= GATHER_ROWS or (type(element) is not dict and isinstance(element, ARROW_TYPES)):
            self._elements = []
            return (Gathered(elements),)
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        if self._elements:
            yield WindowedValue(Gathered(self._elements), GlobalWindow().max_timestamp(), [GlobalWindow()])
            self._elements = []


class _UploadFn(_UploadBase):
    """Encodes and uploads rows; emits one :class:`UploadReport` per bundle that saw rows.

    Its elements are rows, Arrow batches, or :class:`Gathered` lists of them."""

    def start_bundle(self) -> None:
        token, extension = new_token(), self._format.extension
        self._file_writer = self._writer(
            lambda directory, number: self._keys.data_file(token, number, extension, directory)
        )
        self._active = False

    def process(self, row: Any, state: InitOutcome) -> Iterable[Any]:
        if state.error is not None or state.done is not None:
            return ()
        self._active = True
        if type(row) is Gathered:
            self._file_writer.add_rows(row.elements)
        else:
            self._file_writer.add(row)
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        if not self._active:
            return
        report = self._file_writer.finish()
        self._log_error(self._file_writer)
        self._count_retries()
        yield WindowedValue(report, GlobalWindow().max_timestamp(), [GlobalWindow()])

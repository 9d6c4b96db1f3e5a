"""The ``Write`` half of the upload step: :class:`_WriteFn`, the one DoFn that writes data files.

It reads the initialization's outcome as a side input (a stream's: runs it itself, see
:mod:`.stream_init`) and writes the ``(key, blob)`` pairs of
``Batch`` (:mod:`.batches`) through a :class:`~.writer.FileWriter`: per bundle when the two
steps are fused, per key after a ``GroupByKey``. It completes nothing: it emits one
:class:`~.messages.UploadReport` per writer (its pending files, or its error), so the uploads
of a bundle that fails or is retried never become visible; completion aborts them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, List, Optional

from apache_beam import DoFn
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .batches import Key
from .clients import _S3DoFn
from .keys import new_token
from .messages import InitOutcome, PendingFile, UploadReport
from .stream import unit_of, writer_token
from .stream_init import InitializedInStep, outcome_of
from .writer import FileWriter, WriteSettings

__all__: List[str] = []  # its DoFn is private: CopyToS3 wires it

_log = logging.getLogger(__name__)


class _WriteFn(_S3DoFn):
    """Writes blobs into pending files; emits one :class:`UploadReport` per writer.

    ``grouped=False``: elements are :class:`~.batches.Batches`, one writer per bundle. ``grouped=True``:
    elements are ``(key, [blob, ...])``, one writer per key; an int key is a ``num_batches``
    batch number, whose files are ``P/ID-batch-<bbbb>-<nnnn>`` (the same keys on every run).
    Other files are ``P/ID-<token>-<nnnn>``, with a fresh token per writer and attempt (a
    stream's on-time writers' begin with their unit's digits: :func:`~.stream.writer_token`).
    A stream's (``stream_init``) reads no side input: it initializes itself (:mod:`.stream_init`);
    when that fails, each writer reports the error instead of writing, so that its unit fails.
    """

    def __init__(self, settings: WriteSettings, grouped: bool, stream_init: Optional[InitializedInStep] = None) -> None:
        super().__init__(settings.config)
        self._settings = settings
        self._grouped = grouped
        self._stream_init = stream_init
        self._counters = {name: self._counter(name) for name in ("rows", "bytes", "files", "parts")}
        self._pool: Optional[ThreadPoolExecutor] = None
        self._encode_pool: Optional[ThreadPoolExecutor] = None

    def setup(self) -> None:
        super().setup()
        if self._stream_init is not None:
            self._stream_init.setup()
        self._pool = ThreadPoolExecutor(self._config.max_concurrency, thread_name_prefix="s3-part")
        self._encode_pool = ThreadPoolExecutor(1, thread_name_prefix="encode")

    def teardown(self) -> None:
        for pool in (self._encode_pool, self._pool):
            if pool is not None:
                pool.shutdown(wait=True)

    def start_bundle(self) -> None:
        self._bundle_writer: Optional[FileWriter] = None

    def process(
        self,
        element: Any,
        init: Optional[InitOutcome],
        window: Any = DoFn.WindowParam,
        pane: Any = DoFn.PaneInfoParam,
    ) -> Iterable[UploadReport]:
        init = outcome_of(init, self._stream_init)
        if init.error is not None and self._stream_init is not None:
            yield UploadReport(error=init.error)  # the unit fails with it (a bounded copy's completion reports it)
            return
        if init.error is not None or init.done is not None:
            return
        settings = init.settings or self._settings
        if not self._grouped:  # Batches, from the fused Batch step
            if self._bundle_writer is None:
                self._bundle_writer = self._writer("", settings)
            self._bundle_writer.add_blob(element)
            return
        key, blobs = element
        token = writer_token(unit_of(window, pane)) if self._stream_init is not None else None
        writer = self._writer(key, settings, token)
        for blob in blobs:
            writer.add_blob(blob)
            if writer.error is not None:
                break
        yield self._finish(writer)

    def finish_bundle(self) -> Iterable[WindowedValue]:
        if self._bundle_writer is not None:
            yield WindowedValue(self._finish(self._bundle_writer), GlobalWindow().max_timestamp(), [GlobalWindow()])
            self._bundle_writer = None

    def _writer(self, key: Key, settings: WriteSettings, token: Optional[str] = None) -> FileWriter:
        """A writer of files named by batch number ``key`` (an int), else by ``token`` (a stream's:
        :func:`~.stream.writer_token`), else by a fresh token."""
        keys, extension = settings.keys, settings.format.extension
        if isinstance(key, int):
            name = lambda directory, number: keys.batch_file(key, number, extension, directory)  # noqa: E731
        else:
            token = token or new_token()
            name = lambda directory, number: keys.data_file(token, number, extension, directory)  # noqa: E731
        assert self._pool is not None, "setup() makes the pools"
        return FileWriter(self._client, self._pool, settings, name, self._count_file, self._encode_pool)

    def _finish(self, writer: FileWriter) -> UploadReport:
        report = writer.finish()
        if report.error is not None:
            _log.error("copy %s failed: %s", self._settings.keys.sink_id, report.error)
        self._count_retries()
        return report

    def _count_file(self, pending: PendingFile) -> None:
        counts = {"rows": pending.rows, "bytes": pending.bytes, "files": 1, "parts": len(pending.parts)}
        for name, value in counts.items():
            self._counters[name].inc(value)

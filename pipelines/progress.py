"""Rows read so far, counted where the source reads them, shown on one terminal line.

The count travels two ways, because runners differ in when they can tell it::

    source DoFn ── RowCounter.add(n) ─┬─▶ Beam counter pipelines.copy_to_s3/rows_read
                                      │      polled from PipelineResult.metrics() (Dataflow,
                                      │      Flink: runners whose run() returns at once)
                                      └─▶ <progress dir>/<worker>.count (local workers only:
                                             the DirectRunner's run() blocks until the end)
    ProgressLine (a thread in the CLI) ── the larger of the two, every half second ─▶ stderr

The progress directory is given only when the workers run on this machine (DirectRunner,
or a portable runner with ``--environment_type=LOOPBACK``); remote workers count on the
Beam counter alone.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from typing import Any, Optional, TextIO

from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

__all__ = ["RowCounter", "ProgressLine", "NAMESPACE", "ROWS_READ"]

NAMESPACE = "pipelines.copy_to_s3"
ROWS_READ = "rows_read"
_WRITE_EVERY = 0.5  # seconds between a worker's progress file updates


class RowCounter:
    """Counts rows read, on a Beam counter and (optionally) in a local progress directory.

    Picklable: make it when the pipeline is built, call :meth:`setup` in ``DoFn.setup``.

    >>> counter = RowCounter()
    >>> counter.setup(); counter.add(10); counter.flush()
    """

    def __init__(self, progress_dir: Optional[str] = None) -> None:
        self._dir = progress_dir
        self._path: Optional[str] = None
        self._total = 0
        self._written_at = 0.0
        self._metric: Any = None

    def __getstate__(self) -> dict:
        return {"_dir": self._dir}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["_dir"])

    def setup(self) -> None:
        self._metric = Metrics.counter(NAMESPACE, ROWS_READ)
        if self._dir and os.path.isdir(self._dir):
            self._path = os.path.join(self._dir, f"{uuid.uuid4().hex}.count")

    def add(self, rows: int) -> None:
        if self._metric is None:
            self.setup()
        self._metric.inc(rows)
        self._total += rows
        if self._path and time.monotonic() - self._written_at >= _WRITE_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self._path:
            return
        self._written_at = time.monotonic()
        temporary = f"{self._path}.tmp"
        try:
            with open(temporary, "w") as f:
                f.write(str(self._total))
            os.replace(temporary, self._path)
        except OSError:  # the CLI has finished and removed the directory: nobody is watching
            self._path = None


def rows_in(progress_dir: str) -> int:
    """The rows the local workers have reported in ``progress_dir``."""
    total = 0
    try:
        names = os.listdir(progress_dir)
    except OSError:
        return 0
    for name in names:
        if name.endswith(".count"):
            try:
                with open(os.path.join(progress_dir, name)) as f:
                    total += int(f.read() or 0)
            except (OSError, ValueError):
                continue
    return total


def rows_in_metrics(result: Any) -> int:
    """The ``rows_read`` counter of a running pipeline (0 where the runner cannot tell yet)."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name(ROWS_READ))
    except Exception:  # a runner without metrics, or one not ready to answer: nothing to show yet
        return 0
    return sum(max(c.attempted or 0, c.committed or 0) for c in counters["counters"])


class ProgressLine:
    """A thread that shows ``rows read: N (R rows/s)`` while the copy runs.

    On a terminal it rewrites one line; elsewhere (a log, a pipe) it prints a line every
    ``log_every`` seconds when the count has changed.

    >>> with ProgressLine(progress_dir) as progress:   # doctest: +SKIP
    ...     progress.result = pipeline.run()
    ...     progress.result.wait_until_finish()
    """

    def __init__(self, progress_dir: Optional[str], out: TextIO = sys.stderr, log_every: float = 5.0) -> None:
        self.result: Any = None
        self._dir = progress_dir
        self._out = out
        self._tty = out.isatty()
        self._every = 0.5 if self._tty else log_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._started = 0.0
        self._shown = -1

    def rows(self) -> int:
        local = rows_in(self._dir) if self._dir else 0
        remote = rows_in_metrics(self.result) if self.result is not None else 0
        return max(local, remote)

    def __enter__(self) -> "ProgressLine":
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self._tty and self._shown >= 0:
            self._out.write("\n")
            self._out.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._show(self.rows())

    def _show(self, rows: int) -> None:
        if rows == self._shown:
            return
        self._shown = rows
        elapsed = time.monotonic() - self._started
        line = f"rows read: {rows:,} ({rows / elapsed if elapsed else 0:,.0f} rows/s, {elapsed:.0f} s)"
        self._out.write(f"\r{line}\033[K" if self._tty else line + "\n")
        self._out.flush()

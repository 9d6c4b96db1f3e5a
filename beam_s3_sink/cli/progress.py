"""Rows (and bytes) read so far, counted where the source reads them, shown against the total.

The count travels two ways, because runners differ in when they can tell it::

    source DoFn ── RowCounter.add(n, bytes) ─┬─▶ Beam counters beam_s3_sink.cli/rows_read, bytes_read
                                      │      polled from PipelineResult.metrics() (Dataflow,
                                      │      Flink: runners whose run() returns at once)
                                      └─▶ <progress dir>/<worker>.count (local workers only:
                                             the DirectRunner's run() blocks until the end)
    ProgressLine (a thread in the CLI) ── the larger of the two, every half second ─▶ stderr

The total is known before the copy starts: the row counts in Parquet footers, the bytes of
CSV and JSON Lines files (compressed bytes, as read), the rows of ``generate``. With a total
the line follows the ``tqdm``/``rich`` convention on a terminal::

     42%|████▏     | 2.52M/6.00M rows [00:03<00:04, 812k rows/s]

and in a log (not a terminal) one line every few seconds::

    progress: 42% (2,520,000 of 6,001,215 rows), 812,000 rows/s, 3 s elapsed, about 4 s left

The progress directory is given only when the workers run on this machine (DirectRunner,
or a portable runner with ``--environment_type=LOOPBACK``); remote workers count on the
Beam counter alone.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid
from typing import Any, Optional, TextIO, Tuple

from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

__all__ = ["RowCounter", "ProgressLine", "NAMESPACE", "ROWS_READ", "BYTES_READ", "format_progress"]

NAMESPACE = "beam_s3_sink.cli"
ROWS_READ = "rows_read"
BYTES_READ = "bytes_read"
_WRITE_EVERY = 0.5  # seconds between a worker's progress file updates

_log = logging.getLogger(__name__)


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
        self._bytes = 0
        self._written_at = 0.0
        self._metric: Any = None
        self._bytes_metric: Any = None

    def __getstate__(self) -> dict:
        return {"_dir": self._dir}

    def __setstate__(self, state: dict) -> None:
        RowCounter.__init__(self, state["_dir"])

    def setup(self) -> None:
        self._metric = Metrics.counter(NAMESPACE, ROWS_READ)
        self._bytes_metric = Metrics.counter(NAMESPACE, BYTES_READ)
        if self._dir and os.path.isdir(self._dir):
            self._path = os.path.join(self._dir, f"{uuid.uuid4().hex}.count")

    def add(self, rows: int, size: int = 0) -> None:
        """Count ``rows`` read (and ``size`` bytes of the source, where known)."""
        if self._metric is None:
            self.setup()
        self._metric.inc(rows)
        self._total += rows
        if size:
            self._bytes_metric.inc(size)
            self._bytes += size
        if self._path and time.monotonic() - self._written_at >= _WRITE_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self._path:
            return
        self._written_at = time.monotonic()
        temporary = f"{self._path}.tmp"
        try:
            with open(temporary, "w") as f:
                f.write(f"{self._total} {self._bytes}")
            os.replace(temporary, self._path)
        except OSError:  # the CLI has finished and removed the directory: nobody is watching
            self._path = None


def rows_in(progress_dir: str) -> Tuple[int, int]:
    """The (rows, bytes) the local workers have reported in ``progress_dir``."""
    rows = size = 0
    try:
        names = os.listdir(progress_dir)
    except OSError:
        return 0, 0
    for name in names:
        if name.endswith(".count"):
            try:
                with open(os.path.join(progress_dir, name)) as f:
                    parts = (f.read().split() + ["0", "0"])[:2]
                rows, size = rows + int(parts[0]), size + int(parts[1])
            except (OSError, ValueError):
                continue
    return rows, size


def rows_in_metrics(result: Any) -> Tuple[int, int]:
    """The ``rows_read`` and ``bytes_read`` counters of a running pipeline (0 where the runner
    cannot tell yet)."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    except Exception:  # a runner without metrics, or one not ready to answer: nothing to show yet
        return 0, 0

    def total(name: str) -> int:
        return sum(max(c.attempted or 0, c.committed or 0) for c in counters if c.key.metric.name == name)

    return total(ROWS_READ), total(BYTES_READ)


def _si(value: float) -> str:
    """tqdm's unit scale: 812, 81.2k, 2.52M."""
    for unit in ("", "k", "M", "G", "T"):
        if abs(value) < 999.5 or unit == "T":
            return f"{value:.0f}" if not unit else _three(value) + unit
        value /= 1000
    return f"{value:.0f}"


def _three(value: float) -> str:
    """Three significant digits, zeros kept: 6.00, 81.2, 812."""
    return f"{value:.2f}" if value < 9.995 else f"{value:.1f}" if value < 99.95 else f"{value:.0f}"


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def format_progress(done: float, total: Optional[float], elapsed: float, unit: str, tty: bool, rows: int) -> str:
    """One progress line: the tqdm/rich bar on a terminal, a plain sentence for a log.

    >>> format_progress(2_520_000, 6_000_000, 3.0, "rows", True, 2_520_000)
    ' 42%|████▏     | 2.52M/6.00M rows [00:03<00:04, 840k rows/s]'
    >>> format_progress(2_520_000, 6_000_000, 3.0, "rows", False, 2_520_000)
    'progress: 42% (2,520,000 of 6,000,000 rows), 840,000 rows/s, 3 s elapsed, about 4 s left'
    >>> format_progress(1000, None, 2.0, "rows", False, 1000)
    'rows read: 1,000 (500 rows/s, 2 s)'
    """
    rate = done / elapsed if elapsed > 0 else 0.0
    if not total:
        return f"rows read: {rows:,} ({rows / elapsed if elapsed else 0:,.0f} rows/s, {elapsed:.0f} s)"
    fraction = min(1.0, done / total)
    left = (total - done) / rate if rate > 0 else None
    if tty:
        width = 10
        filled = fraction * width
        partial = " ▏▎▍▌▋▊▉"[int((filled - int(filled)) * 8)]
        bar = ("█" * int(filled) + (partial if int(filled) < width else "")).ljust(width)
        shown = (lambda v: _si(v)) if unit == "rows" else (lambda v: _bytes(v))
        return (
            f"{fraction * 100:3.0f}%|{bar}| {shown(done)}/{shown(total)}{' rows' if unit == 'rows' else ''} "
            f"[{_clock(elapsed)}<{_clock(left) if left is not None else '?'}, "
            f"{shown(rate)}{' rows' if unit == 'rows' else ''}/s]"
        )
    what = (
        f"{done:,.0f} of {total:,.0f} rows" if unit == "rows" else (f"{_bytes(done)} of {_bytes(total)}, {rows:,} rows")
    )
    speed = f"{rate:,.0f} rows/s" if unit == "rows" else f"{_bytes(rate)}/s"
    eta = f", about {left:.0f} s left" if left is not None else ""
    return f"progress: {fraction * 100:.0f}% ({what}), {speed}, {elapsed:.0f} s elapsed{eta}"


def _bytes(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if value < 999.5 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{_three(value)} {unit}"
        value /= 1000
    return f"{value:.0f} TB"


class ProgressLine:
    """A thread that shows the rows read (against the total, if known) while the copy runs.

    On a terminal it rewrites one line; elsewhere (a log, a pipe) it prints a line every
    ``log_every`` seconds when the count has changed.

    >>> import io, tempfile
    >>> progress_dir, out = tempfile.mkdtemp(), io.StringIO()
    >>> counter = RowCounter(progress_dir)  # in the source's DoFn: setup(), add(n), flush()
    >>> counter.setup(); counter.add(7); counter.flush()
    >>> with ProgressLine(progress_dir, out=out, total_rows=10) as progress:
    ...     pass  # progress.result = pipeline.run(); progress.result.wait_until_finish()
    >>> print(out.getvalue().strip())
    progress: 70% (7 of 10 rows), ... rows/s, 0 s elapsed, about 0 s left
    """

    def __init__(
        self,
        progress_dir: Optional[str],
        out: TextIO = sys.stderr,
        log_every: float = 5.0,
        total_rows: Optional[int] = None,
        total_bytes: Optional[int] = None,
    ) -> None:
        self.result: Any = None
        self._total_rows = total_rows
        self._total_bytes = total_bytes
        self._dir = progress_dir
        self._out = out
        self._tty = out.isatty()
        self._every = 0.5 if self._tty else log_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._started = 0.0
        self._shown = -1

    def rows(self) -> Tuple[int, int]:
        """(rows, bytes) read so far."""
        local = rows_in(self._dir) if self._dir else (0, 0)
        remote = rows_in_metrics(self.result) if self.result is not None else (0, 0)
        return max(local[0], remote[0]), max(local[1], remote[1])

    def __enter__(self) -> "ProgressLine":
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self._show(self.rows())  # the final count, whenever the last tick fell
        except Exception:  # noqa: BLE001 - a display must never mask the copy's own outcome
            _log.debug("no final progress line", exc_info=True)
        if self._tty and self._shown >= 0:
            self._out.write("\n")
            self._out.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._show(self.rows())

    def _show(self, counts: Tuple[int, int]) -> None:
        rows, size = counts
        if rows == self._shown:
            return
        self._shown = rows
        elapsed = time.monotonic() - self._started
        if self._total_rows:
            line = format_progress(rows, self._total_rows, elapsed, "rows", self._tty, rows)
        elif self._total_bytes:
            line = format_progress(size, self._total_bytes, elapsed, "bytes", self._tty, rows)
        else:
            line = format_progress(rows, None, elapsed, "rows", self._tty, rows)
        self._out.write(f"\r{line}\033[K" if self._tty else line + "\n")
        self._out.flush()

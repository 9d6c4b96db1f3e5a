"""Line-oriented data files (CSV, text, JSON Lines): whole lines, a size limit, optional compression.

The CSV, text and JSON Lines encoders turn a record batch into one Arrow string array of lines (each
ending in ``\\n``); this module writes as many whole lines as fit in the file and hands the
rest back for the next file::

    lines ──▶ as many as fit ──▶ [gzip | zstd] ──▶ stream (MultipartStream)
                 └─ the rest ──▶ next file

With ``max_bad_rows`` the writer screens a batch with the format's ``check_values``, which
renders it into these lines; :meth:`LineEncoder.write` takes them with the batch
(``checked``) and writes them, so a screened batch is rendered once.

Uncompressed, the limit is exact: a file never exceeds ``max_file_size`` unless one line
alone does. Compressed, the limit applies to the compressed bytes, which are only known once
the compressor has emitted them. So lines go in steps: each step writes half of the room
left (estimated with the compression ratio seen so far in this file), then flushes the
compressor, which makes the compressed size exact again. The file is full when the next
line would not fit the estimate; it ends just under the limit, or over it only when the last
step compresses more than twice as badly as the file so far. A flush costs a few bytes and
happens once per batch until the file is nearly full.

Compression is pyarrow's ``CompressedOutputStream`` (zlib's gzip and zstd, both linked into
pyarrow already): one streaming API for both codecs, and no new dependency.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .base import FileEncoder, KeepOpen, OutputStream
from .stats import ColumnStats, StatsCounter

__all__ = [
    "COMPRESSIONS",
    "check_compression",
    "compressed_extension",
    "compressed_content_type",
    "join_lines",
    "LineEncoder",
]

COMPRESSIONS = {"gzip": "gz", "zstd": "zst"}
_COMPRESSED_CONTENT_TYPES = {"gzip": "application/gzip", "zstd": "application/zstd"}
_TRAILER_BYTES = 32
"""Room kept for what a compressor writes when it ends (gzip: a last block and 8 bytes)."""


def check_compression(owner: str, compression: Optional[str]) -> None:
    """Raise ``ValueError`` unless ``compression`` is None, ``"gzip"`` or ``"zstd"``."""
    if compression is not None and compression not in COMPRESSIONS:
        raise ValueError(f"{owner}: compression must be None, 'gzip' or 'zstd', got {compression!r}")


def compressed_extension(base: str, compression: Optional[str]) -> str:
    """``csv`` → ``csv.gz`` / ``csv.zst``.

    >>> compressed_extension("txt", "zstd")
    'txt.zst'
    """
    return base if compression is None else f"{base}.{COMPRESSIONS[compression]}"


def compressed_content_type(base: str, compression: Optional[str]) -> str:
    """``text/csv`` → ``application/gzip`` / ``application/zstd``: a compressed file's
    ``Content-Type`` is its compressor's, as for a ``.gz`` file anywhere.

    >>> compressed_content_type("text/csv", None), compressed_content_type("text/csv", "zstd")
    ('text/csv', 'application/zstd')
    """
    return base if compression is None else _COMPRESSED_CONTENT_TYPES[compression]


def join_lines(fields: List[pa.Array], delimiter: str) -> pa.Array:
    """Join the fields of each row (no NULLs left) with ``delimiter`` and end each line in LF.

    >>> join_lines([pa.array(["1", "2"]), pa.array(["a", "b"])], ",").to_pylist()
    ['1,a\\n', '2,b\\n']
    """
    line = pc.binary_join_element_wise(*fields, delimiter) if len(fields) > 1 else fields[0]
    line = pc.binary_join_element_wise(line, "\n", "")
    return line if pa.types.is_string(line.type) or pa.types.is_large_string(line.type) else line.cast(pa.string())


class LineEncoder(FileEncoder):
    """One data file of lines: ``render(batch)`` gives the lines, this writes whole ones."""

    def __init__(
        self,
        out: OutputStream,
        max_file_size: int,
        render: Callable[[pa.RecordBatch], pa.Array],
        compression: Optional[str] = None,
        header: bytes = b"",
    ) -> None:
        super().__init__(out, max_file_size)
        self._render = render
        self._start = out.tell()
        self._plain = 0  # uncompressed bytes written
        self._stopped = False
        self._sink: Any = out
        if compression is not None:
            self._sink = pa.CompressedOutputStream(KeepOpen(out), compression)
        self._compressed = compression is not None
        # The bytes that may be written before close(): all of them, less the compressor's end.
        self._limit = max_file_size - (_TRAILER_BYTES if self._compressed else 0)
        self._counter: Optional[StatsCounter] = None
        if header:
            self._emit(header)

    def _emit(self, data: Any) -> None:
        self._sink.write(data)
        self._plain += len(data)

    def _written(self) -> int:
        return self.out.tell() - self._start

    def _room(self) -> int:
        """Uncompressed bytes that may still go in."""
        left = self._limit - self._written()
        if not self._compressed or left <= 0:
            return left
        ratio = self._written() / self._plain if self._plain and self._written() else 1.0
        return int(left / max(ratio, 1e-6) / 2)

    def write(self, batch: pa.RecordBatch, checked: Optional[pa.Array] = None) -> Optional[pa.RecordBatch]:
        """Write the whole lines of ``batch`` that fit; ``checked``: its lines already rendered
        (the format's ``check_values``), else rendered here."""
        if batch.num_rows == 0:
            return None
        lines = self._render(batch) if checked is None else checked
        assert len(lines) == batch.num_rows, "checked must hold one line per row of batch"
        width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
        offsets = np.frombuffer(
            lines.buffers()[1], width, len(lines) + 1, lines.offset * np.dtype(width).itemsize
        ).astype(np.int64)
        data = memoryview(lines.buffers()[2])
        start, count = 0, len(lines)
        while start < count:
            room = self._room()
            ends = offsets[start + 1 :] - offsets[start]
            fit = int(np.searchsorted(ends, room, side="right"))
            if fit == 0:
                if self.rows:
                    self._stopped = True
                    break
                fit = 1  # a row larger than the limit gets a file of its own
            self._emit(data[offsets[start] : offsets[start + fit]])
            self.rows += fit
            start += fit
            if self._compressed:
                self._sink.flush()  # the compressed size is exact again
            if self.full:
                break
        if start:
            self._stats_of(batch.slice(0, start) if start < count else batch)
        return batch.slice(start) if start < count else None

    def _stats_of(self, written: pa.RecordBatch) -> None:
        """Count the statistics of the rows that went into this file (:mod:`..stats`)."""
        if self._counter is None:
            self._counter = StatsCounter(written.schema)
        self._counter.add(written)

    def stats(self) -> Tuple[ColumnStats, ...]:
        return self._counter.result() if self._counter is not None else ()

    @property
    def full(self) -> bool:
        return self._stopped or self._written() >= self._limit

    def close(self) -> None:
        if self._compressed:
            self._sink.close()

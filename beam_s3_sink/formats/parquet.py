"""Parquet output through pyarrow's ``ParquetWriter``, with row groups sized in bytes.

Rows arrive as record batches and are held until they make one row group of
``row_group_size`` bytes (Arrow's in-memory size), which is then encoded and written::

    batches ──▶ pending (≤ row_group_size bytes) ──▶ write_table: one row group ──▶ stream
                                                        │
    full when: written + size of the last encoded row group > max_file_size

So a file ends below the limit when row groups are alike, exceeds it by at most one row
group otherwise, and a worker holds at most one row group of rows per open file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar, List, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from .base import FileEncoder, Format

__all__ = ["ParquetFormat"]

_COMPRESSIONS = ("snappy", "zstd", "gzip", "brotli", "lz4", "none")
MIN_ROW_GROUP = 4 * 2**10
MAX_ROW_GROUP = 128 * 2**20


@dataclass(frozen=True)
class ParquetFormat(Format):
    """Parquet files (``.parquet``).

    >>> ParquetFormat(compression="zstd", compression_level=3).extension
    'parquet'

    Attributes:
      compression: ``snappy`` (default), ``zstd``, ``gzip``, ``brotli``, ``lz4`` or ``none``.
      compression_level: the codec's level, or None for its default.
      row_group_size: bytes of Arrow data per row group; None: an eighth of
        ``max_file_size``, from 4 KiB to 128 MiB.
      use_dictionary: dictionary-encode columns.
      write_statistics: write min/max statistics per column chunk.
      version: the Parquet format version, ``"1.0"``, ``"2.4"`` or ``"2.6"``.
    """

    name: ClassVar[str] = "parquet"

    compression: str = "snappy"
    compression_level: Optional[int] = None
    row_group_size: Optional[int] = None
    use_dictionary: bool = True
    write_statistics: bool = True
    version: str = "2.6"

    def __post_init__(self) -> None:
        if self.compression.lower() not in _COMPRESSIONS:
            raise ValueError(
                f"ParquetFormat: compression {self.compression!r} is not one of {list(_COMPRESSIONS)}")
        if self.version not in ("1.0", "2.4", "2.6"):
            raise ValueError(f"ParquetFormat: version must be '1.0', '2.4' or '2.6', got {self.version!r}")
        if self.row_group_size is not None and (
                not isinstance(self.row_group_size, int) or self.row_group_size < 1024):
            raise ValueError(
                f"ParquetFormat: row_group_size is in bytes and must be at least 1024, got {self.row_group_size!r}")

    @property
    def extension(self) -> str:
        return "parquet"

    def row_group_bytes(self, max_file_size: int) -> int:
        """The row-group size used for files of ``max_file_size`` bytes."""
        if self.row_group_size is not None:
            return self.row_group_size
        return max(MIN_ROW_GROUP, min(MAX_ROW_GROUP, max_file_size // 8))

    def open(self, schema: pa.Schema, out: BinaryIO, max_file_size: int) -> "ParquetEncoder":
        return ParquetEncoder(self, schema, out, max_file_size)

    def writer_options(self) -> dict:
        compression = self.compression.lower()
        return dict(
            compression=None if compression == "none" else compression,
            compression_level=self.compression_level,
            use_dictionary=self.use_dictionary,
            write_statistics=self.write_statistics,
            version=self.version,
            coerce_timestamps=None,
            allow_truncated_timestamps=False,
            store_schema=True,
        )


class ParquetEncoder(FileEncoder):
    """One Parquet file: buffers a row group of batches, then encodes it."""

    def __init__(self, fmt: ParquetFormat, schema: pa.Schema, out: BinaryIO, max_file_size: int) -> None:
        super().__init__(out, max_file_size)
        self._schema = schema
        self._row_group_bytes = fmt.row_group_bytes(max_file_size)
        self._writer = pq.ParquetWriter(out, schema, **fmt.writer_options())
        self._pending: List[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._last_group_encoded = 0
        self._groups = 0

    def write(self, batch: pa.RecordBatch) -> Optional[pa.RecordBatch]:
        while batch is not None and batch.num_rows:
            room = self._row_group_bytes - self._pending_bytes
            if batch.nbytes <= room or batch.num_rows == 1:
                head, batch = batch, None
            else:
                per_row = max(1, batch.nbytes // batch.num_rows)
                take = max(1, min(batch.num_rows - 1, room // per_row))
                head, batch = batch.slice(0, take), batch.slice(take)
            self._pending.append(head)
            self._pending_bytes += head.nbytes
            self.rows += head.num_rows
            if self._pending_bytes >= self._row_group_bytes:
                self._flush()
                if self.full:
                    return batch
        return None

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        before = self.out.tell()
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._last_group_encoded = self.out.tell() - before
        self._groups += 1
        self._pending = []
        self._pending_bytes = 0

    @property
    def full(self) -> bool:
        return (self._groups > 0 and not self._pending
                and self.out.tell() + self._last_group_encoded > self.max_file_size)

    def close(self) -> None:
        self._flush()
        self._writer.close()

"""The one result a copy reports: :class:`CopyToResult`, with a :class:`CopiedFile` per data
file. Both are frozen dataclasses: picklable, comparable, and safe to print (no secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["CopiedFile", "CopyToResult"]


@dataclass(frozen=True)
class CopiedFile:
    """One data file of a finished copy."""

    uri: str
    rows: int
    bytes: int
    # Per column: null count, min, max (beam_s3_sink.formats.stats.ColumnStats), as in the manifest.
    stats: Tuple[Any, ...] = ()


@dataclass(frozen=True)
class CopyToResult:
    """The one element that ``CopyToS3`` outputs.

    >>> r = CopyToResult(uri="s3://b/p", sink_id="s1", rows=2, bytes=10,
    ...                  files=(CopiedFile("s3://b/p/s1-0123456789abcdef-0001.csv", 2, 10),))
    >>> r.ok, r.rows
    (True, 2)

    Attributes:
      uri: the destination, ``s3://bucket/path``.
      sink_id: the id that names every object of this copy.
      rows, bytes: totals over all data files (0 when the copy failed).
      files: one :class:`CopiedFile` per data file, sorted by URI.
      error: None on success, else a message saying what went wrong and what to do.
      manifest_uri: where the manifest is (None when the copy failed).
      warnings: best-effort cleanup that could not be done; never a reason to fail.
      dry_run: ``validate_only=True``: nothing was written; ``rows`` is the rows checked.
      invalid_rows, invalid: (dry run) how many rows would fail, and the first ones with
        their position and the reason.
      snapshot_id: a table target's snapshot that holds the copy (``CopyToIceberg``).
    """

    uri: str
    sink_id: str
    rows: int = 0
    bytes: int = 0
    files: Tuple[CopiedFile, ...] = ()
    error: Optional[str] = None
    manifest_uri: Optional[str] = None
    warnings: Tuple[str, ...] = ()
    dry_run: bool = False
    invalid_rows: int = 0
    invalid: Tuple[str, ...] = ()
    snapshot_id: Optional[int] = None

    @property
    def ok(self) -> bool:
        """True when the copy finished and every row is in S3."""
        return self.error is None

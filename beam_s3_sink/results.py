"""The values that flow between the three steps, and the one result a copy reports.

::

    init ──InitState──▶ upload (per bundle, spill key or batch) ──BundleReport──▶ CombineGlobally ──▶ finish ──▶ CopyToResult

All are frozen dataclasses: picklable, comparable, and safe to print (no secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["CopiedFile", "CopyToResult", "PendingFile", "BundleReport", "InitState", "CopyToS3Error"]


class CopyToS3Error(RuntimeError):
    """The copy failed; the message says why and what to do. Raised when ``fail_on_error``."""


@dataclass(frozen=True)
class CopiedFile:
    """One data file of a finished copy."""

    uri: str
    rows: int
    bytes: int
    # Per column: null count, min, max (beam_s3_sink.stats.ColumnStats), as in the manifest.
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

    @property
    def ok(self) -> bool:
        """True when the copy finished and every row is in S3."""
        return self.error is None


@dataclass(frozen=True)
class PendingFile:
    """A data file uploaded as a multipart upload that is not completed yet (so invisible)."""

    key: str
    upload_id: str
    parts: Tuple[Tuple[int, str], ...]  # (part number, ETag)
    rows: int
    bytes: int
    part_checksums: Tuple[str, ...] = ()  # S3's checksum of each part, when parts carry one
    stats: Tuple[Any, ...] = ()  # per column: ColumnStats (beam_s3_sink.stats), for CopiedFile


@dataclass(frozen=True)
class BundleReport:
    """What one upload bundle did: its pending files, or the error that stopped it.

    ``merge`` keeps the smallest error message, so that the merged report is the same
    whatever order the runner combines bundles in. (It copies the files: completion merges
    many reports with :class:`~beam_s3_sink.completion.ReportAccumulator`, in linear time.)
    """

    files: Tuple[PendingFile, ...] = ()
    rows: int = 0
    bytes: int = 0
    error: Optional[str] = None

    def merge(self, other: "BundleReport") -> "BundleReport":
        errors = [e for e in (self.error, other.error) if e is not None]
        return BundleReport(
            files=self.files + other.files,
            rows=self.rows + other.rows,
            bytes=self.bytes + other.bytes,
            error=min(errors) if errors else None,
        )


@dataclass(frozen=True)
class InitState:
    """What the init step found and did; the upload and finish steps read it as a side input.

    Exactly one of three: ready to copy (``error`` and ``done`` None), failed before any data
    (``error``), or already finished by an earlier run of the same sink id (``done``).
    """

    error: Optional[str] = None
    done: Optional[CopyToResult] = None
    warnings: Tuple[str, ...] = ()
    replaced: Tuple[str, ...] = ()  # if_exists="replace": the keys to delete once committed
    # How this copy guards its path (see .claim): "conditional" (it holds P/_CLAIM; completion
    # releases it), "relist" (the store ignores If-None-Match: completion re-checks the
    # sentinels before committing), or "" (if_exists="append": no guard).
    guard: str = ""

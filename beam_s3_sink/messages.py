"""The values that flow between the three steps of a copy (see the diagram in :mod:`.transform`):
``InitOutcome`` from initialization, ``UploadReport`` (of ``PendingFile``\\ s) from each writer.
All are frozen dataclasses: picklable, comparable, and safe to print (no secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from .results import CopyToResult

__all__ = ["InitOutcome", "PendingFile", "UploadReport"]


@dataclass(frozen=True)
class PendingFile:
    """A data file uploaded as a multipart upload that is not completed yet (so invisible)."""

    key: str
    upload_id: str
    parts: Tuple[Tuple[int, str], ...]  # (part number, ETag)
    rows: int
    bytes: int
    part_checksums: Tuple[str, ...] = ()  # S3's checksum of each part, when parts carry one
    stats: Tuple[Any, ...] = ()  # per column: ColumnStats (beam_s3_sink.formats.stats), for CopiedFile
    # A table's file: its partition record, (partition field name, JSON-ready value) per field
    # (see .table_layout); () for CopyToS3, whose partition values are in the key.
    partition: Tuple[Tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class UploadReport:
    """What one writer did (per bundle or key): its pending files, or the error that
    stopped it. Completion merges them (:class:`~beam_s3_sink.completion.MergeReports`)."""

    files: Tuple[PendingFile, ...] = ()
    rows: int = 0
    bytes: int = 0
    error: Optional[str] = None
    # max_bad_rows: the rows left out (beam_s3_sink.bad_rows.BadRow, sink id and unit not set
    # yet), from Batch's dead-letter blobs and the writer's own screening.
    dead_letters: Tuple[Any, ...] = ()


@dataclass(frozen=True)
class InitOutcome:
    """What initialization found and did; the upload and completion steps read it as a side input.

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
    # A table target's write settings, decided by its initialization (the table's location,
    # the field ids of its schema); None: the settings the transform was built with.
    settings: Any = None

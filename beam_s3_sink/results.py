"""The one result a copy reports: :class:`CopyToResult`, with a :class:`CopiedFile` per data
file. Both are frozen dataclasses: picklable, comparable, and safe to print (no secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Tuple

__all__ = ["CopiedFile", "CopyToResult", "StreamUnit"]


@dataclass(frozen=True)
class CopiedFile:
    """One data file of a finished copy."""

    uri: str
    rows: int
    bytes: int
    # Per column: null count, min, max (beam_s3_sink.formats.stats.ColumnStats), as in the manifest.
    stats: Tuple[Any, ...] = ()
    # A table's file: its partition record, (partition field name, JSON-ready value) per field.
    partition: Tuple[Tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class StreamUnit:
    """One unit of a streaming copy: the window pane it commits.

    >>> from datetime import datetime, timezone
    >>> unit = StreamUnit(datetime(2026, 12, 7, 3, 0, tzinfo=timezone.utc),
    ...                   datetime(2026, 12, 7, 3, 5, tzinfo=timezone.utc), pane=0, timing="ON_TIME")
    >>> unit.id
    '20261207T030000Z-20261207T030500Z-p0'
    >>> StreamUnit(None, None, pane=3, timing="EARLY").id  # the global window (triggering_frequency)
    'global-p3'

    Attributes:
      start, end: the window (UTC); None for the global window.
      pane: the pane's index in its window (0, 1, ... as the trigger fires).
      timing: ``"EARLY"``, ``"ON_TIME"``, ``"LATE"`` or ``"UNKNOWN"`` (Beam's ``PaneInfoTiming``).
    """

    start: Optional[datetime]
    end: Optional[datetime]
    pane: int
    timing: str

    @property
    def id(self) -> str:
        """The unit's name in object keys and snapshot summaries: the same on every attempt."""
        if self.start is None or self.end is None:
            return f"global-p{self.pane}"
        return f"{_compact(self.start)}-{_compact(self.end)}-p{self.pane}"


def _compact(moment: datetime) -> str:
    """``20261207T030000Z`` (with ``.123456`` when the moment has microseconds)."""
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y%m%dT%H%M%S") + (f".{moment.microsecond:06d}" if moment.microsecond else "") + "Z"


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
      unit: a streaming copy's unit (its window and pane); None for a bounded copy.
      bad_rows: the rows left out as dead letters (``max_bad_rows``; see :mod:`.bad_rows`).
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
    unit: Optional[StreamUnit] = None
    bad_rows: int = 0

    @property
    def ok(self) -> bool:
        """True when the copy finished and every row is in S3."""
        return self.error is None

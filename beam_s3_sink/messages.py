"""The values that flow between the three steps of a copy.

::

         rows ─▶ Gather ──Gathered──┐  (DirectRunner only: Write is called per Gathered, not per row)
                                    ▼
    initialization ──InitOutcome──▶ upload (per bundle, spill key or shard) ──UploadReport──▶ CombineGlobally
            │                         (pending files: PendingFile)                                │ one UploadReport
            └─────────────────InitOutcome (side input)───────────────────────────────────▶ completion ──▶ CopyToResult

All are frozen dataclasses: picklable, comparable, and safe to print (no secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import apache_beam as beam

from .results import CopyToResult

__all__ = ["Gathered", "GatheredCoder", "InitOutcome", "PendingFile", "UploadReport"]


@dataclass(frozen=True)
class Gathered:
    """Consecutive elements of one bundle (rows, or an Arrow batch last), gathered by the
    upload step's ``Gather`` so that its ``Write``, which reads a side input, is called once
    per few hundred rows rather than per row (:class:`~beam_s3_sink.upload._GatherFn`)."""

    elements: List[Any]


class GatheredCoder(beam.coders.Coder):
    """The coder of :class:`Gathered` lists, whose size it estimates without encoding them.

    Beam weighs sampled elements of every PCollection for its byte-count metrics, by encoding
    them; a list that ends in a large Arrow table would be pickled whole (hundreds of MiB
    for a copy of a few GiB, in a step that otherwise copies nothing). The estimate is the Arrow
    batches' ``nbytes`` and 64 bytes a row. ``Gather`` and ``Write`` are fused, so encoding
    itself happens only if a runner ever separates them.

    >>> coder = GatheredCoder()
    >>> coder.decode(coder.encode(Gathered([{"id": 1}]))), coder.estimate_size(Gathered([{"id": 1}]))
    (Gathered(elements=[{'id': 1}]), 64)
    """

    def __init__(self) -> None:
        self._list = beam.coders.FastPrimitivesCoder()

    def encode(self, value: Gathered) -> bytes:
        return self._list.encode(value.elements)

    def decode(self, encoded: bytes) -> Gathered:
        return Gathered(self._list.decode(encoded))

    def estimate_size(self, value: Gathered) -> int:
        return sum(getattr(element, "nbytes", 64) for element in value.elements)

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return Gathered


beam.coders.registry.register_coder(Gathered, GatheredCoder)


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
class UploadReport:
    """What one upload unit did (a bundle, a spill key or a shard): its pending files, or the
    error that stopped it.

    ``merge`` keeps the smallest error message, so that the merged report is the same
    whatever order the runner combines bundles in. (It copies the files: completion merges
    many reports with :class:`~beam_s3_sink.completion.ReportAccumulator`, in linear time.)
    """

    files: Tuple[PendingFile, ...] = ()
    rows: int = 0
    bytes: int = 0
    error: Optional[str] = None

    def merge(self, other: "UploadReport") -> "UploadReport":
        errors = [e for e in (self.error, other.error) if e is not None]
        return UploadReport(
            files=self.files + other.files,
            rows=self.rows + other.rows,
            bytes=self.bytes + other.bytes,
            error=min(errors) if errors else None,
        )


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

"""Dry run (``CopyToS3(..., validate_only=True)``, CLI ``--dry-run``): check every row, write nothing.

What Snowflake's ``COPY ... VALIDATION_MODE`` does: every row is converted to the schema and
encoded by the format into memory that is dropped, so that a row the real copy would refuse
(a value that does not fit its column, a value the format cannot hold, such as a NUL
character for PostgreSQL's CSV/text) is found, with its position and the reason; no S3
request is made. A failing batch is checked again row by row, to name each bad row; a row's
position is ``bundle <n>, row <i>``, its place among the rows of one bundle.
"""

from __future__ import annotations

import io
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .arrow_input import is_arrow
from .batches import HANDLED, Batcher
from .keys import CopyKeys
from .results import CopyToResult
from .writer import WriteSettings

__all__ = ["merge_validation", "validate_rows", "ValidationReport", "MAX_SHOWN"]

_log = logging.getLogger(__name__)
MAX_SHOWN = 10
"""How many bad rows a dry run's result shows (all are counted)."""
_BATCH_ROWS = 1024


@dataclass(frozen=True)
class ValidationReport:
    """What one bundle's check found: rows checked, bad rows, and the first ones (sorted)."""

    rows: int = 0
    invalid_rows: int = 0
    invalid: Tuple[str, ...] = ()

    def merge(self, other: "ValidationReport") -> "ValidationReport":
        return ValidationReport(
            self.rows + other.rows,
            self.invalid_rows + other.invalid_rows,
            tuple(sorted(self.invalid + other.invalid))[:MAX_SHOWN],
        )


def _short(row: Any, limit: int = 120) -> str:
    text = repr(row)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _ValidateFn(beam.DoFn):
    """Checks rows against the schema and the format, per bundle; emits a ValidationReport."""

    def __init__(self, settings: WriteSettings) -> None:
        self._format = settings.format
        self._schema = settings.schema
        self._layout = settings.layout
        self._file_schema = settings.layout.file_schema(settings.schema)

    def start_bundle(self) -> None:
        self._bundle = secrets.token_hex(3)
        self._rows: List[Tuple[int, Any]] = []
        self._seen = 0
        self._report = ValidationReport()

    def process(self, row: Any) -> Iterable[Any]:
        if type(row) is not dict and is_arrow(row):
            self._check()  # the rows before it keep their positions
            self._check_arrow(row)
            return ()
        self._rows.append((self._seen, row))
        self._seen += 1
        if len(self._rows) >= _BATCH_ROWS:
            self._check()
        return ()

    def finish_bundle(self) -> Iterable[WindowedValue]:
        self._check()
        if self._seen:
            yield WindowedValue(self._report, GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _reason(self, rows: List[Any]) -> Optional[str]:
        """None if these rows convert and encode, else why not."""
        try:
            batcher = Batcher(self._schema)
            for batch in [b for row in rows for b in batcher.add(row)] + batcher.flush():
                self._encode(batch)
        except HANDLED as exc:  # the reason is the report
            return f"{type(exc).__name__}: {exc}" if not str(exc).startswith(type(exc).__name__) else str(exc)
        return None

    def _encode(self, batch: pa.RecordBatch) -> None:
        """Check the partition values (they name directories; a table's transforms apply) and
        encode the file's columns."""
        if self._layout.partition_by:
            self._layout.split(batch, self._schema)  # RowError naming the column and the value
        columns = [batch.column(name) for name in self._file_schema.names]
        encoder = self._format.open(self._file_schema, io.BytesIO(), 2**62)
        encoder.write(pa.RecordBatch.from_arrays(columns, schema=self._file_schema))
        encoder.close()

    def _check_arrow(self, data: Any) -> None:
        """A ``RecordBatch``/``Table``: conformed and encoded as it is; only when that fails
        are its rows checked one by one, to name each bad row."""
        if self._reason([data]) is None:
            self._seen += data.num_rows
            self._report = self._report.merge(ValidationReport(data.num_rows, 0, ()))
            return
        for row in data.to_pylist():
            self._rows.append((self._seen, row))
            self._seen += 1
            if len(self._rows) >= _BATCH_ROWS:
                self._check()
        self._check()

    def _check(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        bad: List[str] = []
        count = 0
        if self._reason([r for _, r in rows]) is not None:
            for index, row in rows:
                why = self._reason([row])
                if why is not None:
                    count += 1
                    if len(bad) < MAX_SHOWN:
                        bad.append(f"bundle {self._bundle}, row {index}: {why.splitlines()[0]} -- row {_short(row)}")
        self._report = self._report.merge(ValidationReport(len(rows), count, tuple(bad)))


def merge_validation(reports: Iterable[ValidationReport]) -> ValidationReport:
    """The bundles' reports summed (an empty input gives an empty report)."""
    merged = ValidationReport()
    for report in reports:
        merged = merged.merge(report)
    return merged


def _result(report: ValidationReport, keys: CopyKeys, uri: str) -> CopyToResult:
    """The dry run's one result: ``dry_run=True``; ``error`` names the bad rows, if any."""
    error = None
    if report.invalid_rows:
        shown = "; ".join(report.invalid)
        error = f"dry run: {report.invalid_rows} of {report.rows} row(s) would fail the copy; the first: {shown}"
        _log.warning("%s", error)
    return CopyToResult(
        uri=uri,
        sink_id=keys.sink_id,
        rows=report.rows,
        error=error,
        dry_run=True,
        invalid_rows=report.invalid_rows,
        invalid=report.invalid,
    )


@beam.ptransform_fn
def validate_rows(rows: beam.PCollection, settings: WriteSettings, uri: Optional[str] = None) -> beam.PCollection:
    """The dry run's graph: rows in, one ``CopyToResult(dry_run=True)`` (for ``uri``, default the
    settings' location) out."""
    return (
        rows
        | "Validate" >> beam.ParDo(_ValidateFn(settings))
        | "MergeChecks" >> beam.CombineGlobally(merge_validation)
        | "Report" >> beam.Map(_result, settings.keys, uri or settings.keys.location.uri)
    )

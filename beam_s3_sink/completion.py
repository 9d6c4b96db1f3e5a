"""Step 3, completion: one commit over the merged reports of every writer.

``MergeReports`` gathers the writers' reports into one (in linear time: 100,000 reports in
about 0.05 s; for an empty input ``CombineGlobally`` emits its default, so there is always
exactly one report, hence one result). ``_CompleteFn`` then commits in this order: complete
every reported upload (in parallel; one an earlier attempt completed is not an error), abort
every other pending upload of the copy, write the manifest, delete the replaced objects,
release the claim, delete the sentinel. On an error it aborts the pending uploads, releases
the claim, leaves the sentinel, and fails the pipeline (``fail_on_error``) or reports it.
A stream's completion runs once per unit (window firing) instead; :mod:`.stream` says how
that commit differs.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, List, Optional, Sequence

import apache_beam as beam
from apache_beam import pvalue

from .bad_rows import BAD_ROWS_TAG, BadRow, too_many
from .claim import CONDITIONAL, RELIST, release_claim
from .cleanup import abort_uploads
from .clients import _S3DoFn
from .errors import CopyToS3Error, ReplaceError, S3RequestError
from .if_exists import delete_keys
from .initialization import fallback_winner
from .keys import TOKEN_HEX_DIGITS
from .manifest import manifest_json, result_from_manifest
from .messages import InitOutcome, PendingFile, UploadReport
from .results import CopiedFile, CopyToResult, StreamUnit
from .s3 import call
from .schema import schema_to_json
from .stream import abort_dead_uploads, commit_record, committed_unit, unit_of
from .stream_init import InitializedInStep, outcome_of
from .writer import WriteSettings

__all__ = ["MergeReports", "ReportAccumulator"]

_log = logging.getLogger(__name__)
EMPTY_FILE_TOKEN = "0" * TOKEN_HEX_DIGITS


class ReportAccumulator:
    """The reports merged so far, kept in lists: merging is linear in the number of files.

    (Merging frozen :class:`UploadReport`\\ s pairwise copies the tuple of files every time,
    which is quadratic: 100,000 reports took about 30 s.) ``moved`` counts the file entries
    appended, so a test can check that each file is moved once per merge level, not once per
    report.
    """

    __slots__ = ("files", "rows", "bytes", "error", "moved", "dead_letters")

    def __init__(self) -> None:
        self.files: List[PendingFile] = []
        self.dead_letters: List[Any] = []
        self.rows = 0
        self.bytes = 0
        self.error: Optional[str] = None
        self.moved = 0

    def add(
        self, files: Sequence[PendingFile], rows: int, size: int, error: Optional[str], dead_letters: Sequence[Any] = ()
    ) -> None:
        self.files.extend(files)
        self.dead_letters.extend(dead_letters)
        self.moved += len(files)
        self.rows += rows
        self.bytes += size
        if error is not None and (self.error is None or error < self.error):
            self.error = error  # the smallest message: the same whatever the merge order

    def report(self) -> UploadReport:
        return UploadReport(
            files=tuple(self.files),
            rows=self.rows,
            bytes=self.bytes,
            error=self.error,
            dead_letters=tuple(self.dead_letters),
        )


class MergeReports(beam.CombineFn):
    """Merges the upload reports: all pending files, the totals, the first error (in linear time)."""

    def create_accumulator(self) -> ReportAccumulator:
        return ReportAccumulator()

    def add_input(self, accumulator: ReportAccumulator, report: UploadReport) -> ReportAccumulator:
        accumulator.add(report.files, report.rows, report.bytes, report.error, report.dead_letters)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[ReportAccumulator]) -> ReportAccumulator:
        merged: Optional[ReportAccumulator] = None
        for accumulator in accumulators:
            if merged is None:
                merged = accumulator  # Beam lets the first accumulator be mutated and returned
                continue
            merged.add(
                accumulator.files, accumulator.rows, accumulator.bytes, accumulator.error, accumulator.dead_letters
            )
            merged.moved += accumulator.moved
        return merged if merged is not None else ReportAccumulator()

    def extract_output(self, accumulator: ReportAccumulator) -> UploadReport:
        return accumulator.report()


class _CompleteFn(_S3DoFn):
    """Commits (or abandons) the copy, or with ``stream`` one unit of it, and emits its
    :class:`CopyToResult`. In a stream's graph (``stream_init``) it reads no side input and
    initializes itself before its first unit (:mod:`.stream_init`)."""

    TRANSFORM = "CopyToS3"  # how errors name the copy

    def __init__(
        self,
        settings: WriteSettings,
        fail_on_error: bool,
        stream: bool = False,
        stream_init: Optional[InitializedInStep] = None,
    ) -> None:
        super().__init__(settings.config)
        self._settings = settings
        self._fail_on_error = fail_on_error
        self._stream = stream
        self._stream_init = stream_init

    def setup(self) -> None:
        super().setup()
        if self._stream_init is not None:
            self._stream_init.setup()

    def process(
        self,
        report: UploadReport,
        init: Optional[InitOutcome],
        window: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterable[CopyToResult]:
        init = outcome_of(init, self._stream_init)
        settings = init.settings or self._settings  # a table's, decided by its initialization
        self._keys, self._format, self._schema = settings.keys, settings.format, settings.schema
        unit = unit_of(window, pane) if self._stream else None
        self._dead_letters: Sequence[BadRow] = report.dead_letters
        try:
            yield from self._finish(report, init, unit)
        finally:
            self._count_retries()

    def _finish(self, report: UploadReport, init: InitOutcome, unit: Optional[StreamUnit]) -> Iterable[CopyToResult]:
        if init.done is not None:
            yield init.done
            return
        error = init.error or report.error or self._too_many_bad_rows(report)
        if error is None:
            try:
                committed = self._commit(report, init, unit)
            except ReplaceError as exc:  # committed: keep the new copy, leave the sentinel
                error = str(exc)
            except CopyToS3Error as exc:  # an S3 request, or a table's commit
                error = f"completing the copy failed: {exc}"
                if unit is not None and self._fail_on_error:  # a stream's runner retries the unit
                    raise CopyToS3Error(f"{self.TRANSFORM} to {self._uri(init)}, unit {unit.id}: {error}") from exc
                self._abandon(self._committing, delete_completed=True, unit=unit)
            else:
                if committed is not None:
                    yield committed
                yield from self._bad_rows_out(unit)  # also of a unit that had no good row
                return
        else:
            self._abandon(report.files, unit=unit)
        if unit is None:
            self._release_claim(init)
        result = CopyToResult(uri=self._uri(init), sink_id=self._keys.sink_id, error=error, unit=unit)
        what = f"unit {unit.id} of copy" if unit is not None else "copy"
        _log.error("%s %s to %s failed: %s", what, self._keys.sink_id, result.uri, error)
        if self._fail_on_error:
            raise CopyToS3Error(
                f"{self.TRANSFORM} to {result.uri} (sink_id {result.sink_id!r}"
                f"{f', unit {unit.id}' if unit is not None else ''}) failed: {error}"
            )
        yield result

    def _uri(self, init: InitOutcome) -> str:
        """Where the copy goes, as its result and its errors name it."""
        return self._keys.location.uri

    # bad rows ---------------------------------------------------------------------------
    def _too_many_bad_rows(self, report: UploadReport) -> Optional[str]:
        """The error of a copy (a stream: a unit) with more bad rows than ``max_bad_rows``."""
        bad, limit = report.dead_letters, self._settings.bad_rows
        seen = report.rows + len(bad)
        return None if limit.allows(len(bad), seen) else too_many(limit, bad, seen)

    def _bad_rows_out(self, unit: Optional[StreamUnit]) -> Iterable[Any]:
        """The committed copy's dead letters, with its sink id and unit, to the bad-rows output."""
        sink_id, unit_id = self._keys.sink_id, unit.id if unit is not None else None
        for bad in self._dead_letters:
            yield pvalue.TaggedOutput(BAD_ROWS_TAG, bad._replace(sink_id=sink_id, unit=unit_id))

    # success ----------------------------------------------------------------------------
    def _commit(self, report: UploadReport, init: InitOutcome, unit: Optional[StreamUnit]) -> Optional[CopyToResult]:
        """Complete every reported upload, abort every other of the copy, then publish. A
        stream's unit: reported again if committed already; nothing for an empty pane; of the
        other uploads, those of attempts that died for this unit are aborted
        (:func:`~.stream.abort_dead_uploads`), the rest left to the units they belong to."""
        keys, files = self._keys, tuple(report.files)
        self._committing = files  # what a failure abandons: these, or an earlier attempt's
        if unit is not None:
            if not files:
                return None
            done = self._committed(unit)
            if done is not None:
                _log.info("unit %s of copy %s is committed already; reporting it again", unit.id, keys.sink_id)
                self._abandon(files, unit=unit)
                abort_dead_uploads(self._client, keys, unit, frozenset())
                return done
            files = self._committing = tuple(self._record(unit, files))
            named = {(f.key, f.upload_id) for f in files}
            self._abandon([f for f in report.files if (f.key, f.upload_id) not in named], unit=unit)
        if files:
            with ThreadPoolExecutor(self._config.max_concurrency) as pool:
                list(pool.map(self._complete, files))
        if unit is not None:  # what attempts that died uploaded for this unit
            abort_dead_uploads(self._client, keys, unit, frozenset((f.key, f.upload_id) for f in files))
        copied = sorted(
            (CopiedFile(keys.location.object_uri(f.key), f.rows, f.bytes, f.stats, f.partition) for f in files),
            key=lambda f: f.uri,
        )
        warnings = list(init.warnings)
        if unit is None:
            warnings += abort_uploads(self._client, keys, {(f.key, f.upload_id) for f in files})[1]
        return self._publish(copied, init, warnings, unit)

    def _committed(self, unit: StreamUnit) -> Optional[CopyToResult]:
        """The result of ``unit`` if an earlier attempt committed it (here: its manifest)."""
        data = committed_unit(self._client, self._keys, unit)
        uri = self._keys.location.object_uri(self._keys.unit_manifest(unit.id))
        return None if data is None else result_from_manifest(data, uri)

    def _record(self, unit: StreamUnit, files: Sequence[PendingFile]) -> Sequence[PendingFile]:
        """The files ``unit`` commits (here: through its commit record, see :mod:`.stream`)."""
        return commit_record(self._client, self._keys, unit, tuple(files), self._config.objects.control_args())

    def _publish(
        self, copied: List[CopiedFile], init: InitOutcome, warnings: List[str], unit: Optional[StreamUnit] = None
    ) -> CopyToResult:
        """Make the completed files the copy (the one step a table target replaces): here the
        manifest, the replaced objects deleted, the claim released, the sentinel deleted; for
        a stream's unit, its manifest, then its commit record deleted."""
        keys, bucket = self._keys, self._keys.location.bucket
        if unit is not None:
            return self._publish_unit(copied, unit)
        if init.guard == RELIST:  # the store ignores If-None-Match: re-check before committing
            winner = fallback_winner(self._client, keys)
            if winner != keys.sink_id:
                raise S3RequestError(
                    f"copy {winner!r} started writing to {keys.location.uri} first; "
                    "this copy gives way (the store ignores If-None-Match, see README)"
                )
        result = self._put_manifest(copied or [self._write_empty_file()], keys.manifest, warnings)
        delete_keys(self._client, bucket, init.replaced)  # if_exists="replace"; see .if_exists
        if init.guard == CONDITIONAL:  # the path's claim (see .claim), before the sentinel
            release_claim(self._client, keys)
        call(self._client, "DeleteObject", bucket, keys.sentinel)
        _log.info(
            "copy %s to %s finished: %d rows in %d file(s), %d bytes",
            keys.sink_id,
            result.uri,
            result.rows,
            len(result.files),
            result.bytes,
        )
        return result

    def _publish_unit(self, copied: List[CopiedFile], unit: StreamUnit) -> CopyToResult:
        keys = self._keys
        result = self._put_manifest(copied, keys.unit_manifest(unit.id), unit=unit)
        try:  # committed: a record left behind is only removed at the end of the stream
            call(self._client, "DeleteObject", keys.location.bucket, keys.unit_commit(unit.id))
        except S3RequestError as exc:
            _log.warning("unit %s of copy %s: could not delete its commit record: %s", unit.id, keys.sink_id, exc)
            result = dataclasses.replace(result, warnings=(f"could not delete the commit record: {exc}",))
        _log.info(
            "unit %s of copy %s committed: %d rows in %d file(s)", unit.id, keys.sink_id, result.rows, len(copied)
        )
        return result

    def _put_manifest(
        self, copied: List[CopiedFile], key: str, warnings: Sequence[str] = (), unit: Optional[StreamUnit] = None
    ) -> CopyToResult:
        """The result of ``copied`` (the copy's, or one unit's), written as the manifest ``key``."""
        keys = self._keys
        result = CopyToResult(
            uri=keys.location.uri,
            sink_id=keys.sink_id,
            rows=sum(f.rows for f in copied),
            bytes=sum(f.bytes for f in copied),
            files=tuple(copied),
            manifest_uri=keys.location.object_uri(key),
            warnings=tuple(warnings),
            unit=unit,
            bad_rows=len(self._dead_letters),
        )
        body = manifest_json(
            result, self._format.describe(), schema_to_json(self._format.file_schema(self._schema), self._schema)
        )
        args = self._config.objects.control_args()
        call(self._client, "PutObject", keys.location.bucket, key, Body=body, ContentType="application/json", **args)
        return result

    def _complete(self, pending: PendingFile) -> None:
        bucket = self._keys.location.bucket
        parts = [{"PartNumber": n, "ETag": etag} for n, etag in pending.parts]
        field = self._config.objects.checksum_field
        if field and pending.part_checksums:
            for part, checksum in zip(parts, pending.part_checksums):
                part[field] = checksum
        try:
            call(
                self._client,
                "CompleteMultipartUpload",
                bucket,
                pending.key,
                UploadId=pending.upload_id,
                MultipartUpload={"Parts": parts},
            )
        except S3RequestError as exc:
            if exc.code == "NoSuchUpload" and self._already_complete(pending):
                return
            raise

    def _already_complete(self, pending: PendingFile) -> bool:
        """Whether an earlier attempt completed this upload (the object is there, whole)."""
        try:
            head = call(self._client, "HeadObject", self._keys.location.bucket, pending.key)
        except S3RequestError:  # not there: really not completed
            return False
        return int(head["ContentLength"]) == pending.bytes

    def _write_empty_file(self) -> CopiedFile:
        buffer = io.BytesIO()
        encoder = self._format.open(self._schema, buffer, 2**62)
        encoder.close()
        stats = encoder.stats()
        body = buffer.getvalue()
        key = self._keys.data_file(EMPTY_FILE_TOKEN, 1, self._format.extension)
        call(
            self._client,
            "PutObject",
            self._keys.location.bucket,
            key,
            Body=body,
            **self._config.objects.data_file_args(self._format.content_type),
        )
        return CopiedFile(self._keys.location.object_uri(key), 0, len(body), stats)

    # failure ----------------------------------------------------------------------------
    def _release_claim(self, init: InitOutcome) -> None:
        """A failed copy gives the path's claim up (its sentinel stays); best effort."""
        if init.guard != CONDITIONAL or init.error is not None:
            return
        try:
            release_claim(self._client, self._keys)
        except S3RequestError as exc:
            _log.warning("could not release the claim of copy %s: %s", self._keys.sink_id, exc)

    def _abandon(
        self, files: Sequence[PendingFile], delete_completed: bool = False, unit: Optional[StreamUnit] = None
    ) -> None:
        """Abort the pending uploads (best effort); after a failed commit, also delete the
        files it had completed already, so that no partial copy stays visible. A bounded copy
        also aborts every other upload of its sink id; a stream's unit only its own (the
        end of the stream aborts the rest)."""
        bucket = self._keys.location.bucket
        for pending in files:
            try:
                call(self._client, "AbortMultipartUpload", bucket, pending.key, UploadId=pending.upload_id)
            except S3RequestError as exc:
                if not delete_completed:
                    _log.warning("could not abort %s: %s", pending.key, exc)
            if delete_completed:  # whatever the abort said: SeaweedFS accepts aborting a completed upload
                try:
                    call(self._client, "DeleteObject", bucket, pending.key)
                except S3RequestError as delete_exc:
                    _log.warning("could not delete %s: %s", pending.key, delete_exc)
        if unit is None:
            abort_uploads(self._client, self._keys)
        elif delete_completed:
            try:
                call(self._client, "DeleteObject", bucket, self._keys.unit_commit(unit.id))
            except S3RequestError as exc:
                _log.warning("could not delete the commit record of unit %s: %s", unit.id, exc)

"""``CopyToDelta``: the same three steps as ``CopyToS3``, into a Delta Lake table.

Initialization opens the table at its ``s3://`` root (delta-rs) or, when there is none yet,
decides the schema it will be created with (:mod:`.delta_commit`); checks that the table
accepts the copy; reports an earlier commit of this sink id again (a rerun commits nothing);
removes what a crashed run of this sink id left under the root (pending uploads, files it
completed but never committed; a stream leaves that to its end); and hands the upload step
the table's write settings: its types, and its partition columns as Hive directories whose
files leave them out (:class:`~.delta_commit.DeltaLayout`). Parquet files are uploaded as
for ``CopyToS3`` and not completed; completion completes them and commits exactly one
version that adds them, with an application transaction of the sink id. A stream commits
one version per unit; at its end, the files no version took are removed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union
from urllib.parse import unquote

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import PCollection
from apache_beam.transforms.display import DisplayDataItem

from .cleanup import AbortReport, abort_uploads
from .clients import _S3DoFn
from .completion import _CompleteFn
from .config import S3Config, resolve_config
from .errors import CommittedCopyError, CopyToS3Error, S3RequestError
from .keys import CopyKeys, parse_s3_uri, validate_sink_id
from .messages import InitOutcome
from .results import CopiedFile, CopyToResult, StreamUnit
from .s3 import call, list_keys, read_object
from .stream import _FinishStreamFn
from .stream_init import InitializedInStep
from .table_copy import CompleteFactory, _TableCopy
from .writer import DEFAULT_MAX_OPEN_FILES, WriteSettings

__all__ = ["CopyToDelta", "abort_delta_copy"]

_log = logging.getLogger(__name__)
LOG_DIRECTORY = "_delta_log"


class CopyToDelta(_TableCopy):
    """Copy a PCollection into a Delta Lake table as one version; output exactly one
    :class:`~beam_s3_sink.CopyToResult` (``snapshot_id``: the table version). A stream
    commits one version per unit and outputs one result per unit, as
    :class:`~beam_s3_sink.CopyToS3` does.

    >>> copy = CopyToDelta("s3://lake/tables/orders", mode="append", partition_by=["day"],
    ...                    schema=pa.schema([("id", pa.int64()), ("day", pa.date32())]))
    >>> copy.sink_id.startswith("copy-")
    True

    Args:
      table_uri: the table's root, ``s3://bucket/path``; a missing table is created there
        from the copy's schema and ``partition_by``.
      mode: ``"append"``, ``"overwrite"`` (one version that removes every file and adds the
        copy's) or ``"overwrite_partitions"`` (removes the files of the partitions the copy
        wrote, as Delta's ``replaceWhere`` on them).
      partition_by: partition columns (integer, string, boolean or date), for a missing table;
        an existing table is written with its own, which ``partition_by``, when given, must
        name. Data files go to Hive directories without the partition columns, as Delta's
        writers lay them out; a null or ``""`` value goes to ``__HIVE_DEFAULT_PARTITION__``
        and reads back as null (Delta's protocol has no empty-string partition value).
      max_file_size: bytes per data file (default 256 MiB).
      schema, sink_id, errors, fail_on_error, validate_only, max_open_files, upload_graph,
        triggering_frequency, max_bad_rows: as for :class:`~beam_s3_sink.CopyToS3`
        (``.with_bad_rows()`` too).
      s3: an :class:`S3Config` for the data files and the table's log; default: the
        pipeline's S3Options, else boto3's chain. Commits need a store that honours
        ``If-None-Match`` (see :func:`~beam_s3_sink.delta_commit.storage_options`).
    """

    TRANSFORM = "CopyToDelta"

    def __init__(
        self,
        table_uri: str,
        mode: str = "append",
        schema: Optional[pa.Schema] = None,
        partition_by: Sequence[str] = (),
        max_file_size: Optional[Union[int, str]] = None,
        sink_id: Optional[str] = None,
        s3: Optional[S3Config] = None,
        errors: Optional[PCollection] = None,
        fail_on_error: bool = True,
        validate_only: bool = False,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        upload_graph: str = "auto",
        label: Optional[str] = None,
        triggering_frequency: Optional[float] = None,
        max_bad_rows: Union[int, str] = 0,
    ) -> None:
        from .delta_commit import MODES

        location = parse_s3_uri(table_uri)
        if not location.prefix:
            raise ValueError(f"CopyToDelta: {table_uri!r} is a bucket; give the table's path, 's3://bucket/path'")
        super().__init__(
            label,
            mode,
            MODES,
            schema=schema,
            partition_by=partition_by,
            max_file_size=max_file_size,
            sink_id=sink_id,
            s3=s3,
            errors=errors,
            fail_on_error=fail_on_error,
            validate_only=validate_only,
            max_open_files=max_open_files,
            upload_graph=upload_graph,
            triggering_frequency=triggering_frequency,
            max_bad_rows=max_bad_rows,
        )
        self._location = location

    @property
    def table_uri(self) -> str:
        return self._location.uri

    def default_label(self) -> str:
        return f"CopyToDelta({self._location.uri})"

    def display_data(self) -> Dict[str, Any]:
        return self._display_data({"table_uri": DisplayDataItem(self._location.uri, label="Table")})

    def _target(self, schema: pa.Schema, options: Any) -> Tuple[CopyKeys, S3Config, Any]:
        from .delta_commit import DeltaLayout, delta_schema

        try:
            delta_schema(schema, self._partition_by)
        except ValueError as exc:
            raise ValueError(f"CopyToDelta: {exc}") from None
        layout = DeltaLayout(partition_by=self._partition_by)
        layout.check(schema)
        return CopyKeys(self._location, self._sink_id), self._s3 or resolve_config(None, options), layout

    def _dry_run_uri(self) -> str:
        return self._location.uri

    def _steps(self, settings: WriteSettings, stream: bool) -> Tuple[beam.DoFn, CompleteFactory, _FinishStreamFn]:
        def complete_fn(in_step: Optional[InitializedInStep]) -> _DeltaCompleteFn:
            return _DeltaCompleteFn(settings, self._fail_on_error, self._mode, self._partition_by, stream, in_step)

        return _DeltaInitFn(settings, stream, self._partition_by, self._mode), complete_fn, _DeltaFinishFn(settings)


class _DeltaInitFn(_S3DoFn):
    """Step 1 for a Delta table: open it (or decide how to create it), check it, clean up;
    emits one :class:`InitOutcome`."""

    def __init__(
        self, settings: WriteSettings, stream: bool = False, partition_by: Sequence[str] = (), mode: str = "append"
    ) -> None:
        super().__init__(settings.config)
        self._settings, self._stream, self._partition_by = settings, stream, tuple(partition_by)
        self._mode = mode

    def process(self, _unused: Any, errors: Iterable[Any] = ()) -> Iterable[InitOutcome]:
        uri = self._settings.keys.location.uri
        for error in errors:
            yield InitOutcome(error=f"the copy was aborted before writing anything, by an upstream error: {error}")
            return
        try:
            yield self._initialize()
        except (CopyToS3Error, ValueError) as exc:
            yield InitOutcome(error=f"Delta table {uri}: {exc}")
        except Exception as exc:  # delta-rs's own errors (they name no secret)
            yield InitOutcome(error=f"Delta table {uri}: {type(exc).__name__}: {exc}")
        finally:
            self._count_retries()

    def _initialize(self) -> InitOutcome:
        from .delta_commit import (
            DeltaLayout,
            check_schema,
            check_table,
            committed_version,
            delta_schema,
            file_schema,
            open_table,
            storage_options,
            table_schema_of,
        )

        settings, keys = self._settings, self._settings.keys
        table = open_table(keys.location.uri, storage_options(settings.config))
        if table is None:
            table_schema, columns = delta_schema(settings.schema, self._partition_by), self._partition_by
        else:
            table_schema, columns = table_schema_of(table), tuple(table.metadata().partition_columns)
            check_table(table, self._mode)
            check_schema(table_schema, settings.schema)
            if self._partition_by and self._partition_by != columns:
                raise ValueError(
                    f"the table is partitioned by {list(columns)}, the copy by partition_by={list(self._partition_by)}: "
                    f"pass partition_by={list(columns)} or leave it out"
                )
            done = None if self._stream else committed_version(table, keys.sink_id)
            if done is not None:
                _log.info("copy %s into %s committed version %s already", keys.sink_id, keys.location.uri, done)
                return InitOutcome(done=result_of(self._client, keys, done))
        warnings: List[str] = []
        if not self._stream:  # a stream's initialization runs in every step: it removes nothing
            warnings = abort_uploads(self._client, keys)[1]
            delete_uncommitted(self._client, keys, settings.config)
        layout = DeltaLayout(partition_by=columns)
        schema = file_schema(table_schema, settings.schema)
        layout.check(schema)
        return InitOutcome(
            warnings=tuple(warnings), settings=dataclasses.replace(settings, schema=schema, layout=layout)
        )


def _log_entries(client: Any, keys: CopyKeys, version: int) -> List[Dict[str, Any]]:
    """The actions of the table version ``version`` (its ``_delta_log`` JSON file)."""
    key = keys.location.key(f"{LOG_DIRECTORY}/{version:020d}.json")
    body = read_object(client, keys.location.bucket, key)
    return [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]


def result_of(client: Any, keys: CopyKeys, version: int, unit: Optional[StreamUnit] = None) -> CopyToResult:
    """The result of the commit ``version`` of this sink id: the files it added (their rows
    from its stats), and the bad rows its commit info names."""
    from .delta_commit import BAD_ROWS_KEY

    files, bad_rows = [], 0
    for action in _log_entries(client, keys, version):
        if "add" in action:
            add = action["add"]
            rows = json.loads(add.get("stats") or "{}").get("numRecords", 0)
            files.append(
                CopiedFile(keys.location.object_uri(keys.location.key(unquote(add["path"]))), rows, add["size"])
            )
        elif "commitInfo" in action:
            bad_rows = int(action["commitInfo"].get(BAD_ROWS_KEY) or 0)
    return CopyToResult(
        uri=keys.location.uri,
        sink_id=keys.sink_id,
        rows=sum(f.rows for f in files),
        bytes=sum(f.bytes for f in files),
        files=tuple(sorted(files, key=lambda f: f.uri)),
        snapshot_id=version,
        unit=unit,
        bad_rows=bad_rows,
    )


def _referenced_paths(client: Any, keys: CopyKeys, config: S3Config) -> Set[str]:
    """Every data file (its key) that the table may still read: those of its current version
    (delta-rs reads its checkpoints too), and those any JSON commit left in its log adds (an
    older version's, for time travel). The log alone would not do: once a checkpoint is
    written, Delta deletes the JSON commits older than its log retention (30 days), whose
    files the current version may still hold."""
    from .delta_commit import open_table, storage_options

    bucket, head = keys.location.bucket, keys.location.key(f"{LOG_DIRECTORY}/")
    paths: Set[str] = set()
    table = open_table(keys.location.uri, storage_options(config))
    if table is not None:
        for path in pa.table(table.get_add_actions(flatten=False)).column("path").to_pylist():
            paths.add(keys.location.key(unquote(path)))
    for listed in list_keys(client, bucket, head):
        if not listed["Key"].endswith(".json"):
            continue
        for line in read_object(client, bucket, listed["Key"]).decode("utf-8").splitlines():
            if line.strip() and '"add"' in line:
                action = json.loads(line)
                if "add" in action:
                    paths.add(keys.location.key(unquote(action["add"]["path"])))
    return paths


def delete_uncommitted(client: Any, keys: CopyKeys, config: S3Config) -> List[str]:
    """Delete the data files of ``keys``' sink id that the table does not reference (a
    crashed run completed them but never committed; see :func:`_referenced_paths`);
    return their URIs."""
    bucket = keys.location.bucket
    owned = [o["Key"] for o in list_keys(client, bucket, keys.data_prefix) if keys.is_data_file(o["Key"])]
    keep = _referenced_paths(client, keys, config) if owned else set()
    deleted = [key for key in owned if key not in keep]
    for key in deleted:
        call(client, "DeleteObject", bucket, key)
    return [keys.location.object_uri(key) for key in deleted]


def abort_delta_copy(table_uri: str, sink_id: str, s3: Optional[S3Config] = None) -> AbortReport:
    """Remove what copy ``sink_id`` into the Delta table at ``table_uri`` left: its pending
    uploads, and the files it completed but no version adds. A committed copy is refused:
    its files are the table's.

    >>> abort_delta_copy("s3://lake/t", "bad id!")
    Traceback (most recent call last):
    ...
    ValueError: CopyToS3: sink_id 'bad id!' is not valid: use 1-100 letters, digits, '_', '.' or '-', starting with a letter or digit

    Raises :class:`~beam_s3_sink.CommittedCopyError` when a version of ``sink_id`` exists.
    """
    from .delta_commit import committed_version, open_table, storage_options

    keys = CopyKeys(parse_s3_uri(table_uri), validate_sink_id(sink_id))
    config = s3 or S3Config()
    table = open_table(keys.location.uri, storage_options(config))
    done = committed_version(table, sink_id) if table is not None else None
    if done is not None:
        raise CommittedCopyError(
            f"copy {sink_id!r} into {keys.location.uri} committed version {done}: its files are the table's"
        )
    client = config.make_client()
    aborted = [(keys.location.object_uri(k), u) for k, u in abort_uploads(client, keys, strict=True)[0]]
    deleted = delete_uncommitted(client, keys, config)
    return AbortReport(keys.location.uri, sink_id, tuple(deleted), tuple(aborted))


class _DeltaCompleteFn(_CompleteFn):
    """Step 3 for a Delta table: the uploads completed as for ``CopyToS3``, then one version."""

    TRANSFORM = "CopyToDelta"

    def __init__(
        self,
        settings: WriteSettings,
        fail_on_error: bool,
        mode: str,
        partition_by: Sequence[str],
        stream: bool = False,
        stream_init: Optional[InitializedInStep] = None,
    ) -> None:
        super().__init__(settings, fail_on_error, stream, stream_init)
        self._mode, self._partition_by = mode, tuple(partition_by)

    def _committed(self, unit: StreamUnit) -> Optional[CopyToResult]:
        from .delta_commit import committed_version, open_table, storage_options

        table = open_table(self._keys.location.uri, storage_options(self._config))
        done = committed_version(table, self._keys.sink_id, unit) if table is not None else None
        return None if done is None else result_of(self._client, self._keys, done, unit)

    def _record(self, unit: StreamUnit, files: Sequence[Any]) -> Sequence[Any]:
        return files  # the version is the commit: a unit cut short left only unreferenced files

    def _publish(
        self, copied: List[CopiedFile], init: InitOutcome, warnings: List[str], unit: Optional[StreamUnit] = None
    ) -> CopyToResult:
        from .delta_commit import commit, delta_schema, storage_options
        from .iceberg_commit import TableFile

        keys, schema = self._keys, init.settings.schema
        partition_by = init.settings.layout.partition_by
        files = [TableFile(f.uri, f.rows, f.bytes, tuple(f.stats), tuple(f.partition)) for f in copied]
        try:
            version = commit(
                keys.location.uri,
                files,
                self._mode,
                keys.sink_id,
                delta_schema(schema, partition_by),
                partition_by,
                storage_options(self._config),
                unit=unit,
                bad_rows=len(self._dead_letters),
            )
        except CopyToS3Error:
            raise
        except Exception as exc:  # delta-rs's: the files are completed, so completion deletes them
            raise CopyToS3Error(
                f"committing to Delta table {keys.location.uri} failed: {type(exc).__name__}: {exc}"
            ) from exc
        _log.info(
            "copy %s into %s: version %s, %d rows",
            keys.sink_id,
            keys.location.uri,
            version,
            sum(f.rows for f in copied),
        )
        return CopyToResult(
            uri=keys.location.uri,
            sink_id=keys.sink_id,
            rows=sum(f.rows for f in copied),
            bytes=sum(f.bytes for f in copied),
            files=tuple(copied),
            warnings=tuple(warnings),
            snapshot_id=version,
            unit=unit,
            bad_rows=len(self._dead_letters),
        )


class _DeltaFinishFn(_FinishStreamFn):
    """At the end of a stream into a Delta table: abort the uploads no unit named, and delete
    the files of units cut short that no version added."""

    def _finish(self, keys: CopyKeys, init: InitOutcome) -> None:
        abort_uploads(self._client, keys)
        try:
            delete_uncommitted(self._client, keys, self._config)
        except S3RequestError as exc:
            _log.warning("copy %s: could not delete the files no version added: %s", keys.sink_id, exc)

"""``--delta s3://BUCKET/PATH``: the command's Delta Lake side (``CopyToDelta``).

::

    plan:  DeltaTarget.check ─▶ the table opens (or is missing: created from the copy's schema
           and --partition_by); an existing one accepts the copy (columns, types) and its
           partition columns are those --partition_by names (which defaults to them)
    run:   CopyToDelta ─▶ one table version
    after: committed_copy ─▶ the version of --sink_id (rows, files, bytes, what it replaced)

The table's store is reached with Beam's S3 flags (``--s3_endpoint_url`` ...), else boto3's
chain, as for ``--output``; ``deltalake`` (delta-rs) is imported inside the functions only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote

import pyarrow as pa

from beam_s3_sink.cli.table import partition_mismatch
from beam_s3_sink.config import S3Config

__all__ = ["DeltaTarget", "DeltaVersion", "parse_delta_uri"]


def parse_delta_uri(uri: str) -> str:
    """``--delta``: a table's root, ``s3://bucket/path`` (a path, not a bucket alone).

    >>> parse_delta_uri("s3://lake/tables/orders/")
    's3://lake/tables/orders'
    >>> parse_delta_uri("s3://lake")
    Traceback (most recent call last):
    ...
    ValueError: --delta s3://lake is a bucket: give the table's root, s3://BUCKET/PATH
    """
    from beam_s3_sink.keys import parse_s3_uri

    try:
        location = parse_s3_uri(uri)
    except ValueError as exc:
        raise ValueError(f"--delta: {str(exc).replace('CopyToS3: ', '', 1)}") from None
    if not location.prefix:
        raise ValueError(f"--delta {uri} is a bucket: give the table's root, s3://BUCKET/PATH")
    return location.uri


@dataclass(frozen=True)
class DeltaVersion:
    """A copy's table version: what the summary prints."""

    version: int
    current: bool
    rows: int
    files: int
    bytes: int
    removed_rows: Optional[int]  # None: the files' stats do not say
    removed_files: int
    log: str  # the version's log entry
    added: Tuple[Tuple[str, int, int], ...] = ()
    bad_rows: int = 0


@dataclass(frozen=True)
class DeltaTarget:
    """``--delta s3://...``, as the command checks and reports it."""

    uri: str
    s3: S3Config

    def options(self) -> Dict[str, str]:
        from beam_s3_sink.delta_commit import storage_options

        return storage_options(self.s3)

    def open(self) -> Optional[Any]:
        """The table, or None when there is none at the root yet; ValueError naming ``--delta``
        when the store or the log cannot be read."""
        from beam_s3_sink.delta_commit import open_table

        try:
            return open_table(self.uri, self.options())
        except Exception as exc:  # delta-rs's: the store, the log
            text = " ".join(str(exc).split())[:400]
            raise ValueError(f"--delta {self.uri}: the table cannot be read: {type(exc).__name__}: {text}") from None

    def check(self, schema: pa.Schema, partition_by: Optional[Sequence[str]]) -> Tuple[Tuple[str, ...], bool]:
        """Check, before anything is written, that the copy fits: an existing table accepts
        ``schema`` (CopyToDelta's own check) and is partitioned as ``partition_by`` says,
        when given. Returns (the partition columns: ``partition_by``, or the existing table's
        when None; whether the table exists). ValueError naming the flag."""
        from beam_s3_sink.delta_commit import check_schema, delta_schema, table_schema_of

        table = self.open()
        if table is None:
            try:
                delta_schema(schema, tuple(partition_by or ()))  # what the commit creates
            except ValueError as exc:
                raise ValueError(f"--delta {self.uri}: {exc}") from None
            return tuple(partition_by or ()), False
        try:
            check_schema(table_schema_of(table), schema)
        except ValueError as exc:
            raise ValueError(f"--delta {self.uri}: {exc}") from None
        columns = tuple(table.metadata().partition_columns)
        if partition_by is not None and tuple(partition_by) != columns:
            raise partition_mismatch(partition_by, columns, f"Delta table {self.uri}", "partition columns")
        return columns, True

    def committed_version(self, sink_id: str) -> Optional[int]:
        """The version copy ``sink_id`` committed, or None (no table, or no such version);
        ValueError naming ``--sink_id`` when the table says it committed in a version whose
        log entry is gone (the copy would fail so: the plan refuses it first)."""
        from beam_s3_sink.delta_commit import committed_version
        from beam_s3_sink.errors import CommittedCopyError

        table = self.open()
        try:
            return committed_version(table, sink_id) if table is not None else None
        except CommittedCopyError as exc:
            raise ValueError(f"--sink_id {sink_id}: {exc}") from None

    def committed_copy(self, sink_id: str) -> Optional[DeltaVersion]:
        """The version copy ``sink_id`` committed, as the summary shows it, or None."""
        from beam_s3_sink.delta_commit import BAD_ROWS_KEY, committed_version
        from beam_s3_sink.keys import parse_s3_uri
        from beam_s3_sink.s3 import read_object

        table = self.open()
        version = committed_version(table, sink_id) if table is not None else None
        if table is None or version is None:
            return None
        location = parse_s3_uri(self.uri)
        key = location.key(f"_delta_log/{version:020d}.json")
        body = read_object(self.s3.make_client(), location.bucket, key)
        actions: List[Dict[str, Any]] = [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]
        added, removed, bad_rows = [], [], 0
        for action in actions:
            if "add" in action:
                add = action["add"]
                rows = int(json.loads(add.get("stats") or "{}").get("numRecords", 0))
                added.append((location.object_uri(location.key(unquote(add["path"]))), rows, int(add["size"])))
            elif "remove" in action:
                removed.append(unquote(action["remove"]["path"]))
            elif "commitInfo" in action:
                bad_rows = int(action["commitInfo"].get(BAD_ROWS_KEY) or 0)
        return DeltaVersion(
            version=version,
            current=table.version() == version,
            rows=sum(rows for _, rows, _ in added),
            files=len(added),
            bytes=sum(size for _, _, size in added),
            removed_rows=self._rows_of(removed, version - 1) if removed else 0,
            removed_files=len(removed),
            log=location.object_uri(key),
            added=tuple(sorted(added)),
            bad_rows=bad_rows,
        )

    def _rows_of(self, paths: Sequence[str], version: int) -> Optional[int]:
        """The rows of the files ``paths`` of table version ``version`` (from their stats)."""
        from deltalake import DeltaTable

        try:
            before = DeltaTable(self.uri, version=version, storage_options=self.options())
            actions = pa.table(before.get_add_actions(flatten=True)).to_pylist()
        except Exception:  # noqa: BLE001 - an old version no longer readable: rows unknown
            return None
        rows = {unquote(a["path"]): a.get("num_records") for a in actions}
        found = [rows.get(path) for path in paths]
        return None if any(n is None for n in found) else sum(int(n or 0) for n in found)


def abort(uri: str, sink_id: str, s3: S3Config) -> Any:
    """``--abort SINK_ID --delta URI``: :func:`beam_s3_sink.abort_delta_copy`."""
    from beam_s3_sink.delta import abort_delta_copy

    return abort_delta_copy(uri, sink_id, s3=s3)

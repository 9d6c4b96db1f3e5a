"""``--table NS.TABLE --catalog CATALOG``: the command's Iceberg side (``CopyToIceberg``).

::

    --catalog '{"type": "sql", ...}' | @catalog.json | NAME ─▶ parse_catalog ─▶ props (or a name)
        ─▶ Secrets: every value of a key holding secret/token/credential/password, and the
           password of any URI, masked in every line the command prints or logs
    plan:  TableTarget.check ─▶ the catalog loads; an existing table accepts the copy (columns,
           types) and its partition spec is the one --partition_by names (which defaults to it)
    run:   CopyToIceberg ─▶ one snapshot
    after: committed_copy ─▶ the snapshot of --sink_id (id, rows, files, bytes, what it replaced)

The catalog is pyiceberg's: properties as ``load_catalog(name, **props)`` takes them (``"name"``
is the catalog's name, default ``"default"``), or a catalog name that pyiceberg resolves from
``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` environment variables. Beam's S3
flags (``--s3_endpoint_url`` ...) reach the data files' store exactly as for ``--output``, and
fill the catalog's ``s3.*`` properties that it does not set itself, so that pyiceberg writes
the table's metadata to the same store.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

import pyarrow as pa

from beam_s3_sink.config import S3Config

__all__ = [
    "CatalogSpec",
    "CommittedCopy",
    "Secrets",
    "TableTarget",
    "catalog_with_s3_flags",
    "describe_catalog",
    "parse_catalog",
    "partition_mismatch",
    "s3_flags_given",
]

CatalogSpec = Union[str, Dict[str, str]]
"""A catalog name pyiceberg resolves, or pyiceberg catalog properties."""

SECRET_WORDS = ("secret", "token", "credential", "password")
"""A catalog property whose name holds one of these is a secret (as ``CopyToIceberg`` says)."""
MASK = "***"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class CatalogError(ValueError):
    """``--catalog`` is not a JSON object, a readable ``@file`` of one, or a catalog name."""


def parse_catalog(text: str) -> CatalogSpec:
    """``--catalog``: a JSON object of pyiceberg catalog properties, ``@path/to/file.json``
    holding one, or a catalog name pyiceberg resolves. Scalar values become the strings
    pyiceberg expects (``true`` → ``"true"``); an error never quotes the text (it may hold
    secrets).

    >>> parse_catalog('{"type": "sql", "uri": "sqlite:///cat.db", "s3.path-style-access": true}')
    {'type': 'sql', 'uri': 'sqlite:///cat.db', 's3.path-style-access': 'true'}
    >>> parse_catalog("prod")
    'prod'
    >>> parse_catalog('{"type": "sql", "uri": ')
    Traceback (most recent call last):
    ...
    beam_s3_sink.cli.table.CatalogError: --catalog is not valid JSON (Expecting value: line 1 column 23 (char 22)); ...
    """
    stripped = text.strip()
    if stripped.startswith("@"):
        path = os.path.expanduser(stripped[1:])
        try:
            with open(path, encoding="utf-8") as f:
                body = f.read()
        except OSError as exc:
            raise CatalogError(f"--catalog @{path}: cannot read the file ({exc.strerror})") from None
        return _props(body, f"--catalog @{path}")
    if stripped.startswith(("{", "[")):
        return _props(stripped, "--catalog")
    if not _NAME.match(stripped):
        raise CatalogError(
            '--catalog takes a JSON object of pyiceberg catalog properties (\'{"type": "rest", "uri": ...}\'), '
            "@path/to/file.json, or a catalog name that pyiceberg resolves (.pyiceberg.yaml, PYICEBERG_CATALOG__*)"
        )
    return stripped


def _props(body: str, what: str) -> Dict[str, str]:
    try:
        value = json.loads(body)
    except ValueError as exc:  # json's message holds a position, never the text
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not JSON"
        where = (
            f": line {exc.lineno} column {exc.colno} (char {exc.pos})" if isinstance(exc, json.JSONDecodeError) else ""
        )
        raise CatalogError(
            f"{what} is not valid JSON ({reason}{where}); write an object such as "
            '\'{"type": "sql", "uri": "sqlite:///catalog.db", "warehouse": "s3://bucket/warehouse"}\''
        ) from None
    if not isinstance(value, dict):
        raise CatalogError(f"{what} must be a JSON object of catalog properties, not a JSON {type(value).__name__}")
    props: Dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            props[key] = "true" if item else "false"
        elif isinstance(item, (str, int, float)):
            props[key] = str(item)
        else:
            shown = MASK if _is_secret(key) else type(item).__name__
            raise CatalogError(f"{what}: property {key!r} must be a string, number or boolean, not {shown}")
    return props


def _is_secret(key: str) -> bool:
    return any(word in key.lower() for word in SECRET_WORDS)


@dataclass
class Secrets:
    """The values the command must never show: masks them in a text, and in every log record
    (:meth:`install` on the root logger's handlers).

    >>> secrets = Secrets.of({"uri": "postgresql://me:pw123@db/cat", "s3.secret-access-key": "k3y-s3cr3t"})
    >>> secrets.mask("connect postgresql://me:pw123@db/cat failed; key k3y-s3cr3t")
    'connect postgresql://me:***@db/cat failed; key ***'
    """

    values: List[str] = field(default_factory=list)

    @classmethod
    def of(cls, catalog: Optional[CatalogSpec]) -> "Secrets":
        found: List[str] = []
        for key, value in catalog.items() if isinstance(catalog, dict) else ():
            if not value:
                continue
            if _is_secret(key):
                found.append(value)
                found += [part for part in value.split(":") if len(part) >= 4 and part != value]
            password = _url_password(value)
            if password:
                found.append(password)
        return cls(sorted(set(found), key=len, reverse=True))

    def add(self, other: "Secrets") -> None:
        """Mask ``other``'s values too (here and in the log filters already installed)."""
        self.values[:] = sorted(set(self.values) | set(other.values), key=len, reverse=True)

    def mask(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, MASK)
        return text

    def install(self) -> None:
        """Mask the secrets in every record that reaches the root logger's handlers."""
        if not self.values:
            return
        for handler in logging.getLogger().handlers:
            handler.addFilter(_MaskingFilter(self))


class _MaskingFilter(logging.Filter):
    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self._secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format: leave it to logging
            return True
        masked = self._secrets.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, self._secrets.mask(text)
        elif record.exc_text:
            record.exc_text = self._secrets.mask(record.exc_text)
        return True


def _url_password(value: str) -> Optional[str]:
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value).password or None
    except ValueError:
        return None


def describe_catalog(catalog: CatalogSpec) -> str:
    """The catalog as the command names it: its name, or its type and URI (no secret, no
    URI password).

    >>> describe_catalog({"type": "sql", "uri": "postgresql+psycopg://me:pw@db:5432/cat", "s3.secret-access-key": "x"})
    'sql catalog postgresql+psycopg://me:***@db:5432/cat'
    >>> describe_catalog("prod")
    "catalog 'prod'"
    """
    if isinstance(catalog, str):
        return f"catalog {catalog!r}"
    kind = catalog.get("type") or ("rest" if "uri" in catalog else "pyiceberg")
    uri = catalog.get("uri")
    if not uri:
        return f"{kind} catalog"
    password = _url_password(uri)
    return f"{kind} catalog {uri.replace(':' + password + '@', ':' + MASK + '@') if password else uri}"


def s3_flags_given(config: S3Config) -> bool:
    """Whether Beam's S3 flags say anything (an endpoint, a region or credentials)."""
    return any(
        (config.endpoint_url, config.region_name, config.access_key_id, config.secret_access_key, config.session_token)
    )


def catalog_with_s3_flags(catalog: CatalogSpec, config: S3Config) -> CatalogSpec:
    """The catalog's properties with the ``s3.*`` ones it lacks taken from the S3 flags (its
    own win), so that pyiceberg reaches the store the flags name. A catalog name is kept as it
    is (pyiceberg resolves all of its properties).

    >>> catalog_with_s3_flags({"type": "sql", "s3.region": "eu-west-1"},
    ...                       S3Config(endpoint_url="http://127.0.0.1:9000", region_name="us-east-1"))
    {'type': 'sql', 's3.region': 'eu-west-1', 's3.endpoint': 'http://127.0.0.1:9000', 's3.path-style-access': 'true'}
    """
    if isinstance(catalog, str):
        return catalog
    given = {
        "s3.endpoint": config.endpoint_url,
        "s3.region": config.region_name,
        "s3.access-key-id": config.access_key_id,
        "s3.secret-access-key": config.secret_access_key,
        "s3.session-token": config.session_token,
        "s3.path-style-access": "true" if config.endpoint_url else None,
    }
    props = dict(catalog)
    for key, value in given.items():
        if value and key not in props:
            props[key] = value
    return props


def _load(catalog: CatalogSpec) -> Any:
    from pyiceberg.catalog import load_catalog

    if isinstance(catalog, str):
        return load_catalog(catalog)
    props = dict(catalog)
    return load_catalog(props.pop("name", "default"), **props)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:400]}"


@dataclass(frozen=True)
class TableTarget:
    """``--table NS.TABLE`` in ``--catalog``, as the command checks and reports it."""

    name: str
    catalog: CatalogSpec
    secrets: Secrets

    def load_catalog(self) -> Any:
        """The pyiceberg catalog; ValueError naming ``--catalog`` (secrets masked) when it does not load."""
        try:
            return _load(self.catalog)
        except Exception as exc:  # pyiceberg's, SQLAlchemy's, the REST client's: name the flag
            raise ValueError(
                self.secrets.mask(f"--catalog: the {describe_catalog(self.catalog)} does not load: {_reason(exc)}")
            ) from None

    def named_s3(self) -> Optional[S3Config]:
        """For a catalog name: the S3 settings of the ``s3.*`` properties pyiceberg resolved for
        it (CopyToIceberg reads them from properties given as such only), their secrets masked
        from now on; None for properties, or a name whose properties have no ``s3.*``."""
        from beam_s3_sink.iceberg import Catalog

        if not isinstance(self.catalog, str):
            return None
        resolved = {str(k): str(v) for k, v in self.load_catalog().properties.items()}
        self.secrets.add(Secrets.of(resolved))
        try:
            return Catalog(tuple(sorted(resolved.items()))).s3_config()
        except ValueError as exc:
            raise ValueError(self.secrets.mask(f"--catalog {self.catalog}: its s3.* properties: {exc}")) from None

    def load_table(self, catalog: Any = None) -> Optional[Any]:
        """The table, or None when it does not exist yet."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        catalog = catalog if catalog is not None else self.load_catalog()
        try:
            return catalog.load_table(self.name)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        except Exception as exc:
            raise ValueError(
                self.secrets.mask(f"--table {self.name}: the {describe_catalog(self.catalog)} fails: {_reason(exc)}")
            ) from None

    def check(
        self, schema: pa.Schema, partition_by: Optional[Sequence[str]], evolution: Optional[str] = None
    ) -> Tuple[Tuple[str, ...], bool]:
        """Check, before anything is written, that the copy fits: the catalog loads, and an
        existing table accepts ``schema`` (CopyToIceberg's own check; with ``evolution``, once
        evolved) and is partitioned as ``partition_by`` says, when given. Returns (the
        partitions: ``partition_by``, or the existing table's spec as ``partition_by``
        expressions, such as ``day(ts)``, when None; whether the table exists). ValueError
        naming the flag."""
        from beam_s3_sink.iceberg_commit import check_schema, iceberg_schema
        from beam_s3_sink.iceberg_evolution import evolved_schema

        table = self.load_table()
        if table is None:
            try:
                iceberg_schema(schema, tuple(partition_by or ()))  # what initialization creates
            except ValueError as exc:
                raise ValueError(f"--table {self.name}: {exc}") from None
            return tuple(partition_by or ()), False
        try:
            check_schema(evolved_schema(table, schema)[0] if evolution else table.schema(), schema)
        except ValueError as exc:
            raise ValueError(f"--table {self.name}: {exc}") from None
        columns = _partition_expressions(table)
        if partition_by is None:
            return columns, True
        if _parsed(partition_by) != _parsed(columns):
            raise partition_mismatch(partition_by, columns, f"table {self.name}", "partitions")
        return columns, True

    def committed_copy(self, sink_id: str, files: bool = True) -> Optional["CommittedCopy"]:
        """The snapshot that copy ``sink_id`` committed, as the summary shows it (with the data
        files it added, read from its manifests, when ``files``), or None."""
        from pyiceberg.manifest import ManifestEntryStatus

        from beam_s3_sink.iceberg_commit import committed_snapshot

        table = self.load_table()
        if table is None:
            return None
        snapshot = committed_snapshot(table, sink_id)
        if snapshot is None:
            return None
        summary = snapshot.summary
        added: List[Tuple[str, int, int]] = []
        for manifest in snapshot.manifests(table.io) if files else ():
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.status == ManifestEntryStatus.ADDED:
                    data = entry.data_file
                    added.append((data.file_path, data.record_count, data.file_size_in_bytes))

        def number(key: str) -> int:
            value = summary[key] if summary is not None else None
            return int(value) if value else 0

        return CommittedCopy(
            snapshot_id=snapshot.snapshot_id,
            timestamp_ms=snapshot.timestamp_ms,
            operation=str(summary.operation.value) if summary is not None else "",
            rows=number("added-records"),
            files=number("added-data-files"),
            bytes=number("added-files-size"),
            removed_rows=number("deleted-records"),
            removed_files=number("deleted-data-files"),
            metadata_location=table.metadata_location,
            current=table.current_snapshot() is not None
            and table.current_snapshot().snapshot_id == snapshot.snapshot_id,
            added=tuple(sorted(added)),
            bad_rows=number("beam-s3-sink.bad-rows"),
        )


def _partition_expressions(table: Any) -> Tuple[str, ...]:
    """The table's current partition spec as ``partition_by`` expressions (``region``,
    ``day(ts)``, ``bucket(16, id)``), dropped (void) fields left out."""
    from beam_s3_sink.table_layout import TableLayout

    layout = TableLayout.of(table.spec(), table.schema())
    return tuple(str(e) for e in layout.expressions if e.transform != "void")


def partition_mismatch(partition_by: Sequence[str], columns: Sequence[str], table: str, takes: str) -> ValueError:
    """The refusal of a ``--partition_by`` that is not how the existing ``table`` is partitioned
    (``columns``), for ``--table`` and ``--delta`` alike; ``takes``: what a copy into the table
    takes when the flag is left out.

    >>> partition_mismatch(["day"], [], "Delta table s3://lake/t", "partition columns")
    ValueError("--partition_by day: Delta table s3://lake/t is not partitioned; give no --partition_by (or leave it out: a copy into an existing table takes the table's partition columns)")
    """
    has = f"partitioned by {','.join(columns)}" if columns else "not partitioned"
    fix = f"--partition_by {','.join(columns)}" if columns else "no --partition_by"
    return ValueError(
        f"--partition_by {','.join(partition_by)}: {table} is {has}; give {fix} "
        f"(or leave it out: a copy into an existing table takes the table's {takes})"
    )


def _parsed(partition_by: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    from beam_s3_sink.table_layout import parse_partition_by

    try:
        return tuple((e.column, e.transform) for e in parse_partition_by(partition_by))
    except ValueError as exc:
        raise ValueError(f"--partition_by {','.join(partition_by)}: {exc}") from None


@dataclass(frozen=True)
class CommittedCopy:
    """A copy's snapshot: what the summary prints."""

    snapshot_id: int
    timestamp_ms: int
    operation: str
    rows: int
    files: int
    bytes: int
    removed_rows: int
    removed_files: int
    metadata_location: str
    current: bool
    added: Tuple[Tuple[str, int, int], ...] = ()
    bad_rows: int = 0  # max_bad_rows: the rows the copy left out (the snapshot's summary)


def abort(target: TableTarget, sink_id: str, s3: Optional[S3Config]) -> Any:
    """``--abort SINK_ID --table``: :func:`beam_s3_sink.abort_table_copy`; ValueError naming
    ``--table`` when the table does not exist, ``--catalog`` when the catalog does not load."""
    from beam_s3_sink import abort_table_copy

    catalog = target.load_catalog()
    if target.load_table(catalog) is None:
        raise ValueError(f"--table {target.name}: no such table in the {describe_catalog(target.catalog)}")
    return abort_table_copy(target.name, target.catalog, sink_id, s3=s3)


def parse_table(name: str) -> str:
    """``--table``: ``namespace.table`` (the namespace may have dots; no part empty).

    >>> parse_table("analytics.orders")
    'analytics.orders'
    """
    parts = name.split(".")
    if len(parts) < 2 or not all(part.strip() for part in parts):
        raise ValueError(f"--table must be NAMESPACE.TABLE (e.g. analytics.orders), got {name!r}")
    return name

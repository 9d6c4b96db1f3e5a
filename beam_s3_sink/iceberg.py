"""``CopyToIceberg``: the same three steps as ``CopyToS3``, into an Apache Iceberg table.

Initialization loads the catalog (pyiceberg), creates a missing table from the copy's schema
(partitioned by ``partition_by``: columns and transforms) or checks that the existing one
accepts it (its current partition spec is the copy's, see :mod:`.table_layout`), reports
an earlier snapshot of this sink id again (a rerun commits nothing), removes what a crashed run
of this sink id left under the table's ``data/`` (pending uploads; files it completed but never
committed; a stream's leaves that to its end, see :mod:`.stream_init`), and hands the upload step the table's write settings (its location, its schema with
Iceberg field ids, its partition spec as a :class:`~.table_layout.TableLayout`). Parquet files
are uploaded as for ``CopyToS3`` and not completed; completion
completes them and commits exactly one snapshot that adds them (:mod:`.iceberg_commit`), with
the sink id in its summary. A copy that fails leaves the table's current snapshot unchanged.
A stream (:mod:`.stream`) commits one snapshot per unit, the unit's id beside the sink id in
its summary; at its end, the files no snapshot took are removed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import PCollection
from apache_beam.transforms.display import DisplayDataItem

from .cleanup import AbortReport, abort_uploads
from .clients import _S3DoFn
from .completion import _CompleteFn
from .config import S3Config, resolve_config
from .errors import CommittedCopyError, CopyToS3Error
from .iceberg_evolution import SCHEMA_EVOLUTIONS
from .iceberg_settings import PUT_OBJECT_FILE_IO, s3_config_of, table_data_keys, table_write_settings
from .keys import CopyKeys, S3Location, validate_sink_id
from .messages import InitOutcome
from .results import CopiedFile, CopyToResult, StreamUnit
from .s3 import call, list_keys
from .stream import _FinishStreamFn
from .stream_init import InitializedInStep
from .table_copy import CompleteFactory, _TableCopy
from .table_layout import PartitionExpression, TableLayout, parse_partition_by, table_layout_for
from .transform import MIN_FILE_SIZE
from .writer import DEFAULT_MAX_OPEN_FILES, WriteSettings

__all__ = ["CopyToIceberg", "MODES", "abort_table_copy"]

_log = logging.getLogger(__name__)
MODES = ("append", "overwrite", "overwrite_partitions")
PY_IO_IMPL = "py-io-impl"  # pyiceberg's catalog property naming the FileIO class
SECRET_PROPERTIES = ("secret", "token", "credential", "password")
"""Catalog properties whose names hold one of these are secrets: never shown."""


class CopyToIceberg(_TableCopy):
    """Copy a PCollection into an Apache Iceberg table as one snapshot; output exactly one
    :class:`~beam_s3_sink.CopyToResult` (with ``snapshot_id``). A stream commits one snapshot
    per unit and outputs one result per unit, as :class:`~beam_s3_sink.CopyToS3` does.

    >>> copy = CopyToIceberg("analytics.orders", catalog={"type": "sql", "uri": "sqlite:///cat.db"},
    ...                      mode="append", schema=pa.schema([("id", pa.int64())]))
    >>> copy.sink_id.startswith("copy-")
    True

    Args:
      table: ``"namespace.table"`` (the namespace may have dots: the last part is the table).
      catalog: pyiceberg catalog properties (``{"type": "rest", "uri": ...}``, ``{"type":
        "sql", "uri": "sqlite:///..." or "postgresql+psycopg://..."}``, ``s3.*`` settings, and
        ``"name"``: the catalog's name, default ``"default"``, which a SQL catalog keeps its
        tables under), or a catalog name pyiceberg resolves (``.pyiceberg.yaml``, environment).
      mode: ``"append"``, ``"overwrite"`` (one snapshot that replaces every data file) or
        ``"overwrite_partitions"`` (replaces the data files of the partitions the copy wrote).
      max_file_size: bytes per data file; default: the table's ``write.target-file-size-bytes``,
        else 256 MiB. The table's other write properties (data path, Parquet codec and level,
        metrics modes) are always followed (:mod:`~beam_s3_sink.iceberg_settings`).
      partition_by: only to create a missing table (an existing one is written with its current
        partition spec, which ``partition_by``, when given, must name): column names (identity)
        and transforms, ``"day(ts)"`` (or ``days``; ``year``, ``month``, ``hour``),
        ``"bucket(16, id)"``, ``"truncate(4, name)"``.
      schema, sink_id, errors, fail_on_error, validate_only, max_open_files, upload_graph,
        triggering_frequency, max_bad_rows: as for :class:`~beam_s3_sink.CopyToS3`
        (``.with_bad_rows()`` too).
      schema_evolution: None (default): the copy must fit the table's schema, else it is
        refused before any upload, naming each column and both types; ``"add_columns"``: the
        copy's columns that the table lacks are added (optional), and the widenings Iceberg
        allows (int to long, float to double, a wider decimal) applied, in the copy's own
        commit (:mod:`~beam_s3_sink.iceberg_evolution`).
      s3: an :class:`S3Config` for the data files; default: made from the catalog's ``s3.*``
        properties when it has them, else the pipeline's S3Options, else boto3's chain.
    """

    TRANSFORM = "CopyToIceberg"
    _partitions = staticmethod(parse_partition_by)  # column names and transforms, such as day(ts)

    def __init__(
        self,
        table: str,
        catalog: Union[str, Mapping[str, Any]],
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
        schema_evolution: Optional[str] = None,
        max_bad_rows: Union[int, str] = 0,
    ) -> None:
        if not isinstance(table, str) or "." not in table.strip(".") or "" in table.split("."):
            raise ValueError(f"CopyToIceberg: table must be 'namespace.table', got {table!r}")
        if schema_evolution is not None and schema_evolution not in SCHEMA_EVOLUTIONS:
            raise ValueError(
                f"CopyToIceberg: schema_evolution must be None or one of {list(SCHEMA_EVOLUTIONS)}, "
                f"got {schema_evolution!r}"
            )
        if not isinstance(catalog, (str, Mapping)):
            raise TypeError(
                f"CopyToIceberg: catalog must be a name or a dict of properties, got {type(catalog).__name__}"
            )
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
        self._table = table
        self._catalog = Catalog(catalog if isinstance(catalog, str) else tuple(sorted(catalog.items())))
        self._evolution = schema_evolution

    def default_label(self) -> str:
        return f"CopyToIceberg({self._table})"

    def display_data(self) -> Dict[str, Any]:
        """The copy's options as a runner's UI shows them; the catalog without its secrets.

        >>> copy = CopyToIceberg("a.b", catalog={"type": "sql", "s3.secret-access-key": "s3cr3t"}, sink_id="n")
        >>> from apache_beam.transforms.display import DisplayData
        >>> items = {i.key: i.value for i in DisplayData.create_from(copy).items}
        >>> items["catalog"], items["mode"], items["sink_id"]
        ("Catalog(s3.secret-access-key=***, type='sql')", 'append', 'n')
        """
        return self._display_data(
            {
                "table": DisplayDataItem(self._table, label="Table"),
                "catalog": DisplayDataItem(repr(self._catalog), label="Catalog"),
            },
            schema_evolution=DisplayDataItem(self._evolution, label="Schema evolution").drop_if_none(),
        )

    def _target(self, schema: pa.Schema, options: Any) -> Tuple[CopyKeys, S3Config, TableLayout]:
        layout = _requested_layout(schema, self._partition_by)
        config = self._s3 or self._catalog.s3_config() or resolve_config(None, options)
        # Where the files go is the table's, known once initialization has loaded it.
        placeholder = CopyKeys(S3Location("iceberg-table", self._table.replace(".", "/")), self._sink_id)
        return placeholder, config, layout

    def _dry_run_uri(self) -> str:
        return f"iceberg:{self._table}"

    def _steps(self, settings: WriteSettings, stream: bool) -> Tuple[beam.DoFn, CompleteFactory, _FinishStreamFn]:
        given = self._max_file_size if self._file_size_given else None
        init_fn = _TableInitFn(
            self._table,
            self._catalog,
            settings,
            stream,
            self._partition_by,
            max_file_size=given,
            evolution=self._evolution,
        )

        def complete_fn(in_step: Optional[InitializedInStep]) -> _TableCompleteFn:
            return _TableCompleteFn(
                settings,
                self._fail_on_error,
                self._table,
                self._catalog,
                self._mode,
                stream,
                evolution=self._evolution,
                stream_init=in_step,
            )

        return init_fn, complete_fn, _TableFinishFn(settings, self._table, self._catalog)


@dataclasses.dataclass(frozen=True)
class Catalog:
    """A pyiceberg catalog: a name pyiceberg resolves, or its properties. Its ``repr`` shows no
    secret (``s3.secret-access-key``, ``credential``, ``token``...).

    >>> Catalog((("type", "sql"), ("s3.secret-access-key", "s3cr3t")))
    Catalog(type='sql', s3.secret-access-key=***)
    """

    spec: Union[str, tuple]

    def __repr__(self) -> str:
        if isinstance(self.spec, str):
            return f"Catalog({self.spec!r})"
        shown = ", ".join(f"{k}={'***' if _secret(k) else repr(v)}" for k, v in self.spec)
        return f"Catalog({shown})"

    def load(self) -> Any:
        """The pyiceberg catalog (on the worker)."""
        from pyiceberg.catalog import load_catalog

        # Table metadata written by single PutObjects (.iceberg_io), unless the catalog names a FileIO.
        io = {} if PY_IO_IMPL in self.properties() else {PY_IO_IMPL: PUT_OBJECT_FILE_IO}
        if isinstance(self.spec, str):
            return load_catalog(self.spec, **io)
        props = dict(self.spec)
        return load_catalog(props.pop("name", "default"), **props, **io)

    def properties(self) -> Dict[str, Any]:
        """The catalog's properties; for a name, as pyiceberg resolves it (``.pyiceberg.yaml``,
        ``PYICEBERG_CATALOG__*``: read from files and the environment, no network)."""
        if not isinstance(self.spec, str):
            return dict(self.spec)
        from pyiceberg.utils.config import Config

        return dict(Config().get_catalog_config(self.spec) or {})

    def s3_config(self) -> Optional[S3Config]:
        """An :class:`S3Config` from the catalog's ``s3.*`` properties, if it has any."""
        return s3_config_of(self.properties())


def _secret(name: str) -> bool:
    return any(word in name.lower() for word in SECRET_PROPERTIES)


def _requested_layout(schema: pa.Schema, partition_by: Sequence[PartitionExpression]) -> TableLayout:
    """The layout ``partition_by`` asks for (what a missing table is created with), checked
    when the pipeline is built: ValueError naming the expression and the problem."""
    from .iceberg_commit import iceberg_schema

    try:
        table_schema, spec = iceberg_schema(schema, [str(e) for e in partition_by])
    except ValueError as exc:
        raise ValueError(f"CopyToIceberg: {exc}") from None
    layout = TableLayout.of(spec, table_schema)
    layout.check(schema)
    return layout


def _load_table(name: str, catalog: Catalog, schema: pa.Schema, partition_by: Sequence[PartitionExpression]) -> Any:
    """The table, created from ``schema`` (and its namespace) when missing."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

    from .iceberg_commit import iceberg_schema

    loaded = catalog.load()
    namespace = tuple(name.split(".")[:-1])
    try:
        return loaded.load_table(name)
    except NoSuchTableError:
        pass
    try:
        loaded.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        pass
    table_schema, spec = iceberg_schema(schema, [str(e) for e in partition_by])
    try:
        return loaded.create_table(name, schema=table_schema, partition_spec=spec)
    except TableAlreadyExistsError:  # another copy created it meanwhile
        return loaded.load_table(name)


def _data_keys(table: Any, sink_id: str) -> CopyKeys:
    return table_data_keys(table.location(), table.properties, sink_id)  # write.data.path, else <location>/data


class _TableInitFn(_S3DoFn):
    """Step 1 for a table: load or create it, check it, clean up; emits one :class:`InitOutcome`."""

    def __init__(
        self,
        name: str,
        catalog: Catalog,
        settings: WriteSettings,
        stream: bool = False,
        partition_by: Sequence[PartitionExpression] = (),
        max_file_size: Optional[int] = None,
        evolution: Optional[str] = None,
    ) -> None:
        super().__init__(settings.config)
        self._name, self._catalog, self._settings, self._stream = name, catalog, settings, stream
        self._partition_by = tuple(partition_by)
        self._max_file_size = max_file_size  # the user's; None: the table's write.target-file-size-bytes
        self._evolution = evolution

    def process(self, _unused: Any, errors: Iterable[Any] = ()) -> Iterable[InitOutcome]:
        for error in errors:
            yield InitOutcome(error=f"the copy was aborted before writing anything, by an upstream error: {error}")
            return
        try:
            yield self._initialize()
        except (CopyToS3Error, ValueError) as exc:
            yield InitOutcome(error=f"table {self._name}: {exc}")
        except Exception as exc:  # pyiceberg's and the catalog's own errors: name the table, no secret
            yield InitOutcome(error=f"table {self._name} in catalog {self._catalog!r}: {type(exc).__name__}: {exc}")
        finally:
            self._count_retries()

    def _initialize(self) -> InitOutcome:
        from .iceberg_commit import check_schema, committed_snapshot, file_schema
        from .iceberg_evolution import evolved_schema

        settings = self._settings
        table = _load_table(self._name, self._catalog, settings.schema, self._partition_by)
        table_schema = table.schema()
        if self._evolution is not None:  # the files get the ids the commit's evolution assigns
            table_schema, changes = evolved_schema(table, settings.schema)
            _log.info("copy into %s evolves its schema: %s", self._name, "; ".join(changes) or "no change")
        check_schema(table_schema, settings.schema)
        layout = table_layout_for(table.spec(), table_schema, self._partition_by)
        keys = _data_keys(table, settings.keys.sink_id)
        done = None if self._stream else committed_snapshot(table, keys.sink_id)
        if done is not None:
            _log.info("copy %s into %s committed snapshot %s already", keys.sink_id, self._name, done.snapshot_id)
            return InitOutcome(done=_result_of(table, keys, done))
        warnings: List[str] = []
        if not self._stream:  # a stream's runs in every step: it removes nothing (see .stream_init)
            warnings = abort_uploads(self._client, keys)[1]
            _delete_uncommitted(self._client, keys, table)
        table_settings, size_warnings = table_write_settings(
            settings, table.location(), table.properties, self._max_file_size, MIN_FILE_SIZE
        )
        schema = _with_field_ids(settings.schema, file_schema(table_schema))
        layout.check(schema)
        table_settings = dataclasses.replace(table_settings, schema=schema, layout=layout)
        return InitOutcome(warnings=tuple(warnings + size_warnings), settings=table_settings)


def _with_field_ids(schema: pa.Schema, table_schema: pa.Schema) -> pa.Schema:
    """``table_schema`` (the table's Arrow types, with field ids), nullable where ``schema`` is."""
    return pa.schema([table_schema.field(f.name).with_nullable(f.nullable) for f in schema])


def _result_of(table: Any, keys: CopyKeys, snapshot: Any, unit: Optional[StreamUnit] = None) -> CopyToResult:
    """The result of an earlier commit of this sink id, from its snapshot and the files of it
    that the table still holds (a stream's unit: the files its snapshot added, so that a unit
    reported again after a restart names the same files as its first report)."""
    from .iceberg_commit import BAD_ROWS_PROPERTY

    summary, head = snapshot.summary, f"s3://{keys.location.bucket}/"
    if unit is not None:
        listed = _added_files(table, snapshot)
    else:
        listed = table.inspect.files().to_pylist() if table.current_snapshot() is not None else []
    files = [
        CopiedFile(f["file_path"], f["record_count"], f["file_size_in_bytes"])
        for f in listed
        if f["file_path"].startswith(head) and keys.is_data_file(f["file_path"][len(head) :])
    ]
    return CopyToResult(
        uri=keys.location.uri,
        sink_id=keys.sink_id,
        rows=int(summary["added-records"] or 0),
        bytes=int(summary["added-files-size"] or 0),
        bad_rows=int(summary[BAD_ROWS_PROPERTY] or 0),
        files=tuple(sorted(files, key=lambda f: f.uri)),
        snapshot_id=snapshot.snapshot_id,
        unit=unit,
    )


def _added_files(table: Any, snapshot: Any) -> List[Dict[str, Any]]:
    """The data files ``snapshot`` added (path, record count, size), from its manifests."""
    from pyiceberg.manifest import ManifestEntryStatus

    added = []
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io):
            if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                f = entry.data_file
                added.append(
                    {
                        "file_path": f.file_path,
                        "record_count": f.record_count,
                        "file_size_in_bytes": f.file_size_in_bytes,
                    }
                )
    return added


def abort_table_copy(
    table: str, catalog: Union[str, Mapping[str, Any]], sink_id: str, s3: Optional[S3Config] = None
) -> AbortReport:
    """Remove what copy ``sink_id`` into ``table`` left (``beam-s3-copy --abort ID --table``):
    its pending uploads, and the files it completed but never committed. A committed copy is
    refused: its files are the table's.

    Raises :class:`~beam_s3_sink.CommittedCopyError` when a snapshot of ``sink_id`` exists.
    """
    from .iceberg_commit import committed_snapshot

    spec = Catalog(catalog if isinstance(catalog, str) else tuple(sorted(catalog.items())))
    loaded = spec.load().load_table(table)
    keys = _data_keys(loaded, validate_sink_id(sink_id))
    done = committed_snapshot(loaded, sink_id)
    if done is not None:
        raise CommittedCopyError(
            f"copy {sink_id!r} into {table} committed snapshot {done.snapshot_id}: its files are the table's"
        )
    client = (s3 or spec.s3_config() or S3Config()).make_client()
    aborted = [(keys.location.object_uri(k), u) for k, u in abort_uploads(client, keys, strict=True)[0]]
    deleted = _delete_uncommitted(client, keys, loaded)
    return AbortReport(keys.location.uri, sink_id, tuple(deleted), tuple(aborted))


def _delete_uncommitted(client: Any, keys: CopyKeys, table: Any, every_snapshot: bool = False) -> List[str]:
    """Delete the data files of ``keys``' sink id that the table does not reference (a crashed
    run completed them but never committed; a file of an expired snapshot of this sink id that
    the table still uses stays; ``every_snapshot``: a stream's files that a later unit replaced
    stay too, for time travel); return their URIs."""
    from .iceberg_commit import referenced_paths

    bucket = keys.location.bucket
    owned = [o["Key"] for o in list_keys(client, bucket, keys.data_prefix) if keys.is_data_file(o["Key"])]
    keep = referenced_paths(table, every_snapshot) if owned else set()
    deleted = [keys.location.object_uri(key) for key in owned if keys.location.object_uri(key) not in keep]
    for uri in deleted:
        call(client, "DeleteObject", bucket, uri[len(f"s3://{bucket}/") :])
    return deleted


class _TableCompleteFn(_CompleteFn):
    """Step 3 for a table: the uploads completed as for ``CopyToS3``, then one snapshot."""

    TRANSFORM = "CopyToIceberg"

    def __init__(
        self,
        settings: WriteSettings,
        fail_on_error: bool,
        name: str,
        catalog: Catalog,
        mode: str,
        stream: bool = False,
        evolution: Optional[str] = None,
        stream_init: Optional[InitializedInStep] = None,
    ) -> None:
        super().__init__(settings, fail_on_error, stream, stream_init)
        self._name, self._catalog, self._mode = name, catalog, mode
        self._evolution = evolution

    def _uri(self, init: InitOutcome) -> str:
        return self._keys.location.uri if init.settings is not None else f"iceberg:{self._name}"

    def _committed(self, unit: StreamUnit) -> Optional[CopyToResult]:
        from .iceberg_commit import committed_snapshot

        table = self._catalog.load().load_table(self._name)
        done = committed_snapshot(table, self._keys.sink_id, unit.id)
        return None if done is None else _result_of(table, self._keys, done, unit)

    def _record(self, unit: StreamUnit, files: Sequence[Any]) -> Sequence[Any]:
        return files  # the snapshot is the commit: a unit cut short left only unreferenced files

    def _publish(
        self, copied: List[CopiedFile], init: InitOutcome, warnings: List[str], unit: Optional[StreamUnit] = None
    ) -> CopyToResult:
        from .iceberg_commit import TableFile, commit

        keys, spec_id, schema = self._keys, init.settings.layout.spec_id, init.settings.schema
        files = [TableFile(f.uri, f.rows, f.bytes, tuple(f.stats), tuple(f.partition), spec_id) for f in copied]
        try:
            table = self._catalog.load().load_table(self._name)
            evolve_to = schema if self._evolution is not None else None  # the files' schema, field ids decided at init
            snapshot_id = commit(
                table,
                files,
                self._mode,
                keys.sink_id,
                unit.id if unit is not None else None,
                schema=evolve_to,
                bad_rows=len(self._dead_letters),
            )
        except CopyToS3Error:
            raise
        except Exception as exc:  # the catalog's: the files are completed, so completion deletes them
            raise CopyToS3Error(f"committing to table {self._name} failed: {type(exc).__name__}: {exc}") from exc
        _log.info(
            "copy %s into %s: snapshot %s, %d rows", keys.sink_id, self._name, snapshot_id, sum(f.rows for f in copied)
        )
        return CopyToResult(
            uri=keys.location.uri,
            sink_id=keys.sink_id,
            rows=sum(f.rows for f in copied),
            bytes=sum(f.bytes for f in copied),
            files=tuple(copied),
            warnings=tuple(warnings),
            snapshot_id=snapshot_id,
            unit=unit,
            bad_rows=len(self._dead_letters),
        )


class _TableFinishFn(_FinishStreamFn):
    """At the end of a stream into a table: abort the uploads no unit named, and delete the
    files of units cut short that no snapshot took."""

    def __init__(self, settings: WriteSettings, name: str, catalog: Catalog) -> None:
        super().__init__(settings)
        self._name, self._catalog = name, catalog

    def _finish(self, keys: CopyKeys, init: InitOutcome) -> None:
        abort_uploads(self._client, keys)
        _delete_uncommitted(self._client, keys, self._catalog.load().load_table(self._name), every_snapshot=True)

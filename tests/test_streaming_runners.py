"""Streaming copies on real streaming runners (DESIGN.md, "Windows and streams"): an unbounded
``PeriodicImpulse`` committed unit by unit on Prism and on Flink, and on Flink through a
``kill -9`` of an SDK worker.

The source emits element ``i`` at event time ``start + i * 20 ms`` (50 rows/s): its id is
recomputed from the impulse's timestamp (``round((t - start) / interval)``), and ``start`` lies
half an interval past a whole second, so that no event falls on a window's boundary. What each
unit must hold is computed here from those timestamps, not by Beam::

    PeriodicImpulse ─▶ {id, at_us} ─┬─ FixedWindows(5 s) ─┬─ CopyToS3     fixed/  one unit per window
                                    │                     ├─ CopyToIceberg        one snapshot per window
                                    │                     └─ CopyToDelta          one version per window  delta/
                                    └─ global window ──── CopyToS3(triggering_frequency=3)  global/

1. ``test_a_periodic_stream_commits_every_window_once``, a 20 s stream on Prism and on Flink
   (LOOPBACK, the session's job server): every id exactly once in every copy; one result per
   unit (each written to a file of its own, created exclusively: a unit reported twice fails the
   pipeline); each fixed-window unit holds exactly the ids whose timestamps fall in its window
   (its manifest, its files, its rows' event times, and its snapshot's added rows); the stream
   ended (no sentinel, claim, commit record or pending upload); the table has one snapshot per
   unit, named by sink id and unit, and reads back (pyiceberg, DuckDB's ``iceberg_scan``) as every
   id once; the Delta table (``delta``) has one version per unit, named by sink id and unit, its
   application transaction at the last unit's version, each version adding exactly its window's
   ids, and reads back as every id once (delta-rs, DuckDB, Polars; Spark at the end). Its
   ``flink-checkpointing`` case runs the same on Flink with checkpoints every 2 s,
   and checks that Flink completed some (and that it restarted nothing).
2. ``test_a_killed_sdk_worker_mid_stream_commits_every_window_once``: Flink with an EXTERNAL
   worker pool (test_worker_kill.py's job server, ``fixed-delay`` restarts, 3 attempts), a 30 s
   stream (45 s with checkpoints) into the fixed windows' copy, the table and the Delta table; one SDK worker is
   ``kill -9``-ed 10 to 20 s in (once a unit has committed, or at 20 s; with checkpoints, once
   Flink has completed one as well).
   Without checkpoints Flink restarts the job from its start and the source replays every row;
   with them (``checkpointing``) it restores the last checkpoint, which its log must name
   (``Restoring job ... from Checkpoint N``). Every window must still be exact and no unit
   committed twice (one manifest per window, one snapshot per unit, distinct unit ids; a replayed
   unit is *reported* again, with the first attempt's files and snapshot), no upload of the copy
   left pending (a kill while pyiceberg writes a snapshot's manifest leaves that upload pending in
   the warehouse, and nothing aborts it: shown, not failed). If the job fails instead, every unit
   committed must be exact and a rerun with the same sink ids exact.
3. ``test_a_killed_sdk_worker_mid_stream_loses_no_row_of_the_global_window``: the same kill, into
   the global window's copy once it has committed a unit. (When ``triggering_frequency`` fired
   processing-time panes, named ``global-pN``, a replay fired other rows under the same pane
   indexes and about a third of the rows were lost in every run; its units are now event-time
   intervals, which a replay fills with the same rows.)

Flink options, and why (Beam 2.62's Flink job server, embedded MiniCluster, measured here).
Streaming without checkpointing: a PeriodicImpulse job ends by itself after the stop timestamp,
and a restart (the kill) reruns the job from its start. With checkpointing,
``--checkpointing_interval=2000 --finish_bundle_before_checkpointing
--shutdown_sources_after_idle_ms=`` (the source's length + 10 s) makes a PeriodicImpulse job
exact, and it ends one idle period after it starts (without the last two options it never ends,
or loses its tail). Beam 2.62's portable Flink runner fails every checkpoint of a stage that
reads a side input (``ClassCastException: ... cannot be cast to ... WindowedValue`` in the
snapshot of the side input's state; ``tests/experiment_flink_checkpoints.py``), so a stream's
graph reads none (``beam_s3_sink/stream_init.py``). A checkpoint that fails makes Flink restart
the job forever (its default restart strategy under checkpointing is unbounded exponential
delay): ``run_stream(restarts_fail=True)`` fails as soon as Flink's log says the job restarts.
Every run here has a deadline, and is cancelled past it.

Prism runs PeriodicImpulse streams. While ``triggering_frequency`` fired processing-time panes
of the global window, Prism 2.77 panicked in about half the runs when such a stream ended
("assignment to entry in nil map", ``aggregateStageKind.buildProcessingTimeBundle``); the source
on Prism still runs ``PRISM_QUIET_S`` longer than its rows, with no row in that tail.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.utils.timestamp import Timestamp

import test_worker_kill
from beam_s3_sink import CopyToDelta, CopyToIceberg, CopyToS3
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.results import StreamUnit
from helpers import data_keys, list_objects, pending_uploads, read_manifest, read_parquet
from test_streaming import check_global, check_table, check_units, keep_result, load_results
from test_worker_kill import copy_and_kill_a_worker, external_flink_args

SCHEMA = pa.schema([("id", pa.int64()), ("at_us", pa.int64())])
INTERVAL_US = 20_000  # 50 rows/s
WINDOW_S = 5
EVERY_S = 3  # triggering_frequency of the global window's copy
SOURCE_S = 20
KILL_SOURCE_S = 30
#: With checkpoints the kill waits for Flink's first one, which the EXTERNAL pool's workers made
#: complete 14 to 27 s into the stream here: the source runs longer, so the kill lands mid-stream.
KILL_SOURCE_CHECKPOINTING_S = 45
KILL_AFTER_S = 10
#: Prism's source runs this much longer than its rows, with none (module docstring).
PRISM_QUIET_S = 8
#: The copies of a pipeline: the fixed windows' and the global window's into S3, the Iceberg table,
#: and the fixed windows' into a Delta table (``s3://bucket/delta``).
COPIES = ("fixed", "global", "table", "delta")

#: test_worker_kill.py's module fixture: a Flink job server with fixed-delay restarts and an
#: EXTERNAL pool of its own (one instance for this module).
restarting_flink = test_worker_kill.restarting_flink


def flink_streaming(source_s: int, checkpointing: bool = False) -> List[str]:
    """Flink's streaming options: plain (the job ends after the stop timestamp), or the
    checkpointing ones that end a PeriodicImpulse job exactly (module docstring)."""
    if not checkpointing:
        return ["--streaming"]
    return [
        "--streaming",
        "--checkpointing_interval=2000",
        "--finish_bundle_before_checkpointing",
        f"--shutdown_sources_after_idle_ms={(source_s + 10) * 1000}",
    ]


@dataclasses.dataclass(frozen=True)
class Impulse:
    """``count`` elements from ``start_us`` every ``interval_us`` microseconds: element ``i`` at
    ``at_us(i)``. The start lies half an interval past a whole second, off every window boundary."""

    start_us: int
    seconds: int
    quiet_s: int = 0  # the source runs this much longer, its rows dropped (Prism: module docstring)
    interval_us: int = INTERVAL_US

    @classmethod
    def from_now(cls, seconds: int, quiet_s: int = 0) -> "Impulse":
        return cls(int(time.time()) * 1_000_000 + INTERVAL_US // 2, seconds, quiet_s)

    @property
    def count(self) -> int:
        return self.seconds * 1_000_000 // self.interval_us

    @property
    def ids(self) -> List[int]:
        return list(range(self.count))

    @property
    def start_s(self) -> float:
        return self.start_us / 1e6

    def at_us(self, i: int) -> int:
        return self.start_us + i * self.interval_us

    def windows(self) -> Dict[Tuple[int, int, str], List[int]]:
        """(window start, end in seconds, "ON_TIME") -> the ids whose timestamps fall in it."""
        units: Dict[Tuple[int, int, str], List[int]] = collections.defaultdict(list)
        for i in self.ids:
            start = self.at_us(i) // 1_000_000 // WINDOW_S * WINDOW_S
            units[(start, start + WINDOW_S, "ON_TIME")].append(i)
        return dict(units)

    def unit_ids(self) -> Dict[str, List[int]]:
        """The id of each window's one unit (its ON_TIME pane) -> the ids whose timestamps fall in it."""
        return {StreamUnit(_utc(a), _utc(b), 0, t).id: ids for (a, b, t), ids in self.windows().items()}

    def source(self) -> PeriodicImpulse:
        # Timestamps, not floats: the number of elements is then exact (from microseconds)
        return PeriodicImpulse(
            start_timestamp=Timestamp(micros=self.start_us),
            stop_timestamp=Timestamp(micros=self.start_us + (self.seconds + self.quiet_s) * 1_000_000),
            fire_interval=self.interval_us / 1e6,
        )


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


class ToRow(beam.DoFn):
    """The impulse's element (its timestamp, in seconds) as a row: its id, and the event time
    Beam carries it at; nothing for the elements of the quiet tail."""

    def __init__(self, impulse: "Impulse") -> None:
        self._start_s, self._interval_s = impulse.start_us / 1e6, impulse.interval_us / 1e6
        self._count = impulse.count

    def process(self, t: float, at=beam.DoFn.TimestampParam):
        i = round((float(t) - self._start_s) / self._interval_s)
        if i < self._count:
            yield {"id": i, "at_us": at.micros}


def keep_every_report(result, out_dir: str) -> None:
    """Every result, a replayed unit's too (after Flink restarts a job, the windows that had
    fired fire again and their units are reported again): one new file each."""
    name = result.unit.id if result.unit is not None else "no-unit"
    with open(os.path.join(out_dir, f"{name}.{uuid.uuid4().hex}.pickle"), "xb") as f:
        pickle.dump(result, f)


def one_per_unit(results: list) -> Tuple[list, int]:
    """The results of ``keep_every_report``, one per unit (every report of a unit the same
    commit: the same files and snapshot; a table's unit reported again names its files as its
    snapshot has them, without the column statistics), and how many were reports of a unit again."""
    by_unit: Dict[str, list] = collections.defaultdict(list)
    for r in results:
        by_unit[r.unit.id].append(r)
    for unit, reports in by_unit.items():
        commits = {
            (r.ok, r.rows, tuple(sorted((f.uri, f.rows, f.bytes) for f in r.files)), r.snapshot_id) for r in reports
        }
        assert len(commits) == 1, f"unit {unit} was reported as {len(commits)} different commits: {reports}"
    return [reports[0] for reports in by_unit.values()], len(results) - len(by_unit)


def build(p, impulse: Impulse, bucket: str, s3, catalog: Dict[str, str], table: str, outs, keep, copies) -> None:
    """The ``copies`` (of ``COPIES``, module docstring), each result kept by ``keep(result, outs[copy])``."""
    rows = p | "Impulse" >> impulse.source() | "Rows" >> beam.ParDo(ToRow(impulse))
    windowed = rows | "Fixed" >> beam.WindowInto(window.FixedWindows(WINDOW_S))
    made = {
        "fixed": lambda: (
            windowed | "Copy fixed" >> CopyToS3(f"s3://{bucket}/fixed", schema=SCHEMA, s3=s3, sink_id="fixed")
        ),
        "global": lambda: (
            rows
            | "Copy global"
            >> CopyToS3(f"s3://{bucket}/global", schema=SCHEMA, s3=s3, sink_id="global", triggering_frequency=EVERY_S)
        ),
        "table": lambda: (
            windowed | "Copy table" >> CopyToIceberg(table, catalog=catalog, schema=SCHEMA, sink_id="table")
        ),
        "delta": lambda: (
            windowed | "Copy delta" >> CopyToDelta(delta_uri(bucket), schema=SCHEMA, s3=s3, sink_id="delta")
        ),
    }
    for name in copies:
        made[name]() | f"Keep {name}" >> beam.Map(keep, str(outs[name]))


class FlinkRestarted(RuntimeError):
    """Flink restarted a job that nothing was done to (the causes from its log)."""


def run_stream(args: List[str], build_fn, timeout_s: float, server=None, restarts_fail: bool = False) -> None:
    """Run the pipeline ``build_fn(p)`` makes until it ends DONE, else cancel it and raise: when it
    has not ended within ``timeout_s`` (TimeoutError, with the tail of ``server``'s log), or, with
    ``restarts_fail``, as soon as Flink's log (``server``) says the job restarts (FlinkRestarted)."""
    p = beam.Pipeline(options=PipelineOptions(args))
    build_fn(p)
    log_from = os.path.getsize(server.log_path) if server is not None else 0
    started = time.monotonic()
    result = p.run()
    while not PipelineState.is_terminal(result.state):
        problem: Optional[Exception] = None
        if restarts_fail and server is not None:
            with open(server.log_path, errors="replace") as f:
                f.seek(log_from)
                log = f.read()
            if "switched from state RUNNING to RESTARTING" in log:
                causes = dict.fromkeys(line for line in log.splitlines() if line.startswith("Caused by"))
                problem = FlinkRestarted("Flink restarted the job:\n" + "\n".join(list(causes)[-3:]))
        if problem is None and time.monotonic() - started > timeout_s:
            tail = server.log_tail(40) if server is not None else ""
            problem = TimeoutError(f"the stream had not ended within {timeout_s:.0f} s (state {result.state})\n{tail}")
        if problem is not None:
            result.cancel()
            raise problem
        time.sleep(1)
    assert result.wait_until_finish() == PipelineState.DONE, result.state


def delta_uri(bucket: str) -> str:
    return f"s3://{bucket}/delta"


def delta_units(s3_config, bucket: str) -> Dict[str, List[int]]:
    """unit -> the ids its version added, read at each version with delta-rs (each version an
    append of one unit of sink ``delta``, no unit twice)."""
    from deltalake import DeltaTable

    from beam_s3_sink.delta_commit import SINK_ID_KEY, UNIT_KEY, storage_options

    options = storage_options(s3_config)
    try:
        loaded = DeltaTable(delta_uri(bucket), storage_options=options)
    except Exception:  # noqa: BLE001  (no unit committed: no table)
        return {}
    history = {loaded.version() - i: h for i, h in enumerate(loaded.history())}
    before: collections.Counter = collections.Counter()
    added: Dict[str, List[int]] = {}
    for version in sorted(history):
        unit = history[version][UNIT_KEY]
        assert history[version][SINK_ID_KEY] == "delta" and unit not in added, f"version {version}: {history[version]}"
        at = DeltaTable(delta_uri(bucket), version=version, storage_options=options)
        now = collections.Counter(at.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
        assert not before - now, f"version {version} of unit {unit} is not an append"
        added[unit] = sorted((now - before).elements())
        before = now
    return added


def check_delta(s3_config, s3_client, bucket: str, impulse: Impulse, results: list) -> None:
    """The Delta copy: one version per unit (its result's), each adding exactly its window's ids;
    the application transaction at the last unit's; every id once to every reader; no file
    under the table that no version adds."""
    from deltalake import DeltaTable

    from beam_s3_sink.delta_commit import storage_options, unit_version
    from delta_readers import assert_tables_read

    assert delta_units(s3_config, bucket) == impulse.unit_ids()
    assert sorted(r.snapshot_id for r in results) == list(range(len(impulse.windows())))
    loaded = DeltaTable(delta_uri(bucket), storage_options=storage_options(s3_config))
    assert loaded.transaction_version("delta") == max(unit_version(r.unit) for r in results)
    assert_tables_read(delta_uri(bucket), s3_config, [{"id": i} for i in impulse.ids])
    files = sorted(k for k in data_keys(s3_client, bucket, "delta/") if "/_delta_log/" not in k)
    assert files == sorted(f.uri.split("/", 3)[3] for r in results for f in r.files)


def out_dirs(root, copies=COPIES) -> Dict[str, Any]:
    outs = {name: root / name for name in copies}
    for out in outs.values():
        out.mkdir()
    return outs


def check_stream_ended(client, bucket: str, name: str, results: list) -> None:
    """The stream of copy ``name`` ended: no sentinel, claim or commit record left; one unit
    manifest per unit, and every data file under the prefix belongs to a unit."""
    keys = CopyKeys(S3Location(bucket, name), name)
    objects = list_objects(client, bucket, name + "/")
    assert keys.sentinel not in objects and keys.claim not in objects and keys.manifest not in objects
    assert [k for k in objects if k.endswith(".commit.json")] == []
    units = [r.unit.id for r in results]
    assert len(set(units)) == len(units)
    assert sorted(k for k in objects if k.endswith(".manifest.json")) == sorted(keys.unit_manifest(u) for u in units)
    assert data_keys(client, bucket, name + "/") == sorted(f.uri.split("/", 3)[3] for r in results for f in r.files)


def check_event_times(client, bucket: str, impulse: Impulse, results: list) -> None:
    """Every row of a fixed-window unit carries its element's event time, inside the unit's window."""
    for r in results:
        start, end = int(r.unit.start.timestamp()) * 1_000_000, int(r.unit.end.timestamp()) * 1_000_000
        for f in r.files:
            rows = read_parquet(client, bucket, f.uri.split("/", 3)[3]).to_pylist()
            assert all(abs(row["at_us"] - impulse.at_us(row["id"])) <= 1 for row in rows), f.uri
            assert all(start <= row["at_us"] < end for row in rows), (r.unit.id, f.uri)


def snapshot_units(catalog, table: str) -> Dict[str, List[int]]:
    """unit -> the ids its snapshot added, read at each snapshot with pyiceberg (each must be an
    append, and name a unit no other snapshot names)."""
    from iceberg_catalogs import load

    loaded = load(catalog).load_table(table)
    before: collections.Counter = collections.Counter()
    added: Dict[str, List[int]] = {}
    for s in sorted(loaded.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms)):
        unit = s.summary["beam-s3-sink.unit"]
        assert unit not in added, f"unit {unit} has two snapshots"
        now = collections.Counter(loaded.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist())
        assert not before - now, f"snapshot {s.snapshot_id} of unit {unit} is not an append"
        added[unit] = sorted((now - before).elements())
        before = now
    return added


def check_table_units(catalog, table: str, impulse: Impulse, killed: bool = False) -> None:
    """Each snapshot adds exactly its unit's window, and no upload is left in the warehouse under
    the table: none of the copy's files and, unless a worker was ``killed``, none of pyiceberg's
    metadata files (a worker killed while pyiceberg writes a manifest leaves its multipart upload,
    which nothing aborts: shown, not failed)."""
    from iceberg_catalogs import load

    assert snapshot_units(catalog, table) == impulse.unit_ids()
    bucket, prefix = urlparse_bucket_key(load(catalog).load_table(table).location())
    pending = [k for k in pending_uploads(catalog.s3.make_client(), bucket) if k.startswith(prefix)]
    metadata = [k for k in pending if k.startswith(prefix.rstrip("/") + "/metadata/")]
    if killed and metadata:
        print(f"pyiceberg's pending uploads left by the kill: {metadata}")
        pending = [k for k in pending if k not in metadata]
    assert pending == []


def urlparse_bucket_key(uri: str) -> Tuple[str, str]:
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key


def check_copies(
    s3_client, s3_config, bucket: str, impulse: Impulse, results: Dict[str, list], catalog, table: str, killed=False
) -> None:
    """Every copy of ``results`` (copy -> one result per unit) exact: module docstring (``killed``:
    :func:`check_table_units`)."""
    assert all(r.ok for rs in results.values() for r in rs), [r.error for rs in results.values() for r in rs]
    if "fixed" in results:
        check_units(s3_client, s3_config, bucket, "fixed", results["fixed"], impulse.windows())
        check_event_times(s3_client, bucket, impulse, results["fixed"])
    if "global" in results:
        check_global(s3_client, bucket, results["global"], impulse.ids)
    for name in sorted({"fixed", "global"} & set(results)):
        check_stream_ended(s3_client, bucket, name, results[name])
    if "table" in results:
        check_table(catalog, table, results["table"], impulse.ids)
        check_table_units(catalog, table, impulse, killed)
    if "delta" in results:
        check_delta(s3_config, s3_client, bucket, impulse, results["delta"])
    assert pending_uploads(s3_client, bucket) == []


@pytest.fixture
def stream_catalog(s3_config, s3_client, tmp_path):
    """A SQLite catalog of the test's own, its warehouse in a bucket of its own: what a killed
    attempt's workers still write after the stream ended (see the README) stays out of the
    session's shared ``iceberg_sqlite`` warehouse, which other modules check for pending uploads."""
    from iceberg_catalogs import s3_props, sqlite_catalog

    warehouse = f"stream-wh-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=warehouse)
    props = s3_props(
        s3_config.endpoint_url, s3_config.access_key_id, s3_config.secret_access_key, s3_config.region_name
    )
    return sqlite_catalog(str(tmp_path / "catalog.db"), f"s3://{warehouse}/warehouse", props)


def table_name(bucket: str) -> str:
    return f"streams.r{bucket.replace('-', '_')}"


@pytest.mark.parametrize(
    "runner_name, checkpointing",
    [("prism", False), ("flink", False), ("flink", True)],
    ids=["prism", "flink", "flink-checkpointing"],
)
def test_a_periodic_stream_commits_every_window_once(
    runner_name, checkpointing, request, s3_config, s3_client, bucket, stream_catalog, tmp_path, spark_final_reads
):
    from conftest import runner_args

    if runner_name == "prism":
        args, server = runner_args("prism", request) + ["--streaming"], None
    else:
        args = runner_args("flink", request) + flink_streaming(SOURCE_S, checkpointing)
        server = request.getfixturevalue("flink_job_server")
    impulse = Impulse.from_now(SOURCE_S, PRISM_QUIET_S if runner_name == "prism" else 0)
    outs = out_dirs(tmp_path)
    catalog, table = dict(stream_catalog.props, name=stream_catalog.name), table_name(bucket)
    log_from = os.path.getsize(server.log_path) if server is not None else 0
    started = time.monotonic()
    run_stream(
        args,
        lambda p: build(p, impulse, bucket, s3_config, catalog, table, outs, keep_result, COPIES),
        240,
        server,
        restarts_fail=True,
    )
    took = time.monotonic() - started
    checkpoints = len(completed_checkpoints(server, log_from)) if server is not None else 0
    mode = " with checkpointing" if checkpointing else ""
    print(f"\n{runner_name}{mode}: a {SOURCE_S} s stream ran in {took:.0f} s; {checkpoints} checkpoint(s) completed")
    assert (checkpoints > 0) == checkpointing

    results = {name: load_results(str(outs[name])) for name in COPIES}
    check_copies(s3_client, s3_config, bucket, impulse, results, stream_catalog, table)
    assert len(results["fixed"]) == len(impulse.windows()) == len(results["table"]) == len(results["delta"])


def completed_checkpoints(server, log_from: int) -> List[str]:
    """The lines of Flink's log (``server``'s, from byte ``log_from``) that say a checkpoint completed."""
    with open(server.log_path, errors="replace") as f:
        f.seek(log_from)
        return [line for line in f.read().splitlines() if "Completed checkpoint" in line]


@dataclasses.dataclass
class Killed:
    """A stream with a worker killed mid-way (:func:`stream_and_kill`)."""

    outcome: Dict[str, Any]  # copy_and_kill_a_worker's: "killed", "workers", and "result" or "error"
    restarts: List[str]  # Flink's log lines about the restart
    new_workers: int  # SDK workers the pool started after the kill
    took: float
    run: Any  # run(root): the same stream again (same impulse, sink ids), results under root

    def results(self, root, copies) -> Tuple[Dict[str, list], int]:
        """One result per unit of each copy, and how many units were reported again."""
        results, replays = {}, 0
        for name in copies:
            results[name], again = one_per_unit(load_results(str(root / name)))
            replays += again
        return results, replays


def stream_and_kill(
    restarting_flink,
    s3_config,
    s3_client,
    bucket,
    catalog,
    table,
    impulse,
    copies,
    root,
    wait_for_units=False,
    checkpointing=False,
) -> Killed:
    """Run the stream of ``copies`` on Flink with the EXTERNAL pool (with ``checkpointing``: its
    options, :func:`flink_streaming`) and ``kill -9`` one SDK worker once ``KILL_AFTER_S`` have
    passed and every S3 copy has committed a unit (at the latest 10 s later, unless
    ``wait_for_units``); results under ``root/first``. Checks that the worker died, Flink
    restarted and the pool started new workers."""
    server, pool = restarting_flink
    args = external_flink_args(server, pool) + flink_streaming(impulse.seconds, checkpointing)
    prefixes = [name for name in copies if name not in ("table", "delta")]

    def run(root) -> None:
        outs = out_dirs(root, copies)
        run_stream(
            args,
            lambda p: build(p, impulse, bucket, s3_config, catalog, table, outs, keep_every_report, copies),
            300,
            server,
        )

    kill_at: List[float] = []

    def due() -> bool:
        if time.time() < impulse.start_s + KILL_AFTER_S:
            return False
        if checkpointing and not completed_checkpoints(server, log_from):  # a checkpoint to restore
            return False
        late = not wait_for_units and time.time() > impulse.start_s + KILL_AFTER_S + 10
        if not late and not all(
            any(k.endswith(".manifest.json") for k in list_objects(s3_client, bucket, name + "/")) for name in prefixes
        ):
            return False
        kill_at.append(time.time() - impulse.start_s)
        return True

    (root / "first").mkdir()
    workers_before = pool_log_workers(pool)
    log_from = os.path.getsize(server.log_path)
    started = time.monotonic()
    outcome = copy_and_kill_a_worker(pool, s3_client, bucket, lambda: run(root / "first"), ready=due, both=True)
    took = time.monotonic() - started
    with open(server.log_path, errors="replace") as f:
        f.seek(log_from)
        restarts = [line for line in f.read().splitlines() if RESTART_LINE.search(line)]
    new_workers = pool_log_workers(pool) - workers_before - len(outcome["workers"])
    print(
        f"\nkilled SDK worker {outcome['killed']} of {outcome['workers']} at t+{kill_at[0]:.0f} s"
        f"; the job {'ended DONE' if 'error' not in outcome else 'FAILED: ' + str(outcome['error'])[:300]} "
        f"{took:.0f} s after it started; the pool started {new_workers} worker(s) after the kill; Flink:\n  "
        + "\n  ".join(restarts)
    )
    assert not alive(outcome["killed"]), f"SDK worker {outcome['killed']} still runs after kill -9"
    assert any("switched from state RUNNING to RESTARTING" in line for line in restarts), "Flink did not restart"
    assert new_workers > 0, "the pool started no worker after the kill"
    return Killed(outcome, restarts, new_workers, took, run)


#: Flink's log lines that tell of a restart: the job's state, and where it restored from.
RESTART_LINE = re.compile(
    r"switched from state \w+ to (RESTARTING|RUNNING)|checkpoint found during restore|Restoring job"
)


@pytest.mark.parametrize("checkpointing", [False, True], ids=["replayed", "checkpointing"])
def test_a_killed_sdk_worker_mid_stream_commits_every_window_once(
    checkpointing, restarting_flink, s3_config, s3_client, bucket, stream_catalog, tmp_path
):
    """Without checkpoints Flink restarts the job from its start and the source replays; with
    them it restores the last checkpoint (its log says from which), and the stream goes on."""
    impulse = Impulse.from_now(KILL_SOURCE_CHECKPOINTING_S if checkpointing else KILL_SOURCE_S)
    catalog, table = dict(stream_catalog.props, name=stream_catalog.name), table_name(bucket)
    copies = ("fixed", "table", "delta")
    killed = stream_and_kill(
        restarting_flink,
        s3_config,
        s3_client,
        bucket,
        catalog,
        table,
        impulse,
        copies,
        tmp_path,
        checkpointing=checkpointing,
    )
    restored = [line for line in killed.restarts if re.search(r"Restoring job \w+ from Checkpoint \d+", line)]
    assert bool(restored) == checkpointing, killed.restarts
    if "error" not in killed.outcome:  # Flink restarted the job, the source replayed, the stream ended: exact
        results, replays = killed.results(tmp_path / "first", copies)
        print(f"units reported again after the restart: {replays}")
        check_copies(s3_client, s3_config, bucket, impulse, results, stream_catalog, table, killed=True)
        return

    # the job failed: every unit committed so far is exact, then a rerun with the same sink ids
    # (and the same impulse, now in the past) commits the rest and reports the others again
    check_committed_units(s3_client, s3_config, bucket, impulse, stream_catalog, table)
    (tmp_path / "rerun").mkdir()
    killed.run(tmp_path / "rerun")
    results, _ = killed.results(tmp_path / "rerun", copies)
    check_copies(s3_client, s3_config, bucket, impulse, results, stream_catalog, table, killed=True)


class GlobalPanesLost(AssertionError):
    """A replayed pane of the global window was taken for the unit of the same index."""


def test_a_killed_sdk_worker_mid_stream_loses_no_row_of_the_global_window(
    restarting_flink, s3_config, s3_client, bucket, stream_catalog, tmp_path
):
    """The same kill, once the global window's copy (``triggering_frequency``) has committed a unit."""
    impulse = Impulse.from_now(KILL_SOURCE_S)
    killed = stream_and_kill(
        restarting_flink, s3_config, s3_client, bucket, {}, "", impulse, ("global",), tmp_path, wait_for_units=True
    )
    root = tmp_path / "first"
    if "error" in killed.outcome:
        (tmp_path / "rerun").mkdir()
        killed.run(tmp_path / "rerun")
        root = tmp_path / "rerun"
    results, replays = killed.results(root, ("global",))
    ids = collections.Counter(
        i
        for r in results["global"]
        for f in r.files
        for i in read_parquet(s3_client, bucket, f.uri.split("/", 3)[3])["id"].to_pylist()
    )
    lost, doubled = [i for i in impulse.ids if i not in ids], sorted(i for i, n in ids.items() if n > 1)
    print(
        f"global window: units {sorted(r.unit.id for r in results['global'])}, {replays} reported again; "
        f"{len(lost)} of {impulse.count} rows lost, {len(doubled)} doubled"
    )
    try:
        check_copies(s3_client, s3_config, bucket, impulse, results, stream_catalog, "")
    except AssertionError as exc:
        raise GlobalPanesLost(f"{len(lost)} rows lost ({lost[:3]}...), {len(doubled)} doubled: {exc}") from exc


def check_committed_units(client, s3_config, bucket: str, impulse: Impulse, catalog, table: str) -> None:
    """After a failed stream: each unit committed so far (fixed-window manifest, snapshot) holds
    exactly its window's ids."""
    from pyiceberg.exceptions import NoSuchTableError

    want = impulse.unit_ids()
    keys = CopyKeys(S3Location(bucket, "fixed"), "fixed")
    for key in list_objects(client, bucket, "fixed/"):
        if keys.is_unit_object(key) and key.endswith(".manifest.json"):
            manifest = read_manifest(client, bucket, key)
            files = [e["url"].split("/", 3)[3] for e in manifest["entries"]]
            ids = sorted(i for f in files for i in read_parquet(client, bucket, f).column("id").to_pylist())
            assert ids == want[manifest["unit"]["id"]], key
    try:
        committed = snapshot_units(catalog, table)
    except NoSuchTableError:  # no unit committed before the job failed
        committed = {}
    for unit, ids in committed.items():
        assert ids == want[unit], unit
    for unit, ids in delta_units(s3_config, bucket).items():
        assert ids == want[unit], unit


def pool_log_workers(pool) -> int:
    """How many SDK workers the EXTERNAL pool has started so far (its log)."""
    return pool.log_tail(1_000_000).count("Starting worker with command")


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

"""An SDK worker dies mid-copy on Flink: ``kill -9`` while its parts are uploading.

::

    Flink job server (own, restart-strategy fixed-delay, 3 attempts) ── EXTERNAL ──▶ worker pool
        │                                                                  ├─ SDK worker 1
        │  copy of ~60 MB of CSV, 5 MiB parts, parallelism 2                └─ SDK worker 2  ◀── kill -9
        ▼                                                                     once a part has landed
    moto S3 ◀── the test polls ListMultipartUploads / ListParts

Either the job recovers (Flink restarts it; init aborts the first attempt's uploads) and the copy
is exact, or it fails with nothing visible but the sentinel. Then a rerun with the same
``sink_id`` is exact and leaves no pending upload. The job server and the pool are this
module's own, so that the kill and the restart strategy touch no other test.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pyarrow as pa
import pytest

import jobservers
from beam_s3_sink import CsvFormat
from helpers import data_keys, get_bytes, list_objects, pending_uploads, run_copy

SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.string())])
ROWS = 300_000  # about 60 MB of CSV: a dozen 5 MiB parts over two workers
FLINK_CONF = """\
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 3
restart-strategy.fixed-delay.delay: 2 s
"""
_LOG = logging.getLogger(__name__)


def payload_row(i: int) -> Dict[str, Any]:
    return {"id": i, "payload": f"{i:010d}" * 20}


@pytest.fixture(scope="module")
def restarting_flink(tmp_path_factory):
    """A Flink job server whose jobs restart after a failure, and its own EXTERNAL pool."""
    conf_dir = tmp_path_factory.mktemp("flink-conf")
    (conf_dir / "config.yaml").write_text(FLINK_CONF)
    logs = str(tmp_path_factory.mktemp("flink-restart-logs"))
    servers, failure = [], None
    try:
        try:
            servers.append(jobservers.flink_job_server(logs, str(conf_dir), name="flink-restart"))
            servers.append(jobservers.worker_pool(logs, name="kill-pool"))
        except jobservers.RunnerSetupError as exc:
            failure = str(exc)
        if failure:
            pytest.fail(failure, pytrace=False)
        yield tuple(servers)
    finally:
        for server in servers:
            server.stop()


def uploaded_parts(client, bucket: str) -> int:
    """How many parts the pending multipart uploads in ``bucket`` hold."""
    count = 0
    for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", ()):
        try:
            parts = client.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        except client.exceptions.NoSuchUpload:  # completed or aborted since it was listed
            continue
        count += len(parts.get("Parts", ()))
    return count


def read_ids(client, bucket: str, keys: List[str]) -> List[int]:
    ids = []
    for key in keys:
        for id_, payload in csv.reader(io.StringIO(get_bytes(client, bucket, key).decode(), newline="")):
            assert payload == f"{int(id_):010d}" * 20, key
            ids.append(int(id_))
    return sorted(ids)


def external_flink_args(server, pool) -> List[str]:
    return [
        "--runner=PortableRunner",
        f"--job_endpoint={server.address}",
        "--parallelism=2",
        "--environment_type=EXTERNAL",
        f"--environment_config={pool.address}",
        "--sdk_worker_parallelism=2",
    ]


def copy_and_kill_a_worker(
    pool, s3_client, bucket: str, copy, ready: Optional[Callable[[], bool]] = None, both: bool = False
) -> Dict[str, Any]:
    """Run ``copy()`` on a thread, ``kill -9`` one SDK worker once ``ready()`` (by default: once a
    part has landed), wait for the copy to end; return ``{"result": ...}`` or ``{"error": ...}``,
    with ``"killed"``: the pid of the worker killed, and ``"workers"``: the pool's workers then.
    ``both``: kill the other worker too, so that Flink restarts whichever of them held the
    stream's stages (a stream's work can all sit on one worker, and killing an idle one does
    nothing)."""
    outcome: Dict[str, Any] = {}

    def a_part_landed() -> bool:
        return uploaded_parts(s3_client, bucket) > 0

    ready = ready or a_part_landed

    def run() -> None:
        try:
            outcome["result"] = copy()
        except Exception as exc:  # the job failed: what is left is checked by the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while not ready():
        assert thread.is_alive(), f"the copy ended before the kill was due: {outcome}"
        assert time.monotonic() < deadline, "the kill was not due within 10 minutes"
        time.sleep(0.1)
    workers = jobservers.child_pids(pool.process.pid)
    assert len(workers) == 2, f"the pool should run two SDK workers, it runs {workers}"
    for pid in workers if both else workers[:1]:
        os.kill(pid, signal.SIGKILL)
    outcome["killed"], outcome["workers"] = workers[0], workers
    _LOG.warning("killed SDK worker %s of %s", workers[0], workers)
    thread.join(900)
    assert not thread.is_alive(), "the copy did not end within 15 minutes of the kill"
    return outcome


def test_a_killed_sdk_worker_loses_and_doubles_nothing(restarting_flink, s3_config, s3_client, bucket):
    server, pool = restarting_flink
    args = external_flink_args(server, pool)
    copy = dict(
        uri=f"s3://{bucket}/orders",
        format=CsvFormat(),
        schema=SCHEMA,
        s3=s3_config,
        sink_id="killed",
        max_file_size="40MiB",
    )
    outcome = copy_and_kill_a_worker(
        pool, s3_client, bucket, lambda: run_copy(args=args, generate=(payload_row, ROWS), **copy)
    )

    expected = list(range(ROWS))
    if "result" in outcome:  # Flink restarted the job and it finished: exact, nothing extra
        assert "to RESTARTING" in server.log_tail(100_000), "the job finished, so Flink must have restarted it"
        result = outcome["result"]
        assert result.ok and result.rows == ROWS
        files = data_keys(s3_client, bucket, "orders")
        assert sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in files]
        assert read_ids(s3_client, bucket, files) == expected
        assert "orders/_killed-INCOMPLETE" not in list_objects(s3_client, bucket)
        assert pending_uploads(s3_client, bucket) == []
    else:  # the job failed: nothing visible but the sentinel
        assert data_keys(s3_client, bucket, "orders") == [], outcome["error"]
        assert "orders/_killed-INCOMPLETE" in list_objects(s3_client, bucket)
    print(
        f"\nworker kill on Flink: {'recovered, exact' if 'result' in outcome else 'failed, nothing visible'}"
        f" ({outcome.get('error', '')!s:.200})"
    )

    rerun = run_copy(args=args, generate=(payload_row, ROWS), **copy)
    assert rerun.ok and rerun.rows == ROWS
    files = data_keys(s3_client, bucket, "orders")
    assert sorted(f.uri for f in rerun.files) == [f"s3://{bucket}/{k}" for k in files]
    assert read_ids(s3_client, bucket, files) == expected
    assert pending_uploads(s3_client, bucket) == []
    if "result" in outcome:
        assert rerun == outcome["result"], "a rerun of a finished copy reports it again"


@pytest.mark.parametrize("target", ["iceberg", "delta"])
def test_a_killed_sdk_worker_leaves_one_snapshot_with_every_row_or_none(
    target, restarting_flink, s3_config, s3_client, bucket, tmp_path
):
    """The same kill, into an Iceberg table (SQL catalog on SQLite) or a Delta table: after it,
    the table holds exactly one snapshot (version) with every row, or none; then a rerun with
    the same sink_id is exact."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    from beam_s3_sink import CopyToDelta, CopyToIceberg
    from beam_s3_sink.delta_commit import storage_options
    from test_iceberg import sqlite_catalog

    server, pool = restarting_flink
    args = external_flink_args(server, pool)
    if target == "iceberg":
        catalog = sqlite_catalog(tmp_path, s3_config, bucket)
        copy = dict(table="kill.orders", catalog=catalog, schema=SCHEMA, sink_id="killed", max_file_size="40MiB")
        transform: Any = CopyToIceberg
    else:
        uri = f"s3://{bucket}/lake/orders"
        copy = dict(table_uri=uri, s3=s3_config, schema=SCHEMA, sink_id="killed", max_file_size="40MiB")
        transform = CopyToDelta
    outcome = copy_and_kill_a_worker(
        pool,
        s3_client,
        bucket,
        lambda: run_copy(args=args, generate=(payload_row, ROWS), transform=transform, **copy),
    )

    def snapshots_and_ids():
        """The table's snapshots (Delta: its versions), and its ids."""
        if target == "delta":
            try:
                table = DeltaTable(uri, storage_options=storage_options(s3_config))
            except TableNotFoundError:
                return [], []
            ids = sorted(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
            return list(range(table.version() + 1)), ids
        try:
            table = load_catalog("default", **catalog).load_table("kill.orders")
        except NoSuchTableError:
            return [], []
        return table.snapshots(), sorted(table.scan().to_arrow().column("id").to_pylist())

    snapshots, ids = snapshots_and_ids()
    if "result" in outcome:
        assert outcome["result"].ok and len(snapshots) == 1 and ids == list(range(ROWS))
    else:
        assert snapshots == [] and ids == [], outcome["error"]
    print(f"\n{target}: {'recovered, exact' if 'result' in outcome else 'failed, nothing committed'}")
    rerun = run_copy(args=args, generate=(payload_row, ROWS), transform=transform, **copy)
    assert rerun.ok and rerun.rows == ROWS
    snapshots, ids = snapshots_and_ids()
    assert len(snapshots) == 1 and ids == list(range(ROWS))
    assert pending_uploads(s3_client, bucket) == []

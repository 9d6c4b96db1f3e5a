"""Shared fixtures: a real S3 server (moto in server mode, or SeaweedFS, each in its own
process on free loopback ports: see ``pipelines/s3servers.py``), a fresh bucket per test,
and the Beam runners every pipeline test runs on: three in this process, and Flink, Spark and
Prism job servers started once per session the first time a test needs them
(tests/jobservers.py).

Fixtures: ``s3_server`` (session; parametrized over ``S3_SERVERS`` of the test's module,
default moto only) ─▶ ``s3_endpoint`` ─▶ ``s3_config`` ─▶ ``s3_client`` ─▶ ``bucket`` (per test).

Iceberg (session, tests/iceberg_catalogs.py): ``iceberg_sqlite``, ``iceberg_postgres``,
``iceberg_rest`` (or ``iceberg_catalog``, parametrized over the three) and ``spark_iceberg``,
Spark's Iceberg reader. Delta (session, tests/spark_delta.py): ``spark_delta``, Spark with Delta Lake;
``spark_final_reads`` (per test): Spark reads the last state the test asserted of each Delta
table (tests/delta_readers.py), once, at the test's end.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence

import pytest

from beam_s3_sink import S3Config

# Worker processes (multi_processing DirectRunner, Beam's stager) import the tests' helpers
# by name, as a remote worker would import user code: put them on their path.
_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_HERE, os.path.dirname(_HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)
if os.path.dirname(_HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_HERE))

if TYPE_CHECKING:
    import jobservers  # noqa: F401  (tests/jobservers.py, imported by the fixtures when needed)

from pipelines.s3servers import ACCESS_KEY, REGION, SECRET_KEY, SERVERS, S3Server, free_port, start_moto, start_server  # noqa: E402, F401  (re-exported for the test modules)

#: Runners that run in this process. "direct" names the FnApiRunner, which is what Beam 2.77's
#: DirectRunner falls back to after first trying Prism (a failed download here, every pipeline).
LOCAL_RUNNERS = {
    "direct": ["--runner=FnApiRunner"],
    "multiprocess": ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}
#: Runners on a job server of the session (tests/jobservers.py), with parallelism 2: Flink with
#: SDK workers in this process (LOOPBACK) and with an EXTERNAL pool of two worker processes,
#: Spark (local[2]), Prism.
DISTRIBUTED_RUNNERS = ("flink", "flink-external", "spark", "prism")
RUNNERS = sorted([*LOCAL_RUNNERS, *DISTRIBUTED_RUNNERS])


def pytest_report_header(config) -> str:
    """Which Beam and pyarrow this session runs (make test runs the pinned, newest and floor)."""
    import apache_beam
    import pyarrow

    return f"apache-beam {apache_beam.__version__}, pyarrow {pyarrow.__version__}"


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--runners",
        default=",".join(RUNNERS),
        help="comma-separated runners to run the runner-parametrized tests on (default: all); "
        "make test's Beam-version tiers pass direct,multiprocess,portable,prism",
    )


def pytest_collection_modifyitems(config, items) -> None:
    """Deselect the tests parametrized with a runner that ``--runners`` leaves out."""
    wanted = set(config.getoption("--runners").split(","))
    unknown = wanted - set(RUNNERS)
    if unknown:
        raise pytest.UsageError(f"--runners: unknown runner(s) {sorted(unknown)}; known: {', '.join(RUNNERS)}")
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        names = {params[k] for k in ("runner", "runner_name") if k in params}
        (dropped if names - wanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_generate_tests(metafunc) -> None:
    """Run every test that uses S3 against the servers its module names in ``S3_SERVERS``.

    A module opts in with ``S3_SERVERS = SERVERS`` (moto and SeaweedFS); every other test
    that uses S3 runs against moto only. ``s3_server`` is always parametrized (with the
    server's name as the test id's last part), so that pytest groups the tests by server.
    """
    if "s3_server" in metafunc.fixturenames:
        names = getattr(metafunc.module, "S3_SERVERS", ("moto",))
        metafunc.parametrize("s3_server", list(names), indirect=True, scope="session")


@pytest.fixture(scope="session")
def s3_servers() -> Iterator[Dict[str, S3Server]]:
    """The S3 servers of this session, started the first time a test asks for each one and
    stopped at its end (so that switching servers between tests restarts none)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    servers: Dict[str, S3Server] = {}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="session")
def s3_server(request, s3_servers: Dict[str, S3Server]) -> S3Server:
    """The S3 server a test runs against: ``moto`` or ``seaweedfs`` (see ``S3_SERVERS``).

    A server that cannot start fails the tests that need it; none is skipped."""
    name = getattr(request, "param", "moto")
    if name not in s3_servers:
        s3_servers[name] = start_server(name)
    return s3_servers[name]


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: S3Server) -> str:
    return s3_server.endpoint


@pytest.fixture(scope="session")
def s3_config(s3_endpoint: str) -> S3Config:
    return S3Config(
        endpoint_url=s3_endpoint,
        region_name=REGION,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        path_style=True,
        max_attempts=3,
    )


@pytest.fixture(scope="session")
def s3_client(s3_config: S3Config):
    return s3_config.make_client()


@pytest.fixture
def bucket(s3_client) -> str:
    name = f"test-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return name


def runner_args(name: str, request: Optional[pytest.FixtureRequest] = None) -> List[str]:
    """Pipeline arguments for runner ``name``; a distributed runner needs the test's ``request``
    (its job server is a session fixture, started on first use)."""
    if name in LOCAL_RUNNERS:
        return list(LOCAL_RUNNERS[name])
    if request is None:
        raise ValueError(f"runner {name!r} needs the test's request to start its job server")
    if name == "prism":
        return [
            "--runner=PrismRunner",
            f"--job_endpoint={request.getfixturevalue('prism_job_server').address}",
            "--environment_type=LOOPBACK",
        ]
    server = request.getfixturevalue("spark_job_server" if name == "spark" else "flink_job_server")
    args = ["--runner=PortableRunner", f"--job_endpoint={server.address}", "--parallelism=2"]
    if name == "flink-external":
        pool = request.getfixturevalue("worker_pool")
        return args + [
            "--environment_type=EXTERNAL",
            f"--environment_config={pool.address}",
            "--sdk_worker_parallelism=2",
        ]
    return args + ["--environment_type=LOOPBACK"]


def across_runners(
    variants: Sequence[str], on_distributed: Sequence[str], distributed: Sequence[str] = DISTRIBUTED_RUNNERS
) -> List[Any]:
    """``(runner, variant)`` params for ``@pytest.mark.parametrize("runner,variant", ...,
    indirect=["runner"])``: every variant on the in-process runners, ``on_distributed`` on the
    job-server runners (whose own contract is tests/test_runners.py), to keep the suite CI-sized."""
    return [pytest.param(r, v, id=f"{r}-{v}") for r in sorted(LOCAL_RUNNERS) for v in variants] + [
        pytest.param(r, v, id=f"{r}-{v}") for r in distributed for v in on_distributed
    ]


@pytest.fixture(params=RUNNERS)
def runner(request) -> List[str]:
    """Beam pipeline arguments for each runner the package must work on."""
    return runner_args(request.param, request)


@pytest.fixture(scope="session")
def runner_logs(tmp_path_factory) -> str:
    """Where the session's job servers and worker pool write their logs."""
    return str(tmp_path_factory.mktemp("runner-logs"))


@pytest.fixture(scope="session")
def flink_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam 2.62's Flink job server with an embedded MiniCluster, for the session."""
    import jobservers

    yield from _serve(lambda: jobservers.flink_job_server(runner_logs))


@pytest.fixture(scope="session")
def spark_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam 2.62's Spark job server on a local[2] master, for the session."""
    import jobservers

    yield from _serve(lambda: jobservers.spark_job_server(runner_logs))


@pytest.fixture(scope="session")
def prism_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """One Prism process shared by every Prism pipeline of the session."""
    import jobservers

    yield from _serve(lambda: jobservers.prism_job_server(runner_logs))


@pytest.fixture(scope="session")
def worker_pool(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam's EXTERNAL SDK worker pool (worker processes started on the runner's demand)."""
    import jobservers

    yield from _serve(lambda: jobservers.worker_pool(runner_logs))


def _serve(start) -> Iterator["jobservers.ServerProcess"]:
    import jobservers

    try:
        server, failure = start(), None
    except jobservers.RunnerSetupError as exc:
        server, failure = None, str(exc)
    if failure:
        pytest.fail(failure, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster (tests/pg.py); fails, never skips, when it cannot start."""
    from pg import postgres_server

    yield from postgres_server()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession (``local[1]``, UTC, no UI) for the whole run: Spark starts once.

    Needs pyspark (the test extra) and Java 17+; without either the tests that use it fail."""
    from spark_worker import local_session

    session = local_session("beam-s3-sink-tests")
    try:
        yield session
    finally:
        session.stop()


# -- Iceberg (issue 29): three real catalogs with warehouses on the test S3 servers, and Spark's
# Iceberg reader (tests/iceberg_catalogs.py). Each is made once per session, on first use.

#: The catalogs ``iceberg_catalog`` runs a test against (tests/iceberg_catalogs.py: KINDS), and
#: the session fixture of each.
ICEBERG_CATALOGS = {"sql-sqlite": "iceberg_sqlite", "sql-postgres": "iceberg_postgres", "rest": "iceberg_rest"}
#: The S3 Tables bucket of SeaweedFS's REST catalog (its warehouse is the bucket's ARN).
ICEBERG_TABLE_BUCKET = "iceberg-tables"


def _session_server(servers: Dict[str, S3Server], key: str, start) -> S3Server:
    if key not in servers:
        servers[key] = start()
    return servers[key]


def _warehouse_props(server: S3Server, prefix: str):
    """A new bucket on ``server`` and its pyiceberg FileIO properties: (``s3://bucket/warehouse``, props)."""
    from iceberg_catalogs import props_s3_config, s3_props

    props = s3_props(server.endpoint, ACCESS_KEY, SECRET_KEY, REGION)
    bucket = f"{prefix}-{uuid.uuid4().hex[:12]}"
    props_s3_config(props).make_client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/warehouse", props


@pytest.fixture(scope="session")
def iceberg_sqlite(s3_servers: Dict[str, S3Server], tmp_path_factory):
    """pyiceberg's SqlCatalog on a SQLite file, warehouse ``s3://iceberg-sqlite-*/warehouse`` on moto."""
    from iceberg_catalogs import sqlite_catalog

    moto = _session_server(s3_servers, "moto", lambda: start_server("moto"))
    warehouse, props = _warehouse_props(moto, "iceberg-sqlite")
    return sqlite_catalog(str(tmp_path_factory.mktemp("iceberg-sqlite") / "catalog.db"), warehouse, props)


@pytest.fixture(scope="session")
def iceberg_postgres(s3_servers: Dict[str, S3Server], postgres):
    """pyiceberg's SqlCatalog on database ``iceberg_catalog`` of the tests' PostgreSQL (which
    Spark reads as Iceberg's JdbcCatalog), warehouse ``s3://iceberg-postgres-*/warehouse`` on moto."""
    import psycopg

    from iceberg_catalogs import postgres_catalog

    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE iceberg_catalog")
    moto = _session_server(s3_servers, "moto", lambda: start_server("moto"))
    warehouse, props = _warehouse_props(moto, "iceberg-postgres")
    return postgres_catalog(postgres.host, postgres.port, postgres.user, "iceberg_catalog", warehouse, props)


@pytest.fixture(scope="session")
def iceberg_rest(s3_servers: Dict[str, S3Server]):
    """SeaweedFS's Iceberg REST catalog (a ``weed mini`` of its own, with the S3 Tables bucket
    ``iceberg-tables``), SigV4-signed as Amazon S3 Tables is; tables under ``s3://iceberg-tables/``."""
    from iceberg_catalogs import rest_catalog, s3_props
    from pipelines.s3servers import start_seaweedfs

    server = _session_server(
        s3_servers, "seaweedfs-iceberg", lambda: start_seaweedfs(table_buckets=[ICEBERG_TABLE_BUCKET])
    )
    props = s3_props(server.endpoint, ACCESS_KEY, SECRET_KEY, REGION)
    return rest_catalog(server.extra["iceberg_uri"], server.extra["table_bucket_arns"], props)


@pytest.fixture(scope="session", params=list(ICEBERG_CATALOGS))
def iceberg_catalog(request):
    """Each catalog of ``ICEBERG_CATALOGS`` in turn (an ``IcebergCatalog``: ``.props`` for
    ``load_catalog(.name, **.props)``, ``.s3`` for the S3 server of its warehouse)."""
    return request.getfixturevalue(ICEBERG_CATALOGS[request.param])


@pytest.fixture(scope="session")
def spark_iceberg(runner_logs: str):
    """Spark's Iceberg reader for the session (tests/iceberg_catalogs.py ``SparkIceberg``: pyspark
    4.1 with iceberg-spark-runtime-4.1 and iceberg-aws-bundle 1.12.0 in a worker process, started
    once, in tens of seconds); pass it to ``read_spark``. Fails, never skips, when it cannot start."""
    from iceberg_catalogs import SparkIceberg

    yield from _spark_worker(lambda: SparkIceberg(runner_logs))


@pytest.fixture(scope="session")
def spark_delta(runner_logs: str):
    """Spark with Delta Lake for the session (tests/spark_delta.py ``SparkDelta``: pyspark 4.1
    with delta-spark 4.1.0 and hadoop-aws in a worker process, started once, on first use); pass
    it to ``read_delta_spark``, ``create_delta_table_spark``, ``spark_sql``. Fails, never skips."""
    from spark_delta import SparkDelta

    yield from _spark_worker(lambda: SparkDelta(runner_logs))


def _spark_worker(start):
    """A Spark worker (tests/spark_worker.py) for the session, stopped at its end; a failure
    (never a skip) when it cannot start."""
    from spark_worker import SparkSetupError

    try:
        spark, failure = start(), None
    except SparkSetupError as exc:
        spark, failure = None, str(exc)
    if failure:
        pytest.fail(failure, pytrace=False)
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture
def spark_final_reads(spark_delta):
    """While the test runs, ``delta_readers.assert_tables_read`` notes each table's version and
    rows; after it, Spark reads the last noted version of each table and must read exactly those
    rows (a failure is an error at teardown)."""
    import time

    from delta_readers import SparkFinalReads

    reads = SparkFinalReads()
    SparkFinalReads.active = reads
    try:
        yield reads
    finally:
        SparkFinalReads.active = None
    started = time.monotonic()
    count = reads.check(spark_delta)
    if count:
        print(f"\nSpark read {count} Delta table(s) in {time.monotonic() - started:.1f} s")

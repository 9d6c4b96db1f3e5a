"""Spark with Delta Lake for the tests: the reader that proves a Delta table reads back exactly
in Spark, and the maker of Delta tables as users' Spark makes them.

::

    SparkDelta(log_dir)        a worker process: pyspark 4.1.4 + delta-spark 4.1.0 + hadoop-aws 3.4.2
                               (the session fixture ``spark_delta`` in tests/conftest.py)
    read_delta_spark(spark, "s3://bucket/t", s3_config)            the table (or ``version=``) as Arrow
    create_delta_table_spark(spark, "s3://bucket/t", s3_config,
                             "id BIGINT, ts TIMESTAMP, p STRING", partitioned_by=("p",),
                             properties={"delta.appendOnly": "false"})
    spark_sql(spark, s3_config, "INSERT INTO {table} VALUES ...", table_uri="s3://bucket/t")
                               statements in one session, ``{table}`` = delta.`s3a://bucket/t`;
                               the last one's rows as Arrow

Spark reaches the tests' S3 servers (moto, SeaweedFS: HTTP on loopback) through S3A, Hadoop's
``s3a://`` file system: every ``s3://`` URI is read as ``s3a://``, and each request's new Spark
session gets the endpoint, path-style access, region and keys of the test's ``S3Config``
(:func:`s3a_conf`). Delta's default log store for ``s3a`` (one writer at a time, as here).

The worker is :class:`iceberg_catalogs.SparkIceberg`'s kind, with its own JVM: pyspark 4.1.4
from the runners' cache (the Iceberg reader's copy; delta-spark 4.1 is built for Spark 4.1, and
the venv's pyspark is newer), the jars of ``scripts/runners/delta/pom.xml`` that
``scripts/fetch-runners.sh`` fetches into ``$BEAM_S3_SINK_CACHE/delta/lib`` (nothing is
downloaded here), Delta's session extension and catalog, the session time zone UTC (TIMESTAMP
columns come back as ``timestamp[us, tz=UTC]``, TIMESTAMP_NTZ as ``timestamp[us]``). Requests
and answers are JSON lines; each table comes back as an Arrow IPC file. Its log is ``log_path``.
Secret keys never reach an error message.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

if TYPE_CHECKING:
    from beam_s3_sink import S3Config

#: pyspark and Delta versions (scripts/fetch-runners.sh, scripts/runners/delta/pom.xml).
SPARK_VERSION = "4.1.4"
DELTA_VERSION = "4.1.0"
HADOOP_AWS_VERSION = "3.4.2"
#: The Hadoop settings that hold secrets.
SECRET_CONF = frozenset({"fs.s3a.secret.key", "fs.s3a.session.token"})


class SparkSetupError(RuntimeError):
    """Spark's Delta reader is missing (run ``make runners``) or did not start."""


def _mask(text: str, conf: Mapping[str, str]) -> str:
    for key, value in conf.items():
        if key in SECRET_CONF and value:
            text = text.replace(str(value), "***")
    return text


def s3a_uri(uri: str) -> str:
    """``s3://bucket/path`` (or ``s3a://``) as ``s3a://bucket/path``, without a trailing slash."""
    for scheme in ("s3://", "s3a://"):
        if uri.startswith(scheme):
            return "s3a://" + uri[len(scheme) :].rstrip("/")
    raise ValueError(f"not an S3 URI: {uri!r}")


def delta_ident(uri: str) -> str:
    """Spark SQL's name of the Delta table at ``uri``: ``delta.`s3a://bucket/path```."""
    return f"delta.`{s3a_uri(uri)}`"


def s3a_conf(s3_config: "S3Config") -> Dict[str, str]:
    """Hadoop S3A settings (set on the request's Spark session) for the S3 server of
    ``s3_config``: its endpoint (HTTP or HTTPS as its URL says), path-style access when the
    config asks for it, its region, and its static keys (with a session token when it has one)."""
    endpoint = s3_config.endpoint_url
    if not endpoint:
        raise ValueError("the tests' Spark reads S3 servers with an endpoint URL only")
    conf = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.connection.ssl.enabled": "true" if endpoint.startswith("https://") else "false",
        "fs.s3a.path.style.access": "true" if s3_config.path_style else "false",
        "fs.s3a.endpoint.region": s3_config.region_name or "us-east-1",
        "fs.s3a.access.key": s3_config.access_key_id or "",
        "fs.s3a.secret.key": s3_config.secret_access_key or "",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.attempts.maximum": "3",
        "fs.s3a.retry.limit": "3",
    }
    if s3_config.session_token:
        conf["fs.s3a.session.token"] = s3_config.session_token
        conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return conf


def spark_delta_paths(cache: Optional[str] = None) -> Tuple[str, List[str]]:
    """(the pyspark 4.1 directory to put first on the worker's path, the Delta and S3A jars),
    from the runners' cache that ``scripts/fetch-runners.sh`` fills."""
    cache = cache or os.environ.get("BEAM_S3_SINK_CACHE") or os.path.expanduser("~/.cache/beam-s3-sink")
    python, lib = os.path.join(cache, "pyspark-4.1"), os.path.join(cache, "delta", "lib")
    jars = sorted(glob.glob(os.path.join(lib, "*.jar")))
    missing = []
    if not (os.path.exists(os.path.join(python, ".stamp")) and os.path.isdir(os.path.join(python, "pyspark"))):
        missing.append(f"pyspark {SPARK_VERSION} in {python}")
    names = " ".join(os.path.basename(j) for j in jars)
    if not os.path.exists(os.path.join(cache, "delta", ".stamp")) or not (
        f"delta-spark_2.13-{DELTA_VERSION}.jar" in names and f"hadoop-aws-{HADOOP_AWS_VERSION}.jar" in names
    ):
        missing.append(f"the Delta {DELTA_VERSION} and hadoop-aws {HADOOP_AWS_VERSION} jars in {lib}")
    if missing:
        raise SparkSetupError(
            f"Spark's Delta reader is not fetched ({'; '.join(missing)}): run `make runners` (scripts/fetch-runners.sh)"
        )
    return python, jars


class SparkDelta:
    """Spark with Delta Lake in a worker process, one local Spark for its whole life: reads
    (:meth:`read_delta`) and SQL statements (:meth:`sql`), each in a new Spark session
    configured with the request's settings."""

    def __init__(self, log_dir: Optional[str] = None, timeout: float = 180.0) -> None:
        python, jars = spark_delta_paths()
        self.log_path = os.path.join(log_dir or tempfile.mkdtemp(prefix="spark-delta-"), "spark-delta.log")
        self._dir = tempfile.mkdtemp(prefix="spark-delta-io-")
        self._lock = threading.Lock()
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([python] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env["SPARK_HOME"] = os.path.join(python, "pyspark")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--spark-delta-worker", str(write_fd), json.dumps(jars)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, "r", encoding="utf-8")
        try:
            hello = self._answer(timeout)
        except BaseException:
            self.stop()
            raise
        self.spark_version = hello.get("spark")
        self.started_in = time.monotonic() - started

    def _answer(self, timeout: float) -> Dict[str, Any]:
        result: List[str] = []
        reader = threading.Thread(target=lambda: result.append(self._answers.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            state = "did not answer" if reader.is_alive() else f"exited ({self.process.poll()})"
            raise SparkSetupError(f"Spark's Delta reader {state}; its log's tail:\n{self.log_tail()}")
        return json.loads(result[0])

    def read_delta(
        self, conf: Mapping[str, str], path: str, version: Optional[int] = None, timeout: float = 300.0
    ) -> pa.Table:
        """``spark.read.format("delta").load(path)`` (at ``versionAsOf=version`` when given) in a
        new session configured with ``conf``, as Arrow."""
        request: Dict[str, Any] = {"conf": dict(conf), "delta": path, "version": version}
        return self._request(request, f"Spark's read of the Delta table {path}", timeout)

    def sql(self, conf: Mapping[str, str], statements: Sequence[str], timeout: float = 600.0) -> pa.Table:
        """``spark.sql(s)`` for each of ``statements`` in order, in one new session configured
        with ``conf``; the last one's rows as Arrow."""
        what = f"Spark SQL ({len(statements)} statement(s))"
        return self._request({"conf": dict(conf), "sql": list(statements)}, what, timeout)

    def _request(self, request: Dict[str, Any], what: str, timeout: float) -> pa.Table:
        out = os.path.join(self._dir, f"{uuid.uuid4().hex}.arrow")
        conf = request["conf"]
        with self._lock:
            if self.process.poll() is not None:
                raise SparkSetupError(f"Spark's Delta reader exited ({self.process.returncode}):\n{self.log_tail()}")
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps({**request, "out": out}) + "\n").encode())
            self.process.stdin.flush()
            answer = self._answer(timeout)
        if "error" in answer:
            raise RuntimeError(_mask(f"{what} failed: {answer['error']}", conf))
        try:
            with pa.memory_map(out) as source:
                return pa.ipc.open_file(source).read_all()
        finally:
            os.unlink(out)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)
        self._answers.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def read_delta_spark(
    spark: SparkDelta, table_uri: str, s3_config: "S3Config", version: Optional[int] = None
) -> pa.Table:
    """Spark's read of the Delta table at ``table_uri`` (``s3://`` or ``s3a://``) on the S3
    server of ``s3_config``: its current version, or ``version``; as Arrow, rows in Spark's
    order (sort before comparing), TIMESTAMP columns in UTC."""
    return spark.read_delta(s3a_conf(s3_config), s3a_uri(table_uri), version)


def spark_sql(
    spark: SparkDelta,
    s3_config: "S3Config",
    *statements: str,
    table_uri: Optional[str] = None,
    conf: Optional[Mapping[str, str]] = None,
) -> pa.Table:
    """Run ``statements`` in order in one new Spark session that reaches the S3 server of
    ``s3_config`` (``conf`` set on it too); ``{table}`` in a statement is
    :func:`delta_ident` of ``table_uri``. Returns the last statement's rows as Arrow."""
    if table_uri is not None:
        statements = tuple(s.replace("{table}", delta_ident(table_uri)) for s in statements)
    return spark.sql({**s3a_conf(s3_config), **(conf or {})}, list(statements))


def create_delta_table_spark(
    spark: SparkDelta,
    table_uri: str,
    s3_config: "S3Config",
    ddl_columns: str,
    partitioned_by: Sequence[str] = (),
    properties: Optional[Mapping[str, str]] = None,
) -> None:
    """``CREATE TABLE delta.`s3a://...` (ddl_columns) USING delta [PARTITIONED BY (...)]
    [TBLPROPERTIES (...)]``, as a user's Spark makes a table (version 0, no rows)."""
    statement = f"CREATE TABLE {delta_ident(table_uri)} ({ddl_columns}) USING delta"
    if partitioned_by:
        statement += " PARTITIONED BY (" + ", ".join(f"`{c}`" for c in partitioned_by) + ")"
    if properties:
        statement += " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in properties.items()) + ")"
    spark_sql(spark, s3_config, statement)


def _delta_worker(answer_fd: int, jars: List[str]) -> None:
    """The worker's loop (run by :class:`SparkDelta` with pyspark 4.1 first on its path)."""
    answers = os.fdopen(answer_fd, "w", encoding="utf-8")

    def send(message: Dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("beam-s3-sink-delta-reader")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "1")
        # Delta rebuilds a table's state in 50 partitions by default: a read of a test's small
        # table took 4-8 s here, 1.2-1.4 s in one partition
        .config("spark.databricks.delta.snapshotPartitions", "1")
        # a local catalog of its own: no metastore_db or spark-warehouse in the working directory
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="spark-delta-warehouse-"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    send({"spark": spark.version})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            session = spark.newSession()
            for key, value in request["conf"].items():
                session.conf.set(key, value)
            if "sql" in request:
                for number, statement in enumerate(request["sql"], 1):
                    try:
                        frame = session.sql(statement)
                    except Exception as exc:  # noqa: BLE001 - which statement, then the error
                        raise RuntimeError(f"statement {number} ({statement[:300]!r}): {exc}") from exc
                table = frame.toArrow()
            else:
                reader = session.read.format("delta")
                if request.get("version") is not None:
                    reader = reader.option("versionAsOf", int(request["version"]))
                table = reader.load(request["delta"]).toArrow()
            with pa.OSFile(request["out"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            send({"rows": table.num_rows})
        except Exception as exc:  # noqa: BLE001 - reported to the test, which raises it
            send({"error": f"{type(exc).__name__}: {str(exc)[:4000]}"})
    spark.stop()


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--spark-delta-worker":
    _delta_worker(int(sys.argv[2]), json.loads(sys.argv[3]))

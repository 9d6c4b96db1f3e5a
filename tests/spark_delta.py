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

The worker is a :class:`spark_worker.SparkWorker`, as :class:`iceberg_catalogs.SparkIceberg` is,
with its own JVM: pyspark 4.1.4 from the runners' cache (the Iceberg reader's copy; delta-spark
4.1 is built for Spark 4.1, and the venv's pyspark is newer), the jars of ``scripts/runners/delta/pom.xml`` that
``scripts/fetch-runners.sh`` fetches into ``$BEAM_S3_SINK_CACHE/delta/lib`` (nothing is
downloaded here), Delta's session extension and catalog, the session time zone UTC (TIMESTAMP
columns come back as ``timestamp[us, tz=UTC]``, TIMESTAMP_NTZ as ``timestamp[us]``). Requests
and answers are JSON lines; each table comes back as an Arrow IPC file. Its log is ``log_path``.
Secret keys never reach an error message.
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

# SPARK_VERSION and SparkSetupError are this module's names too
from spark_worker import SPARK_VERSION as SPARK_VERSION
from spark_worker import SparkSetupError as SparkSetupError
from spark_worker import SparkWorker, spark_paths

if TYPE_CHECKING:
    from beam_s3_sink import S3Config

#: Delta's and hadoop-aws's versions (scripts/runners/delta/pom.xml); pyspark's is spark_worker's.
DELTA_VERSION = "4.1.0"
HADOOP_AWS_VERSION = "3.4.2"
#: The Hadoop settings that hold secrets.
SECRET_CONF = frozenset({"fs.s3a.secret.key", "fs.s3a.session.token"})


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
    return spark_paths(
        "delta",
        [f"delta-spark_2.13-{DELTA_VERSION}.jar", f"hadoop-aws-{HADOOP_AWS_VERSION}.jar"],
        f"the Delta {DELTA_VERSION} and hadoop-aws {HADOOP_AWS_VERSION} jars",
        SparkDelta.name,
        cache,
    )


class SparkDelta(SparkWorker):
    """Spark with Delta Lake in a worker process (:class:`spark_worker.SparkWorker`), one local
    Spark for its whole life: reads (:meth:`read_delta`) and SQL statements (:meth:`sql`), each
    in a new Spark session configured with the request's settings."""

    name = "Spark's Delta reader"
    log_name = "spark-delta"
    app_name = "beam-s3-sink-delta-reader"
    paths = staticmethod(spark_delta_paths)
    mask = staticmethod(_mask)

    def read_delta(
        self, conf: Mapping[str, str], path: str, version: Optional[int] = None, timeout: float = 300.0
    ) -> pa.Table:
        """``spark.read.format("delta").load(path)`` (at ``versionAsOf=version`` when given) in a
        new session configured with ``conf``, as Arrow."""
        request: Dict[str, Any] = {"conf": dict(conf), "delta": path, "version": version}
        return self._request(request, f"Spark's read of the Delta table {path}", timeout)

    @classmethod
    def session_conf(cls) -> Dict[str, str]:
        return {
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            # Delta rebuilds a table's state in 50 partitions by default: a read of a test's small
            # table took 4-8 s here, 1.2-1.4 s in one partition
            "spark.databricks.delta.snapshotPartitions": "1",
            # a local catalog of its own: no metastore_db or spark-warehouse in the working directory
            "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="spark-delta-warehouse-"),
        }

    @staticmethod
    def read(session: Any, request: Dict[str, Any]) -> Any:
        reader = session.read.format("delta")
        if request.get("version") is not None:
            reader = reader.option("versionAsOf", int(request["version"]))
        return reader.load(request["delta"])


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

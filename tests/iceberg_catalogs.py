"""Iceberg catalogs and readers for the tests: three real catalogs whose warehouses live on the
tests' S3 servers, and three real engines reading their tables back.

::

    IcebergCatalog(kind, name, props)        props: what pyiceberg.catalog.load_catalog(name, **props) takes
      sql-sqlite    SqlCatalog, SQLite file        ─┐
      sql-postgres  SqlCatalog, the tests' Postgres ─┴─ warehouse s3://<bucket>/warehouse on moto
      rest          SeaweedFS's Iceberg REST catalog (SigV4, service s3tables, as Amazon S3 Tables):
                    warehouse = the S3 Tables bucket's ARN, tables under s3://<table bucket>/ns/table

    read_pyiceberg(catalog, "ns.table")  catalog.load_table(...).scan().to_arrow()
    read_duckdb(catalog, "ns.table")     iceberg_scan('<current metadata.json>') over httpfs (S3 secret
                                         from the props); httpfs, avro and iceberg loaded from their
                                         PyPI wheels, autoinstall and autoload off: nothing downloaded
    read_spark(spark, catalog, "ns.table")  Spark 4.1 + iceberg-spark-runtime-4.1 1.12.0 + iceberg-aws-bundle:
                                         the same catalog as a Spark catalog of the same name
                                         (type=rest with SigV4, or type=jdbc on the same PostgreSQL
                                         database), S3FileIO on the same S3 server
    spark_sql(spark, catalog, "CREATE TABLE ...", ...)  SQL statements in one Spark session with
                                         that catalog (DDL, INSERT, ALTER TABLE ... PARTITION FIELD,
                                         CALL <catalog>.system.*); the last one's rows as Arrow

Each reader takes an :class:`IcebergCatalog` or a props mapping (then ``name=``, or a ``"name"``
key of the props, is the catalog's name, :data:`CATALOG_NAME` by default). The name matters for the SQL catalogs: pyiceberg's
SqlCatalog and Iceberg's JdbcCatalog key every row of ``iceberg_tables`` and
``iceberg_namespace_properties`` by catalog name, so a table written through a catalog loaded
as ``"default"`` is found only through a catalog of that name.

Spark: Iceberg 1.12.0 has a Spark runtime for Spark 4.1 at most, and the venv's pyspark is 4.3
(Spark 4.3 turned ``connector.catalog.View`` into a class: the 4.1 runtime fails with an
IncompatibleClassChangeError on its first query). So the reader runs in a worker process of its
own, :class:`SparkIceberg`, on pyspark 4.1.4 (installed with the jars by
``scripts/fetch-runners.sh`` into the runners' cache; nothing is downloaded here), one Spark for
the whole session; each read gets a fresh ``newSession()`` configured with the catalog, so
catalogs never clash and no table is cached between reads. ``read_spark`` also takes a classic
in-process ``SparkSession`` that has the Iceberg jars (one whose Spark matches a runtime).

Secrets (:data:`SECRET_PROPS`) are never printed: an :class:`IcebergCatalog`'s repr leaves the
props out, :func:`redacted` masks them, and the readers' errors have every secret value masked.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import pyarrow as pa

# SPARK_VERSION and SparkSetupError are this module's names too
from spark_worker import SPARK_VERSION as SPARK_VERSION
from spark_worker import SparkSetupError as SparkSetupError
from spark_worker import SparkWorker, spark_paths

if TYPE_CHECKING:
    from beam_s3_sink import S3Config

#: The name the fixtures' catalogs are loaded under: pyiceberg's own default
#: (``load_catalog(None, **props)`` names the catalog ``"default"``).
CATALOG_NAME = "default"
KINDS = ("sql-sqlite", "sql-postgres", "rest")
#: Catalog properties that hold secrets (pyiceberg's and Iceberg Java's names).
SECRET_PROPS = frozenset(
    {
        "s3.secret-access-key",
        "s3.session-token",
        "client.secret-access-key",
        "client.session-token",
        "rest.secret-access-key",
        "rest.session-token",
        "credential",
        "token",
        "jdbc.password",
    }
)
#: Iceberg's version of Spark's Iceberg reader (scripts/runners/iceberg/pom.xml); its pyspark is
#: spark_worker's SPARK_VERSION.
ICEBERG_JAVA_VERSION = "1.12.0"

Catalogish = Union["IcebergCatalog", Mapping[str, str]]


def redacted(props: Mapping[str, Any]) -> Dict[str, Any]:
    """``props`` with every secret's value replaced by ``***``: safe to print."""
    return {k: ("***" if _is_secret(k) else v) for k, v in props.items()}


def _is_secret(key: str) -> bool:
    key = key.lower()
    return key in SECRET_PROPS or key.endswith((".secret-access-key", ".session-token", ".password", ".token"))


def _mask(text: str, props: Mapping[str, Any]) -> str:
    for key, value in props.items():
        if _is_secret(key) and value:
            text = text.replace(str(value), "***")
    return text


@dataclasses.dataclass(frozen=True)
class IcebergCatalog:
    """A catalog of the test session: ``load_catalog(catalog.name, **catalog.props)``.

    ``warehouse`` is the catalog's warehouse property; ``s3`` reaches the S3 server its tables
    live on (for CopyToIceberg's ``s3=``, or to look at the objects). The repr shows no prop.
    """

    kind: str
    name: str
    props: Dict[str, str] = dataclasses.field(repr=False)
    warehouse: str
    s3: S3Config = dataclasses.field(repr=False)

    def load(self) -> Any:
        """A new pyiceberg ``Catalog`` of this catalog (cheap for SQL, one config call for REST)."""
        from pyiceberg.catalog import load_catalog

        return load_catalog(self.name, **self.props)

    def __repr__(self) -> str:
        return f"IcebergCatalog({self.kind!r}, name={self.name!r}, uri={self.props.get('uri')!r}, warehouse={self.warehouse!r})"


def s3_props(endpoint: str, access_key_id: str, secret_access_key: str, region: str) -> Dict[str, str]:
    """pyiceberg's FileIO properties for an S3 server at ``endpoint`` (path-style), with the same
    keys as the AWS client keys (``client.*``: REST SigV4 signing, and FileIO's fallback)."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": access_key_id,
        "s3.secret-access-key": secret_access_key,
        "s3.region": region,
        "s3.path-style-access": "true",
        "client.access-key-id": access_key_id,
        "client.secret-access-key": secret_access_key,
        "client.region": region,
    }


def props_s3_config(props: Mapping[str, str]) -> "S3Config":
    """The package's ``S3Config`` for the S3 server of :func:`s3_props`-style properties."""
    from beam_s3_sink import S3Config

    return S3Config(
        endpoint_url=props["s3.endpoint"],
        region_name=props["s3.region"],
        access_key_id=props["s3.access-key-id"],
        secret_access_key=props["s3.secret-access-key"],
        path_style=True,
        max_attempts=3,
    )


def sqlite_catalog(path: str, warehouse: str, s3: Mapping[str, str], name: str = CATALOG_NAME) -> IcebergCatalog:
    """pyiceberg's SqlCatalog on the SQLite file ``path`` (made on first use), tables under
    ``warehouse`` (``s3://bucket/prefix``) on the S3 server of ``s3`` (:func:`s3_props`)."""
    props = {"type": "sql", "uri": f"sqlite:///{os.path.abspath(path)}", "warehouse": warehouse, **s3}
    return IcebergCatalog("sql-sqlite", name, props, warehouse, props_s3_config(s3))


def postgres_catalog(
    host: str, port: int, user: str, dbname: str, warehouse: str, s3: Mapping[str, str], name: str = CATALOG_NAME
) -> IcebergCatalog:
    """pyiceberg's SqlCatalog on a PostgreSQL database (SQLAlchemy with psycopg 3:
    ``postgresql+psycopg://``; pyiceberg makes its two tables on first use)."""
    props = {"type": "sql", "uri": f"postgresql+psycopg://{user}@{host}:{port}/{dbname}", "warehouse": warehouse, **s3}
    return IcebergCatalog("sql-postgres", name, props, warehouse, props_s3_config(s3))


def rest_catalog(uri: str, warehouse: str, s3: Mapping[str, str], name: str = CATALOG_NAME) -> IcebergCatalog:
    """An Iceberg REST catalog signed with SigV4 for the service ``s3tables`` (Amazon S3 Tables,
    SeaweedFS): ``warehouse`` is the table bucket's ARN (SeaweedFS takes its bare name too)."""
    props = {
        "type": "rest",
        "uri": uri,
        "warehouse": warehouse,
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": s3["client.region"],
        **s3,
    }
    return IcebergCatalog("rest", name, props, warehouse, props_s3_config(s3))


def _props_and_name(catalog: Catalogish, name: Optional[str]) -> Tuple[Dict[str, str], str]:
    """(props, name): ``name=`` wins, then the catalog's own, then a ``"name"`` key of the props
    (as CopyToIceberg's ``catalog=`` takes it), then :data:`CATALOG_NAME`."""
    if isinstance(catalog, IcebergCatalog):
        return dict(catalog.props), name or catalog.name
    props = dict(catalog)
    return props, name or props.pop("name", None) or CATALOG_NAME


def load(catalog: Catalogish, name: Optional[str] = None) -> Any:
    """The pyiceberg ``Catalog`` of an :class:`IcebergCatalog` or of props (named ``name``)."""
    from pyiceberg.catalog import load_catalog

    props, name = _props_and_name(catalog, name)
    return load_catalog(name, **props)


# -- pyiceberg ---------------------------------------------------------------------------------


def read_pyiceberg(catalog: Catalogish, table: str, name: Optional[str] = None) -> pa.Table:
    """The table's current snapshot, scanned by pyiceberg (an empty table if it has none)."""
    return load(catalog, name).load_table(table).scan().to_arrow()


# -- DuckDB ------------------------------------------------------------------------------------


def duckdb_extension_path(extension: str) -> str:
    """The extension file of the ``duckdb-extension-<extension>`` wheel for the installed duckdb
    (:func:`pipelines.duckdb_s3.extension_path`, which the demo uses too)."""
    from pipelines import duckdb_s3

    return duckdb_s3.extension_path(extension)


def duckdb_connect(catalog: Catalogish) -> Any:
    """A DuckDB connection reading the S3 server of ``catalog``'s FileIO properties, with
    httpfs, avro and iceberg loaded from their wheels and extension autoloading and
    autoinstalling off (a missing extension is an error, never a download):
    :func:`pipelines.duckdb_s3.connect` with ``iceberg=True``, as the demo reads its table."""
    from pipelines import duckdb_s3

    props, _ = _props_and_name(catalog, None)
    return duckdb_s3.connect(
        props["s3.endpoint"],
        props.get("s3.access-key-id") or props["client.access-key-id"],
        props.get("s3.secret-access-key") or props["client.secret-access-key"],
        props.get("s3.region") or props.get("client.region") or "us-east-1",
        iceberg=True,
    )


def read_duckdb(catalog: Catalogish, table: str, name: Optional[str] = None) -> pa.Table:
    """DuckDB's ``iceberg_scan`` of the table's current metadata file (its location from the
    catalog, through pyiceberg), over S3 through httpfs."""
    props, name = _props_and_name(catalog, name)
    location = load(props, name).load_table(table).metadata_location
    con = duckdb_connect(props)
    try:
        from pipelines import duckdb_s3

        return con.execute(f"SELECT * FROM {duckdb_s3.iceberg_scan(location)}").to_arrow_table()
    except Exception as exc:
        raise RuntimeError(_mask(f"DuckDB's iceberg_scan of {location} failed: {exc}", props)) from None
    finally:
        con.close()


# -- Spark -------------------------------------------------------------------------------------


def spark_catalog_conf(catalog: Catalogish, name: Optional[str] = None) -> Dict[str, str]:
    """``spark.sql.catalog.<name>.*`` settings that make the same catalog a Spark catalog of
    Iceberg's ``SparkCatalog``: ``type=rest`` (SigV4 with the ``client.*`` keys) or
    ``type=jdbc`` (the same PostgreSQL database), ``S3FileIO`` on the same S3 server, and no
    table cache (every read sees the current snapshot)."""
    props, name = _props_and_name(catalog, name)
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": props["warehouse"],
        f"{prefix}.cache-enabled": "false",
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.s3.endpoint": props["s3.endpoint"],
        f"{prefix}.s3.path-style-access": props.get("s3.path-style-access", "true"),
        f"{prefix}.s3.access-key-id": props.get("s3.access-key-id") or props["client.access-key-id"],
        f"{prefix}.s3.secret-access-key": props.get("s3.secret-access-key") or props["client.secret-access-key"],
        f"{prefix}.client.region": props.get("s3.region") or props["client.region"],
    }
    kind = props.get("type", "rest")
    if kind == "rest":
        conf.update({f"{prefix}.type": "rest", f"{prefix}.uri": props["uri"]})
        if props.get("rest.sigv4-enabled", "false").lower() == "true":
            conf.update(
                {
                    f"{prefix}.rest.sigv4-enabled": "true",
                    f"{prefix}.rest.signing-name": props.get("rest.signing-name", "execute-api"),
                    f"{prefix}.rest.signing-region": props.get("rest.signing-region") or props["client.region"],
                    f"{prefix}.rest.access-key-id": props["client.access-key-id"],
                    f"{prefix}.rest.secret-access-key": props["client.secret-access-key"],
                }
            )
    elif kind == "sql" and props["uri"].startswith("postgresql"):
        from sqlalchemy.engine import make_url

        url = make_url(props["uri"])
        conf.update(
            {
                f"{prefix}.type": "jdbc",
                f"{prefix}.uri": f"jdbc:postgresql://{url.host}:{url.port or 5432}/{url.database}",
                f"{prefix}.jdbc.user": url.username or "",
                # read only: never create or migrate pyiceberg's tables
                f"{prefix}.jdbc.init-catalog-tables": "false",
            }
        )
        if url.password:
            conf[f"{prefix}.jdbc.password"] = url.password
    else:
        raise ValueError(f"Spark reads REST and PostgreSQL SQL catalogs here, not {redacted(props)!r}")
    return conf


def read_spark(spark_or_factory: Any, catalog: Catalogish, table: str, name: Optional[str] = None) -> pa.Table:
    """Spark's read of the table through the same catalog (:func:`spark_catalog_conf`), as Arrow
    (timestamps in UTC). ``spark_or_factory``: a :class:`SparkIceberg` worker, a classic
    ``SparkSession`` with the Iceberg jars, or a callable returning either."""
    props, name = _props_and_name(catalog, name)
    spark = spark_or_factory
    if callable(spark) and not hasattr(spark, "read_table") and not hasattr(spark, "newSession"):
        spark = spark()
    conf = spark_catalog_conf(props, name)
    ident = f"`{name}`.{table}"
    if hasattr(spark, "read_table"):
        return spark.read_table(conf, ident)
    try:
        session = spark.newSession()
        for key, value in conf.items():
            session.conf.set(key, value)
        return session.table(ident).toArrow()
    except Exception as exc:
        raise RuntimeError(_mask(f"Spark's read of {ident} failed: {exc}", conf)) from None


def spark_sql(
    spark: "SparkIceberg",
    catalog: Catalogish,
    *statements: str,
    name: Optional[str] = None,
    conf: Optional[Mapping[str, str]] = None,
) -> pa.Table:
    """Run ``statements`` in order in one new Spark session with the catalog (as
    :func:`read_spark` has it; ``{catalog}`` in a statement is its quoted name) and ``conf``
    set on it too, and return the last statement's rows as Arrow (an empty table for DDL)."""
    props, name = _props_and_name(catalog, name)
    settings = {**spark_catalog_conf(props, name), **(conf or {})}
    return spark.sql(settings, [s.replace("{catalog}", f"`{name}`") for s in statements])


def spark_iceberg_paths(cache: Optional[str] = None) -> Tuple[str, List[str]]:
    """(the pyspark 4.1 directory to put first on the worker's path, the Iceberg jars), from the
    runners' cache that ``scripts/fetch-runners.sh`` fills."""
    return spark_paths(
        "iceberg",
        [f"{a}-{ICEBERG_JAVA_VERSION}.jar" for a in ("iceberg-spark-runtime-4.1_2.13", "iceberg-aws-bundle")],
        f"the Iceberg {ICEBERG_JAVA_VERSION} jars",
        SparkIceberg.name,
        cache,
    )


class SparkIceberg(SparkWorker):
    """Spark's Iceberg reader in a worker process (:class:`spark_worker.SparkWorker`): pyspark 4.1
    with Iceberg's runtime, one local Spark for its whole life. Requests and answers are JSON lines
    on its stdin and a pipe of its own; each table comes back as an Arrow IPC file. Its log
    (Spark's included) is ``log_path``. It also runs SQL statements (:meth:`sql`: DDL, INSERT,
    Iceberg's ALTER TABLE extensions and ``CALL`` procedures), so that Spark makes and maintains
    tables as it does in production.
    """

    name = "Spark's Iceberg reader"
    log_name = "spark-iceberg"
    app_name = "beam-s3-sink-iceberg-reader"
    paths = staticmethod(spark_iceberg_paths)
    mask = staticmethod(_mask)

    def read_table(self, conf: Mapping[str, str], ident: str, timeout: float = 300.0) -> pa.Table:
        """``spark.table(ident).toArrow()`` in a new session configured with ``conf``."""
        return self._request({"conf": dict(conf), "table": ident}, f"Spark's read of {ident}", timeout)

    @classmethod
    def session_conf(cls) -> Dict[str, str]:
        return {"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"}

    @staticmethod
    def read(session: Any, request: Dict[str, Any]) -> Any:
        return session.table(request["table"])


def factory(make: Callable[[], Any]) -> Callable[[], Any]:
    """A callable that makes its value once, on first call (a lazy Spark for ``read_spark``)."""
    made: List[Any] = []

    def get() -> Any:
        if not made:
            made.append(make())
        return made[0]

    return get

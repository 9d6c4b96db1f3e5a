"""The ground under CopyToIceberg (issue 29): each test catalog (tests/iceberg_catalogs.py: SQL on
SQLite, SQL on PostgreSQL, SeaweedFS's SigV4 REST catalog) creates a namespace and a partitioned
table, takes pyiceberg appends, and every real reader reads the table back exactly: pyiceberg's
scan, DuckDB's iceberg_scan over S3, and Spark 4.1 with Iceberg's runtime through the same
catalog (REST, and JDBC on the same PostgreSQL database; not SQLite).

Nothing is skipped: a catalog, a server or Spark's reader that cannot start fails the test.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pyarrow as pa

from iceberg_catalogs import (
    SECRET_PROPS,
    duckdb_connect,
    read_duckdb,
    read_pyiceberg,
    read_spark,
    redacted,
    spark_catalog_conf,
)
from pipelines.s3servers import SECRET_KEY

UTC = datetime.timezone.utc

ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("tags", pa.list_(pa.string())),
    ]
)

FIRST = [
    {
        "id": 1,
        "name": "plain",
        "amount": Decimal("12.34"),
        "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        "day": datetime.date(2024, 1, 2),
        "tags": ["a", "b"],
    },
    {
        "id": 2,
        "name": 'naïve ☃, "quoted"\nline',
        "amount": Decimal("-9999999999.99"),
        "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "day": datetime.date(2024, 1, 2),
        "tags": [],
    },
    {
        "id": 3,
        "name": None,
        "amount": None,
        "at": None,
        "day": datetime.date(1999, 12, 31),
        "tags": None,
    },
    {
        "id": 4,
        "name": "",
        "amount": Decimal("0.01"),
        "at": datetime.datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC),
        "day": None,  # the null partition
        "tags": [None, "x"],
    },
]
SECOND = [
    {
        "id": 5,
        "name": "second",
        "amount": Decimal("1.00"),
        "at": datetime.datetime(2025, 6, 30, 12, 0, tzinfo=UTC),
        "day": datetime.date(2025, 6, 30),
        "tags": ["z"],
    }
]


def iceberg_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DateType,
        DecimalType,
        IntegerType,
        ListType,
        NestedField,
        StringType,
        TimestamptzType,
    )

    return Schema(
        NestedField(1, "id", IntegerType(), required=True),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "amount", DecimalType(12, 2), required=False),
        NestedField(4, "at", TimestamptzType(), required=False),
        NestedField(5, "day", DateType(), required=False),
        NestedField(6, "tags", ListType(7, StringType(), element_required=False), required=False),
    )


def partition_spec():
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"))


def rows(table: pa.Table):
    """The rows of a read, in id order, as Python values (any reader's Arrow types)."""
    assert table.column_names == ARROW_SCHEMA.names
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_catalog_tables_read_back_exactly_in_every_reader(iceberg_catalog, request):
    """Namespace, partitioned table, two appends; after each, pyiceberg, DuckDB and (REST,
    PostgreSQL) Spark read exactly the rows appended so far: the current snapshot, never a
    cached one."""
    catalog = iceberg_catalog.load()
    namespace = f"ground_{uuid.uuid4().hex[:8]}"
    name = f"{namespace}.orders"
    catalog.create_namespace(namespace)
    table = catalog.create_table(name, schema=iceberg_schema(), partition_spec=partition_spec())
    assert table.spec().fields[0].name == "day"
    assert (namespace,) in catalog.list_namespaces()
    assert (namespace, "orders") in catalog.list_tables(namespace)

    readers = {"pyiceberg": read_pyiceberg, "DuckDB": read_duckdb}
    if iceberg_catalog.kind != "sql-sqlite":
        spark = request.getfixturevalue("spark_iceberg")
        readers["Spark"] = lambda props, ident: read_spark(spark, props, ident)

    expected = []
    for batch in (FIRST, SECOND):
        table.append(pa.Table.from_pylist(batch, schema=ARROW_SCHEMA))
        expected += batch
        table = catalog.load_table(name)
        assert table.metadata_location.startswith(("s3://",)), table.metadata_location
        for reader, read in readers.items():
            assert rows(read(iceberg_catalog, name)) == expected, reader
    assert len(table.snapshots()) == 2
    # the files are where the warehouse says, one directory per partition value
    files = [task.file.file_path for task in table.scan().plan_files()]
    assert len(files) == 4 and all(f.startswith(table.location() + "/data/day=") for f in files), files


def test_catalog_props_hide_their_secrets(iceberg_catalog):
    """Neither the fixture's repr nor ``redacted`` props nor a Spark catalog conf's redaction
    shows a secret; every secret prop the catalog has is one pyiceberg reads."""
    assert SECRET_KEY not in repr(iceberg_catalog)
    assert SECRET_KEY not in repr(redacted(iceberg_catalog.props))
    assert {k for k, v in iceberg_catalog.props.items() if v == SECRET_KEY} <= SECRET_PROPS
    if iceberg_catalog.kind != "sql-sqlite":
        assert SECRET_KEY not in repr(redacted(spark_catalog_conf(iceberg_catalog)))


def test_duckdb_loads_iceberg_from_the_wheels(iceberg_sqlite):
    """httpfs, avro and iceberg are loaded from the duckdb-extension-* wheels' files, and DuckDB
    may neither install nor autoload an extension (nothing is downloaded at run time)."""
    con = duckdb_connect(iceberg_sqlite)
    try:
        loaded = dict(
            con.execute(
                "SELECT extension_name, install_path FROM duckdb_extensions() WHERE loaded AND installed_from IS DISTINCT FROM 'core'"
            ).fetchall()
        )
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('autoinstall_known_extensions', 'autoload_known_extensions')"
            ).fetchall()
        )
    finally:
        con.close()
    assert {"httpfs", "avro", "iceberg"} <= set(loaded), loaded
    assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


def test_rest_table_bucket_takes_only_table_files(iceberg_rest):
    """What SeaweedFS (4.48) lets the S3 API write in an S3 Tables bucket, which a table target's
    uploads must fit: under ``<table location>/data/`` (or ``metadata/``) keys ending ``.parquet``,
    ``.avro``, ``.orc`` or with no extension, by PutObject (If-None-Match honoured) or multipart
    upload; any other key (a ``.json`` manifest, a ``.csv``, anything outside data/ and
    metadata/) is AccessDenied. Listing and deleting under data/ work."""
    from botocore.exceptions import ClientError

    catalog = iceberg_rest.load()
    namespace = f"ground_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.files", schema=iceberg_schema())
    bucket, _, prefix = table.location().removeprefix("s3://").partition("/")
    assert bucket == "iceberg-tables" and prefix == f"{namespace}/files"
    s3 = iceberg_rest.s3.make_client()

    def put(key: str, **kwargs) -> str:
        try:
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"x", **kwargs)
            return "ok"
        except ClientError as exc:
            return exc.response["Error"]["Code"]

    key = f"{prefix}/data/day=2024-01-02/part-00000.parquet"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"PAR1")["ETag"]
    assert [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix + "/").get("Uploads", [])] == [key]
    s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
    )
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"PAR1"

    assert [put("data/_ID-INCOMPLETE"), put("data/_CLAIM", IfNoneMatch="*"), put("data/_CLAIM", IfNoneMatch="*")] == [
        "ok",
        "ok",
        "PreconditionFailed",
    ]
    assert {k: put(k) for k in ("data/a.avro", "data/a.orc", "data/_ID-manifest.json", "data/a.csv", "_CLAIM")} == {
        "data/a.avro": "ok",
        "data/a.orc": "ok",
        "data/_ID-manifest.json": "AccessDenied",
        "data/a.csv": "AccessDenied",
        "_CLAIM": "AccessDenied",
    }
    s3.delete_object(Bucket=bucket, Key=f"{prefix}/data/_CLAIM")
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/data/").get("Contents", [])}
    assert listed == {key} | {f"{prefix}/data/{k}" for k in ("_ID-INCOMPLETE", "a.avro", "a.orc")}

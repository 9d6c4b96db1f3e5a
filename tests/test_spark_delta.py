"""The tests' Spark with Delta Lake (tests/spark_delta.py) on moto: a table that Spark makes
(partitioned, then appended to) reads back with what was inserted, and a table that the
``deltalake`` package (delta-rs) writes reads back in Spark exactly, value for value, with
timestamps in UTC. Spark is the session's one ``SparkDelta`` worker (``spark_delta``).
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any, Dict, List

import pyarrow as pa
import pytest

from spark_delta import create_delta_table_spark, delta_ident, read_delta_spark, s3a_uri, spark_sql

UTC = datetime.timezone.utc


def deltalake_storage_options(s3_config) -> Dict[str, str]:
    """delta-rs's storage options for the test's S3 server (HTTP, path-style, static keys;
    conditional PUT by ETag for its commits, which moto and SeaweedFS honour)."""
    return {
        "AWS_ENDPOINT_URL": s3_config.endpoint_url,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": s3_config.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_config.secret_access_key,
        "AWS_REGION": s3_config.region_name,
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "conditional_put": "etag",
    }


def sorted_rows(table: pa.Table, key: str = "id") -> List[Dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r[key])


def test_uris_map_to_s3a():
    assert s3a_uri("s3://b/warehouse/t/") == "s3a://b/warehouse/t"
    assert s3a_uri("s3a://b/t") == "s3a://b/t"
    assert delta_ident("s3://b/t") == "delta.`s3a://b/t`"
    with pytest.raises(ValueError):
        s3a_uri("/tmp/t")


def test_spark_made_partitioned_table_reads_back(spark_delta, s3_config, bucket):
    uri = f"s3://{bucket}/tables/events"
    create_delta_table_spark(
        spark_delta,
        uri,
        s3_config,
        "id BIGINT, ts TIMESTAMP, d DATE, s STRING, p STRING, x DOUBLE",
        partitioned_by=("p",),
        properties={"delta.appendOnly": "false"},
    )
    empty = read_delta_spark(spark_delta, uri, s3_config)
    assert empty.num_rows == 0
    assert empty.schema.names == ["id", "ts", "d", "s", "p", "x"]
    assert empty.schema.field("ts").type == pa.timestamp("us", tz="UTC")

    spark_sql(
        spark_delta,
        s3_config,
        "INSERT INTO {table} VALUES (1, TIMESTAMP'2024-01-30 20:00:00', DATE'2023-12-20', 'a', 'eu', 0.25),"
        " (2, NULL, NULL, NULL, NULL, NULL), (3, TIMESTAMP'2024-02-29 23:59:59.123456', DATE'2024-02-29', '', '', -1.5)",
        "INSERT INTO {table} VALUES (4, TIMESTAMP'1970-01-01 00:00:00', DATE'1970-01-01', 'ü', 'us', 1e300)",
        table_uri=uri,
    )
    table = read_delta_spark(spark_delta, uri, s3_config)
    assert sorted_rows(table) == [
        {
            "id": 1,
            "ts": datetime.datetime(2024, 1, 30, 20, tzinfo=UTC),
            "d": datetime.date(2023, 12, 20),
            "s": "a",
            "p": "eu",
            "x": 0.25,
        },
        {"id": 2, "ts": None, "d": None, "s": None, "p": None, "x": None},
        # Delta keeps no empty string as a partition value: Spark writes "" as NULL (Hive's way)
        {
            "id": 3,
            "ts": datetime.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
            "d": datetime.date(2024, 2, 29),
            "s": "",
            "p": None,
            "x": -1.5,
        },
        {
            "id": 4,
            "ts": datetime.datetime(1970, 1, 1, tzinfo=UTC),
            "d": datetime.date(1970, 1, 1),
            "s": "ü",
            "p": "us",
            "x": 1e300,
        },
    ]
    # version 0 is the CREATE, 1 and 2 the INSERTs: time travel reads the first INSERT alone
    assert sorted(read_delta_spark(spark_delta, uri, s3_config, version=1).column("id").to_pylist()) == [1, 2, 3]
    detail = spark_sql(spark_delta, s3_config, "DESCRIBE DETAIL {table}", table_uri=uri).to_pylist()[0]
    assert detail["partitionColumns"] == ["p"]
    assert detail["location"] == f"s3a://{bucket}/tables/events"
    history = spark_sql(spark_delta, s3_config, "DESCRIBE HISTORY {table}", table_uri=uri)
    assert sorted(history.column("version").to_pylist()) == [0, 1, 2]

    # the objects are where a Delta table's are: the log, and one directory per partition value
    keys = [o["Key"] for o in s3_config.make_client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert f"tables/events/_delta_log/{0:020d}.json" in keys
    assert any(k.startswith("tables/events/p=eu/") and k.endswith(".parquet") for k in keys)


def test_deltalake_written_table_reads_back_exactly_in_spark(spark_delta, s3_config, bucket):
    from deltalake import DeltaTable, write_deltalake

    uri = f"s3://{bucket}/tables/rs"
    options = deltalake_storage_options(s3_config)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("i32", pa.int32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("d", pa.date32()),
            ("s", pa.string()),
            ("b", pa.bool_()),
            ("x", pa.float64()),
            ("dec", pa.decimal128(12, 3)),
            ("bin", pa.binary()),
            ("p", pa.string()),
        ]
    )
    rows = [
        {
            "id": i,
            "i32": None if i % 7 == 6 else -(2**31) + i,
            "ts": None
            if i % 5 == 4
            else datetime.datetime(2024, 3, 31, 1, 30, tzinfo=UTC) + datetime.timedelta(hours=7 * i, microseconds=i),
            "d": None if i % 6 == 5 else datetime.date(1999, 12, 31) + datetime.timedelta(days=40 * i),
            "s": [None, "", "abc", "ünï", "null"][i % 5],
            "b": [True, False, None][i % 3],
            "x": [0.1, -0.0, None, 1.5e-300][i % 4],
            "dec": None if i % 8 == 7 else decimal.Decimal(i * 1000 + 1) / 1000,
            "bin": None if i % 9 == 8 else bytes([i % 256, 0, 255]),
            "p": ["eu", "us", None][i % 3],
        }
        for i in range(30)
    ]
    first, second = pa.Table.from_pylist(rows[:20], schema), pa.Table.from_pylist(rows[20:], schema)
    write_deltalake(uri, first, partition_by=["p"], storage_options=options)
    write_deltalake(uri, second, mode="append", storage_options=options)
    assert DeltaTable(uri, storage_options=options).version() == 1

    table = read_delta_spark(spark_delta, uri, s3_config)
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("dec").type == pa.decimal128(12, 3)
    got = table.select(schema.names).cast(schema)
    assert sorted_rows(got) == rows
    assert read_delta_spark(spark_delta, uri, s3_config, version=0).num_rows == 20

    # and Spark appends to it, and delta-rs reads Spark's commit
    spark_sql(
        spark_delta,
        s3_config,
        "INSERT INTO {table} (id, ts, p) VALUES (100, TIMESTAMP'2000-01-01 00:00:00', 'eu')",
        table_uri=uri,
    )
    back = DeltaTable(uri, storage_options=options)
    assert back.version() == 2
    added = [r for r in back.to_pyarrow_table().to_pylist() if r["id"] == 100]
    assert added == [
        {**dict.fromkeys(schema.names), "id": 100, "ts": datetime.datetime(2000, 1, 1, tzinfo=UTC), "p": "eu"}
    ]

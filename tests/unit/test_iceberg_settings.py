"""iceberg_settings: a table's write properties as the copy's settings, each refusal naming the
property; CopyToIceberg's schema_evolution and max_file_size options."""

from __future__ import annotations

import pyarrow as pa
import pytest

from beam_s3_sink import CopyToIceberg, S3Config
from beam_s3_sink.formats import ParquetFormat
from beam_s3_sink.iceberg_settings import (
    data_location,
    parquet_format,
    s3_config_of,
    table_data_keys,
    table_write_settings,
    target_file_size,
)
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.writer import WriteSettings


@pytest.mark.parametrize(
    "properties, where",
    [
        ({}, "s3://lake/t/data"),
        ({"write.folder-storage.path": "s3://old/f"}, "s3://old/f"),
        ({"write.object-storage.path": "s3://obj/o", "write.folder-storage.path": "s3://old/f"}, "s3://obj/o"),
        ({"write.data.path": "s3a://new/d/", "write.object-storage.path": "s3://obj/o"}, "s3://new/d"),
    ],
)
def test_data_location_reads_the_properties_as_iceberg_does(properties, where):
    assert data_location("s3://lake/t", properties) == where


def test_a_data_path_that_is_not_s3_names_the_property():
    with pytest.raises(ValueError, match="table property write.data.path='gs://b/d': .*not an S3 URI"):
        table_data_keys("s3://lake/t", {"write.data.path": "gs://b/d"}, "id")


@pytest.mark.parametrize(
    "properties, codec, level",
    [
        ({}, "zstd", None),
        ({"write.parquet.compression-codec": "UNCOMPRESSED"}, "none", None),
        ({"write.parquet.compression-codec": "snappy", "write.parquet.compression-level": "3"}, "snappy", None),
        ({"write.parquet.compression-codec": "zstd", "write.parquet.compression-level": "12"}, "zstd", 12),
        ({"write.parquet.compression-level": ""}, "zstd", None),
    ],
)
def test_parquet_format_takes_the_codec_and_level(properties, codec, level):
    fmt = parquet_format(properties, ParquetFormat(types="exact"))
    assert (fmt.compression, fmt.compression_level, fmt.types) == (codec, level, "exact")


@pytest.mark.parametrize(
    "properties, says",
    [
        ({"write.parquet.compression-codec": "lzo"}, "write.parquet.compression-codec='lzo'"),
        ({"write.parquet.compression-level": "high"}, "write.parquet.compression-level='high' is not an integer"),
        ({"write.parquet.compression-codec": "gzip", "write.parquet.compression-level": "99"}, "level.* gzip"),
    ],
)
def test_a_codec_the_copy_cannot_write_names_the_property(properties, says):
    with pytest.raises(ValueError, match=says):
        parquet_format(properties, ParquetFormat())


def test_target_file_size_the_users_first_then_the_tables_then_the_default():
    table = {"write.target-file-size-bytes": "100000"}
    assert target_file_size(table, None, 2**28, 1024) == (100000, [])
    assert target_file_size(table, 5000, 2**28, 1024) == (5000, [])
    assert target_file_size({}, None, 2**28, 1024) == (2**28, [])
    size, warnings = target_file_size({"write.target-file-size-bytes": "10"}, None, 2**28, 1024)
    assert size == 1024 and "write.target-file-size-bytes=10" in warnings[0]
    with pytest.raises(ValueError, match="write.target-file-size-bytes='1GB' is not an integer"):
        target_file_size({"write.target-file-size-bytes": "1GB"}, None, 2**28, 1024)


def test_table_write_settings_replace_keys_format_and_size_only():
    schema = pa.schema([("id", pa.int64())])
    base = WriteSettings(
        CopyKeys(S3Location("iceberg-table", "a/b"), "sink"), S3Config(), ParquetFormat(), schema, 2**28
    )
    props = {"write.data.path": "s3://bkt/files", "write.target-file-size-bytes": "65536"}
    settings, warnings = table_write_settings(base, "s3://bkt/t", props, None, 1024)
    assert settings.keys == CopyKeys(S3Location("bkt", "files"), "sink") and warnings == []
    assert (settings.max_file_size, settings.format.compression, settings.schema) == (65536, "zstd", schema)


def test_s3_config_of_the_catalogs_properties_shows_no_secret():
    props = {"s3.endpoint": "http://h:1", "s3.access-key-id": "k", "client.secret-access-key": "never-shown"}
    config = s3_config_of(dict(props, **{"s3.region": "r"}))
    assert config is not None and config.secret_access_key == "never-shown" and "never-shown" not in repr(config)
    assert config.region_name == "r"


def test_copy_to_iceberg_options():
    with pytest.raises(ValueError, match="schema_evolution must be None or one of \\['add_columns'\\], got 'yes'"):
        CopyToIceberg("a.b", catalog={"type": "sql"}, schema_evolution="yes")
    assert CopyToIceberg("a.b", catalog={"type": "sql"})._file_size_given is False
    assert CopyToIceberg("a.b", catalog={"type": "sql"}, max_file_size="1MiB")._max_file_size == 2**20

"""An Iceberg table's own write settings, as a copy into it honours them.

Iceberg keeps how its data files are written in table properties; Spark's Iceberg writer (and
pyiceberg's) reads them at every write, and so does ``CopyToIceberg``'s initialization
(:func:`table_write_settings`), which turns them into the copy's
:class:`~beam_s3_sink.writer.WriteSettings`:

============================================  =====================================================
property                                      what the copy does
============================================  =====================================================
``write.data.path``                           data files go under it (else the deprecated
                                              ``write.object-storage.path``, then
                                              ``write.folder-storage.path``, as Iceberg's
                                              location provider reads them; else ``<location>/data``)
``write.parquet.compression-codec``           the Parquet codec (default ``zstd``, Iceberg's)
``write.parquet.compression-level``           the codec's level (zstd, gzip, brotli, lz4;
                                              ignored by snappy, which has none)
``write.target-file-size-bytes``              the file size, unless the copy was given
                                              ``max_file_size`` (the user's choice wins)
``write.metadata.metrics.*``                  read at commit by :func:`~.iceberg_commit.data_file`
============================================  =====================================================

A property the copy cannot follow (an unknown codec, a level out of the codec's range, a size
that is not a number) fails initialization, before any upload, naming the property and its value.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, List, Mapping, Optional, Tuple

from .config import S3Config
from .formats import ParquetFormat
from .keys import CopyKeys, parse_s3_uri
from .writer import WriteSettings

__all__ = [
    "CODEC",
    "CODEC_LEVEL",
    "DATA_PATHS",
    "PUT_OBJECT_FILE_IO",
    "TARGET_FILE_SIZE",
    "data_location",
    "parquet_format",
    "s3_config_of",
    "table_data_keys",
    "table_write_settings",
    "target_file_size",
]

_log = logging.getLogger(__name__)

DATA_PATHS = ("write.data.path", "write.object-storage.path", "write.folder-storage.path")
"""Where data files go, first set wins (Iceberg's ``LocationProviders``; the last two are deprecated)."""
CODEC = "write.parquet.compression-codec"
CODEC_DEFAULT = "zstd"
"""Iceberg's default codec (since 1.4, and pyiceberg's) for a table without the property."""
CODEC_LEVEL = "write.parquet.compression-level"
TARGET_FILE_SIZE = "write.target-file-size-bytes"
PUT_OBJECT_FILE_IO = "beam_s3_sink.iceberg_io.PutObjectFileIO"
"""``py-io-impl``: the FileIO a copy's catalog writes table metadata with (:mod:`.iceberg_io`)."""
_CODECS = {"uncompressed": "none", "none": "none", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd"}
_CODECS.update({"brotli": "brotli", "lz4": "lz4"})


def data_location(location: str, properties: Mapping[str, str]) -> str:
    """The ``s3://`` URI data files of a table at ``location`` go under.

    >>> data_location("s3a://lake/wh/t", {})
    's3://lake/wh/t/data'
    >>> data_location("s3://lake/wh/t", {"write.data.path": "s3://other/files/"})
    's3://other/files'
    """
    for name in DATA_PATHS:
        if properties.get(name):
            return _s3_uri(str(properties[name]))
    return _s3_uri(location) + "/data"


def _s3_uri(uri: str) -> str:
    uri = uri.rstrip("/")
    if uri.startswith(("s3a://", "s3n://")):
        return "s3://" + uri.split("://", 1)[1]
    return uri


def table_data_keys(location: str, properties: Mapping[str, str], sink_id: str) -> CopyKeys:
    """The keys of copy ``sink_id``'s data files in a table (:func:`data_location`); a path that
    is not an S3 URI raises ValueError naming the property."""
    uri = data_location(location, properties)
    try:
        return CopyKeys(parse_s3_uri(uri), sink_id)
    except ValueError as exc:
        where = next((f"table property {n}={properties[n]!r}" for n in DATA_PATHS if properties.get(n)), None)
        reason = str(exc).replace("CopyToS3: ", "", 1)
        raise ValueError(f"{where or f'the table location {location!r}'}: {reason}") from None


def parquet_format(properties: Mapping[str, str], base: ParquetFormat) -> ParquetFormat:
    """``base`` with the table's codec and level.

    >>> parquet_format({}, ParquetFormat()).compression
    'zstd'
    >>> fmt = parquet_format({CODEC: "GZIP", CODEC_LEVEL: "9"}, ParquetFormat())
    >>> fmt.compression, fmt.compression_level
    ('gzip', 9)
    >>> parquet_format({CODEC: "lzo"}, ParquetFormat())
    Traceback (most recent call last):
    ...
    ValueError: table property write.parquet.compression-codec='lzo': the copy writes uncompressed, snappy, gzip, zstd, brotli or lz4
    """
    name = str(properties.get(CODEC) or CODEC_DEFAULT)
    codec = _CODECS.get(name.lower())
    if codec is None:
        raise ValueError(
            f"table property {CODEC}={name!r}: the copy writes uncompressed, snappy, gzip, zstd, brotli or lz4"
        )
    level: Optional[int] = None
    text = properties.get(CODEC_LEVEL)
    if text not in (None, ""):
        level = _int_property(CODEC_LEVEL, text)
        if codec == "none" or not _takes_level(codec):
            _log.info("table property %s=%s: codec %s has no level, ignored (as Iceberg does)", CODEC_LEVEL, text, name)
            level = None
    try:
        return dataclasses.replace(base, compression=codec, compression_level=level)
    except ValueError as exc:  # ParquetFormat's: the level out of the codec's range
        raise ValueError(f"table property {CODEC_LEVEL}={text!r} (codec {name}): {exc}") from None


def _takes_level(codec: str) -> bool:
    import pyarrow as pa

    return bool(pa.Codec.supports_compression_level(codec))


def target_file_size(
    properties: Mapping[str, str], given: Optional[int], default: int, least: int
) -> Tuple[int, List[str]]:
    """The copy's file size and the warnings about it: ``given`` (the user's ``max_file_size``)
    when not None, else the table's ``write.target-file-size-bytes``, else ``default``. A
    table's size under ``least`` is raised to it, with a warning.

    >>> target_file_size({TARGET_FILE_SIZE: "134217728"}, None, 2**28, 1024)
    (134217728, [])
    >>> target_file_size({TARGET_FILE_SIZE: "134217728"}, 2**20, 2**28, 1024)
    (1048576, [])
    """
    text = properties.get(TARGET_FILE_SIZE)
    if given is not None or text in (None, ""):
        return (given if given is not None else default), []
    size = _int_property(TARGET_FILE_SIZE, text)
    if size < least:
        return least, [f"table property {TARGET_FILE_SIZE}={text} is under the least file size: files of {least} bytes"]
    return size, []


def _int_property(name: str, text: object) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"table property {name}={text!r} is not an integer") from None


def table_write_settings(
    settings: WriteSettings, location: str, properties: Mapping[str, str], max_file_size: Optional[int], least: int
) -> Tuple[WriteSettings, List[str]]:
    """``settings`` with the table's data keys, Parquet codec and file size (``max_file_size``:
    the user's, or None), and the warnings to report; ValueError names a property it cannot
    follow. The schema is left to the caller (the table's field ids).

    For a table loaded by pyiceberg, at initialization::

        settings, warnings = table_write_settings(settings, table.location(), table.properties, None, 1024)
    """
    assert isinstance(settings.format, ParquetFormat), "a table's files are Parquet"
    keys = table_data_keys(location, properties, settings.keys.sink_id)
    size, warnings = target_file_size(properties, max_file_size, settings.max_file_size, least)
    fmt = parquet_format(properties, settings.format)
    return dataclasses.replace(settings, keys=keys, format=fmt, max_file_size=size), warnings


def s3_config_of(properties: Mapping[str, Any]) -> Optional[S3Config]:
    """An :class:`S3Config` from pyiceberg's ``s3.*`` (and ``client.*``) properties, or None
    when there are none.

    >>> s3_config_of({"s3.endpoint": "http://127.0.0.1:9000", "s3.path-style-access": "true"})
    S3Config(endpoint_url='http://127.0.0.1:9000', path_style=True)
    >>> s3_config_of({"type": "sql"}) is None
    True
    """
    props = properties
    if not any(str(k).startswith(("s3.", "client.")) for k in props):
        return None
    return S3Config(
        endpoint_url=props.get("s3.endpoint"),
        region_name=props.get("s3.region") or props.get("client.region"),
        access_key_id=props.get("s3.access-key-id") or props.get("client.access-key-id"),
        secret_access_key=props.get("s3.secret-access-key") or props.get("client.secret-access-key"),
        session_token=props.get("s3.session-token") or props.get("client.session-token"),
        path_style=str(props.get("s3.path-style-access", "")).lower() == "true" or None,
    )

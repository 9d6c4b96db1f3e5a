"""DuckDB reading straight from S3, the way users query what a copy landed: files with
``read_parquet``/``read_csv``, and Iceberg tables with ``iceberg_scan``.

Extensions are loaded from their PyPI wheels (``duckdb-extension-httpfs``, ``-avro``,
``-iceberg``, each of the same version as the installed ``duckdb``) by their file paths, so
nothing is downloaded at run time::

    duckdb.connect() ─▶ LOAD '<site-packages>/duckdb_extension_httpfs/extensions/vX.Y.Z/httpfs.duckdb_extension'
                     ─▶ (iceberg=True) autoinstall and autoload off; LOAD avro, LOAD iceberg the same way
                     ─▶ CREATE SECRET (TYPE s3, ENDPOINT, URL_STYLE 'path', USE_SSL ...)
                     ─▶ SELECT ... FROM read_parquet('s3://bucket/path/**/*.parquet', hive_partitioning = true)
                     ─▶ SELECT ... FROM iceberg_scan('s3://bucket/.../metadata/00001-....metadata.json')

The demo (:mod:`pipelines.demo`) and the tests (``tests/iceberg_catalogs.py``) share it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any
from urllib.parse import urlparse

__all__ = ["extension_path", "httpfs_path", "connect", "iceberg_scan"]

ICEBERG_EXTENSIONS = ("avro", "iceberg")
"""What ``iceberg_scan`` needs besides httpfs (iceberg reads the manifests with avro), in load order."""


def extension_path(extension: str) -> str:
    """The extension file of the ``duckdb-extension-<extension>`` wheel for the installed duckdb."""
    import duckdb

    module = f"duckdb_extension_{extension}"
    wheel = f"duckdb-extension-{extension}=={duckdb.__version__}"
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{module} is not installed: pip install '{wheel}'")
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "extensions", f"v{duckdb.__version__}", f"{extension}.duckdb_extension")
        if os.path.exists(path):
            return path
    raise RuntimeError(f"{module} has no build for duckdb {duckdb.__version__}: install '{wheel}'")


def httpfs_path() -> str:
    """The httpfs extension file of the ``duckdb-extension-httpfs`` wheel for this duckdb."""
    return extension_path("httpfs")


def connect(
    endpoint_url: str, access_key_id: str, secret_access_key: str, region: str = "us-east-1", iceberg: bool = False
) -> Any:
    """A DuckDB connection that reads ``s3://`` paths from ``endpoint_url`` (path-style); with
    ``iceberg``, also Iceberg tables (avro and iceberg loaded from their wheels, extension
    autoinstalling and autoloading off: a missing extension is an error, never a download)."""
    import duckdb

    url = urlparse(endpoint_url)
    con = duckdb.connect()
    con.execute(f"LOAD '{httpfs_path()}'")
    if iceberg:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        for extension in ICEBERG_EXTENSIONS:
            con.execute(f"LOAD '{extension_path(extension)}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        "CREATE SECRET s3_store (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL ?)",
        [access_key_id, secret_access_key, region, url.netloc, url.scheme == "https"],
    )
    return con


def iceberg_scan(metadata_location: str) -> str:
    """The table function that reads an Iceberg table at its metadata file, quoted for SQL.

    >>> iceberg_scan("s3://lake/t/metadata/00001-a.metadata.json")
    "iceberg_scan('s3://lake/t/metadata/00001-a.metadata.json')"
    """
    return "iceberg_scan('{}')".format(metadata_location.replace("'", "''"))

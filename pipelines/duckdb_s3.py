"""DuckDB reading straight from S3, the way users query what a copy landed.

httpfs is loaded from the ``duckdb-extension-httpfs`` wheel (the same version as the
installed ``duckdb``) by its file path, so nothing is downloaded at run time::

    duckdb.connect() ─▶ LOAD '<site-packages>/duckdb_extension_httpfs/extensions/vX.Y.Z/httpfs.duckdb_extension'
                     ─▶ CREATE SECRET (TYPE s3, ENDPOINT, URL_STYLE 'path', USE_SSL ...)
                     ─▶ SELECT ... FROM read_parquet('s3://bucket/path/**/*.parquet', hive_partitioning = true)
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any
from urllib.parse import urlparse

__all__ = ["httpfs_path", "connect"]


def httpfs_path() -> str:
    """The httpfs extension file of the ``duckdb-extension-httpfs`` wheel for this duckdb."""
    import duckdb

    spec = importlib.util.find_spec("duckdb_extension_httpfs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"duckdb-extension-httpfs is not installed: pip install 'duckdb-extension-httpfs=={duckdb.__version__}'"
        )
    version = duckdb.__version__
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "extensions", f"v{version}", "httpfs.duckdb_extension")
        if os.path.exists(path):
            return path
    raise RuntimeError(
        f"duckdb-extension-httpfs has no build for duckdb {version}: install 'duckdb-extension-httpfs=={version}'"
    )


def connect(endpoint_url: str, access_key_id: str, secret_access_key: str, region: str = "us-east-1") -> Any:
    """A DuckDB connection that reads ``s3://`` paths from ``endpoint_url`` (path-style)."""
    import duckdb

    url = urlparse(endpoint_url)
    con = duckdb.connect()
    con.execute(f"LOAD '{httpfs_path()}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        "CREATE SECRET s3_store (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL ?)",
        [access_key_id, secret_access_key, region, url.netloc, url.scheme == "https"],
    )
    return con

"""The manifest a finished copy writes (``P/_ID-manifest.json``), and reading it back: Amazon
Redshift's ``COPY ... MANIFEST`` entries (``url``, ``mandatory``, ``meta.content_length``,
``meta.record_count``, plus ``meta.columns`` statistics), then the totals, the format and the
schema.
"""

from __future__ import annotations

import json
from typing import Any, Dict

from .formats.stats import stats_from_json, stats_json
from .results import CopiedFile, CopyToResult

__all__ = ["manifest_json", "result_from_manifest"]


def manifest_json(result: CopyToResult, format_description: Dict[str, Any], schema_json: Any) -> bytes:
    """The manifest of a successful copy, as UTF-8 JSON bytes."""
    body = {
        "entries": [
            {
                "url": f.uri,
                "mandatory": True,
                "meta": {"content_length": f.bytes, "record_count": f.rows, "columns": stats_json(f.stats)},
            }
            for f in result.files
        ],
        "sink_id": result.sink_id,
        "uri": result.uri,
        "rows": result.rows,
        "bytes": result.bytes,
        "files": len(result.files),
        "format": format_description,
        "schema": schema_json,
    }
    return json.dumps(body, indent=1, sort_keys=False).encode("utf-8")


def result_from_manifest(data: bytes, manifest_uri: str) -> CopyToResult:
    """The result that an earlier, finished run of the same copy reported."""
    body = json.loads(data)
    files = tuple(
        CopiedFile(
            e["url"],
            int(e["meta"]["record_count"]),
            int(e["meta"]["content_length"]),
            stats_from_json(e["meta"].get("columns")),
        )
        for e in body["entries"]
    )
    return CopyToResult(
        uri=body["uri"],
        sink_id=body["sink_id"],
        rows=int(body["rows"]),
        bytes=int(body["bytes"]),
        files=files,
        manifest_uri=manifest_uri,
    )

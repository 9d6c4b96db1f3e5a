"""The manifest a finished copy writes (``P/_ID-manifest.json``; a stream's unit:
``P/_ID-<unit>.manifest.json``), and reading it back: Amazon Redshift's ``COPY ... MANIFEST``
entries (``url``, ``mandatory``, ``meta.content_length``, ``meta.record_count``, plus
``meta.columns`` statistics), then the totals (``bad_rows``: the rows left out as dead letters),
the format, the schema and a stream's ``unit``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Dict, Optional

from .formats.stats import stats_from_json, stats_json
from .results import CopiedFile, CopyToResult, StreamUnit

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
        "bad_rows": result.bad_rows,
        "format": format_description,
        "schema": schema_json,
    }
    if result.unit is not None:
        unit = result.unit
        body["unit"] = {
            "id": unit.id,
            "window_start": unit.start.isoformat() if unit.start else None,
            "window_end": unit.end.isoformat() if unit.end else None,
            "pane": unit.pane,
            "timing": unit.timing,
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
        unit=_unit(body.get("unit")),
        bad_rows=int(body.get("bad_rows", 0)),
    )


def _unit(data: Optional[Dict[str, Any]]) -> Optional[StreamUnit]:
    if data is None:
        return None
    start, end = data["window_start"], data["window_end"]
    return StreamUnit(
        datetime.fromisoformat(start) if start else None,
        datetime.fromisoformat(end) if end else None,
        int(data["pane"]),
        data["timing"],
    )

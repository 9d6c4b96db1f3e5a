"""manifest: Redshift's COPY ... MANIFEST layout plus the totals, and reading a result back."""

from __future__ import annotations

import json

from beam_s3_sink.formats.stats import ColumnStats
from beam_s3_sink.manifest import manifest_json, result_from_manifest
from beam_s3_sink.results import CopiedFile, CopyToResult

RESULT = CopyToResult(
    uri="s3://b/p",
    sink_id="s1",
    rows=3,
    bytes=30,
    files=(
        CopiedFile("s3://b/p/s1-0123456789abcdef-0001.csv", 2, 20, (ColumnStats("id", 0, 1, 2),)),
        CopiedFile("s3://b/p/s1-0123456789abcdef-0002.csv", 1, 10),
    ),
    manifest_uri="s3://b/p/_s1-manifest.json",
)


def test_redshift_entries_and_totals():
    body = json.loads(manifest_json(RESULT, {"name": "csv"}, [{"name": "id", "type": "int64", "nullable": True}]))
    assert body["entries"][0] == {
        "url": "s3://b/p/s1-0123456789abcdef-0001.csv",
        "mandatory": True,
        "meta": {"content_length": 20, "record_count": 2, "columns": {"id": {"null_count": 0, "min": 1, "max": 2}}},
    }
    assert (body["rows"], body["bytes"], body["files"], body["sink_id"], body["uri"]) == (3, 30, 2, "s1", "s3://b/p")
    assert body["format"] == {"name": "csv"} and body["schema"][0]["name"] == "id"


def test_result_read_back_is_the_result_written():
    data = manifest_json(RESULT, {}, [])
    assert result_from_manifest(data, RESULT.manifest_uri) == RESULT

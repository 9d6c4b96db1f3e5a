"""Helpers for the tests: run a copy, list what is in the bucket, read data files back."""

from __future__ import annotations

import io
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToResult, CopyToS3

SHARD_ROWS = 5000


def run_copy(
    rows: Sequence[Any] = (),
    args: Optional[List[str]] = None,
    *,
    generate: Optional[Tuple[Callable[[int], Any], int]] = None,
    counters: Optional[Dict[str, int]] = None,
    source: Optional[Callable[[Any], Any]] = None,
    **copy_kwargs: Any,
) -> CopyToResult:
    """Run a pipeline that copies ``rows`` and return its single result (via a temp file).

    ``generate=(make_row, n)`` makes rows ``make_row(0..n-1)`` inside the pipeline, in shards
    spread over the workers, instead of shipping them through ``Create`` (slow for many rows).
    ``source(pipeline)``, if given, makes the input PCollection instead (e.g. a Parquet read).
    ``counters``, a dict, receives the pipeline's ``beam_s3_sink`` counters by name.
    """
    import os
    import pickle
    import tempfile

    out = tempfile.NamedTemporaryFile(delete=False, suffix=".pickle")
    out.close()
    options = PipelineOptions(args or ["--runner=FnApiRunner"])
    with beam.Pipeline(options=options) as p:
        if source is not None:
            pcoll = source(p)
        elif generate is not None:
            make_row, count = generate
            pcoll = (
                p
                | "Shards" >> beam.Create(list(range(0, count, SHARD_ROWS)))
                | "Generate"
                >> beam.FlatMap(lambda start: [make_row(i) for i in range(start, min(start + SHARD_ROWS, count))])
            )
        else:
            pcoll = p | "Rows" >> beam.Create(list(rows))
        result = pcoll | CopyToS3(**copy_kwargs)
        result | "Keep" >> beam.Map(_write_pickle, out.name)
    if counters is not None:
        from apache_beam.metrics.metric import MetricsFilter

        query = p.result.metrics().query(MetricsFilter().with_namespace("beam_s3_sink"))
        for counter in query["counters"]:
            value = counter.committed if counter.committed is not None else counter.attempted
            counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + value
    with open(out.name, "rb") as f:
        results = pickle.load(f)
    os.unlink(out.name)
    return results


def _write_pickle(result: CopyToResult, path: str) -> None:
    import pickle

    with open(path, "rb") as f:
        data = f.read()
    previous = pickle.loads(data) if data else None
    if previous is not None:
        raise AssertionError(f"CopyToS3 emitted more than one result: {previous} and {result}")
    with open(path, "wb") as f:
        pickle.dump(result, f)


def list_objects(client, bucket: str, prefix: str = "") -> Dict[str, int]:
    """Every object under ``prefix`` with its size."""
    keys: Dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            keys[item["Key"]] = item["Size"]
    return keys


def pending_uploads(client, bucket: str) -> List[str]:
    return [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", ())]


def get_bytes(client, bucket: str, key: str) -> bytes:
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def read_manifest(client, bucket: str, key: str) -> Dict[str, Any]:
    return json.loads(get_bytes(client, bucket, key))


def read_parquet(client, bucket: str, key: str) -> pa.Table:
    return pq.read_table(io.BytesIO(get_bytes(client, bucket, key)))


def data_keys(client, bucket: str, prefix: str) -> List[str]:
    return sorted(k for k in list_objects(client, bucket, prefix) if not k.rsplit("/", 1)[-1].startswith("_"))

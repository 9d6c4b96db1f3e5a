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
    transform: Callable[..., Any] = CopyToS3,
    **copy_kwargs: Any,
) -> CopyToResult:
    """Run a pipeline that copies ``rows`` and return its single result (via a temp file).

    ``generate=(make_row, n)`` makes rows ``make_row(0..n-1)`` inside the pipeline, in shards
    spread over the workers, instead of shipping them through ``Create`` (slow for many rows).
    ``source(pipeline)``, if given, makes the input PCollection instead (e.g. a Parquet read).
    ``counters``, a dict, receives the pipeline's ``beam_s3_sink`` counters by name.
    ``transform`` is ``CopyToS3`` or ``CopyToIceberg``.
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
        result = pcoll | transform(**copy_kwargs)
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


# The upload and completion steps' DoFns, driven as a runner drives them ---------------------------
def batch_numbers(rows: Sequence[Any], schema: pa.Schema, num_batches: int) -> List[int]:
    """The ``num_batches`` shard of each row, each row hashed alone (``batches.split_by_batch_number``)."""
    from beam_s3_sink.batches import split_by_batch_number
    from beam_s3_sink.schema import rows_to_batch

    return [split_by_batch_number(rows_to_batch([row], schema), num_batches)[0][0] for row in rows]


def write_settings(
    keys: Any, config: Any, fmt: Any, schema: pa.Schema, max_file_size: int = 256 * 2**20, **kwargs: Any
):
    """The ``WriteSettings`` of a copy (``layout``, ``max_open_files`` as keywords)."""
    from beam_s3_sink.writer import WriteSettings

    return WriteSettings(keys, config, fmt, schema, max_file_size, **kwargs)


def write_bundle(settings: Any, rows: Sequence[Any], init: Any = None) -> Any:
    """One bundle of ``rows`` through the ``per_bundle`` graph (``_BatchFn`` fused with
    ``_WriteFn``): the bundle's ``UploadReport``, or None when it emitted none."""
    from beam_s3_sink.batches import _BatchFn
    from beam_s3_sink.messages import InitOutcome
    from beam_s3_sink.upload import _WriteFn

    init = init if init is not None else InitOutcome()
    batch, write = _BatchFn(settings.schema, grouped=False), _WriteFn(settings, grouped=False)
    batch.setup()
    write.setup()
    try:
        batch.start_bundle()
        write.start_bundle()
        for row in rows:
            for pair in batch.process(row):
                assert list(write.process(pair, init)) == []  # a generator: it runs when iterated
        for windowed in batch.finish_bundle():
            assert list(write.process(windowed.value, init)) == []
        reports = [w.value for w in write.finish_bundle()]
    finally:
        write.teardown()
    assert len(reports) <= 1
    return reports[0] if reports else None


def batch_bundles(fn: Any, bundles: Sequence[Sequence[Any]]) -> List[Tuple[Any, bytes]]:
    """Run a set-up ``_BatchFn`` over bundles of rows, as a runner would; every (key, blob)."""
    out: List[Tuple[Any, bytes]] = []
    for rows in bundles:
        fn.start_bundle()
        for row in rows:
            out.extend(fn.process(row))
        out.extend(w.value for w in fn.finish_bundle())
    return out


def group_blobs(pairs: Sequence[Tuple[Any, bytes]]) -> Dict[Any, List[bytes]]:
    """What a ``GroupByKey`` makes of (key, blob) pairs."""
    groups: Dict[Any, List[bytes]] = {}
    for key, blob in pairs:
        groups.setdefault(key, []).append(blob)
    return groups


def write_groups(settings: Any, groups: Dict[Any, List[bytes]], init: Any = None) -> List[Any]:
    """The ``grouped`` graph's ``_WriteFn`` over grouped blobs: one ``UploadReport`` per key."""
    from beam_s3_sink.messages import InitOutcome
    from beam_s3_sink.upload import _WriteFn

    init = init if init is not None else InitOutcome()
    write = _WriteFn(settings, grouped=True)
    write.setup()
    try:
        write.start_bundle()
        reports = [r for item in groups.items() for r in write.process(item, init)]
        assert list(write.finish_bundle()) == []
    finally:
        write.teardown()
    return reports


def complete_copy(settings: Any, reports: Sequence[Any], init: Any, fail_on_error: bool = True) -> CopyToResult:
    """The completion step over ``reports``: ``MergeReports``, then ``_CompleteFn``; its result."""
    from beam_s3_sink.completion import MergeReports, _CompleteFn

    combine = MergeReports()
    accumulator = combine.create_accumulator()
    for report in reports:
        accumulator = combine.add_input(accumulator, report)
    fn = _CompleteFn(settings, fail_on_error)
    fn.setup()
    (result,) = list(fn.process(combine.extract_output(accumulator), init))
    return result

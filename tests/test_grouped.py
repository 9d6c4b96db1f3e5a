"""Files that span bundles (the ``grouped`` upload graph: ``_BatchFn`` blobs through a
``GroupByKey`` to one ``_WriteFn`` writer per key), the shared client, and the linear merge."""

from __future__ import annotations

from typing import List

import pyarrow as pa
import pytest

from beam_s3_sink import S3Config
from beam_s3_sink.batches import _BatchFn, decode_blob
from beam_s3_sink.clients import shared_client
from beam_s3_sink.completion import MergeReports
from beam_s3_sink.formats import resolve_format
from beam_s3_sink.initialization import initialize
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.messages import PendingFile, UploadReport
from helpers import (
    batch_bundles,
    complete_copy,
    data_keys,
    group_blobs,
    pending_uploads,
    read_parquet,
    run_copy,
    write_groups,
    write_settings,
)
from test_copy import SCHEMA, make_row


def batch_fn(**kwargs) -> _BatchFn:
    """A grouped ``_BatchFn`` of the test rows, set up (one per DoFn instance)."""
    fn = _BatchFn(SCHEMA, grouped=True, **kwargs)
    fn.setup()
    return fn


def rows_in(bundles: List[range]) -> List[List[dict]]:
    return [[make_row(i) for i in ids] for ids in bundles]


def test_many_tiny_bundles_give_one_file_per_instance(s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "tiny"), "tiny")
    settings = write_settings(keys, s3_config, resolve_format("parquet"), SCHEMA)
    state = initialize(s3_client, keys)
    fns = [batch_fn() for _ in range(2)]  # two DoFn instances, as on two parallel workers
    # 500 bundles of 20 rows each, alternating between the two instances.
    pairs = []
    for b in range(500):
        pairs += batch_bundles(fns[b % 2], rows_in([range(b * 20, b * 20 + 20)]))
    groups = group_blobs(pairs)
    assert len(groups) == 2, "one key per instance while its data is under GROUP_BYTES"
    result = complete_copy(settings, write_groups(settings, groups, state), state)
    assert result.ok and result.rows == 10_000 and len(result.files) == 2
    ids = sorted(
        i
        for key in data_keys(s3_client, bucket, "tiny")
        for i in read_parquet(s3_client, bucket, key).column("id").to_pylist()
    )
    assert ids == list(range(10_000))
    table = read_parquet(s3_client, bucket, data_keys(s3_client, bucket, "tiny")[0])
    assert table.schema.field("created").type == pa.timestamp("us", tz="UTC")
    assert pending_uploads(s3_client, bucket) == []


def test_groups_roll_over_at_group_bytes():
    fn = batch_fn(blob_bytes=64 * 1024, group_bytes=256 * 1024)
    groups = group_blobs(batch_bundles(fn, rows_in([range(b * 1000, b * 1000 + 1000) for b in range(40)])))
    assert len(groups) > 1
    for blobs in groups.values():
        size = sum(b.nbytes for blob in blobs for b in decode_blob(blob))
        assert size <= 256 * 1024 + 64 * 1024 * 2
    ids = sorted(
        i for blobs in groups.values() for blob in blobs for b in decode_blob(blob) for i in b.column("id").to_pylist()
    )
    assert ids == list(range(40_000))


def test_a_retried_bundle_or_writer_never_doubles_rows(s3_config, s3_client, bucket):
    """A failed bundle's blob is discarded with the bundle's outputs (the runner's rule); its
    retry batches the same rows again under its own key. A writer attempt whose report is lost
    leaves only pending uploads, which completion aborts: the rows are there exactly once."""
    keys = CopyKeys(S3Location(bucket, "retry"), "retry")
    settings = write_settings(keys, s3_config, resolve_format("csv"), SCHEMA)
    state = initialize(s3_client, keys)
    failed, retry = batch_fn(), batch_fn()
    discarded = batch_bundles(failed, rows_in([range(300)]))  # the bundle then fails: outputs dropped
    kept = batch_bundles(retry, rows_in([range(300)]))
    assert discarded and kept and {k for k, _ in discarded}.isdisjoint(k for k, _ in kept)
    groups = group_blobs(kept)
    lost = write_groups(settings, groups, state)  # its report never arrives
    assert data_keys(s3_client, bucket, "retry") == []
    assert sorted(pending_uploads(s3_client, bucket)) == sorted(f.key for r in lost for f in r.files)
    committed = write_groups(settings, groups, state)
    result = complete_copy(settings, committed, state)
    assert result.ok and result.rows == 300
    files = data_keys(s3_client, bucket, "retry")
    assert files == sorted(f.key for r in committed for f in r.files)
    lines = [line for key in files for line in s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines()]
    assert sorted(int(line.split(b",")[0]) for line in lines) == list(range(300))
    assert pending_uploads(s3_client, bucket) == []


def test_a_bad_row_in_a_grouped_bundle_is_reported_naming_the_column(s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "bad"), "bad")
    settings = write_settings(keys, s3_config, resolve_format("parquet"), SCHEMA)
    state = initialize(s3_client, keys)
    pairs = batch_bundles(batch_fn(), [[make_row(1), dict(make_row(2), id="two")]])
    [report] = write_groups(settings, group_blobs(pairs), state)
    assert report.error and "'id'" in report.error and "two" in report.error
    assert pending_uploads(s3_client, bucket) == []
    result = complete_copy(settings, [report], state, fail_on_error=False)
    assert not result.ok and "'id'" in result.error and data_keys(s3_client, bucket, "bad") == []


@pytest.mark.parametrize("keep", [False, True])
def test_grouped_batches_keep_partitions(keep, s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "parts"), "parts")
    layout = Layout(("paid",), keep)
    settings = write_settings(keys, s3_config, resolve_format("parquet"), SCHEMA, layout=layout, max_open_files=8)
    state = initialize(s3_client, keys)
    pairs = batch_bundles(batch_fn(), rows_in([range(50), range(50, 120)]))
    result = complete_copy(settings, write_groups(settings, group_blobs(pairs), state), state)
    assert result.ok and result.rows == 120
    directories = sorted({k.split("/")[1] for k in data_keys(s3_client, bucket, "parts")})
    assert directories == ["paid=__HIVE_DEFAULT_PARTITION__", "paid=false", "paid=true"]
    for key in data_keys(s3_client, bucket, "parts"):
        table = read_parquet(s3_client, bucket, key)
        assert ("paid" in table.schema.names) == keep


@pytest.mark.parametrize("num_batches", [None, 3])
def test_the_grouped_graph_on_a_local_runner_copies_every_row_once(num_batches, s3_config, s3_client, bucket):
    n = 12_000
    result = run_copy(
        generate=(make_row, n),
        uri=f"s3://{bucket}/g",
        format="csv",
        schema=SCHEMA,
        s3=s3_config,
        sink_id="grouped",
        upload_graph="grouped",
        num_batches=num_batches,
    )
    assert result.ok and result.rows == n
    keys = data_keys(s3_client, bucket, "g")
    assert sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in keys]
    lines = [line for key in keys for line in s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines()]
    assert sorted(int(line.split(b",")[0]) for line in lines) == list(range(n))
    if num_batches:
        assert [k.rsplit("/", 1)[1] for k in keys] == [f"grouped-batch-{b:04d}-0001.csv" for b in range(3)]
    assert pending_uploads(s3_client, bucket) == []


def test_merging_100k_reports_moves_each_file_once_per_level():
    """Linear, counted: every file entry is appended once when its report is added and once
    per merge of accumulators (here two levels), never once per report merged before it."""
    n = 100_000
    combine = MergeReports()
    accumulators = []
    for start in range(0, n, 1000):
        acc = combine.create_accumulator()
        for i in range(start, start + 1000):
            acc = combine.add_input(
                acc,
                UploadReport(
                    files=(PendingFile(f"k{i}", "u", ((1, "e"),), 1, 2),),
                    rows=1,
                    bytes=2,
                    error=f"e{i}" if i in (7, 70) else None,
                ),
            )
        accumulators.append(acc)
    merged = combine.merge_accumulators(accumulators)
    assert merged.moved <= 2 * n
    report = combine.extract_output(merged)
    assert len(report.files) == n and report.rows == n and report.bytes == 2 * n
    assert report.error == "e7"
    assert [f.key for f in report.files[:3]] == ["k0", "k1", "k2"]


def test_one_client_per_process_per_config(s3_config):
    client, retries = shared_client(s3_config)
    assert shared_client(S3Config(**{f: getattr(s3_config, f) for f in s3_config.__dataclass_fields__}))[0] is client
    other = S3Config(
        endpoint_url=s3_config.endpoint_url,
        region_name=s3_config.region_name,
        access_key_id=s3_config.access_key_id,
        secret_access_key="another-secret",
        path_style=True,
    )
    assert shared_client(other)[0] is not client
    assert "another-secret" not in repr(other)

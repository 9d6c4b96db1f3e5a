"""Files that span bundles (beam_s3_sink.spill), the shared client, and the linear merge."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Tuple

import pyarrow as pa
import pytest

from beam_s3_sink import S3Config
from beam_s3_sink.clients import shared_client
from beam_s3_sink.completion import MergeReports, _CompleteFn
from beam_s3_sink.formats import resolve_format
from beam_s3_sink.initialization import initialize
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.messages import PendingFile, UploadReport
from beam_s3_sink.spill import _SpillFn, _WriteSpilledFn, decode_blob
from helpers import data_keys, pending_uploads, read_parquet
from test_copy import SCHEMA, make_row


def spill_bundles(bundles: List[range], fn: _SpillFn) -> List[Tuple[str, bytes]]:
    """Run ``fn`` over bundles of row ids, as a runner would; return every (key, blob)."""
    out: List[Tuple[str, bytes]] = []
    for ids in bundles:
        fn.start_bundle()
        for i in ids:
            out.extend(fn.process(make_row(i)))
        out.extend(w.value for w in fn.finish_bundle())
    return out


def group(pairs: List[Tuple[str, bytes]]) -> Dict[str, List[bytes]]:
    groups: Dict[str, List[bytes]] = defaultdict(list)
    for key, blob in pairs:
        groups[key].append(blob)
    return groups


def write_groups(keys: CopyKeys, config: S3Config, fmt, groups, state, layout: Layout = Layout()):
    writer = _WriteSpilledFn(keys, config, fmt, SCHEMA, 256 * 2**20, layout)
    writer.setup()
    reports = [r for item in groups.items() for r in writer.process(item, state)]
    writer.teardown()
    return reports


def finish(keys: CopyKeys, config: S3Config, fmt, reports, state):
    combine = MergeReports()
    acc = combine.create_accumulator()
    for report in reports:
        acc = combine.add_input(acc, report)
    fn = _CompleteFn(keys, config, fmt, SCHEMA, fail_on_error=True)
    fn.setup()
    [result] = list(fn.process(combine.extract_output(acc), state))
    return result


def test_many_tiny_bundles_give_one_file_per_instance(s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "tiny"), "tiny")
    fmt = resolve_format("parquet")
    state = initialize(s3_client, keys)
    spills = []
    for _ in range(2):  # two DoFn instances, as on two parallel workers
        fn = _SpillFn(SCHEMA)
        fn.setup()
        spills.append(fn)
    # 500 bundles of 20 rows each, alternating between the two instances.
    pairs: List[Tuple[str, bytes]] = []
    for b in range(500):
        pairs += spill_bundles([range(b * 20, b * 20 + 20)], spills[b % 2])
    groups = group(pairs)
    assert len(groups) == 2, "one key per instance while its data is under GROUP_BYTES"
    result = finish(keys, s3_config, fmt, write_groups(keys, s3_config, fmt, groups, state), state)
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
    fn = _SpillFn(SCHEMA, blob_bytes=64 * 1024, group_bytes=256 * 1024)
    fn.setup()
    pairs = spill_bundles([range(b * 1000, b * 1000 + 1000) for b in range(40)], fn)
    groups = group(pairs)
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
    retry spills the same rows again under its own key. A writer attempt whose report is lost
    leaves only pending uploads, which completion aborts: the rows are there exactly once."""
    keys = CopyKeys(S3Location(bucket, "retry"), "retry")
    fmt = resolve_format("csv")
    state = initialize(s3_client, keys)
    failed, retry = _SpillFn(SCHEMA), _SpillFn(SCHEMA)
    failed.setup()
    retry.setup()
    discarded = spill_bundles([range(300)], failed)  # the bundle then fails: outputs dropped
    kept = spill_bundles([range(300)], retry)
    assert discarded and kept and {k for k, _ in discarded}.isdisjoint(k for k, _ in kept)
    groups = group(kept)
    lost = write_groups(keys, s3_config, fmt, groups, state)  # its report never arrives
    assert data_keys(s3_client, bucket, "retry") == []
    assert sorted(pending_uploads(s3_client, bucket)) == sorted(f.key for r in lost for f in r.files)
    committed = write_groups(keys, s3_config, fmt, groups, state)
    result = finish(keys, s3_config, fmt, committed, state)
    assert result.ok and result.rows == 300
    files = data_keys(s3_client, bucket, "retry")
    assert files == sorted(f.key for r in committed for f in r.files)
    lines = [line for key in files for line in s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines()]
    assert sorted(int(line.split(b",")[0]) for line in lines) == list(range(300))
    assert pending_uploads(s3_client, bucket) == []


def test_a_bad_row_in_a_spilled_bundle_is_reported_naming_the_column(s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "bad"), "bad")
    fmt = resolve_format("parquet")
    state = initialize(s3_client, keys)
    fn = _SpillFn(SCHEMA)
    fn.setup()
    fn.start_bundle()
    pairs = list(fn.process(make_row(1))) + list(fn.process(dict(make_row(2), id="two")))
    pairs += [w.value for w in fn.finish_bundle()]
    [report] = write_groups(keys, s3_config, fmt, group(pairs), state)
    assert report.error and "'id'" in report.error and "two" in report.error
    assert pending_uploads(s3_client, bucket) == []


@pytest.mark.parametrize("keep", [False, True])
def test_spilled_batches_keep_partitions(keep, s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "parts"), "parts")
    fmt = resolve_format("parquet")
    state = initialize(s3_client, keys)
    fn = _SpillFn(SCHEMA)
    fn.setup()
    layout = Layout(("paid",), keep, 8)
    reports = write_groups(keys, s3_config, fmt, group(spill_bundles([range(50), range(50, 120)], fn)), state, layout)
    result = finish(keys, s3_config, fmt, reports, state)
    assert result.ok and result.rows == 120
    directories = sorted({k.split("/")[1] for k in data_keys(s3_client, bucket, "parts")})
    assert directories == ["paid=__HIVE_DEFAULT_PARTITION__", "paid=false", "paid=true"]
    for key in data_keys(s3_client, bucket, "parts"):
        table = read_parquet(s3_client, bucket, key)
        assert ("paid" in table.schema.names) == keep


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

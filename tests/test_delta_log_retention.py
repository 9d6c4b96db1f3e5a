"""A Delta table whose oldest commits Delta has removed from its log (past
``delta.logRetentionDuration``, once a checkpoint holds them): a copy committed there is still
committed. Its rerun copies nothing again, its abort is refused, and nothing deletes its files,
which the table's current version still reads (the log's JSON commits alone no longer name them)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from beam_s3_sink import CommittedCopyError, abort_delta_copy
from delta_readers import read_deltalake
from helpers import list_objects
from test_delta import run_delta_copy, table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string())])


def test_a_copy_whose_commit_left_the_log_is_still_committed(tmp_path, s3_config, s3_client, bucket):
    uri = f"s3://{bucket}/lake/t"
    copy = dict(table_uri=uri, schema=SCHEMA, partition_by=["region"], s3=s3_config)
    rows = [{"id": i, "region": "eu" if i % 2 else "us"} for i in range(100)]
    first = run_delta_copy(rows, tmp_path, sink_id="old", **copy)
    assert first.ok and first.snapshot_id == 0, first.error
    later = [{"id": 100 + i, "region": "eu"} for i in range(10)]
    assert run_delta_copy(later, tmp_path, sink_id="new", **copy).ok
    t = table(uri, s3_config)
    t.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    t.create_checkpoint()
    t.cleanup_metadata()  # version 0's commit (sink "old") leaves the log
    logged = list_objects(s3_client, bucket, "lake/t/_delta_log/")
    assert "lake/t/_delta_log/00000000000000000000.json" not in logged, logged
    files_before = sorted(k for k in list_objects(s3_client, bucket, "lake/t/") if "_delta_log" not in k)

    rerun = run_delta_copy(rows, tmp_path, sink_id="old", fail_on_error=False, **copy)
    assert not rerun.ok and "committed into this table" in rerun.error and "'old'" in rerun.error, rerun.error
    with pytest.raises(CommittedCopyError, match="committed into this table"):
        abort_delta_copy(uri, "old", s3=s3_config)

    assert sorted(k for k in list_objects(s3_client, bucket, "lake/t/") if "_delta_log" not in k) == files_before
    got = sorted(r["id"] for r in read_deltalake(uri, s3_config).to_pylist())
    assert got == list(range(110))

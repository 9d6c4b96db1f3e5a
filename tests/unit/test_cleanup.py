"""cleanup: abort_copy removes exactly what one copy left, and refuses a finished copy."""

from __future__ import annotations

import json

import pytest

from beam_s3_sink.cleanup import abort_copy
from beam_s3_sink.errors import CommittedCopyError
from beam_s3_sink.keys import CopyKeys, S3Location

KEYS = CopyKeys(S3Location("bucket", "p"), "s1")
TOKEN = "0123456789abcdef"


def leave_a_failed_copy(fake):
    for key in (
        KEYS.sentinel,
        KEYS.data_file(TOKEN, 1, "csv"),
        "p/other.csv",
        "p/_s2-INCOMPLETE",
        "p/s1-2026-" + TOKEN + "-0001.csv",
    ):
        fake.put_object(Bucket="bucket", Key=key, Body=b"x")
    fake.put_object(Bucket="bucket", Key=KEYS.claim, Body=json.dumps({"sink_id": "s1"}).encode())
    mine = fake.create_multipart_upload(Bucket="bucket", Key=KEYS.data_file(TOKEN, 2, "csv"))["UploadId"]
    theirs = fake.create_multipart_upload(Bucket="bucket", Key="p/s2-" + TOKEN + "-0001.csv")["UploadId"]
    return mine, theirs


def test_removes_what_the_copy_left_and_nothing_else(fake_s3):
    mine, theirs = leave_a_failed_copy(fake_s3)
    report = abort_copy("s3://bucket/p", "s1", client=fake_s3)
    assert fake_s3.keys() == ["p/_s2-INCOMPLETE", "p/other.csv", "p/s1-2026-" + TOKEN + "-0001.csv"]
    assert list(fake_s3.uploads) == [theirs]
    assert report.aborted == ((f"s3://bucket/{KEYS.data_file(TOKEN, 2, 'csv')}", mine),)
    assert report.deleted[-1] == f"s3://bucket/{KEYS.sentinel}"  # the sentinel goes last
    assert set(report.deleted) == {
        f"s3://bucket/{k}" for k in (KEYS.sentinel, KEYS.data_file(TOKEN, 1, "csv"), KEYS.claim)
    }
    assert not report.committed
    text = report.describe()
    assert text.startswith("copy 's1' in s3://bucket/p: deleted 3 object(s), aborted 1 pending upload(s)")


def test_another_copy_s_claim_stays(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key=KEYS.claim, Body=json.dumps({"sink_id": "s2"}).encode())
    abort_copy("s3://bucket/p", "s1", client=fake_s3)
    assert fake_s3.keys() == [KEYS.claim]


def test_a_committed_copy_needs_force(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key=KEYS.manifest, Body=b"{}")
    fake_s3.put_object(Bucket="bucket", Key=KEYS.data_file(TOKEN, 1, "csv"), Body=b"1\n")
    with pytest.raises(CommittedCopyError, match="is complete .* pass --force"):
        abort_copy("s3://bucket/p", "s1", client=fake_s3)
    assert len(fake_s3.keys()) == 2
    assert abort_copy("s3://bucket/p", "s1", client=fake_s3, force=True).committed
    assert fake_s3.keys() == []


def test_bad_arguments_fail_before_any_request(fake_s3):
    with pytest.raises(ValueError, match="not an S3 URI"):
        abort_copy("bucket/p", "s1", client=fake_s3)
    with pytest.raises(ValueError, match="sink_id"):
        abort_copy("s3://bucket/p", "bad id", client=fake_s3)
    assert fake_s3.calls == []


def test_a_stream_keeps_its_committed_units_unless_forced(fake_s3):
    """What a dead stream left: a committed unit (manifest and file), a unit cut short (record
    and a completed file), a pending upload, the sentinel: --abort removes all but the unit."""
    committed, cut_short = KEYS.data_file(TOKEN, 1, "csv"), KEYS.data_file(TOKEN, 2, "csv")
    manifest = {"entries": [{"url": f"s3://bucket/{committed}", "mandatory": True, "meta": {}}]}
    for key, body in (
        (committed, b"x"),
        (cut_short, b"y"),
        (KEYS.unit_manifest("global-p0"), json.dumps(manifest).encode()),
        (KEYS.unit_commit("global-p1"), json.dumps([{"key": cut_short}]).encode()),
        (KEYS.sentinel, b""),
    ):
        fake_s3.put_object(Bucket="bucket", Key=key, Body=body)
    pending = fake_s3.create_multipart_upload(Bucket="bucket", Key=KEYS.data_file(TOKEN, 3, "csv"))["UploadId"]
    report = abort_copy("s3://bucket/p", "s1", client=fake_s3)
    assert fake_s3.keys() == sorted([committed, KEYS.unit_manifest("global-p0")])
    assert report.aborted == ((f"s3://bucket/{KEYS.data_file(TOKEN, 3, 'csv')}", pending),)
    abort_copy("s3://bucket/p", "s1", client=fake_s3, force=True)
    assert fake_s3.keys() == []

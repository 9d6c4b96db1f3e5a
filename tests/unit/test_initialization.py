"""initialization: what the first step decides from the path's listing, against the fake."""

from __future__ import annotations

import json

import pytest

from beam_s3_sink.claim import CONDITIONAL, RELIST
from beam_s3_sink.errors import S3RequestError
from beam_s3_sink.initialization import fallback_winner, initialize
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.manifest import manifest_json
from beam_s3_sink.results import CopiedFile, CopyToResult

from .fakes import FakeS3

KEYS = CopyKeys(S3Location("bucket", "p"), "s1")
TOKEN = "0123456789abcdef"


def test_empty_path_claim_then_sentinel(fake_s3):
    outcome = initialize(fake_s3, KEYS, put_args={"ServerSideEncryption": "AES256"})
    assert (outcome.error, outcome.done, outcome.guard) == (None, None, CONDITIONAL)
    assert fake_s3.keys() == [KEYS.claim, KEYS.sentinel]
    assert fake_s3.body(KEYS.sentinel) == b""
    assert fake_s3.objects[("bucket", KEYS.sentinel)].args == {"ServerSideEncryption": "AES256"}


def test_foreign_objects_fail_naming_them_and_write_nothing(fake_s3):
    for i in range(7):
        fake_s3.put_object(Bucket="bucket", Key=f"p/old-{i}.csv", Body=b"")
    outcome = initialize(fake_s3, KEYS)
    assert "s3://bucket/p is not empty: 7 object(s) that copy 's1' did not write" in outcome.error
    assert "p/old-0.csv, p/old-1.csv, p/old-2.csv, p/old-3.csv, p/old-4.csv and 2 more" in outcome.error
    assert "if_exists='append' or 'replace'" in outcome.error
    assert fake_s3.keys() == [f"p/old-{i}.csv" for i in range(7)]  # the claim is released too


def test_an_incomplete_copy_there_is_named_with_the_clean_up_command(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key="p/_other-INCOMPLETE", Body=b"")
    outcome = initialize(fake_s3, KEYS)
    assert "Copy 'other' there is incomplete" in outcome.error
    assert "--abort other --output s3://bucket/p" in outcome.error


def test_append_leaves_them_and_takes_no_claim(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key="p/old.csv", Body=b"")
    outcome = initialize(fake_s3, KEYS, "append")
    assert outcome.error is None and outcome.guard == "" and outcome.replaced == ()
    assert fake_s3.keys() == sorted(["p/old.csv", KEYS.sentinel])


def test_replace_records_the_keys_it_found(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key="p/old.csv", Body=b"")
    fake_s3.put_object(Bucket="bucket", Key="p/sub/old.parquet", Body=b"")
    outcome = initialize(fake_s3, KEYS, "replace")
    assert outcome.error is None and outcome.replaced == ("p/old.csv", "p/sub/old.parquet")
    assert "p/old.csv" in fake_s3.keys()  # deleted only once the copy commits


def test_a_finished_copy_reports_its_result_again_and_writes_nothing(fake_s3):
    result = CopyToResult(
        uri="s3://bucket/p",
        sink_id="s1",
        rows=1,
        bytes=2,
        files=(CopiedFile(f"s3://bucket/p/s1-{TOKEN}-0001.csv", 1, 2),),
        manifest_uri=f"s3://bucket/{KEYS.manifest}",
    )
    fake_s3.put_object(Bucket="bucket", Key=KEYS.manifest, Body=manifest_json(result, {}, []))
    before = set(fake_s3.keys())
    outcome = initialize(fake_s3, KEYS)
    assert outcome.done == result and outcome.error is None
    assert set(fake_s3.keys()) == before and "PutObject" not in fake_s3.operations()[1:]


def test_leftovers_of_an_earlier_run_are_removed(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key=KEYS.sentinel, Body=b"")
    fake_s3.put_object(Bucket="bucket", Key=KEYS.data_file(TOKEN, 1, "csv"), Body=b"old")
    upload = fake_s3.create_multipart_upload(Bucket="bucket", Key=KEYS.data_file(TOKEN, 2, "csv"))["UploadId"]
    outcome = initialize(fake_s3, KEYS)
    assert outcome.error is None and outcome.warnings == ()
    assert fake_s3.keys() == [KEYS.claim, KEYS.sentinel] and upload not in fake_s3.uploads


def test_an_upload_that_cannot_be_aborted_is_a_warning(fake_s3):
    fake_s3.create_multipart_upload(Bucket="bucket", Key=KEYS.data_file(TOKEN, 2, "csv"))
    fake_s3.refuse("AbortMultipartUpload", "AccessDenied")
    outcome = initialize(fake_s3, KEYS)
    assert outcome.error is None
    assert len(outcome.warnings) == 1 and "could not abort a pending upload" in outcome.warnings[0]


def test_a_path_claimed_by_another_copy(fake_s3):
    fake_s3.put_object(
        Bucket="bucket",
        Key=KEYS.claim,
        Body=json.dumps({"sink_id": "other", "started": "2026-01-01T00:00:00+00:00"}).encode(),
    )
    outcome = initialize(fake_s3, KEYS)
    assert "another copy, sink_id 'other', is writing to s3://bucket/p" in outcome.error
    assert "since 2026-01-01T00:00:00+00:00" in outcome.error and "Nothing of copy 's1' was written" in outcome.error
    assert fake_s3.keys() == [KEYS.claim]


def test_fallback_store_oldest_sentinel_wins():
    fake = FakeS3(enforce_if_none_match=False)
    fake.put_object(Bucket="bucket", Key="p/_other-INCOMPLETE", Body=b"")  # written first: older
    outcome = initialize(fake, KEYS)
    assert outcome.error is not None and "'other'" in outcome.error
    assert KEYS.sentinel not in fake.keys()  # it gave way and took its sentinel back


def test_fallback_store_alone_goes_on():
    fake = FakeS3(enforce_if_none_match=False)
    outcome = initialize(fake, KEYS)
    assert outcome.error is None and outcome.guard == RELIST and fake.keys() == [KEYS.sentinel]
    assert fallback_winner(fake, KEYS) == "s1"


def test_a_missing_bucket_is_an_error(fake_s3):
    with pytest.raises(S3RequestError, match="S3 refused ListObjectsV2 on s3://nope/p/: NoSuchBucket"):
        initialize(fake_s3, CopyKeys(S3Location("nope", "p"), "s1"))

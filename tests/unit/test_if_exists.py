"""if_exists: the policy's values, and deleting the replaced objects once the copy committed."""

from __future__ import annotations

import pytest

from beam_s3_sink.errors import ReplaceError, S3RequestError
from beam_s3_sink.if_exists import IF_EXISTS, check_if_exists, delete_keys


@pytest.mark.parametrize("value", IF_EXISTS)
def test_valid(value):
    assert check_if_exists(value) == value


def test_invalid():
    with pytest.raises(ValueError, match=r"if_exists must be one of \['error', 'append', 'replace'\], got 'overwrite'"):
        check_if_exists("overwrite")


def test_deletes_in_batches_of_1000(fake_s3):
    keys = [f"old/{i:05d}" for i in range(2500)]
    for key in keys + ["old/kept"]:
        fake_s3.put_object(Bucket="bucket", Key=key, Body=b"")
    delete_keys(fake_s3, "bucket", keys)
    assert fake_s3.keys() == ["old/kept"]
    sizes = [len(kw["Delete"]["Objects"]) for name, kw in fake_s3.calls if name == "DeleteObjects"]
    assert sizes == [1000, 1000, 500]


def test_nothing_to_delete_calls_nothing(fake_s3):
    delete_keys(fake_s3, "bucket", ())
    assert fake_s3.calls == []


def test_a_key_s3_refuses_is_named(fake_s3):
    fake_s3.undeletable = {"old/b"}
    with pytest.raises(
        ReplaceError,
        match=r"refused to delete s3://bucket/old/b \(AccessDenied: Access Denied\) and 0 more.*rerun with the same sink_id",
    ):
        delete_keys(fake_s3, "bucket", ["old/a", "old/b"])


def test_a_refused_request_is_a_replace_error(fake_s3):
    fake_s3.refuse("DeleteObjects", "AccessDenied")
    with pytest.raises(ReplaceError, match="deleting the objects it replaces failed: S3 refused DeleteObjects") as info:
        delete_keys(fake_s3, "bucket", ["old/a"])
    assert isinstance(info.value, S3RequestError)

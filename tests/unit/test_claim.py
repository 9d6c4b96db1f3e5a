"""claim: one conditional PutObject decides which of two copies into a path goes on."""

from __future__ import annotations

import json

import pytest

from beam_s3_sink.claim import CONDITIONAL, RELIST, abort_hint, read_claim_holder, release_claim, take_claim
from beam_s3_sink.errors import S3RequestError
from beam_s3_sink.keys import CopyKeys, S3Location

from .fakes import FakeS3

A = CopyKeys(S3Location("bucket", "p"), "copy-a")
B = CopyKeys(S3Location("bucket", "p"), "copy-b")


def test_first_copy_takes_the_claim_and_the_second_is_told_who_holds_it(fake_s3):
    assert take_claim(fake_s3, A, {"ServerSideEncryption": "AES256"}).guard == CONDITIONAL
    body = json.loads(fake_s3.body("p/_CLAIM"))
    assert body["sink_id"] == "copy-a" and body["started"]
    assert fake_s3.objects[("bucket", "p/_CLAIM")].args["ServerSideEncryption"] == "AES256"
    other = take_claim(fake_s3, B)
    assert (other.guard, other.holder, other.started) == (None, "copy-a", body["started"])
    assert json.loads(fake_s3.body("p/_CLAIM"))["sink_id"] == "copy-a"  # untouched


def test_a_rerun_of_the_holder_takes_its_claim_over(fake_s3):
    take_claim(fake_s3, A)
    assert take_claim(fake_s3, A).guard == CONDITIONAL


def test_a_store_that_ignores_if_none_match_falls_back_to_the_relist():
    fake = FakeS3(enforce_if_none_match=False)
    assert take_claim(fake, A).guard == RELIST
    assert fake.keys() == []  # the claim decides nothing there, so it is removed


def test_a_store_that_refuses_the_header_falls_back(fake_s3):
    fake_s3.refuse("PutObject", "NotImplemented")
    assert take_claim(fake_s3, A).guard == RELIST


def test_a_conflict_is_retried(fake_s3, monkeypatch):
    monkeypatch.setattr("beam_s3_sink.claim.time.sleep", lambda _: None)
    fake_s3.refuse("PutObject", "ConditionalRequestConflict", times=2)
    assert take_claim(fake_s3, A).guard == CONDITIONAL


def test_a_claim_that_keeps_changing_fails(fake_s3, monkeypatch):
    monkeypatch.setattr("beam_s3_sink.claim.time.sleep", lambda _: None)
    fake_s3.refuse("PutObject", "ConditionalRequestConflict")
    with pytest.raises(S3RequestError, match="the claim kept changing"):
        take_claim(fake_s3, A)


def test_a_refused_put_is_an_s3_error(fake_s3):
    fake_s3.refuse("PutObject", "AccessDenied")
    with pytest.raises(S3RequestError, match="S3 refused PutObject on s3://bucket/p/_CLAIM: AccessDenied"):
        take_claim(fake_s3, A)


def test_read_claim_holder(fake_s3):
    assert read_claim_holder(fake_s3, "bucket", "p/_CLAIM") is None
    fake_s3.put_object(Bucket="bucket", Key="p/_CLAIM", Body=b"not json")
    assert read_claim_holder(fake_s3, "bucket", "p/_CLAIM") == {"sink_id": "?"}
    fake_s3.put_object(Bucket="bucket", Key="p/_CLAIM", Body=b'{"sink_id": "x", "nonce": "n"}')
    assert read_claim_holder(fake_s3, "bucket", "p/_CLAIM")["sink_id"] == "x"


def test_release(fake_s3):
    take_claim(fake_s3, A)
    release_claim(fake_s3, A)
    assert fake_s3.keys() == [] and take_claim(fake_s3, B).guard == CONDITIONAL


def test_abort_hint_is_the_cli_command():
    assert abort_hint("s3://b/p", "copy-a") == "beam-s3-copy --abort copy-a --output s3://b/p"

"""object_settings: encryption, storage class, content type, checksums and the bucket owner."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from beam_s3_sink.object_settings import ObjectSettings

from .fakes import FakeS3


def test_default_is_no_parameters_but_the_format_s_content_type():
    settings = ObjectSettings()
    assert settings.control_args() == {} and settings.part_args() == {} and settings.checksum_field is None
    assert settings.data_file_args("text/csv") == {"ContentType": "text/csv"}
    assert settings.data_file_args() == {}
    assert ObjectSettings(content_type="application/x-mine").data_file_args("text/csv") == {
        "ContentType": "application/x-mine"
    }


def test_encryption_and_checksums_reach_every_object_but_class_and_type_only_data_files():
    settings = ObjectSettings(
        server_side_encryption="aws:kms",
        kms_key_id="alias/k",
        bucket_key_enabled=True,
        storage_class="STANDARD_IA",
        content_type="application/x-mine",
        checksum_algorithm="CRC32C",
    )
    encryption = {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/k",
        "BucketKeyEnabled": True,
        "ChecksumAlgorithm": "CRC32C",
    }
    assert settings.control_args() == encryption
    assert settings.data_file_args("text/csv") == {
        **encryption,
        "StorageClass": "STANDARD_IA",
        "ContentType": "application/x-mine",
    }
    assert settings.part_args() == {"ChecksumAlgorithm": "CRC32C"} and settings.checksum_field == "ChecksumCRC32C"


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(server_side_encryption="KMS"), "server_side_encryption must be one of"),
        (dict(kms_key_id="k"), "kms_key_id needs"),
        (dict(server_side_encryption="AES256", kms_key_id="k"), "kms_key_id needs"),
        (dict(expected_bucket_owner="12345"), "12-digit"),
        (dict(checksum_algorithm="MD5"), "checksum_algorithm must be one of"),
    ],
)
def test_invalid(kwargs, says):
    with pytest.raises(ValueError, match=says):
        ObjectSettings(**kwargs)


def test_attach_adds_the_expected_owner_to_every_request_that_takes_it():
    fake = FakeS3()
    ObjectSettings(expected_bucket_owner="111122223333").attach(fake)
    ((event, handler),) = fake.meta.events.handlers
    assert event == "before-parameter-build.s3"
    takes = SimpleNamespace(input_shape=SimpleNamespace(members={"Bucket": 1, "ExpectedBucketOwner": 1}))
    params = {"Bucket": "b"}
    handler(params=params, model=takes)
    assert params["ExpectedBucketOwner"] == "111122223333"
    other = {"Bucket": "b"}
    handler(params=other, model=SimpleNamespace(input_shape=SimpleNamespace(members={"Bucket": 1})))
    assert other == {"Bucket": "b"}


def test_attach_without_an_owner_registers_nothing():
    fake = FakeS3()
    ObjectSettings().attach(fake)
    assert fake.meta.events.handlers == []


def test_a_real_client_sends_the_owner():
    """With botocore's own parameter building: the header is on the request it would send."""
    from beam_s3_sink.config import S3Config

    class Sent(Exception):
        pass

    def capture(request, **_):
        raise Sent(request.headers.get("x-amz-expected-bucket-owner"))

    client = S3Config(
        region_name="us-east-1",
        access_key_id="AK",
        secret_access_key="SK",
        objects=ObjectSettings(expected_bucket_owner="111122223333"),
    ).make_client()
    client.meta.events.register("before-send.s3", capture)  # nothing leaves the process
    for call in (
        lambda: client.head_object(Bucket="b", Key="k"),
        lambda: client.list_objects_v2(Bucket="b", Prefix="p/"),
    ):
        with pytest.raises(Sent) as info:
            call()
        assert info.value.args[0] == b"111122223333"

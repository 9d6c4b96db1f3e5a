"""s3: MultipartStream against the fake, the one call path, listings, error messages, retries."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from botocore.exceptions import EndpointConnectionError

from beam_s3_sink.errors import S3RequestError
from beam_s3_sink.s3 import (
    MultipartStream,
    PartBuffers,
    RetryCounter,
    call,
    describe_error,
    error_code,
    list_keys,
    list_uploads,
)

from .fakes import FakeS3, client_error

KEY = "p/id-0123456789abcdef-0001.csv"


@pytest.fixture
def pool():
    with ThreadPoolExecutor(4) as executor:
        yield executor


def stream(fake, pool, **kwargs):
    options = dict(part_size=4, pool=pool, max_in_flight=2)
    options.update(kwargs)
    return MultipartStream(fake, "bucket", KEY, **options)


def test_parts_of_part_size_then_the_rest(fake_s3, pool):
    out = stream(fake_s3, pool)
    assert out.write(b"abcdefghij") == 10 and out.tell() == 10
    pending = out.finish(rows=3)
    upload = fake_s3.uploads[pending.upload_id]
    assert [upload.parts[n][1] for n in sorted(upload.parts)] == [b"abcd", b"efgh", b"ij"]
    assert pending.parts == tuple((n, upload.parts[n][0]) for n in (1, 2, 3))
    assert (pending.key, pending.rows, pending.bytes) == (KEY, 3, 10)
    assert fake_s3.keys() == []  # nothing visible: the upload is not completed


def test_the_parts_complete_into_the_bytes_written(fake_s3, pool):
    out = stream(fake_s3, pool)
    for chunk in (b"a", b"bcdef", memoryview(b"ghijk"), bytearray(b"l")):
        out.write(chunk)
    pending = out.finish(rows=1)
    fake_s3.complete_multipart_upload(
        Bucket="bucket",
        Key=KEY,
        UploadId=pending.upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in pending.parts]},
    )
    assert fake_s3.body(KEY) == b"abcdefghijkl"


def test_part_buffers_are_filled_again_once_uploaded_and_the_parts_stay_intact(fake_s3, pool):
    buffers = PartBuffers(size=4, keep=2)
    taken = []
    take = buffers.take
    buffers.take = lambda: taken.append(take()) or taken[-1]
    for key in ("p/a", "p/b"):  # two files share the buffers, as a writer's lanes do
        out = MultipartStream(fake_s3, "bucket", key, part_size=4, pool=pool, max_in_flight=1, buffers=buffers)
        out.write(b"abcdefghijklmn")
        pending = out.finish(rows=1)
        upload = fake_s3.uploads[pending.upload_id]
        assert [upload.parts[n][1] for n in sorted(upload.parts)] == [b"abcd", b"efgh", b"ijkl", b"mn"]
    # Four parts a file (the last one cut short, then dropped); with one part in flight, the
    # third part of each file at the latest fills a buffer that an uploaded part gave back.
    assert len(taken) == 8 and len({id(b) for b in taken}) <= 6
    with pytest.raises(ValueError, match="buffers of 4 bytes for parts of 8"):
        MultipartStream(fake_s3, "bucket", KEY, part_size=8, pool=pool, max_in_flight=1, buffers=buffers)


def test_part_buffers_keep_at_most_keep_and_drop_short_last_parts():
    buffers = PartBuffers(size=4, keep=1)
    first, second = buffers.take(), buffers.take()
    buffers.give(first)
    buffers.give(second)  # over keep: left to the allocator
    buffers.give(bytearray(2))  # a last part, cut short
    assert buffers.take() is first
    fresh = buffers.take()
    assert fresh is not first and fresh is not second and len(fresh) == 4


def test_the_upload_is_created_lazily_and_an_empty_file_gets_one_empty_part(fake_s3, pool):
    out = stream(fake_s3, pool)
    assert fake_s3.operations() == [] and out.upload_id is None
    pending = out.finish(rows=0)
    assert fake_s3.operations() == ["CreateMultipartUpload", "UploadPart"]
    assert fake_s3.uploads[pending.upload_id].parts[1][1] == b"" and pending.bytes == 0


def test_create_args_and_part_checksums(fake_s3, pool):
    out = stream(fake_s3, pool, create_args={"ContentType": "text/csv"}, part_args={"ChecksumAlgorithm": "CRC32C"})
    out.write(b"abcdef")
    pending = out.finish(rows=1)
    assert fake_s3.uploads[pending.upload_id].args == {"ContentType": "text/csv"}
    assert len(pending.part_checksums) == 2 and all(c.startswith("sum-") for c in pending.part_checksums)


def test_a_store_without_part_checksums_is_named(pool):
    fake = FakeS3(part_checksums=False)
    out = stream(fake, pool, part_args={"ChecksumAlgorithm": "SHA256"})
    out.write(b"abc")
    with pytest.raises(S3RequestError, match="did not return the ChecksumSHA256 .*checksum_algorithm=None"):
        out.finish(rows=1)


def test_closing_the_formats_wrapper_keeps_the_stream_usable(fake_s3, pool):
    from beam_s3_sink.formats.base import KeepOpen

    out = stream(fake_s3, pool)
    wrapper = KeepOpen(out)  # what the formats hand pyarrow, which closes what it wraps
    wrapper.write(b"ab")
    wrapper.close()
    assert out.finish(rows=1).bytes == 2


def test_abort_gives_the_upload_up(fake_s3, pool):
    out = stream(fake_s3, pool)
    out.write(b"abcdefgh")
    upload_id = out.upload_id
    out.abort()
    assert upload_id not in fake_s3.uploads and "AbortMultipartUpload" in fake_s3.operations()


def test_abort_of_an_unstarted_stream_calls_nothing(fake_s3, pool):
    stream(fake_s3, pool).abort()
    assert fake_s3.operations() == []


def test_a_refused_part_fails_finish_naming_it(fake_s3, pool):
    fake_s3.refuse("UploadPart", "AccessDenied")
    out = stream(fake_s3, pool)
    out.write(b"abcdefgh")
    with pytest.raises(S3RequestError, match=f"S3 refused UploadPart on s3://bucket/{KEY}: AccessDenied.*s3:PutObject"):
        out.finish(rows=1)


def test_at_most_max_in_flight_parts_are_pending(fake_s3):
    """The stream waits for the oldest part before queueing one more than ``max_in_flight``."""
    queued = []

    class Recording:
        def submit(self, fn, *args):
            from concurrent.futures import Future

            future = Future()
            queued.append((future, fn, args))
            return future

    out = MultipartStream(fake_s3, "bucket", KEY, part_size=1, pool=Recording(), max_in_flight=2)
    out.write(b"ab")
    assert len(queued) == 2
    for future, fn, args in queued:  # complete them, as a pool would
        future.set_result(fn(*args))
    out.write(b"c")
    assert len(queued) == 3


def test_call_passes_bucket_and_key_and_translates_errors(fake_s3):
    fake_s3.put_object(Bucket="bucket", Key="k", Body=b"x")
    assert call(fake_s3, "HeadObject", "bucket", "k")["ContentLength"] == 1
    with pytest.raises(S3RequestError, match="S3 refused ListObjectsV2 on s3://nope/p/: NoSuchBucket .*create it"):
        call(fake_s3, "ListObjectsV2", "nope", Prefix="p/")


def test_call_translates_connection_errors():
    class Down:
        def head_object(self, **_):
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    with pytest.raises(S3RequestError, match="S3 request HeadObject on s3://b/k failed: Could not connect"):
        call(Down(), "HeadObject", "b", "k")


def test_listings_follow_every_page(fake_s3):
    for i in range(5):
        fake_s3.put_object(Bucket="bucket", Key=f"p/{i}", Body=b"")
    fake_s3.put_object(Bucket="bucket", Key="q/0", Body=b"")
    assert [o["Key"] for o in list_keys(fake_s3, "bucket", "p/")] == [f"p/{i}" for i in range(5)]
    ids = [fake_s3.create_multipart_upload(Bucket="bucket", Key=f"p/{i}")["UploadId"] for i in range(5)]
    assert sorted(list_uploads(fake_s3, "bucket", "p/")) == [(f"p/{i}", u) for i, u in enumerate(ids)]
    assert fake_s3.operations().count("ListObjectsV2") == 3  # pages of two


@pytest.mark.parametrize(
    "code, hint",
    [
        ("NoSuchBucket", "the bucket does not exist"),
        ("AccessDenied", "lack the IAM permission s3:ListBucket"),
        ("InvalidAccessKeyId", "check the credentials"),
        ("SignatureDoesNotMatch", "secret key does not match"),
        ("ExpiredToken", "session token has expired"),
        ("SlowDown", ""),
    ],
)
def test_describe_error_hints(code, hint):
    text = describe_error(client_error(code, "ListObjectsV2", "msg"), "ListObjectsV2", "b", "p/")
    assert text.startswith(f"S3 refused ListObjectsV2 on s3://b/p/: {code} (msg)") and hint in text


def test_describe_error_of_an_assume_role_failure():
    text = describe_error(client_error("AccessDenied", "AssumeRole", "not allowed"), "PutObject", "b", "k")
    assert "assuming the role (sts:AssumeRole) for PutObject on s3://b/k failed: AccessDenied" in text
    assert "role_arn" in text


def test_describe_error_of_anything_else():
    assert describe_error(OSError("boom"), "GetObject", "b") == "GetObject on s3://b failed: OSError: boom"


def test_error_code():
    assert error_code(client_error("NoSuchKey", "GetObject")) == "NoSuchKey"
    assert error_code(ValueError()) is None


def test_retry_counter_counts_attempts_after_the_first():
    fake = FakeS3()
    counter = RetryCounter.attach(fake)
    ((event, handler),) = fake.meta.events.handlers
    assert event == "request-created.s3"
    for attempt in (1, 2, 3, 1):
        handler(request=SimpleNamespace(context={"retries": {"attempt": attempt}}), operation_name="UploadPart")
    handler(request=SimpleNamespace(context=None))
    assert counter.drain() == 2 and counter.drain() == 0


class _Hollow:
    """A client whose first ``hollow`` answers to create_multipart_upload lack the upload id."""

    def __init__(self, hollow: int) -> None:
        self.meta = SimpleNamespace(config=SimpleNamespace(retries={"total_max_attempts": 3}))
        self.hollow, self.calls = hollow, 0

    def create_multipart_upload(self, **kwargs):
        self.calls += 1
        return {} if self.calls <= self.hollow else {"UploadId": "u1"}

    def list_objects_v2(self, **kwargs):
        self.calls += 1
        return {"IsTruncated": True, "Contents": []}  # a next page promised, and no token for it


def test_an_answer_without_what_s3_promises_is_retried(monkeypatch):
    monkeypatch.setattr("beam_s3_sink.s3.time.sleep", lambda _: None)
    client = _Hollow(hollow=2)
    assert call(client, "CreateMultipartUpload", "b", "k")["UploadId"] == "u1" and client.calls == 3


def test_an_answer_that_stays_incomplete_fails_naming_what_is_missing(monkeypatch):
    monkeypatch.setattr("beam_s3_sink.s3.time.sleep", lambda _: None)
    with pytest.raises(S3RequestError) as info:
        call(_Hollow(hollow=3), "CreateMultipartUpload", "b", "k")
    assert info.value.code == "IncompleteAnswer"
    assert str(info.value).startswith(
        "S3's answer to CreateMultipartUpload on s3://b/k lacks UploadId, which S3 always sends (after 3 attempts)"
    )
    with pytest.raises(S3RequestError, match=r"ListObjectsV2 on s3://b/p/ lacks NextContinuationToken"):
        list(list_keys(_Hollow(hollow=0), "b", "p/"))

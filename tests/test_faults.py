"""Nothing lost, nothing doubled: S3 faults and retries, reruns by sink id, retried bundles,
best-effort cleanup, and the bad-input matrix, against a real moto server (through a
fault-injecting proxy where the test needs faults)."""

from __future__ import annotations

import csv
import datetime
import io
import json
import random
import uuid

import pyarrow as pa
import pytest

from beam_s3_sink import CopyToS3, CsvFormat, S3Config
from beam_s3_sink.completion import _CompleteFn
from beam_s3_sink.initialization import initialize
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.messages import InitOutcome, UploadReport
from conftest import REGION, SERVERS, free_port, start_moto
from faultproxy import FaultProxy
from helpers import (
    data_keys,
    get_bytes,
    list_objects,
    pending_uploads,
    read_parquet,
    run_copy,
    write_bundle,
    write_settings,
)

S3_SERVERS = SERVERS  # moto and SeaweedFS: see conftest.pytest_generate_tests

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def make_row(i: int) -> dict:
    return {"id": i, "name": f'name-{i}, "{i % 7}"', "amount": i * 0.5}


def read_rows(client, bucket: str, key: str) -> list:
    """The rows of one data file (Parquet, or CSV without a header) as dicts."""
    if key.endswith(".parquet"):
        return read_parquet(client, bucket, key).to_pylist()
    lines = csv.reader(io.StringIO(get_bytes(client, bucket, key).decode(), newline=""))
    return [{"id": int(i), "name": n, "amount": float(a)} for i, n, a in lines]


def all_rows(client, bucket: str, prefix: str) -> list:
    return [r for key in data_keys(client, bucket, prefix) for r in read_rows(client, bucket, key)]


def assert_exactly_once(client, bucket: str, prefix: str, result, count: int) -> None:
    assert result.ok, result.error
    assert result.rows == count
    rows = all_rows(client, bucket, prefix)
    assert sorted(r["id"] for r in rows) == list(range(count)), "each input row exactly once"
    assert sorted(rows, key=lambda r: r["id"]) == [make_row(i) for i in range(count)]
    assert sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in data_keys(client, bucket, prefix)]
    keys = CopyKeys(S3Location(bucket, prefix), result.sink_id)
    assert keys.sentinel not in list_objects(client, bucket, prefix)
    assert pending_uploads(client, bucket) == []


def snapshot(client, bucket: str) -> dict:
    """Every object with its ETag and LastModified: what a rewrite would change."""
    page = client.list_objects_v2(Bucket=bucket)
    return {o["Key"]: (o["ETag"], o["LastModified"]) for o in page.get("Contents", ())}


# criterion 1: faults are retried; every row arrives exactly once ------------------------------


@pytest.mark.parametrize("runner_name", ["direct", "portable"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_copy_through_faults_keeps_every_row_once(fmt, runner_name, s3_endpoint, s3_config, s3_client, bucket):
    from conftest import runner_args

    count = 30_000
    with FaultProxy(s3_endpoint, seed=5, rate=1 / 8) as proxy:
        counters: dict = {}
        result = run_copy(
            args=runner_args(runner_name),
            generate=(make_row, count),
            counters=counters,
            uri=f"s3://{bucket}/faulty",
            format=fmt,
            schema=SCHEMA,
            s3=s3_config.replace(endpoint_url=proxy.url, max_attempts=10),
            max_file_size=10 * 1024,  # many small files: faults hit creates, parts and completions
        )
    assert_exactly_once(s3_client, bucket, "faulty", result, count)
    assert len(result.files) >= 30
    kinds = {fault for _, fault in proxy.faults}
    assert kinds == {"503", "500", "reset", "reset-after"}, proxy.faults
    # Every injected fault cost exactly one retry, and the retries were counted.
    assert counters["retries"] == proxy.fault_count >= 10


@pytest.mark.parametrize("operation,field", [("CreateMultipartUpload", "UploadId"), ("UploadPart", "ETag")])
def test_answer_without_a_promised_field_is_retried(operation, field, s3_endpoint, s3_config, s3_client, bucket):
    """A store's odd answer (200, but no upload id or ETag) is retried like a 500: the copy lands
    every row once."""
    with FaultProxy(s3_endpoint, rate=0, hollow={operation: (field, 2)}) as proxy:
        counters: dict = {}
        result = run_copy(
            generate=(make_row, 3000),
            counters=counters,
            uri=f"s3://{bucket}/odd",
            format="csv",
            schema=SCHEMA,
            s3=s3_config.replace(endpoint_url=proxy.url),
            max_file_size=16 * 1024,
        )
    assert proxy.hollowed[operation] == 2
    assert_exactly_once(s3_client, bucket, "odd", result, 3000)
    assert counters["retries"] == 2


@pytest.mark.parametrize("operation,field", [("CreateMultipartUpload", "UploadId"), ("UploadPart", "ETag")])
def test_answer_always_without_a_promised_field_fails_naming_it(
    operation, field, s3_endpoint, s3_config, s3_client, bucket
):
    with FaultProxy(s3_endpoint, rate=0, hollow={operation: (field, -1)}) as proxy:
        result = run_copy(
            generate=(make_row, 3000),
            uri=f"s3://{bucket}/odd",
            format="csv",
            schema=SCHEMA,
            sink_id="odd",
            s3=s3_config.replace(endpoint_url=proxy.url, max_attempts=2),
            fail_on_error=False,
        )
    assert not result.ok
    assert f"S3's answer to {operation} on s3://{bucket}/odd/odd-" in result.error, result.error
    assert f"lacks {field}, which S3 always sends (after 3 attempts)" in result.error, result.error
    assert proxy.hollowed[operation] >= 3
    assert data_keys(s3_client, bucket, "odd") == [], "nothing of a failed copy is visible"
    assert pending_uploads(s3_client, bucket) == [], "the failed copy aborted what it had started"


# criterion 2: a failed completion, a rerun, an idempotent third run ---------------------------


def test_rerun_after_failed_completion_copies_once_then_writes_nothing(s3_endpoint, s3_config, s3_client, bucket):
    count = 3000
    kwargs = dict(
        uri=f"s3://{bucket}/nightly", format="parquet", schema=SCHEMA, sink_id="nightly", max_file_size=16 * 1024
    )
    keys = CopyKeys(S3Location(bucket, "nightly"), "nightly")
    refuse = {"CompleteMultipartUpload": (403, "AccessDenied"), "AbortMultipartUpload": (501, "NotImplemented")}
    with FaultProxy(s3_endpoint, rate=0, refuse=refuse) as proxy:
        with pytest.raises(Exception) as info:
            run_copy(generate=(make_row, count), s3=s3_config.replace(endpoint_url=proxy.url), **kwargs)
    assert "CompleteMultipartUpload" in str(info.value) and "AccessDenied" in str(info.value)
    assert proxy.requests["CompleteMultipartUpload"] >= 1
    objects = list_objects(s3_client, bucket)
    assert keys.sentinel in objects, "a failed copy leaves its sentinel"
    assert keys.manifest not in objects and data_keys(s3_client, bucket, "nightly") == []
    assert len(pending_uploads(s3_client, bucket)) >= 2, "the failed run could not abort its uploads"

    second = run_copy(generate=(make_row, count), s3=s3_config, **kwargs)
    assert_exactly_once(s3_client, bucket, "nightly", second, count)
    assert len(second.files) >= 2
    before = snapshot(s3_client, bucket)

    third = run_copy(generate=(make_row, count), s3=s3_config, **kwargs)
    assert third == second
    assert snapshot(s3_client, bucket) == before, "a rerun of a finished copy rewrites nothing"
    assert pending_uploads(s3_client, bucket) == []


# criterion 3: a retried bundle: only the committed attempt becomes visible --------------------


def test_retried_bundle_only_committed_attempt_is_visible(s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "retried"), "bundle")
    settings = write_settings(keys, s3_config, CsvFormat(), SCHEMA, max_file_size=8 * 1024)
    state = initialize(s3_client, keys)
    assert state == InitOutcome(guard="conditional")  # it holds the path's claim
    rows = [make_row(i) for i in range(2000)]

    def attempt() -> UploadReport:
        return write_bundle(settings, rows, InitOutcome())

    first, second = attempt(), attempt()
    assert first.rows == second.rows == len(rows) and len(first.files) >= 2
    assert not {f.key for f in first.files} & {f.key for f in second.files}
    assert len(pending_uploads(s3_client, bucket)) == len(first.files) + len(second.files)
    assert data_keys(s3_client, bucket, "retried") == [], "nothing is visible before completion"

    finish = _CompleteFn(settings, fail_on_error=True)
    finish.setup()
    (result,) = list(finish.process(second, state))
    # A retried finishing step completes again without error (the uploads are done already).
    (again,) = list(finish.process(second, state))
    assert again == result
    assert data_keys(s3_client, bucket, "retried") == sorted(f.key for f in second.files)
    assert pending_uploads(s3_client, bucket) == [], "the first attempt's uploads are aborted"
    assert sorted(r["id"] for r in all_rows(s3_client, bucket, "retried")) == list(range(len(rows)))
    assert result.ok and result.rows == len(rows) and result.warnings == ()


# best-effort cleanup never fails a copy ------------------------------------------------------


@pytest.mark.parametrize("missing", ["ListMultipartUploads", "AbortMultipartUpload"])
def test_store_without_cleanup_calls_still_copies(missing, s3_endpoint, s3_config, s3_client, bucket):
    keys = CopyKeys(S3Location(bucket, "p"), "weekly")
    # What a failed earlier run left: its sentinel and an upload it never completed.
    s3_client.put_object(Bucket=bucket, Key=keys.sentinel, Body=b"")
    stale = keys.data_file("0123456789abcdef", 1, "csv")
    s3_client.create_multipart_upload(Bucket=bucket, Key=stale)
    with FaultProxy(s3_endpoint, rate=0, refuse={missing: (501, "NotImplemented")}) as proxy:
        result = run_copy(
            generate=(make_row, 100),
            uri=f"s3://{bucket}/p",
            format="csv",
            schema=SCHEMA,
            sink_id="weekly",
            s3=s3_config.replace(endpoint_url=proxy.url),
        )
    assert proxy.requests[missing] >= 1
    assert result.ok and result.rows == 100
    assert result.warnings and all(
        f"{missing} on s3://{bucket}" in w and "NotImplemented" in w for w in result.warnings
    ), result.warnings
    assert sorted(r["id"] for r in all_rows(s3_client, bucket, "p")) == list(range(100))
    assert keys.sentinel not in list_objects(s3_client, bucket)
    assert pending_uploads(s3_client, bucket) == [stale], "only the upload nobody could abort is left"


# the bad-input matrix ------------------------------------------------------------------------


def test_bad_uri_fails_at_construction_and_writes_nothing(s3_client, bucket):
    with pytest.raises(ValueError, match=r"'TEST-.*' in 's3://TEST-.*' is not a valid bucket name"):
        CopyToS3(f"s3://{bucket.upper()}/p", schema=SCHEMA)
    with pytest.raises(ValueError, match=r"is not an S3 URI; write it as 's3://bucket/path'"):
        CopyToS3(f"{bucket}/p", schema=SCHEMA)
    assert list_objects(s3_client, bucket) == {}


def test_missing_bucket_fails_naming_it(s3_config, s3_client):
    name = f"missing-{uuid.uuid4().hex[:12]}"
    with pytest.raises(Exception) as info:
        run_copy(generate=(make_row, 10), uri=f"s3://{name}/p", format="csv", schema=SCHEMA, s3=s3_config)
    message = str(info.value)
    assert f"s3://{name}" in message and "NoSuchBucket" in message
    assert "the bucket does not exist: create it or fix the URI" in message
    assert name not in [b["Name"] for b in s3_client.list_buckets()["Buckets"]]


@pytest.fixture(scope="module")
def auth_server():
    """A second moto server that checks signatures and IAM policies after its first 3 calls,
    which make a user allowed s3:*; yields its endpoint and that user's access key."""
    import boto3

    port = free_port()
    process = start_moto(port, {"INITIAL_NO_AUTH_ACTION_COUNT": "3"})
    try:
        endpoint = f"http://127.0.0.1:{port}"
        iam = boto3.client(
            "iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup", aws_secret_access_key="setup"
        )
        iam.create_user(UserName="copier")
        key = iam.create_access_key(UserName="copier")["AccessKey"]
        iam.put_user_policy(
            UserName="copier",
            PolicyName="s3",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
            ),
        )
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        process.terminate()
        process.wait(10)


def test_refused_credentials_fail_and_write_nothing(auth_server):
    endpoint, key_id, secret = auth_server
    good = S3Config(
        endpoint_url=endpoint, region_name=REGION, access_key_id=key_id, secret_access_key=secret, path_style=True
    )
    client = good.make_client()
    client.create_bucket(Bucket="guarded")
    wrong_secret = "wrong-secret-never-shown"
    result = run_copy(
        generate=(make_row, 10),
        uri="s3://guarded/p",
        format="csv",
        schema=SCHEMA,
        s3=good.replace(secret_access_key=wrong_secret),
        fail_on_error=False,
    )
    assert not result.ok and result.rows == 0
    assert "SignatureDoesNotMatch" in result.error and "s3://guarded" in result.error
    assert "the secret key does not match the access key id" in result.error
    assert wrong_secret not in result.error and wrong_secret not in repr(result)
    assert client.list_objects_v2(Bucket="guarded").get("KeyCount") == 0
    assert client.list_multipart_uploads(Bucket="guarded").get("Uploads", []) == []


def test_row_that_does_not_fit_the_schema(s3_config, s3_client, bucket):
    rows = [make_row(i) for i in range(20)] + [dict(make_row(20), id="twenty-one")]
    result = run_copy(rows, uri=f"s3://{bucket}/p", format="csv", schema=SCHEMA, s3=s3_config, fail_on_error=False)
    assert not result.ok
    assert "'id'" in result.error and "int64" in result.error and "twenty-one" in result.error
    assert f"s3://{bucket}/p/" in result.error and "nothing was made visible" in result.error
    assert data_keys(s3_client, bucket, "p") == [] and pending_uploads(s3_client, bucket) == []


def test_value_the_format_cannot_encode(s3_config, s3_client, bucket):
    # Year 318857: Parquet holds it, PostgreSQL's timestamp (up to 294276 AD) cannot.
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("s"))])
    rows = [{"id": i, "at": datetime.datetime(2024, 1, 1)} for i in range(20)] + [{"id": 20, "at": 10**13}]
    result = run_copy(rows, uri=f"s3://{bucket}/p", format="csv", schema=schema, s3=s3_config, fail_on_error=False)
    assert not result.ok
    assert "the csv format cannot encode column 'at' (timestamp[s])" in result.error
    assert "10000000000000" in result.error and f"s3://{bucket}/p/" in result.error
    assert data_keys(s3_client, bucket, "p") == [] and pending_uploads(s3_client, bucket) == []


def test_option_out_of_range_fails_at_construction(s3_client, bucket):
    with pytest.raises(ValueError, match="max_file_size must be at least 1024 bytes, got 100"):
        CopyToS3(f"s3://{bucket}/p", schema=SCHEMA, max_file_size=100)
    with pytest.raises(ValueError, match="max_attempts must be an int from 1 to 50, got 0"):
        S3Config(max_attempts=0)
    assert list_objects(s3_client, bucket) == {}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_row_larger_than_max_file_size_gets_its_own_file(fmt, s3_config, s3_client, bucket):
    def row(i):
        if i != 50:
            return make_row(i)
        return dict(make_row(i), name=random.Random(i).randbytes(15_000).hex())  # 30 kB, incompressible

    result = run_copy(
        [row(i) for i in range(100)],
        uri=f"s3://{bucket}/big",
        format=fmt,
        schema=SCHEMA,
        s3=s3_config,
        max_file_size=4096,
    )
    assert result.ok and result.rows == 100
    got = {k: read_rows(s3_client, bucket, k) for k in data_keys(s3_client, bucket, "big")}
    (big_file,) = [k for k, rows in got.items() if any(r["id"] == 50 for r in rows)]
    sizes = {k: s3_client.head_object(Bucket=bucket, Key=k)["ContentLength"] for k in got}
    assert sizes[big_file] > 15_000 and len(got) >= 2
    if fmt == "csv":
        assert [r["id"] for r in got[big_file]] == [50], "the large row is alone in its file"
    else:
        # Parquet cuts files at row groups: the large row's group-mates share its file
        # (formats/parquet.py); every other file stays near the limit.
        assert all(size <= 4096 * 1.2 for k, size in sizes.items() if k != big_file), sizes
    assert sorted(r["id"] for rows in got.values() for r in rows) == list(range(100))
    assert pending_uploads(s3_client, bucket) == []

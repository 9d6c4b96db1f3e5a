"""Connecting the way operators do: assumed roles with an external id, the least-privilege IAM
policy, encryption / storage class / part checksums / expected bucket owner on the requests,
the precedence of settings, and no secret in logs, reprs, results or the pipeline graph.

The IAM tests run against their own moto server with IAM enforcement on
(``INITIAL_NO_AUTH_ACTION_COUNT``): it checks signatures, the caller's policies, and a role's
trust policy, including its ``sts:ExternalId`` condition. moto serves STS on the same port as S3.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import uuid

import apache_beam as beam
import boto3
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.display import DisplayData

from beam_s3_sink import CopyToS3, CsvFormat, JsonlFormat, ObjectSettings, S3Config
from beam_s3_sink.config import resolve_config
from beam_s3_sink.keys import CopyKeys, S3Location
from conftest import ACCESS_KEY, REGION, SECRET_KEY, free_port, start_moto
from faultproxy import FaultProxy
from helpers import data_keys, get_bytes, list_objects, pending_uploads, run_copy, write_bundle, write_settings

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
ACCOUNT = "123456789012"  # moto's default account
PREFIX = "exports/orders"


def make_row(i: int) -> dict:
    return {"id": i, "name": f"name-{i}"}


def minimal_policy(bucket: str, prefix: str) -> dict:
    """The README's least-privilege policy for copies to ``s3://bucket/prefix``."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListThePath",
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"],
                "Resource": f"arn:aws:s3:::{bucket}",
            },
            {
                "Sid": "WriteThePath",
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}/*",
            },
        ],
    }


def without(policy: dict, action: str) -> dict:
    statements = [dict(s, Action=[a for a in s["Action"] if a != action]) for s in policy["Statement"]]
    return dict(policy, Statement=[s for s in statements if s["Action"]])


@pytest.fixture(scope="module")
def iam_server():
    """A moto server that enforces IAM after its first 3 calls, which make an admin user."""
    port = free_port()
    process = start_moto(port, {"INITIAL_NO_AUTH_ACTION_COUNT": "3"})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        iam = boto3.client(
            "iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup", aws_secret_access_key="setup"
        )
        iam.create_user(UserName="admin")
        key = iam.create_access_key(UserName="admin")["AccessKey"]
        iam.put_user_policy(
            UserName="admin",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        yield (
            endpoint,
            S3Config(
                endpoint_url=endpoint,
                region_name=REGION,
                path_style=True,
                max_attempts=2,
                access_key_id=key["AccessKeyId"],
                secret_access_key=key["SecretAccessKey"],
            ),
        )
    finally:
        process.terminate()
        process.wait(10)


def new_user(admin: S3Config, policy: dict) -> S3Config:
    """A user with exactly ``policy``; its settings on the IAM server."""
    iam = admin.make_session().client("iam", endpoint_url=admin.endpoint_url)
    name = f"user-{uuid.uuid4().hex[:10]}"
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    iam.put_user_policy(UserName=name, PolicyName="copy", PolicyDocument=json.dumps(policy))
    return admin.replace(access_key_id=key["AccessKeyId"], secret_access_key=key["SecretAccessKey"])


def new_bucket(admin: S3Config) -> str:
    name = f"iam-{uuid.uuid4().hex[:12]}"
    admin.make_client().create_bucket(Bucket=name)
    return name


def new_role(admin: S3Config, trusted_user: S3Config, external_id: str, policy: dict) -> str:
    iam = admin.make_session().client("iam", endpoint_url=admin.endpoint_url)
    user_arn = boto3.client(
        "sts",
        endpoint_url=admin.endpoint_url,
        region_name=REGION,
        aws_access_key_id=trusted_user.access_key_id,
        aws_secret_access_key=trusted_user.secret_access_key,
    ).get_caller_identity()["Arn"]
    name = f"exporter-{uuid.uuid4().hex[:8]}"
    arn = iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"AWS": user_arn},
                        "Action": "sts:AssumeRole",
                        "Condition": {"StringEquals": {"sts:ExternalId": external_id}},
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="copy", PolicyDocument=json.dumps(policy))
    return arn


ASSUME_ONLY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}


# criterion 1: assume a role with an external id, copy with its credentials --------------------


def test_copy_with_assumed_role_and_external_id(iam_server):
    endpoint, admin = iam_server
    bucket = new_bucket(admin)
    # The user may only assume roles: every S3 request must use the role's credentials.
    operator = new_user(admin, ASSUME_ONLY)
    role_arn = new_role(admin, operator, "tenant-42", minimal_policy(bucket, PREFIX))
    config = operator.replace(role_arn=role_arn, external_id="tenant-42", sts_endpoint_url=endpoint)

    result = run_copy(
        generate=(make_row, 500),
        uri=f"s3://{bucket}/{PREFIX}",
        format="csv",
        schema=SCHEMA,
        s3=config,
        max_file_size=2048,
    )
    assert result.ok, result.error
    assert result.rows == 500 and len(result.files) >= 2
    admin_client = admin.make_client()
    assert (
        sum(len(get_bytes(admin_client, bucket, k).splitlines()) for k in data_keys(admin_client, bucket, PREFIX))
        == 500
    )

    # The role's credentials are botocore's refreshable ones, from AssumeRole.
    credentials = config.make_session().get_credentials()
    assert credentials.method == "assume-role"
    assert credentials.get_frozen_credentials().access_key.startswith("ASIA")

    # Without the role, the same user is refused; with a wrong external id, STS refuses.
    refused = run_copy(
        generate=(make_row, 5),
        uri=f"s3://{bucket}/other",
        format="csv",
        schema=SCHEMA,
        s3=operator,
        fail_on_error=False,
    )
    assert "AccessDenied" in refused.error and "s3:ListBucket" in refused.error
    wrong = run_copy(
        generate=(make_row, 5),
        uri=f"s3://{bucket}/other",
        format="csv",
        schema=SCHEMA,
        s3=config.replace(external_id="tenant-43"),
        fail_on_error=False,
    )
    assert "sts:AssumeRole" in wrong.error and "AccessDenied" in wrong.error, wrong.error
    assert "external_id" in wrong.error and f"s3://{bucket}/other" in wrong.error
    assert list_objects(admin_client, bucket, "other") == {}


def test_assumed_role_credentials_are_refreshed_before_they_expire(iam_server):
    """A 15-minute role session is inside botocore's 15-minute refresh window from the
    start, so botocore assumes the role again on each use instead of letting it expire."""
    endpoint, admin = iam_server
    operator = new_user(admin, ASSUME_ONLY)
    role_arn = new_role(admin, operator, "tenant-7", ASSUME_ONLY)
    credentials = (
        operator.replace(
            role_arn=role_arn, external_id="tenant-7", sts_endpoint_url=endpoint, role_duration_seconds=900
        )
        .make_session()
        .get_credentials()
    )
    first = credentials.get_frozen_credentials().access_key
    second = credentials.get_frozen_credentials().access_key
    assert first != second and first.startswith("ASIA") and second.startswith("ASIA")

    steady = (
        operator.replace(
            role_arn=role_arn, external_id="tenant-7", sts_endpoint_url=endpoint, role_duration_seconds=3600
        )
        .make_session()
        .get_credentials()
    )
    assert steady.get_frozen_credentials().access_key == steady.get_frozen_credentials().access_key


# criterion 2: exactly the README's policy; one action less and the copy says which ----------


def test_minimal_policy_is_enough(iam_server):
    _, admin = iam_server
    bucket = new_bucket(admin)
    user = new_user(admin, minimal_policy(bucket, PREFIX))
    result = run_copy(
        generate=(make_row, 300),
        uri=f"s3://{bucket}/{PREFIX}",
        format="parquet",
        schema=SCHEMA,
        s3=user,
        max_file_size=2048,
        sink_id="daily",
    )
    assert result.ok and result.rows == 300 and result.warnings == (), (result.error, result.warnings)
    again = run_copy(
        generate=(make_row, 300),
        uri=f"s3://{bucket}/{PREFIX}",
        format="parquet",
        schema=SCHEMA,
        s3=user,
        max_file_size=2048,
        sink_id="daily",
    )
    assert again == result, "a rerun of the finished copy reads its manifest (s3:GetObject)"
    # Outside the policy's prefix, the same user is refused.
    outside = run_copy(
        generate=(make_row, 5),
        uri=f"s3://{bucket}/elsewhere",
        format="csv",
        schema=SCHEMA,
        s3=user,
        fail_on_error=False,
    )
    assert "AccessDenied" in outside.error and "s3:PutObject" in outside.error


@pytest.mark.parametrize(
    "action",
    [
        "s3:ListBucket",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:GetObject",
        "s3:ListBucketMultipartUploads",
        "s3:AbortMultipartUpload",
    ],
)
def test_each_action_of_the_policy_is_needed(action, iam_server):
    """Removing any one action from the minimal policy: moto enforces every one of them.

    Where the sink needs the action decides how it shows:

    * ``s3:ListBucket`` (init lists the path), ``s3:PutObject`` (claim, sentinel, multipart
      uploads, manifest) and ``s3:DeleteObject`` (the claim and the sentinel, at the end): a
      fresh copy fails.
    * ``s3:GetObject``: only a rerun of a finished copy reads (its manifest): that rerun fails.
    * ``s3:ListBucketMultipartUploads`` and ``s3:AbortMultipartUpload``: cleanup of pending
      uploads is best effort (invisible leftovers never fail a copy, see notes-issue5), so the
      copy succeeds and its ``warnings`` name the refused action and the object; abort is only
      needed when there is something to abort, here an earlier failed run's upload.

    In every case the message names the refused IAM action and the S3 object.
    """
    _, admin = iam_server
    bucket = new_bucket(admin)
    admin_client = admin.make_client()
    user = new_user(admin, without(minimal_policy(bucket, PREFIX), action))
    kwargs = dict(
        uri=f"s3://{bucket}/{PREFIX}",
        format="csv",
        schema=SCHEMA,
        max_file_size=2048,
        sink_id="nightly",
        fail_on_error=False,
    )
    keys = CopyKeys(S3Location(bucket, PREFIX), "nightly")
    stale = keys.data_file("0123456789abcdef", 1, "csv")
    if action == "s3:GetObject":
        assert run_copy(generate=(make_row, 50), s3=admin, **kwargs).ok
    if action == "s3:AbortMultipartUpload":
        # What a failed earlier run left: its sentinel and an upload it never completed.
        admin_client.put_object(Bucket=bucket, Key=keys.sentinel, Body=b"")
        admin_client.create_multipart_upload(Bucket=bucket, Key=stale)

    result = run_copy(generate=(make_row, 50), s3=user, **kwargs)

    expected_object = {
        "s3:ListBucket": f"s3://{bucket}/{PREFIX}/",
        "s3:PutObject": f"s3://{bucket}/{keys.claim}",  # the path's claim comes first (issue 16)
        "s3:DeleteObject": f"s3://{bucket}/{keys.claim}",  # released at commit, before the sentinel
        "s3:GetObject": f"s3://{bucket}/{keys.manifest}",
        "s3:ListBucketMultipartUploads": f"s3://{bucket}/{PREFIX}/",
        "s3:AbortMultipartUpload": f"s3://{bucket}/{stale}",
    }[action]
    if action in ("s3:ListBucketMultipartUploads", "s3:AbortMultipartUpload"):
        assert result.ok and result.rows == 50
        assert result.warnings, "the refused cleanup is reported"
        assert all(action in w and "AccessDenied" in w for w in result.warnings), result.warnings
        assert any(expected_object in w for w in result.warnings), result.warnings
    else:
        assert not result.ok, f"the copy succeeded without {action}"
        assert f"the IAM permission {action} " in result.error, result.error
        assert expected_object in result.error and "AccessDenied" in result.error, result.error
    if action in ("s3:ListBucket", "s3:PutObject"):
        assert data_keys(admin_client, bucket, PREFIX) == [] and pending_uploads(admin_client, bucket) == []


# criterion 3: encryption, storage class, checksums, expected owner: what the server holds ----


@pytest.mark.parametrize(
    "fmt, content_type",
    [
        ("parquet", "application/vnd.apache.parquet"),
        ("csv", "text/csv"),
        ("text", "text/plain"),
        ("jsonl", "application/jsonl"),
        (JsonlFormat(compression="gzip"), "application/gzip"),
        (CsvFormat(compression="zstd"), "application/zstd"),
    ],
)
def test_each_format_gives_its_files_its_content_type(fmt, content_type, s3_config, s3_client, bucket):
    # the format owns its content type (Format.content_type); an empty copy's one file has it too
    for n, prefix in ((3, "rows"), (0, "empty")):
        result = run_copy(
            [{"id": i, "name": "x"} for i in range(n)],
            uri=f"s3://{bucket}/{prefix}",
            format=fmt,
            schema=SCHEMA,
            s3=s3_config,
        )
        assert result.ok, result.error
        for key in data_keys(s3_client, bucket, prefix):
            assert s3_client.head_object(Bucket=bucket, Key=key)["ContentType"] == content_type, key
    override = s3_config.replace(objects=ObjectSettings(content_type="application/octet-stream"))
    assert run_copy([{"id": 1, "name": "x"}], uri=f"s3://{bucket}/override", format=fmt, schema=SCHEMA, s3=override).ok
    (key,) = data_keys(s3_client, bucket, "override")
    assert s3_client.head_object(Bucket=bucket, Key=key)["ContentType"] == "application/octet-stream"


@pytest.mark.parametrize("sse, kms_key", [("AES256", None), ("aws:kms", "alias/exports")])
def test_object_settings_reach_the_server(sse, kms_key, s3_endpoint, s3_config, s3_client, bucket):
    part_size = 5 * 2**20
    objects = ObjectSettings(
        server_side_encryption=sse,
        kms_key_id=kms_key,
        storage_class="STANDARD_IA",
        checksum_algorithm="SHA256",
        expected_bucket_owner=ACCOUNT,
    )
    with FaultProxy(s3_endpoint, rate=0) as proxy:
        result = run_copy(
            generate=(lambda i: {"id": i, "name": hashlib.sha256(b"%d" % i).hexdigest()}, 200_000),
            uri=f"s3://{bucket}/{PREFIX}",
            format="csv",
            schema=SCHEMA,
            max_file_size=12 * 2**20,
            s3=s3_config.replace(endpoint_url=proxy.url, part_size=part_size, objects=objects),
        )
    assert result.ok, result.error
    keys = data_keys(s3_client, bucket, PREFIX)
    multipart = 0
    for key in keys:
        head = s3_client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert head["ServerSideEncryption"] == sse
        assert head.get("SSEKMSKeyId") == kms_key
        assert head["StorageClass"] == "STANDARD_IA" and head["ContentType"] == "text/csv"
        # S3's checksum of the object is the composite of the parts' SHA-256: recompute it.
        body = get_bytes(s3_client, bucket, key)
        digests = [hashlib.sha256(body[i : i + part_size]).digest() for i in range(0, len(body), part_size)]
        composite = base64.b64encode(hashlib.sha256(b"".join(digests)).digest()).decode()
        # (AWS appends "-<parts>" to a composite checksum; moto leaves it off.)
        assert head["ChecksumSHA256"] in (composite, f"{composite}-{len(digests)}")
        attributes = s3_client.get_object_attributes(Bucket=bucket, Key=key, ObjectAttributes=["Checksum"])
        assert attributes["Checksum"]["ChecksumType"] == "COMPOSITE"
        multipart += len(digests) > 1
    assert multipart >= 1, "at least one file has several parts"
    manifest = s3_client.head_object(Bucket=bucket, Key=CopyKeys(S3Location(bucket, PREFIX), result.sink_id).manifest)
    assert manifest["ServerSideEncryption"] == sse and manifest.get("StorageClass", "STANDARD") == "STANDARD"

    # On the wire: every request named the expected owner; every part carried its checksum.
    assert {op for op, _ in proxy.seen} >= {
        "ListObjectsV2",
        "PutObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "DeleteObject",
    }
    assert all(h.get("x-amz-expected-bucket-owner") == ACCOUNT for _, h in proxy.seen), [
        op for op, h in proxy.seen if h.get("x-amz-expected-bucket-owner") != ACCOUNT
    ]
    parts = [h for op, h in proxy.seen if op == "UploadPart"]
    assert len(parts) > len(keys) and all(h.get("x-amz-checksum-sha256") for h in parts)


def test_crc32c_part_checksums(s3_endpoint, s3_config, s3_client, bucket):
    from awscrt.checksums import crc32c

    objects = ObjectSettings(checksum_algorithm="CRC32C")
    with FaultProxy(s3_endpoint, rate=0) as proxy:
        result = run_copy(
            generate=(make_row, 2000),
            uri=f"s3://{bucket}/{PREFIX}",
            format="parquet",
            schema=SCHEMA,
            s3=s3_config.replace(endpoint_url=proxy.url, objects=objects),
            max_file_size=4096,
        )
    assert result.ok and len(result.files) >= 2
    parts = [h for op, h in proxy.seen if op == "UploadPart"]
    assert len(parts) == len(result.files)  # one part per small file
    sent = sorted(h["x-amz-checksum-crc32c"] for h in parts)
    # Each part is a whole file here: the checksum sent is the file's CRC32C.
    stored = sorted(
        base64.b64encode(crc32c(get_bytes(s3_client, bucket, k)).to_bytes(4, "big")).decode()
        for k in data_keys(s3_client, bucket, PREFIX)
    )
    assert sent == stored
    completes = [h for op, h in proxy.seen if op == "CompleteMultipartUpload"]
    assert len(completes) == len(result.files)
    for key in data_keys(s3_client, bucket, PREFIX):
        attributes = s3_client.get_object_attributes(Bucket=bucket, Key=key, ObjectAttributes=["Checksum"])
        assert "ChecksumCRC32C" in attributes["Checksum"], attributes


def test_completion_passes_part_checksums_back(s3_config, s3_client, bucket):
    """CompleteMultipartUpload names each part's checksum (S3 refuses the completion of a
    checksummed upload without them); recorded by botocore's own event, on the client."""
    from beam_s3_sink.completion import _CompleteFn
    from beam_s3_sink.formats import resolve_format
    from beam_s3_sink.initialization import initialize
    from beam_s3_sink.messages import InitOutcome

    config = s3_config.replace(objects=ObjectSettings(checksum_algorithm="SHA256"))
    keys = CopyKeys(S3Location(bucket, PREFIX), "checksums")
    settings = write_settings(keys, config, resolve_format("csv"), SCHEMA, max_file_size=4096)
    state = initialize(s3_client, keys)
    assert state == InitOutcome(guard="conditional")  # it holds the path's claim
    report = write_bundle(settings, [make_row(i) for i in range(500)], InitOutcome())
    assert report.files and all(len(f.part_checksums) == len(f.parts) for f in report.files)
    finish = _CompleteFn(settings, fail_on_error=True)
    finish.setup()
    sent = []
    finish._client.meta.events.register(
        "before-parameter-build.s3.CompleteMultipartUpload", lambda params, **_: sent.append(params)
    )
    (result,) = list(finish.process(report, state))
    assert result.ok
    by_key = {f.key: f for f in report.files}
    assert len(sent) == len(by_key)
    for params in sent:
        pending = by_key[params["Key"]]
        assert [p["ChecksumSHA256"] for p in params["MultipartUpload"]["Parts"]] == list(pending.part_checksums)


def test_object_settings_are_checked():
    with pytest.raises(ValueError, match="server_side_encryption must be one of AES256, aws:kms"):
        ObjectSettings(server_side_encryption="aes256")
    with pytest.raises(ValueError, match="kms_key_id needs server_side_encryption='aws:kms'"):
        ObjectSettings(kms_key_id="alias/x")
    with pytest.raises(ValueError, match="expected_bucket_owner must be a 12-digit AWS account id"):
        ObjectSettings(expected_bucket_owner="my-account")
    with pytest.raises(ValueError, match="checksum_algorithm must be one of CRC32C, SHA256"):
        ObjectSettings(checksum_algorithm="MD5")
    with pytest.raises(ValueError, match="external_id needs role_arn"):
        S3Config(external_id="x")
    with pytest.raises(ValueError, match="role_duration_seconds must be an int from 900 to 43200"):
        S3Config(role_arn="arn:aws:iam::123456789012:role/r", role_duration_seconds=60)
    with pytest.raises(ValueError, match="static keys or profile_name, not both"):
        S3Config(access_key_id="a", secret_access_key="b", profile_name="p")


# precedence: explicit S3Config > the pipeline's S3Options > boto3's default chain -------------


def test_explicit_config_wins_over_pipeline_options(s3_config, s3_client, bucket):
    args = [
        "--runner=FnApiRunner",
        "--s3_endpoint_url=http://127.0.0.1:9",
        "--s3_access_key_id=wrong",
        "--s3_secret_access_key=wrong",
    ]
    result = run_copy(
        [make_row(i) for i in range(10)], args, uri=f"s3://{bucket}/{PREFIX}", format="csv", schema=SCHEMA, s3=s3_config
    )
    assert result.ok and result.rows == 10
    resolved = resolve_config(s3_config, PipelineOptions(args))
    assert resolved is s3_config, "an explicit S3Config is used as a whole, not merged"


def test_pipeline_options_are_used_without_explicit_config(s3_endpoint, s3_client, bucket):
    args = [
        "--runner=FnApiRunner",
        f"--s3_endpoint_url={s3_endpoint}",
        f"--s3_region_name={REGION}",
        f"--s3_access_key_id={ACCESS_KEY}",
        f"--s3_secret_access_key={SECRET_KEY}",
    ]
    result = run_copy(
        [make_row(i) for i in range(10)], args, uri=f"s3://{bucket}/{PREFIX}", format="csv", schema=SCHEMA
    )
    assert result.ok and result.rows == 10
    resolved = resolve_config(None, PipelineOptions(args))
    assert resolved.endpoint_url == s3_endpoint and resolved.access_key_id == ACCESS_KEY


def test_default_chain_without_config_or_options(s3_endpoint, s3_client, bucket, monkeypatch):
    # boto3's chain: the endpoint and keys from the environment (as on a configured worker).
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    resolved = resolve_config(None, PipelineOptions([]))
    assert resolved == S3Config()
    result = run_copy([make_row(i) for i in range(10)], uri=f"s3://{bucket}/{PREFIX}", format="csv", schema=SCHEMA)
    assert result.ok and result.rows == 10
    assert len(data_keys(s3_client, bucket, PREFIX)) == 1


# criterion 4: no secret in logs, results, reprs, errors, or the pipeline graph ---------------


def test_no_secret_in_logs_results_or_pipeline_graph(iam_server, caplog):
    endpoint, admin = iam_server
    bucket = new_bucket(admin)
    operator = new_user(admin, ASSUME_ONLY)
    role_arn = new_role(admin, operator, "tenant-9", minimal_policy(bucket, PREFIX))
    caplog.set_level(logging.DEBUG)
    for name in ("botocore", "boto3", "urllib3", "apache_beam", "beam_s3_sink"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    # STS through a proxy that keeps its answers: the role's temporary credentials, as sent.
    with FaultProxy(endpoint, rate=0, keep_answers=True) as sts:
        config = operator.replace(role_arn=role_arn, external_id="tenant-9", sts_endpoint_url=sts.url)
        result = run_copy(
            generate=(make_row, 300),
            uri=f"s3://{bucket}/{PREFIX}",
            format="csv",
            schema=SCHEMA,
            s3=config,
            max_file_size=2048,
        )
    failed = run_copy(
        generate=(make_row, 5),
        uri=f"s3://{bucket}/other",
        format="csv",
        schema=SCHEMA,
        s3=operator.replace(secret_access_key="wrong-secret-never-shown"),
        fail_on_error=False,
    )
    assert result.ok and not failed.ok
    temporary = [m for body in sts.answers for m in re.findall(rb"<(?:SecretAccessKey|SessionToken)>([^<]+)<", body)]
    assert len(temporary) >= 2, "the role was assumed while we listened"
    secrets = [operator.secret_access_key, admin.secret_access_key, "wrong-secret-never-shown"]
    secrets += [t.decode() for t in temporary]

    records = list(caplog.records)
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records)
    assert any(r.name == "botocore.parsers" and "Response body" in r.getMessage() for r in records), (
        "botocore's DEBUG records were captured"
    )
    assert "AssumeRole" in text
    for where in (text, repr(result), repr(failed), failed.error, repr(config), str(config)):
        for secret in secrets:
            assert secret not in where

    # The pipeline graph Beam prints: display data of every transform, and the runner API proto.
    static = S3Config(
        endpoint_url=endpoint,
        access_key_id="AKIAEXAMPLE",
        secret_access_key="graph-secret-1",
        session_token="graph-token-1",
    )
    p = beam.Pipeline()
    _ = p | beam.Create([make_row(1)]) | CopyToS3(f"s3://{bucket}/{PREFIX}", format="csv", schema=SCHEMA, s3=static)
    shown = [str(p.to_runner_api())]
    for transform in p.transforms_stack[0].parts:
        stack = [transform]
        while stack:
            node = stack.pop()
            stack.extend(node.parts)
            shown.append(repr(node.transform))
            if node.transform is not None:
                shown.append(str(DisplayData.create_from(node.transform).items))
                if isinstance(node.transform, beam.ParDo):
                    shown.append(repr(node.transform.fn))
    for secret in ("graph-secret-1", "graph-token-1"):
        assert all(secret not in s for s in shown)


# display data: the options a runner's UI shows, never a secret ------------------------------


def test_display_data_shows_the_options_and_no_secret():
    secret, token = "display-secret-1", "display-token-1"
    config = S3Config(
        endpoint_url=f"http://user:{secret}@127.0.0.1:9/",
        region_name="eu-west-3",
        access_key_id="AKIADISPLAYKEY",
        secret_access_key=secret,
        session_token=token,
        role_arn="arn:aws:iam::123456789012:role/exports",
        external_id="display-external-1",
    )
    copy = CopyToS3(
        "s3://bucket/exports/orders",
        format=CsvFormat(header=True, compression="gzip"),
        schema=SCHEMA,
        max_file_size="64MiB",
        sink_id="nightly",
        s3=config,
        if_exists="replace",
        num_batches=4,
        partition_by=["name"],
    )
    items = {i.key: i.value for i in DisplayData.create_from(copy).items}
    assert items == {
        "uri": "s3://bucket/exports/orders",
        "format": "csv",
        "format_options": "header=True, delimiter=',', null='', quote='\"', escape='\"', force_quote=(), "
        "compression='gzip'",
        "schema": "id: int64, name: string",
        "max_file_size": 64 * 2**20,
        "sink_id": "nightly",
        "if_exists": "replace",
        "fail_on_error": True,
        "num_batches": 4,
        "partition_by": "name",
        "s3_endpoint": "http://127.0.0.1:9/",
        "s3_region": "eu-west-3",
    }
    labels = {i.key: i.label for i in DisplayData.create_from(copy).items}
    assert labels["uri"] == "Destination" and labels["num_batches"] == "Batches (num_batches)"
    grouped = CopyToS3("s3://bucket/p", schema=SCHEMA, upload_graph="grouped")
    shown = {i.key: (i.value, i.label) for i in DisplayData.create_from(grouped).items}
    assert shown["upload_graph"] == ("grouped", "Upload graph")  # the default, "auto", is not shown

    # Once the pipeline is built: the schema and the S3 settings it resolved (here from the
    # pipeline's S3Options), in the runner API proto that a runner receives too.
    options = PipelineOptions(
        [
            "--s3_endpoint_url=http://127.0.0.1:9",
            "--s3_region_name=us-west-2",
            "--s3_access_key_id=AKIAOPTIONSKEY",
            "--s3_secret_access_key=options-secret-1",
        ]
    )
    p = beam.Pipeline(options=options)
    built = CopyToS3("s3://bucket/p", format="parquet", sink_id="built", validate_only=True)
    _ = (
        p
        | beam.Create([make_row(1)]).with_output_types(
            beam.row_type.RowTypeConstraint.from_fields([("id", int), ("name", str)])
        )
        | built
    )
    shown = {i.key: i.value for i in DisplayData.create_from(built).items}
    assert shown["s3_endpoint"] == "http://127.0.0.1:9" and shown["s3_region"] == "us-west-2"
    assert shown["schema"] == "id: int64 not null, name: string not null" and shown["validate_only"] is True
    assert "num_batches" not in shown and "partition_by" not in shown
    proto = str(p.to_runner_api())
    assert "s3://bucket/p" in proto and "Destination" in proto
    everything = [str(DisplayData.create_from(copy).items), str(DisplayData.create_from(built).items), proto]
    for value in (secret, token, "display-external-1", "AKIADISPLAYKEY", "options-secret-1", "AKIAOPTIONSKEY"):
        assert all(value not in text for text in everything), value

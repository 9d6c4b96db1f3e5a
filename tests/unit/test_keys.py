"""keys: parsing the destination, naming every object, and deciding what a copy owns."""

from __future__ import annotations

import pytest

from beam_s3_sink.keys import (
    MAX_BATCHES,
    TOKEN_HEX_DIGITS,
    CopyKeys,
    S3Location,
    new_sink_id,
    new_token,
    parse_s3_uri,
    validate_sink_id,
)


@pytest.mark.parametrize(
    "uri, bucket, prefix",
    [
        ("s3://bucket", "bucket", ""),
        ("s3://bucket/", "bucket", ""),
        ("s3://my.bucket-1/a/b/", "my.bucket-1", "a/b"),
        ("s3://bucket/exports/orders", "bucket", "exports/orders"),
    ],
)
def test_parse_s3_uri(uri, bucket, prefix):
    assert parse_s3_uri(uri) == S3Location(bucket, prefix)


@pytest.mark.parametrize(
    "uri, says",
    [
        ("gs://bucket/p", "is not an S3 URI"),
        ("bucket/p", "is not an S3 URI"),
        ("s3://Bucket/p", "not a valid bucket name"),
        ("s3://ab/p", "not a valid bucket name"),
        ("s3://a..b/p", "not a valid bucket name"),
        ("s3://bucket/p?x=1", "must not carry"),
        ("s3://bucket/p#frag", "must not carry"),
        ("s3://bucket/a//b", "empty segment"),
        (42, "must be a string"),
    ],
)
def test_parse_s3_uri_refuses(uri, says):
    with pytest.raises(ValueError, match=says):
        parse_s3_uri(uri)


def test_location_names():
    root, deep = S3Location("b", ""), S3Location("b", "x/y")
    assert (root.uri, root.key("k"), root.list_prefix) == ("s3://b", "k", "")
    assert (deep.uri, deep.key("k"), deep.list_prefix) == ("s3://b/x/y", "x/y/k", "x/y/")
    assert deep.object_uri("x/y/k") == "s3://b/x/y/k"


@pytest.mark.parametrize("sink_id", ["a", "copy-1", "A.b_c-9", "x" * 100])
def test_valid_sink_ids(sink_id):
    assert validate_sink_id(sink_id) == sink_id


@pytest.mark.parametrize("sink_id", ["", "-a", "_a", "a/b", "a b", "x" * 101, None, 7])
def test_invalid_sink_ids(sink_id):
    with pytest.raises(ValueError, match="sink_id"):
        validate_sink_id(sink_id)


def test_new_ids_are_fresh_and_valid():
    ids = {new_sink_id() for _ in range(50)}
    assert len(ids) == 50 and all(validate_sink_id(i) for i in ids)
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    assert all(len(t) == TOKEN_HEX_DIGITS and int(t, 16) >= 0 for t in tokens)


def test_control_object_keys():
    keys = CopyKeys(S3Location("b", "p"), "s1")
    assert keys.sentinel == "p/_s1-INCOMPLETE"
    assert keys.manifest == "p/_s1-manifest.json"
    assert keys.claim == "p/_CLAIM"
    assert CopyKeys(S3Location("b", ""), "s1").sentinel == "_s1-INCOMPLETE"


def test_data_file_keys():
    keys = CopyKeys(S3Location("b", "p"), "s1")
    token = "0123456789abcdef"
    assert keys.data_file(token, 1, "parquet") == "p/s1-0123456789abcdef-0001.parquet"
    assert keys.data_file(token, 12345, "csv.gz", "d=1/c=x") == "p/d=1/c=x/s1-0123456789abcdef-12345.csv.gz"
    assert keys.batch_file(MAX_BATCHES - 1, 2, "txt") == "p/s1-batch-9999-0002.txt"


def test_owns_its_files_and_nothing_else():
    keys = CopyKeys(S3Location("b", "p"), "orders")
    token = new_token()
    mine = [
        keys.data_file(token, 1, "csv"),
        keys.data_file(token, 2, "csv.zst", "day=1"),
        keys.batch_file(3, 1, "parquet"),
        keys.sentinel,
        keys.manifest,
    ]
    assert all(keys.is_owned(k) for k in mine)
    others = [
        "p/orders-2026-" + token + "-0001.csv",  # the copy "orders-2026"
        "p/orders-" + token[:-1] + "-0001.csv",  # a token one digit short
        "p/orders-" + token.upper() + "-0001.csv",  # not lower-case hex
        "p/orders-" + token + "-001.csv",  # three digits
        "q/orders-" + token + "-0001.csv",  # another path
        "p/sub/orders-" + token + "-0001.csv",  # a directory that is no partition
        "p/_orders-2026-INCOMPLETE",
        "p/_CLAIM",
        "p/other.csv",
    ]
    assert [k for k in others if keys.is_owned(k)] == []
    assert keys.is_data_file(mine[0]) and not keys.is_data_file(keys.sentinel)


def test_owner_of_control_objects():
    keys = CopyKeys(S3Location("b", "p"), "a")
    assert keys.sentinel_owner("p/_other-INCOMPLETE") == "other"
    assert keys.manifest_owner("p/_other-manifest.json") == "other"
    assert keys.sentinel_owner("p/_other-manifest.json") is None
    assert keys.sentinel_owner("p/sub/_other-INCOMPLETE") is None  # not directly under P/
    assert keys.sentinel_owner("q/_other-INCOMPLETE") is None
    assert keys.manifest_owner("p/x-manifest.json") is None


def test_keys_are_frozen_values():
    keys = CopyKeys(S3Location("b", "p"), "a")
    assert keys == CopyKeys(S3Location("b", "p"), "a")
    with pytest.raises(AttributeError):
        keys.sink_id = "b"  # type: ignore[misc]

"""results: the one CopyToResult a copy emits."""

from __future__ import annotations

import pickle

import pytest

from beam_s3_sink import CopiedFile, CopyToResult


def test_ok_means_no_error():
    assert CopyToResult("s3://b/p", "s1", rows=3).ok
    assert not CopyToResult("s3://b/p", "s1", error="S3 refused PutObject").ok


def test_defaults_of_a_failed_copy():
    failed = CopyToResult("s3://b/p", "s1", error="boom")
    assert (failed.rows, failed.bytes, failed.files, failed.manifest_uri, failed.dry_run) == (0, 0, (), None, False)


def test_frozen_picklable_and_comparable():
    result = CopyToResult(
        "s3://b/p", "s1", rows=1, bytes=2, files=(CopiedFile("s3://b/p/f", 1, 2),), warnings=("could not abort",)
    )
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(AttributeError):
        result.rows = 5  # type: ignore[misc]

"""Which failures fail the copy, and which fail the bundle (README "When a copy fails").

The rule: every error the package knows (a row or Arrow batch that does not fit, a value a
format cannot encode, an S3 request refused, or still failing after botocore's retries)
fails the *copy* through its report: completion aborts every pending upload and the result
(or the pipeline's error) names the cause. Anything else (a bug) fails the *bundle*, and the
runner decides. These tests measure why: the runners here do not retry a failed bundle, so
an S3 error raised out of a bundle would skip completion and leave pending uploads behind.
"""

from __future__ import annotations

import os

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink.keys import CopyKeys, S3Location
from faultproxy import FaultProxy
from helpers import data_keys, list_objects, pending_uploads, run_copy

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def make_row(i: int) -> dict:
    return {"id": i, "name": f"row {i}"}


def test_an_s3_error_that_outlasts_the_retries_fails_the_copy_cleanly(s3_endpoint, s3_config, s3_client, bucket):
    refuse = {"UploadPart": (503, "SlowDown")}
    kwargs = dict(uri=f"s3://{bucket}/slow", format="csv", schema=SCHEMA, sink_id="slow", max_file_size=4096)
    with FaultProxy(s3_endpoint, rate=0, refuse=refuse) as proxy:
        config = s3_config.replace(endpoint_url=proxy.url, max_attempts=2)
        result = run_copy(generate=(make_row, 2000), s3=config, fail_on_error=False, **kwargs)
    assert not result.ok and "UploadPart" in result.error and "SlowDown" in result.error, result.error
    assert proxy.requests["UploadPart"] >= 2, "botocore retried before the copy gave up"
    keys = CopyKeys(S3Location(bucket, "slow"), "slow")
    assert data_keys(s3_client, bucket, "slow") == [] and keys.manifest not in list_objects(s3_client, bucket)
    assert keys.sentinel in list_objects(s3_client, bucket), "a failed copy leaves its sentinel"
    assert pending_uploads(s3_client, bucket) == [], "completion aborted every upload"

    rerun = run_copy(generate=(make_row, 2000), s3=s3_config, **kwargs)  # the store is well again
    assert rerun.ok and rerun.rows == 2000
    assert sorted(
        r["id"] for f in data_keys(s3_client, bucket, "slow") for r in _csv_ids(s3_client, bucket, f)
    ) == list(range(2000))


def _csv_ids(client, bucket: str, key: str) -> list:
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    return [{"id": int(line.split(",")[0])} for line in body.splitlines()]


class _FailOnce(beam.DoFn):
    """Raises in its first attempt only (counted in a file): a bundle a runner could retry."""

    def __init__(self, marker: str) -> None:
        self._marker = marker

    def process(self, element):
        with open(self._marker, "a") as out:
            out.write("attempt\n")
        if os.path.getsize(self._marker) <= len("attempt\n"):
            raise RuntimeError("a failure the runner could retry")
        yield element


@pytest.mark.parametrize("runner_name", ["direct", "flink", "prism"])
def test_the_runners_here_do_not_retry_a_failed_bundle(runner_name, tmp_path, request):
    from conftest import runner_args

    marker = str(tmp_path / "attempts")
    args = runner_args(runner_name, request)
    with pytest.raises(Exception, match="a failure the runner could retry"):
        with beam.Pipeline(options=PipelineOptions(args)) as p:
            _ = p | beam.Create([1]) | beam.ParDo(_FailOnce(marker))
    with open(marker) as attempts:
        assert attempts.read().count("attempt") == 1, "the runner gave up after one attempt"

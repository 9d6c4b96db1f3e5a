"""completion: MergeReports as a CombineFn, and the completing step against the fake."""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_s3_sink.claim import CONDITIONAL
from beam_s3_sink.completion import EMPTY_FILE_TOKEN, MergeReports, ReportAccumulator
from beam_s3_sink.completion import _CompleteFn as CompleteFn
from beam_s3_sink.errors import CopyToS3Error
from beam_s3_sink.formats import CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.messages import InitOutcome, PendingFile, UploadReport
from beam_s3_sink.writer import WriteSettings

from .beam_testing import pipeline
from .fakes import serve

KEYS = CopyKeys(S3Location("bucket", "p"), "s1")
SCHEMA = pa.schema([("id", pa.int64())])


def pending(fake, number, body, rows):
    key = KEYS.data_file("0123456789abcdef", number, "csv")
    upload = fake.create_multipart_upload(Bucket="bucket", Key=key)["UploadId"]
    etag = fake.upload_part(Bucket="bucket", Key=key, UploadId=upload, PartNumber=1, Body=body)["ETag"]
    return PendingFile(key, upload, ((1, etag),), rows, len(body))


def file_report(name, rows, error=None):
    return UploadReport(files=(PendingFile(name, "u", (), rows, rows),), rows=rows, bytes=rows, error=error)


def test_merge_reports_in_a_pipeline():
    reports = [file_report("a", 1), file_report("b", 2, error="z: later"), file_report("c", 3, error="a: first")]

    def totals(report):
        return report.rows, report.bytes, sorted(f.key for f in report.files), report.error

    with pipeline() as p:
        merged = p | beam.Create(reports) | beam.CombineGlobally(MergeReports()) | beam.Map(totals)
        assert_that(merged, equal_to([(6, 6, ["a", "b", "c"], "a: first")]))


def test_merge_of_nothing_is_one_empty_report():
    with pipeline() as p:
        merged = p | beam.Create([]) | beam.CombineGlobally(MergeReports())
        assert_that(merged, equal_to([UploadReport()]))


def test_merging_moves_each_file_once_per_level():
    fn = MergeReports()
    accumulators = []
    for i in range(10):
        accumulators.append(fn.add_input(fn.create_accumulator(), file_report(str(i), 1)))
    merged = fn.merge_accumulators(accumulators)
    assert isinstance(merged, ReportAccumulator) and merged.moved == 19  # 10 added, then 9 moved into the first
    assert fn.extract_output(merged).rows == 10


def test_report_merge_keeps_the_smallest_error_whatever_the_order():
    a, b = UploadReport(error="b"), UploadReport(rows=1, error="a")
    fn = MergeReports()
    for first, second in ((a, b), (b, a)):
        accumulator = fn.add_input(fn.add_input(fn.create_accumulator(), first), second)
        assert fn.extract_output(accumulator) == UploadReport(rows=1, error="a")
        split = fn.merge_accumulators([fn.add_input(fn.create_accumulator(), r) for r in (first, second)])
        assert fn.extract_output(split) == UploadReport(rows=1, error="a")


@pytest.fixture
def complete(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)

    def run(report, outcome=InitOutcome(guard=CONDITIONAL), fail_on_error=False):
        fn = CompleteFn(WriteSettings(KEYS, config, CsvFormat(header=True), SCHEMA, 2**30), fail_on_error)
        fn.setup()
        return list(fn.process(report, outcome))

    fake_s3.put_object(Bucket="bucket", Key=KEYS.sentinel, Body=b"")
    fake_s3.put_object(Bucket="bucket", Key=KEYS.claim, Body=b'{"sink_id": "s1"}')
    return run


def test_success_completes_writes_the_manifest_and_removes_sentinel_and_claim(fake_s3, complete):
    files = (pending(fake_s3, 2, b"id\n3\n", 1), pending(fake_s3, 1, b"id\n1\n2\n", 2))
    stray = fake_s3.create_multipart_upload(Bucket="bucket", Key=KEYS.data_file("fedcba9876543210", 1, "csv"))[
        "UploadId"
    ]
    (result,) = complete(UploadReport(files=files, rows=3, bytes=sum(f.bytes for f in files)))
    assert result.ok and (result.rows, result.bytes) == (3, 12)
    assert [f.uri for f in result.files] == sorted(f.uri for f in result.files)  # sorted by URI
    assert fake_s3.keys() == sorted([KEYS.manifest, files[0].key, files[1].key])
    assert fake_s3.body(files[1].key) == b"id\n1\n2\n" and fake_s3.uploads == {}  # the stray one aborted
    assert stray not in fake_s3.uploads
    manifest = json.loads(fake_s3.body(KEYS.manifest))
    assert (
        manifest["rows"] == 3
        and len(manifest["entries"]) == 2
        and result.manifest_uri == f"s3://bucket/{KEYS.manifest}"
    )
    order = [kw.get("Key") for name, kw in fake_s3.calls if name in ("PutObject", "DeleteObject")]
    assert order[-3:] == [KEYS.manifest, KEYS.claim, KEYS.sentinel]  # the sentinel goes last


def test_an_empty_copy_still_writes_one_file(fake_s3, complete):
    (result,) = complete(UploadReport())
    key = KEYS.data_file(EMPTY_FILE_TOKEN, 1, "csv")
    assert [f.uri for f in result.files] == [f"s3://bucket/{key}"] and fake_s3.body(key) == b"id\n"


def test_an_upload_completed_by_an_earlier_attempt_is_not_an_error(fake_s3, complete):
    file = pending(fake_s3, 1, b"id\n1\n", 1)
    fake_s3.complete_multipart_upload(
        Bucket="bucket",
        Key=file.key,
        UploadId=file.upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": file.parts[0][1]}]},
    )
    (result,) = complete(UploadReport(files=(file,), rows=1, bytes=file.bytes))
    assert result.ok and fake_s3.body(file.key) == b"id\n1\n"


def test_an_error_aborts_everything_and_leaves_the_sentinel(fake_s3, complete):
    file = pending(fake_s3, 1, b"id\n1\n", 1)
    (result,) = complete(UploadReport(files=(file,), rows=1, bytes=file.bytes, error="column 'id' is bad"))
    assert not result.ok and result.error == "column 'id' is bad" and result.rows == 0
    assert fake_s3.keys() == [KEYS.sentinel] and fake_s3.uploads == {}  # the claim is released


def test_fail_on_error_raises_naming_the_copy(fake_s3, complete):
    with pytest.raises(CopyToS3Error, match=r"CopyToS3 to s3://bucket/p \(sink_id 's1'\) failed: boom"):
        complete(UploadReport(error="boom"), fail_on_error=True)


def test_a_failed_commit_removes_what_it_had_completed(fake_s3, complete):
    files = (pending(fake_s3, 1, b"id\n1\n", 1), pending(fake_s3, 2, b"id\n2\n", 1))
    fake_s3.refuse("PutObject", "AccessDenied", when=lambda kw: kw["Key"] == KEYS.manifest)
    (result,) = complete(UploadReport(files=files, rows=2, bytes=10))
    assert result.error.startswith(
        "completing the copy failed: S3 refused PutObject on s3://bucket/p/_s1-manifest.json"
    )
    assert KEYS.sentinel in fake_s3.keys() and not any(KEYS.is_data_file(k) for k in fake_s3.keys())


def test_a_finished_copy_is_reported_again(fake_s3, complete):
    from beam_s3_sink.results import CopyToResult

    done = CopyToResult(uri="s3://bucket/p", sink_id="s1", rows=9)
    assert complete(UploadReport(), InitOutcome(done=done)) == [done]
    assert KEYS.sentinel in fake_s3.keys()  # nothing touched
